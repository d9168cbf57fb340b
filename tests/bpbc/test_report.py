"""The run's statistics (bpbc.summary), the HTML report and the MultiQC file (bpbc.report).

The report's counts are checked against the ``--json`` summary, its
histograms against references computed here from the PAF and the reads
files, its merging against runs on the reads at once. MultiQC itself reads
the MultiQC file (skipped where the ``multiqc`` command is missing), and
headless Chromium draws the report (skipped where ``chromium`` is missing).

Golden data: tests/data/expected_report_example.json is the report data of
the shipped example, less what changes from run to run (:func:`stable`),
written from the repository root by::

    python -c 'from tests.bpbc.test_report import write_golden; write_golden()'

The screenshot docs/report.png is the Chromium test's, kept with
``BPBC_UPDATE_SCREENSHOT=1 pytest tests/bpbc/test_report.py -k chromium``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import subprocess
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

import dnaio
import numpy as np
import pytest

from bpbc.cli import main
from bpbc.pipeline import ScreenSettings, screen_files
from bpbc.summary import HitColumns, Histogram, Statistics, combined_summary

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
#: as given from the repository root (the report names the files as given)
EXAMPLE = (Path("examples/reads.fq.gz"), Path("examples/adapters.fa"))
GOLDEN = DATA / "expected_report_example.json"
SCREENSHOT = ROOT / "docs" / "report.png"
#: how the run went on its machine, not what it found: the times, and the threads each stage had
TIMING = ("wall_time_s", "reads_per_s", "stage_seconds", "stage_shares", "plan")


@pytest.fixture(autouse=True)
def in_the_repository_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def run_cli(capsys, *args) -> tuple[int, str]:
    status = main([str(a) for a in args])
    return status, capsys.readouterr().err


def embedded(html_path: Path, element_id: str = "bpbc-report-data"):
    text = html_path.read_text()
    found = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', text, re.S)
    assert found is not None, f"no {element_id} in the report"
    return json.loads(found.group(1))


def without_timing(summary: dict) -> dict:
    return {key: value for key, value in summary.items() if key not in TIMING}


def stable(data: dict) -> dict:
    """The report data less what changes from run to run (times, the command line)."""
    data = copy.deepcopy(data)
    data.pop("run")
    for section in data["sections"]:
        section["summary"] = without_timing(section["summary"])
    return data


def example_report(tmp_path: Path, capsys, monkeypatch) -> Path:
    """The shipped example's report, from a directory where the example is
    examples/ and the outputs are beside it (the command line as a user's)."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    status, err = run_cli(capsys, *EXAMPLE, "-t", "30", "-q", "-o", "hits.paf", "--json", "s.json", "--report",
                          "report.html", "--multiqc", "ex_mqc.json")
    assert status == 0, err
    return tmp_path / "report.html"


def write_golden() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory)
        assert main([*map(str, EXAMPLE), "-t", "30", "-q", "-o", str(out / "h.paf"), "--report",
                     str(out / "r.html")]) == 0
        GOLDEN.write_text(json.dumps(stable(embedded(out / "r.html")), indent=1) + "\n")


# ---------------------------------------------------------------- Histogram


def test_histogram_is_the_same_however_the_values_are_split_and_merged():
    rng = np.random.default_rng(5)
    values = np.concatenate([rng.integers(0, 200, 3000), rng.integers(0, 5000, 300)])
    rows = rng.integers(0, 3, len(values))
    whole = Histogram(3)
    whole.add(rows, values)
    assert whole.width == 32  # 4999 // 32 < 256 <= 4999 // 16
    reference = np.zeros((3, 256), np.int64)
    np.add.at(reference, (rows, values // 32), 1)
    assert np.array_equal(whole.counts, reference)
    # small parts first (narrow bins), widened as they are merged, in any order
    parts = []
    for part in np.array_split(np.argsort(values, kind="stable"), 7):
        histogram = Histogram(3)
        histogram.add(rows[part], values[part])
        parts.append(histogram)
    for order in (parts, parts[::-1]):
        merged = Histogram(3)
        for part in order:
            merged += part
        assert merged.width == whole.width and np.array_equal(merged.counts, whole.counts)
    assert parts[0].width == 1  # merging did not change the parts


# ---------------------------------------------------------------- counts and histograms


@pytest.mark.parametrize("mates", [1, 2])
def test_a_batch_is_counted_as_a_plain_count_of_its_hits_says(mates):
    """Statistics.add_batch (one compiled pass over the hits) against counts
    made here hit by hit: per read its patterns, the hits per pattern, strand
    and mate, the scores, where the hits start and end (bins widened past
    255), for two batches in turn."""
    rng = np.random.default_rng(mates)
    names, strands = ["a", "b", "c"], ["+", "-"]
    statistics = Statistics(names, [20, 30, 40], [10, 10, 10], strands, mates, match=2)
    expected_passing = np.zeros((3, 2, mates), np.int64)
    sole, several, readers = np.zeros(3, np.int64), 0, 0
    scores = np.zeros((3, 81), np.int64)
    starts, ends = [], []
    for top in (200, 700):  # the second batch widens the position bins
        count = 500
        rows = sorted({(int(r), int(p), int(k)) for r, p, k in zip(rng.integers(0, 300, count),
                                                                  rng.integers(0, 3, count),
                                                                  rng.integers(0, 2, count))})
        read, pattern, strand = (np.array(column, np.int64) for column in zip(*rows))
        score = rng.integers(10, 81, len(read)).astype(np.int32)
        start = rng.integers(0, top, len(read))
        end = start + rng.integers(1, 50, len(read))
        statistics.add_batch(np.full(300, 150, np.int64), HitColumns(read, pattern, strand, score, start, end),
                             np.ones(300 // mates, bool))
        for r in np.unique(read):
            patterns = set(pattern[read == r].tolist())
            readers += 1
            if len(patterns) == 1:
                sole[patterns.pop()] += 1
            else:
                several += 1
        for t in range(len(read)):
            expected_passing[pattern[t], strand[t], read[t] % mates] += 1
            scores[pattern[t], score[t]] += 1
            starts.append((pattern[t] * mates + read[t] % mates, start[t]))
            ends.append((pattern[t] * mates + read[t] % mates, end[t]))
    assert statistics.reads_passing == readers and statistics.several_patterns == several
    assert np.array_equal(statistics.passing, expected_passing) and np.array_equal(statistics.sole_pattern, sole)
    assert np.array_equal(statistics.scores, scores)
    assert statistics.alignments == len(starts)
    for histogram, values in ((statistics.hit_starts, starts), (statistics.hit_ends, ends)):
        assert histogram.width == 4  # 700 + 49 needs bins 4 wide
        dense = np.zeros((3 * mates, 256), np.int64)
        for row, value in values:
            dense[row, value // 4] += 1
        assert np.array_equal(histogram.counts, dense)




def test_strided_hit_columns_are_counted_through_the_contiguous_kernel(monkeypatch):
    """Hit columns may be views of wider tables; numba compiles a kernel of
    _count_hits for each mix of layouts it is called with (a first large run
    after bpbc.prepare compiled a fourth, session 31), so add_batch hands it
    contiguous columns, and counts them as it counts contiguous ones."""
    from bpbc import summary

    layouts = []
    count_hits = summary._count_hits

    def spy(*args):
        layouts.append([column.flags.c_contiguous for column in args[:6]])
        return count_hits(*args)

    monkeypatch.setattr(summary, "_count_hits", spy)
    rng = np.random.default_rng(3)
    wide = np.zeros((200, 12), np.int64)  # every other row and column of it: strided columns
    wide[:, 0] = np.sort(rng.integers(0, 50, 200))
    wide[:, 2], wide[:, 4], wide[:, 6] = rng.integers(0, 2, 200), rng.integers(0, 2, 200), rng.integers(10, 41, 200)
    wide[:, 8] = rng.integers(0, 100, 200)
    wide[:, 10] = wide[:, 8] + rng.integers(1, 30, 200)
    rows = wide[::2]
    strided = HitColumns(*(rows[:, c] for c in range(0, 12, 2)))
    assert not strided.score.flags.c_contiguous
    counted = []
    for columns in (strided, HitColumns(*(np.ascontiguousarray(rows[:, c]) for c in range(0, 12, 2)))):
        statistics = Statistics(["a", "b"], [20, 20], [10, 10], ["+", "-"], 1, match=2)
        statistics.add_batch(np.full(50, 150, np.int64), columns, np.ones(50, bool))
        counted.append((statistics.passing, statistics.scores, statistics.hit_starts.counts, statistics.reads_passing))
    assert layouts == [[True] * 6] * 2
    assert all(np.array_equal(a, b) for a, b in zip(*counted))


def test_report_counts_equal_the_json_summary(tmp_path, capsys, monkeypatch):
    report = example_report(tmp_path, capsys, monkeypatch)
    data = embedded(report)
    summary = json.loads((tmp_path / "s.json").read_text())
    [section] = data["sections"]
    assert without_timing(section["summary"]) == without_timing(summary)
    parts = section["reads_by_pattern"]
    assert sum(parts.values()) == summary["reads"]
    assert parts["no pattern"] == summary["reads_not_passing"]
    assert data["run"]["command_line"].startswith("bpbc-screen ") and "--report" in data["run"]["command_line"]
    mqc = json.loads((tmp_path / "ex_mqc.json").read_text())
    assert mqc["data"] == {"reads": parts}  # the sample: the reads file's stem


def test_golden_report_data_of_the_shipped_example(tmp_path, capsys, monkeypatch):
    assert stable(embedded(example_report(tmp_path, capsys, monkeypatch))) == json.loads(GOLDEN.read_text())


def paf_histograms(paf: Path, width_starts: int, width_ends: int) -> tuple[dict, dict, dict]:
    """Per pattern: hit starts and ends binned as the report says, and score counts, from PAF lines."""
    starts: dict = defaultdict(lambda: defaultdict(int))
    ends: dict = defaultdict(lambda: defaultdict(int))
    scores: dict = defaultdict(lambda: defaultdict(int))
    for line in paf.read_text().splitlines():
        fields = line.split("\t")
        pattern, start, end = fields[5], int(fields[2]), int(fields[3])
        score = int(next(field for field in fields[12:] if field.startswith("AS:i:"))[5:])
        starts[pattern][start // width_starts] += 1
        ends[pattern][end // width_ends] += 1
        scores[pattern][score] += 1
    return starts, ends, scores


def dense(counts: dict, names: list[str], size: int) -> dict[str, list[int]]:
    table = {name: [0] * size for name in names}
    for name, bins in counts.items():
        for index, count in bins.items():
            table[name][index] += count
    return table


def padded(rows: dict[str, list[int]], size: int) -> dict[str, list[int]]:
    return {name: values + [0] * (size - len(values)) for name, values in rows.items()}


def length_counts(lengths: list[int], width: int) -> list[int]:
    counts = np.bincount(np.asarray(lengths) // width) if lengths else np.zeros(0, np.int64)
    return counts.tolist()


@pytest.mark.parametrize("trim", [False, True], ids=["screen", "trim"])
def test_histograms_equal_a_reference_from_the_paf(tmp_path, capsys, trim):
    reads = tmp_path / "long.fq"
    rng = np.random.default_rng(11)
    patterns = [line for line in EXAMPLE[1].read_text().splitlines() if not line.startswith(">")]
    with dnaio.open(reads, mode="w") as out:  # lengths past 256: bins wider than 1
        for index in range(600):
            length = int(rng.integers(20, 700))
            bases = rng.choice(list("ACGT"), length)
            adapter = patterns[index % len(patterns)]
            at = int(rng.integers(0, length))
            sequence = "".join(bases[:at]) + adapter + "".join(bases[at:])
            out.write(dnaio.SequenceRecord(f"r{index}", sequence, "I" * len(sequence)))
    trimming = ["--action", "trim", "--min-length", "30", "--trimmed", tmp_path / "trimmed.fq"] if trim else []
    status, err = run_cli(capsys, reads, EXAMPLE[1], "-t", "30", "-q", "-o", tmp_path / "h.paf", "--report",
                          tmp_path / "r.html", *trimming)
    assert status == 0, err
    [section] = embedded(tmp_path / "r.html")["sections"]
    figures = section["histograms"]
    names = [pattern["name"] for pattern in section["summary"]["patterns"]]
    width_starts, width_ends = figures["hit_starts"]["width"], figures["hit_ends"]["width"]
    assert width_starts > 1 and width_ends > 1
    starts, ends, scores = paf_histograms(tmp_path / "h.paf", width_starts, width_ends)
    size = 1000
    assert padded(figures["hit_starts"]["counts"], size) == dense(starts, names, size)
    assert padded(figures["hit_ends"]["counts"], size) == dense(ends, names, size)
    assert padded(figures["scores"], size) == dense(scores, names, size)
    with dnaio.open(reads) as records:
        lengths = [len(record.sequence) for record in records]
    width = figures["read_lengths"]["width"]
    assert figures["read_lengths"]["counts"] == {"reads": length_counts(lengths, width)}
    if trim:
        with dnaio.open(tmp_path / "trimmed.fq") as records:
            trimmed = [len(record.sequence) for record in records]
        assert len(trimmed) < len(lengths)  # --min-length dropped some
        width = figures["trimmed_lengths"]["width"]
        assert figures["trimmed_lengths"]["counts"] == {"reads": length_counts(trimmed, width)}


def test_paired_counts_per_mate(tmp_path, capsys):
    status, err = run_cli(capsys, DATA / "reads_1.fq", DATA / "patterns.fa", "-2", DATA / "reads_2.fq", "-t", "20",
                          "-q", "-o", tmp_path / "h.paf", "--json", tmp_path / "s.json", "--report", tmp_path / "r.html")
    assert status == 0, err
    [section] = embedded(tmp_path / "r.html")["sections"]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert without_timing(section["summary"]) == without_timing(summary) and summary["paired"]
    figures = section["histograms"]
    assert set(figures["read_lengths"]["counts"]) == {"mate 1", "mate 2"}
    with dnaio.open(DATA / "reads_1.fq") as one, dnaio.open(DATA / "reads_2.fq") as two:
        for mate, records in (("mate 1", one), ("mate 2", two)):
            assert figures["read_lengths"]["counts"][mate] == length_counts([len(r.sequence) for r in records], 1)
    # per pattern and mate, the hits as the JSON counts them per mate
    hits = {name: sum(counts) for name, counts in figures["hit_starts"]["counts"].items()}
    for pattern in summary["patterns"]:
        for mate in ("1", "2"):
            assert hits[f"{pattern['name']} (mate {mate})"] == sum(pattern["mates"][mate].values())


def test_a_run_over_parts_adds_up_to_the_run_over_the_whole(tmp_path):
    """combined_summary (several files) and the per-batch hook (small chunks)
    give the statistics of one run over all the reads at once."""
    with dnaio.open(EXAMPLE[0]) as records:
        records = list(records)
    paths = []
    for index, part in enumerate((records[:1100], records[1100:])):
        paths.append(tmp_path / f"part{index}.fq")
        with dnaio.open(paths[-1], mode="w") as out:
            for record in part:
                out.write(record)
    settings = ScreenSettings(threshold=30)
    whole = screen_files(EXAMPLE[0], EXAMPLE[1], settings, output=tmp_path / "whole.paf")
    parts = [screen_files(path, EXAMPLE[1], ScreenSettings(threshold=30, chunk_size=97),
                          output=tmp_path / f"{path.stem}.paf") for path in paths]
    total = combined_summary(parts, 1.0)
    assert total.reads == whole.reads and total.reads_passing == whole.reads_passing
    assert total.patterns == whole.patterns and total.alignments == whole.alignments
    assert total.statistics.as_dict() == whole.statistics.as_dict()
    assert np.array_equal(total.statistics.sole_pattern, whole.statistics.sole_pattern)
    assert parts[0].reads == 1100  # merging left the parts as they were


@pytest.mark.dask
@pytest.mark.parametrize("split", ["chunks", "parts"])
def test_a_dask_run_counts_as_the_local_run(tmp_path, monkeypatch, split):
    """One file over Dask: the workers' chunks counted on the client (take())
    as the local run counts its batches; or its parts' summaries added up
    (here the example's one gzip member, cut through its index)."""
    distributed = pytest.importorskip("distributed", reason="distributed is not installed (pip install '.[dask]')")
    from bpbc import file_parts
    from bpbc.distributed import NO_DASHBOARD, screen_distributed

    monkeypatch.setattr(file_parts, "MIN_PART_BYTES", 4096)
    settings = ScreenSettings(threshold=30, chunk_size=250, threads=1)
    local = screen_files(EXAMPLE[0], EXAMPLE[1], settings, output=tmp_path / "local.paf")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, **NO_DASHBOARD,
                            set_as_default=False) as client:
        remote = screen_distributed(client, EXAMPLE[0], EXAMPLE[1], settings, output=tmp_path / "dask.paf",
                                    split=split == "parts")
    assert remote.plan["dask"] == ("4 parts" if split == "parts" else "chunks")
    assert remote.statistics.as_dict() == local.statistics.as_dict()
    assert without_timing(remote.as_dict()) == without_timing(local.as_dict())


@pytest.mark.dask
def test_several_files_a_section_each_and_the_total(tmp_path, capsys):
    """--reads-from over Dask: one report, the total first, then one section per file; one MultiQC sample per file."""
    pytest.importorskip("distributed", reason="distributed is not installed (pip install '.[dask]')")
    first, second = tmp_path / "first.fq", tmp_path / "second.fq"
    shutil.copyfile(DATA / "reads.fq", first)
    shutil.copyfile(DATA / "reads_1.fq", second)
    listing = tmp_path / "runs.txt"
    listing.write_text(f"{first}\n{second}\n")
    from bpbc.resources import usable_cores

    threads = 1 if usable_cores() > 1 else 2  # not the default (every usable core): the report must say which
    status, err = run_cli(capsys, "--reads-from", listing, DATA / "patterns.fa", "-t", "20", "-q", "--dask", "local:1",
                          "--threads", threads, "-o", tmp_path / "{stem}.paf", "--json", tmp_path / "{stem}.json",
                          "--report", tmp_path / "run.html", "--multiqc", tmp_path / "run_mqc.json")
    assert status == 0, err
    data = embedded(tmp_path / "run.html")
    assert data["run"]["threads"] == threads
    assert data["run"]["command_line"] == shlex.join(["bpbc-screen", "--reads-from", str(listing),
                                                      str(DATA / "patterns.fa"), "-t", "20", "-q", "--dask", "local:1",
                                                      "--threads", str(threads), "-o", str(tmp_path / "{stem}.paf"),
                                                      "--json", str(tmp_path / "{stem}.json"), "--report",
                                                      str(tmp_path / "run.html"), "--multiqc",
                                                      str(tmp_path / "run_mqc.json")])
    total, *files = data["sections"]
    assert total["title"] == "All reads files" and [section["sample"] for section in files] == ["first", "second"]
    for section in files:
        assert without_timing(section["summary"]) == without_timing(json.loads(
            (tmp_path / f"{section['sample']}.json").read_text()))
    for key in ("reads", "reads_passing", "alignments"):
        assert total["summary"][key] == sum(section["summary"][key] for section in files)
    assert total["reads_by_pattern"] == {key: sum(section["reads_by_pattern"].get(key, 0) for section in files)
                                         for key in total["reads_by_pattern"]}
    mqc = json.loads((tmp_path / "run_mqc.json").read_text())
    assert mqc["data"] == {section["sample"]: section["reads_by_pattern"] for section in files}
    # {stem} in --report names no one file: refused before any cluster starts
    status, err = run_cli(capsys, "--reads-from", listing, DATA / "patterns.fa", "--dask", "local:1", "-o",
                          tmp_path / "{stem}.paf", "--report", tmp_path / "{stem}.html")
    assert status == 1 and err.count("\n") == 1 and "--report is one file for the run" in err, err


def test_statistics_memory_does_not_grow_with_the_reads(tmp_path):
    small = screen_files(EXAMPLE[0], EXAMPLE[1], ScreenSettings(threshold=30, chunk_size=3000),
                         output=tmp_path / "a.paf").statistics
    many = combined_summary([screen_files(EXAMPLE[0], EXAMPLE[1], ScreenSettings(threshold=30, chunk_size=100),
                                          output=tmp_path / "b.paf")] * 4, 1.0).statistics

    def size(statistics) -> int:
        return sum(value.nbytes if isinstance(value, np.ndarray) else value.counts.nbytes
                   for value in vars(statistics).values() if isinstance(value, (np.ndarray, Histogram)))

    assert many.reads == 4 * small.reads and size(many) == size(small)


@pytest.mark.parametrize("reads", ["", "@r\nACGTACGTAC\n+\nIIIIIIIIII\n"], ids=["no reads", "no hits"])
def test_a_run_with_nothing_to_draw(tmp_path, capsys, reads):
    (tmp_path / "r.fq").write_text(reads)
    status, err = run_cli(capsys, tmp_path / "r.fq", EXAMPLE[1], "-t", "30", "-q", "-o", tmp_path / "h.paf",
                          "--report", tmp_path / "r.html", "--multiqc", tmp_path / "r_mqc.json")
    assert status == 0, err
    [section] = embedded(tmp_path / "r.html")["sections"]
    assert section["reads_by_pattern"] == {"several patterns": 0, "no pattern": len(reads) // 25}
    notes = {figure["div"].split("-")[-1]: figure["layout"].get("annotations", [{}])[0].get("text")
             for figure in embedded(tmp_path / "r.html", "bpbc-figures") if figure["div"].startswith("section")}
    assert notes == {"reads": None if reads else "no reads", "passing": "no alignments", "hit_starts": "no alignments",
                     "hit_ends": "no alignments", "scores": "no alignments", "lengths": None if reads else "no reads"}
    assert json.loads((tmp_path / "r_mqc.json").read_text())["data"] == {"r": section["reads_by_pattern"]}


def test_pattern_names_cannot_break_the_page(tmp_path, capsys):
    name = "x</script><!--<b>&"
    patterns = tmp_path / "p.fa"
    patterns.write_text(f">{name}\nAGATCGGAAGAGCACACGTCTGAACTCCAGTCA\n")
    status, err = run_cli(capsys, *EXAMPLE[:1], patterns, "-t", "30", "-q", "-o", tmp_path / "h.paf", "--report",
                          tmp_path / "r.html")
    assert status == 0, err
    [section] = embedded(tmp_path / "r.html")["sections"]
    assert section["summary"]["patterns"][0]["name"] == name and section["reads_by_pattern"][f"{name} only"] > 0
    page = (tmp_path / "r.html").read_text()
    assert name not in page and "x&lt;/script&gt;&lt;!--&lt;b&gt;&amp;" in page  # escaped in the tables too


# ---------------------------------------------------------------- bad paths


@pytest.mark.parametrize("option, name, message", [
    ("--report", "missing/r.html", "cannot write the HTML report file"),
    ("--multiqc", "missing/x_mqc.json", "cannot write the MultiQC file"),
    ("--multiqc", "x.json", "needs a name ending in _mqc.json"),
    ("--report", "-", "needs a file name"),
])
def test_an_unwritable_report_path_is_a_bad_option_checked_first(tmp_path, capsys, option, name, message):
    status, err = run_cli(capsys, *EXAMPLE, "-t", "30", "-o", tmp_path / "h.paf", option,
                          name if name == "-" else tmp_path / name)
    assert status == 1 and err.count("\n") == 1 and err.startswith("bpbc-screen: error: ") and message in err, err
    assert list(tmp_path.iterdir()) == []  # nothing screened, no output


def test_stem_in_the_report_path(tmp_path, capsys):
    status, err = run_cli(capsys, *EXAMPLE, "-t", "30", "-q", "-o", tmp_path / "h.paf", "--report",
                          tmp_path / "{stem}.html", "--multiqc", tmp_path / "{stem}_mqc.json")
    assert status == 0, err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["h.paf", "reads.html", "reads_mqc.json"]


# ---------------------------------------------------------------- MultiQC


def test_multiqc_reads_the_file(tmp_path, capsys):
    multiqc = shutil.which("multiqc")
    if multiqc is None:
        pytest.skip("the multiqc command is not installed (pip install multiqc, or '.[test]')")
    runs = tmp_path / "runs"
    runs.mkdir()
    hand_made = tmp_path / "hand_made.fq"
    shutil.copyfile(DATA / "reads.fq", hand_made)
    expected = {}
    for reads in (EXAMPLE[0], hand_made):  # one run per sample, each with its own file, as a pipeline has them
        status, err = run_cli(capsys, reads, EXAMPLE[1], "-t", "30", "-q", "-o", tmp_path / "h.paf",
                              "--multiqc", runs / "{stem}_mqc.json")
        assert status == 0, err
    for path in runs.iterdir():
        expected.update(json.loads(path.read_text())["data"])
    assert set(expected) == {"reads", "hand_made"}  # the samples: the reads files' stems
    done = subprocess.run([multiqc, "--no-ansi", "--no-version-check", "-f", "-o", str(tmp_path / "mqc"), "--data-format", "json",
                           str(runs)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((tmp_path / "mqc" / "multiqc_data" / "multiqc_data.json").read_text())
    parsed = data["report_saved_raw_data"]["multiqc_bpbc_reads_by_pattern"]
    assert {sample: {key: int(value) for key, value in values.items()} for sample, values in parsed.items()} == expected
    # the bar plot MultiQC drew: our title, a bar per sample, the categories in the panel's order
    [dataset] = data["report_plot_data"]["bpbc_reads_by_pattern"]["datasets"]
    assert dataset["dconfig"]["title"] == "bpbc: reads by the patterns they pass for"
    assert sorted(dataset["samples"]) == ["hand_made", "reads"]
    drawn = {cat["name"]: dict(zip(dataset["samples"], cat["data"])) for cat in dataset["cats"]}  # None: none
    assert {name: {sample: int(value or 0) for sample, value in values.items()} for name, values in drawn.items()} == {
        name: {sample: expected[sample].get(name, 0) for sample in dataset["samples"]}
        for name in {name for values in expected.values() for name in values}}
    assert list(drawn)[-2:] == ["several patterns", "no pattern"]


# ---------------------------------------------------------------- Chromium


class PlotFinder(HTMLParser):
    """Per element with class "plot": its id, and the SVG elements and trace groups inside it."""

    def __init__(self):
        super().__init__()
        self.plots: dict[str, dict[str, int]] = {}
        self._open: list[tuple[str, str | None]] = []  # (tag, plot id it opens)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        opens = attributes.get("id") if tag == "div" and "plot" in classes else None
        if opens is not None:
            self.plots[opens] = {"svg": 0, "trace": 0}
        inside = [plot for _, plot in self._open if plot is not None]
        if inside:
            counts = self.plots[inside[-1]]
            counts["svg"] += tag == "svg" and "main-svg" in classes
            counts["trace"] += tag == "g" and ("trace" in classes or "point" in classes)
        if tag not in ("meta", "br", "img", "input", "hr", "link"):  # HTML's void elements have no end tag
            self._open.append((tag, opens))

    def handle_endtag(self, tag):
        tags = [open_tag for open_tag, _ in self._open]
        if tag in tags:
            del self._open[len(tags) - 1 - tags[::-1].index(tag):]


def chromium_or_skip() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found is not None:
            return found
    pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium)")


def render(chromium: str, page: Path, *more: str) -> tuple[str, list[str]]:
    """The page's DOM after its scripts ran, and the console messages."""
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", "--virtual-time-budget=15000", "--window-size=1280,2600", "--hide-scrollbars",
                           *more, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def test_console_errors_are_seen(tmp_path):
    """The browser check can fail: a page with an error says so."""
    chromium = chromium_or_skip()
    page = tmp_path / "bad.html"
    page.write_text('<html><body><div class="plot" id="p"></div><script>undefinedCall();</script></body></html>')
    dom, console = render(chromium, page)
    finder = PlotFinder()
    finder.feed(dom)
    assert any("undefinedCall" in line for line in console) and finder.plots == {"p": {"svg": 0, "trace": 0}}


def test_chromium_draws_every_plot_without_console_errors(tmp_path, capsys, monkeypatch):
    chromium = chromium_or_skip()
    report = example_report(tmp_path, capsys, monkeypatch)
    shot = tmp_path / "report.png"
    dom, console = render(chromium, report, f"--screenshot={shot}")
    assert console == []
    figures = embedded(report, "bpbc-figures")
    finder = PlotFinder()
    finder.feed(dom)
    assert set(finder.plots) == {figure["div"] for figure in figures}
    for figure in figures:
        drawn = finder.plots[figure["div"]]
        assert drawn["svg"] >= 1 and drawn["trace"] >= 1, (figure["div"], drawn)
    assert shot.stat().st_size > 50_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("BPBC_UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, SCREENSHOT)
