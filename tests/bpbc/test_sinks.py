"""Demultiplexing with {name}: each passing read (pair) in its best pattern's
file, files created on first use, a bounded number open at once.

Golden files: tests/data/expected_demux/ was written from tests/data by::

    python -m bpbc reads_1.fq patterns.fa -2 reads_2.fq -t 20 -q --pair-filter both -o /dev/null \\
        --matched 'expected_demux/{name}_1.fq' --matched2 'expected_demux/{name}_2.fq' \\
        --unmatched expected_demux/unmatched_1.fq --unmatched2 expected_demux/unmatched_2.fq

tests/bpbc/test_outputs.py checks them against the independent oracle of tests/oracle.py.
"""

from __future__ import annotations

import gzip
import os
import resource
import subprocess
import sys
from pathlib import Path

import dnaio
import numpy as np
import pytest

import bpbc
import bpbc.io
import bpbc.sinks
from bpbc.cli import main
from bpbc.result import AlignmentTable, Texts
from bpbc.sinks import best_patterns
from tests.bpbc.conftest import random_read

DATA = Path(__file__).resolve().parents[1] / "data"
PATTERNS = DATA / "patterns.fa"
PACKAGE_ROOT = str(Path(bpbc.__file__).resolve().parents[1])


def run_cli(capsys, *args):
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def table(read, pattern, score) -> AlignmentTable:
    n = len(read)
    zeros = np.zeros(n, np.int64)
    return AlignmentTable(np.array(read), np.array(pattern), zeros, np.array(score), *([zeros] * 7),
                          Texts.of([""] * n), ("+",))


def test_best_pattern_is_the_top_score_ties_to_the_first_listed():
    alignments = table([0, 0, 1, 1, 1, 3, 4, 5], [2, 1, 3, 0, 2, 1, 0, 2], [30, 30, 25, 20, 40, 33, 21, 50])
    assert best_patterns(alignments, 6, mates=1).tolist() == [1, 2, -1, 1, 0, 2]
    # pairs: reads 0-1, 2-3 and 4-5; the best over both mates
    assert best_patterns(alignments, 3, mates=2).tolist() == [2, 1, 2]
    assert best_patterns(table([], [], []), 2, mates=1).tolist() == [-1, -1]
    # pattern indices, as the demultiplexer indexes the pattern names by them
    assert best_patterns(alignments, 6, mates=1).dtype == best_patterns(table([], [], []), 2, mates=1).dtype == np.int64


def read_ids(path) -> list[str]:
    with dnaio.open(path) as reader:
        return [record.id for record in reader]


def test_paired_demultiplexing_matches_golden_files(capsys, tmp_path):
    status, _, err = run_cli(capsys, DATA / "reads_1.fq", "-2", DATA / "reads_2.fq", PATTERNS, "-t", "20", "-q",
                             "--pair-filter", "both", "-o", os.devnull, "--chunk-size", 3,
                             "--matched", tmp_path / "{name}_1.fq", "--matched2", tmp_path / "{name}_2.fq",
                             "--unmatched", tmp_path / "unmatched_1.fq", "--unmatched2", tmp_path / "unmatched_2.fq")
    assert status == 0, err
    expected = sorted(p.name for p in (DATA / "expected_demux").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == expected
    for name in expected:
        assert (tmp_path / name).read_bytes() == (DATA / "expected_demux" / name).read_bytes(), name


@pytest.mark.parametrize("open_files,fasta", [(2, False), (3, False), (512, False), (2, True)])
def test_reads_go_to_their_best_patterns_file_with_few_files_open(capsys, tmp_path, monkeypatch, open_files, fasta):
    """Against the PAF: every passing read in the file of its best-scoring
    pattern (ties: listed first), in input order, across chunks and reopened
    gzip files; no file for a pattern without reads. FASTA reads are
    written as records (not raw FASTQ bytes), into files opened as lazily."""
    monkeypatch.setattr(bpbc.sinks, "MAX_OPEN_FILES", open_files)
    rng = np.random.default_rng(3)
    patterns = {f"q{i}": random_read(rng, 16) for i in range(12)}
    reads = []
    for k in range(300):
        read = random_read(rng, 60)
        if k % 2 and k % 50 != 7:
            pattern = patterns[f"q{k % 11}"]  # q11 never planted
            at = int(rng.integers(0, 44))
            read = read[:at] + pattern + read[at + 16:]
        reads.append(read)
    reads_path, patterns_path = tmp_path / ("r.fa" if fasta else "r.fq"), tmp_path / "p.fa"
    reads_path.write_text("".join(f">r{k} c\n{read}\n" if fasta else f"@r{k} c\n{read}\n+\n{'I' * len(read)}\n"
                                  for k, read in enumerate(reads)))
    patterns_path.write_text("".join(f">{name}\n{seq}\n" for name, seq in patterns.items()))
    out = tmp_path / "out"
    out.mkdir()
    kind = "fa" if fasta else "fq"
    status, paf, err = run_cli(capsys, reads_path, patterns_path, "-t", "24", "-q", "--chunk-size", 16,
                               "--matched", out / f"{{name}}.{kind}.gz", "--unmatched", out / f"none.{kind}")
    assert status == 0, err
    best = {}
    order = list(patterns)
    for line in paf.splitlines():
        fields = line.split("\t")
        read, pattern, score = fields[0], fields[5], int(fields[13][5:])
        key = (-score, order.index(pattern))
        if read not in best or key < best[read]:
            best[read] = key
    expected: dict[str, list[str]] = {}
    for k in range(len(reads)):
        name = f"r{k}"
        target = f"{order[best[name][1]]}.{kind}.gz" if name in best else f"none.{kind}"
        expected.setdefault(target, []).append(name)
    assert f"q11.{kind}.gz" not in expected and len(expected) >= 10
    assert sorted(p.name for p in out.iterdir()) == sorted(expected)
    for target, names in expected.items():
        assert read_ids(out / target) == names
        if target.endswith(".gz"):
            with gzip.open(out / target) as fh:  # reopened files are further gzip members
                assert fh.read().count(b"\n") == (2 if fasta else 4) * len(names)


def test_name_template_in_an_unwritable_directory(capsys, tmp_path):
    reads = DATA / "reads.fq"
    status, out, err = run_cli(capsys, reads, PATTERNS, "-t", "20", "-o", tmp_path / "o.paf",
                               "--matched", tmp_path / "missing" / "{name}.fq")
    assert status == 1 and out == ""
    assert err == (f"bpbc-screen: error: {tmp_path / 'missing' / '{name}.fq'}: cannot write the demultiplexed "
                   "reads file: No such file or directory\n")
    assert list(tmp_path.iterdir()) == []
    status, _, err = run_cli(capsys, reads, PATTERNS, "-t", "20", "--matched", tmp_path / "{name}" / "r.fq")
    assert status == 1 and "{name} may only be part of the file name, not of a directory" in err


@pytest.mark.parametrize("name", ["a/b", ".", ".."])
def test_pattern_name_that_is_no_file_name(capsys, tmp_path, name):
    patterns = tmp_path / "p.fa"
    patterns.write_text(f">{name}\nACGTACGTAC\n")
    status, _, err = run_cli(capsys, DATA / "reads.fq", patterns, "-t", "10", "--matched", tmp_path / "{name}")
    assert status == 1 and f"pattern name {name!r} cannot be part of a file name" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.fa"]


def test_failed_run_leaves_no_demultiplexed_file(capsys, tmp_path, monkeypatch):
    """A demultiplexing writer makes files as it goes. Where the run fails,
    none is left, and each is discarded only after the writer thread has
    stopped: one discarded while the writer could still open it stayed open
    (found as a ResourceWarning in CI)."""
    import threading

    import bpbc.io

    writer_alive = []
    discard = bpbc.io.AtomicOutput.discard

    def watched_discard(self):
        writer_alive.append(any(t.name == "bpbc-writer" and t.is_alive() for t in threading.enumerate()))
        discard(self)

    monkeypatch.setattr(bpbc.io.AtomicOutput, "discard", watched_discard)
    reads = tmp_path / "r.fq"
    good = (DATA / "reads.fq").read_text()
    reads.write_text(good + good.replace("@r", "@s").replace("ACG", "AZG", 1))
    status, _, err = run_cli(capsys, reads, PATTERNS, "-t", "20", "--chunk-size", 4, "--matched",
                             tmp_path / "{name}.fq")
    assert status == 1 and "character 'Z'" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.fq"]
    assert writer_alive and not any(writer_alive)


def _limit_open_files():
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_five_thousand_patterns_under_ulimit_256(tmp_path):
    rng = np.random.default_rng(5)
    names = [f"b{i:04d}" for i in range(5000)]
    barcodes = ["".join(rng.choice(list("ACGT"), 12)) for _ in names]
    (tmp_path / "p.fa").write_text("".join(f">{n}\n{b}\n" for n, b in zip(names, barcodes)))
    # every barcode once, then a second time in reverse order: files are closed and reopened
    reads = [f"@{k}\n{'TTTTTTTT' + barcodes[i] + 'TTTTTTTT'}\n+\n{'I' * 28}\n"
             for k, i in enumerate(list(range(5000)) + list(range(4999, -1, -1)))]
    (tmp_path / "r.fq").write_text("".join(reads))
    (tmp_path / "out").mkdir()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "bpbc", "r.fq", "p.fa", "--strand", "forward", "--min-score-fraction", "1", "-q",
         "--device", "cpu", "-o", "hits.paf", "--matched", "out/{name}.fq"],
        cwd=tmp_path, env=env, capture_output=True, timeout=600, preexec_fn=_limit_open_files)
    assert done.returncode == 0, done.stderr.decode()
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    best = {}  # every hit scores 24: the best is the first listed pattern with a hit
    for line in (tmp_path / "hits.paf").read_text().splitlines():
        read, pattern = line.split("\t")[0], line.split("\t")[5]
        best[read] = min(best.get(read, pattern), pattern)
    assert files == sorted({f"{name}.fq" for name in best.values()}) and len(files) > 4900
    for i in (0, 1234, 4999):
        if best[str(i)] == names[i]:
            got = (tmp_path / "out" / f"{names[i]}.fq").read_text().splitlines()[::4]
            assert f"@{i}" in got and f"@{9999 - i}" in got


def test_open_file_budget_is_half_the_soft_limit(monkeypatch):
    """Half the soft limit of open files, an integer, at least 2 and at most
    MAX_OPEN_FILES; MAX_OPEN_FILES where there is no limit."""
    hard = 1 << 20
    for soft, budget in ((255, 127), (256, 128), (3, 2), (5, 2), (hard, bpbc.sinks.MAX_OPEN_FILES),
                         (resource.RLIM_INFINITY, bpbc.sinks.MAX_OPEN_FILES)):
        monkeypatch.setattr(resource, "getrlimit", lambda which, soft=soft: (soft, hard))
        got = bpbc.sinks.open_file_budget()
        assert got == budget and type(got) is int, (soft, got)


@pytest.mark.parametrize("paired,open_files", [(False, 2), (False, 3), (True, 2), (True, 3), (True, 5)])
def test_demultiplexed_files_open_at_once_stay_within_the_budget(capsys, tmp_path, monkeypatch, paired,
                                                                 open_files):
    """With a budget of B open files (one file a pattern, two for pairs), the
    files of the patterns used least recently are closed first, only when
    one more would go over B: the files are (re)opened exactly as often as
    an LRU cache of ⌊B / files a pattern⌋ patterns misses (at least one
    pattern's), never more than B at once (at most one pattern's when that
    is more than B), and every read lands in its file."""
    monkeypatch.setattr(bpbc.sinks, "MAX_OPEN_FILES", open_files)
    out = tmp_path / "out"
    out.mkdir()
    open_now: set = set()
    most_open, opens, used = [0], [0], []
    real_open, real_suspend, real_outputs = bpbc.io.ReadsOutput._open, bpbc.io.ReadsOutput.suspend, \
        bpbc.sinks.DemuxSink._outputs

    def counted_open(self):
        handle = real_open(self)
        if str(out) in str(self._output.path):
            opens[0] += 1
            open_now.add(id(self))
            most_open[0] = max(most_open[0], len(open_now))
        return handle

    def counted_suspend(self):
        open_now.discard(id(self))
        return real_suspend(self)

    def recorded_outputs(self, pattern):
        used.append(pattern)
        return real_outputs(self, pattern)

    monkeypatch.setattr(bpbc.io.ReadsOutput, "_open", counted_open)
    monkeypatch.setattr(bpbc.io.ReadsOutput, "suspend", counted_suspend)
    monkeypatch.setattr(bpbc.sinks.DemuxSink, "_outputs", recorded_outputs)
    mates = ("-2", DATA / "reads_2.fq", "--matched2", out / "{name}_2.fq") if paired else ()
    status, _, err = run_cli(capsys, DATA / "reads_1.fq", PATTERNS, "-t", "20", "-q", "--chunk-size", 2,
                             "-o", tmp_path / "o.paf", "--matched", out / "{name}_1.fq", *mates)
    assert status == 0, err
    per_pattern = 2 if paired else 1
    patterns_open: list = []  # the LRU oracle: least recent first
    misses = 0
    for pattern in used:
        if pattern in patterns_open:
            patterns_open.remove(pattern)
        else:
            misses += 1
        patterns_open.append(pattern)
        while len(patterns_open) > 1 and len(patterns_open) * per_pattern > open_files:
            patterns_open.pop(0)
    assert len(set(used)) == 3 and len(used) > 3
    assert opens[0] == misses * per_pattern
    assert most_open[0] == max(per_pattern, min(open_files // per_pattern, 3) * per_pattern)
    names = [line[1:].split()[0] for line in PATTERNS.read_text().splitlines() if line.startswith(">")]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{names[k]}_{mate}.fq" for k in set(used) for mate in ((1, 2) if paired else (1,)))
