"""Every output of ``bpbc-screen`` against the independent oracle of
tests/oracle.py: the PAF, the matched and unmatched reads (single, both
mates of two files, interleaved), one file per pattern, the trimmed and
masked reads, the ``--json`` counts; and each golden file of tests/data,
once, against the same oracle (the golden files stay as a guard against
change; this says they were right).

The oracle is checked first on its own: its alignments against parasail's
scores, their columns replayed base by base, the tie rule on examples
worked by hand.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpbc.cli import main
from tests.oracle import (Options, Record, Scoring, end_overlap, end_overlap_scores, expected, instance, load,
                          local_alignment, parasail_score, pattern_sets, read_codes, reverse_complement_sets,
                          summary_of)

DATA = Path(__file__).resolve().parents[1] / "data"
PATTERNS = DATA / "patterns.fa"
GOLDEN_TRIM = Options(min_score_fraction="0.8")


def run(*args) -> None:
    status = main([str(a) for a in args] + ["-q", "--device", "cpu"])
    assert status == 0


# --- the oracle on its own ---------------------------------------------------------

SCORINGS = [Scoring(), Scoring(1, 1, 1, 1), Scoring(3, 2, 4, 1), Scoring(4, 1, 2, 3)]


def replay(hit_ops: str, read: list[int], pattern: list[frozenset[int]], scoring: Scoring) -> int:
    """The score of an alignment's columns, each base looked at again."""
    score = i = j = 0
    previous = ""
    for op in hit_ops:
        if op in "=X":
            assert (read[i] in pattern[j]) == (op == "=")
            score += scoring.match if op == "=" else -scoring.mismatch
            i, j = i + 1, j + 1
        else:
            score -= scoring.gap_extend + (scoring.gap_open if op != previous else 0)
            i, j = i + (op == "I"), j + (op == "D")
        previous = op
    return score


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(read=st.text("ACGTN", max_size=40), pattern=st.text("ACGTRYN", min_size=1, max_size=20),
       scoring=st.sampled_from(SCORINGS), strand=st.sampled_from("+-"))
def test_oracle_alignments_score_what_parasail_finds(read, pattern, scoring, strand):
    codes, sets = read_codes(read), pattern_sets(pattern)
    hit = instance(codes, sets, 0, strand, scoring)
    oriented = sets if strand == "+" else reverse_complement_sets(sets)
    best = parasail_score(codes, oriented, scoring)
    if hit is None:
        assert best == 0
        return
    assert hit.score == best > 0
    assert hit.ops[0] == hit.ops[-1] == "="  # a local alignment begins and ends with a match
    aligned = oriented[len(sets) - hit.pattern_end:len(sets) - hit.pattern_start] if strand == "-" else \
        sets[hit.pattern_start:hit.pattern_end]
    ops = hit.ops if strand == "+" else hit.ops[::-1]
    assert replay(ops, codes[hit.read_start:hit.read_end], aligned, scoring) == best
    assert hit.read_end - hit.read_start == len(ops) - ops.count("D")


@pytest.mark.parametrize("read, pattern, cigar, where", [
    # the gap goes as far toward the alignment's start as it can (bpbc/traceback.py;
    # scoring 3, 3, 1, 1: the gap pays for itself)
    ("GAAAC", "GAAAAC", "1=1D4=", (0, 5, 0, 6)),
    ("GAAAAC", "GAAAC", "1=1I4=", (0, 6, 0, 5)),
    # of equal scores, the smallest read end, then the smallest pattern end
    ("ACGTTTACGT", "ACGT", "4=", (0, 4, 0, 4)),
    ("ACGT", "ACGTTACGT", "4=", (0, 4, 0, 4)),
    # a mismatch at the end only lowers the score: not in the alignment
    ("TTACGTAC", "GACGTAG", "5=", (2, 7, 1, 6)),
])
def test_the_oracles_tie_rule_on_examples_worked_by_hand(read, pattern, cigar, where):
    found = local_alignment(read_codes(read), pattern_sets(pattern), Scoring(3, 3, 1, 1))
    assert found is not None and found[1:5] == where
    hit = instance(read_codes(read), pattern_sets(pattern), 0, "+", Scoring(3, 3, 1, 1))
    assert hit is not None and hit.cigar(eqx=True) == cigar


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(read=st.text("ACGTN", max_size=120), pattern=st.text("ACGTRYSWKMBDHVN", max_size=40),
       scoring=st.sampled_from(SCORINGS))
def test_the_oracles_compiled_dp_is_its_plain_one(read, pattern, scoring):
    """The oracle's DP compiled by numba (what the fuzz and the tests run) and
    the same source run as plain Python on lists: the same matrices, the
    same end cell, the same alignment. Tandem repeats make ties."""
    import numpy as np

    from tests import oracle

    read = read + read[:len(read) // 2]
    codes, sets = read_codes(read), pattern_sets(pattern)
    compiled = oracle._matrices(codes, sets, scoring)
    found = local_alignment(codes, sets, scoring)
    forced, oracle.PLAIN = oracle.PLAIN, True
    try:
        plain = oracle._matrices(codes, sets, scoring)
        plain_found = local_alignment(codes, sets, scoring)
    finally:
        oracle.PLAIN = forced
    assert isinstance(plain[0], list) and (forced or not sets or isinstance(compiled[0], np.ndarray))
    for a, b in zip(compiled[:3], plain[:3]):
        assert np.array_equal(np.asarray(a, dtype=np.int64).reshape(len(codes) + 1, len(sets) + 1),
                              np.asarray(b, dtype=np.int64).reshape(len(codes) + 1, len(sets) + 1))
    assert compiled[3:] == plain[3:]
    assert found == plain_found


def brute_force_end_overlap(read: str, pattern: str, length: int, scoring: Scoring) -> int:
    """The best score of aligning ``pattern[:length]`` whole with a whole
    suffix of ``read``, by trying every suffix with parasail's global
    alignment: the end-overlap DP's definition, from the other side."""
    import parasail

    matrix = parasail.matrix_create("ACGT", scoring.match, -scoring.mismatch)
    best = -(scoring.gap_open + scoring.gap_extend * length)  # the empty suffix: every base deleted
    for start in range(len(read)):
        result = parasail.nw_scan_32(pattern[:length], read[start:], scoring.gap_open + scoring.gap_extend,
                                     scoring.gap_extend, matrix)
        best = max(best, result.score)
    return best


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(read=st.text("ACGT", max_size=14), pattern=st.text("ACGT", min_size=2, max_size=9),
       scoring=st.sampled_from(SCORINGS))
def test_oracle_end_overlap_scores_are_the_best_global_alignments_of_a_prefix_and_a_suffix(read, pattern, scoring):
    scores, _ = end_overlap_scores(read_codes(read), pattern_sets(pattern)[:-1], scoring)
    for length in range(1, len(pattern)):
        assert scores[length] == brute_force_end_overlap(read, pattern, length, scoring)


def test_oracle_end_overlap_cuts_where_the_partial_adapter_starts():
    adapter = "AGATCGGAAGAGC"
    read = "TTTTGCTTACCA" + adapter[:7]
    needed = [0] + [2 * length for length in range(1, len(adapter))]  # every base must match
    cut = end_overlap(read_codes(read), pattern_sets(adapter), False, needed, 3, Scoring())
    assert cut == len(read) - 7
    # a 5' adapter's last bases at the read's start
    read5 = adapter[-5:] + "TTTTGCTTACCA"
    assert end_overlap(read_codes(read5), pattern_sets(adapter), True, needed, 3, Scoring()) == 5
    assert end_overlap(read_codes(read5), pattern_sets(adapter), True, needed, 6, Scoring()) is None


# --- the golden files, once each --------------------------------------------------------

def test_golden_single_end_paf_files_are_the_oracles():
    reads, patterns = load(DATA / "reads.fq"), load(PATTERNS)
    assert expected(reads, patterns, Options(threshold=20)).paf == (DATA / "expected.paf").read_text()
    assert expected(reads, patterns, Options(threshold=30, strands=("+",), eqx=True)).paf == (
        DATA / "expected_forward_eqx.paf").read_text()


def test_golden_paired_paf_is_the_oracles_both_mates():
    out = expected(load(DATA / "reads_1.fq"), load(PATTERNS), Options(threshold=20), load(DATA / "reads_2.fq"))
    text = (DATA / "expected_paired.paf").read_text()
    assert out.paf == text and "/2\t" in text and "/1\t" in text


def test_golden_demultiplexed_files_are_the_oracles():
    """tests/data/expected_demux (its command: test_sinks.py)."""
    out = expected(load(DATA / "reads_1.fq"), load(PATTERNS), Options(threshold=20, pair_filter="both"),
                   load(DATA / "reads_2.fq"))
    files = sorted(path.name for path in (DATA / "expected_demux").iterdir())
    assert files == sorted([f"{name}_{mate}.fq" for name in [*out.demux, "unmatched"] for mate in "12"])
    for name in files:
        stem, mate = name[:-5], int(name[-4])
        text = out.text("unmatched", mate) if stem == "unmatched" else out.text("matched", mate, name=stem)
        assert (DATA / "expected_demux" / name).read_text() == text, name


@pytest.mark.parametrize("action", ["trim", "mask"])
def test_golden_trimmed_and_masked_files_are_the_oracles(action):
    """tests/data/expected_{trim,mask}*.fq (their commands: test_trimming.py)."""
    options = GOLDEN_TRIM.with_(action=action)
    single = expected(load(DATA / "reads.fq"), load(PATTERNS), options)
    assert (DATA / f"expected_{action}.fq").read_text() == single.text("trimmed")
    assert single.summary["reads_trimmed"] >= 8
    paired = expected(load(DATA / "reads_1.fq"), load(PATTERNS), options, load(DATA / "reads_2.fq"))
    for mate in (1, 2):
        assert (DATA / f"expected_{action}_{mate}.fq").read_text() == paired.text("trimmed", mate)


# --- generated inputs through the command ------------------------------------------------

ADAPTER = "AGATCGGAAGAGCACACGTCTGAACTCCAGTCA"
PANEL = [("TruSeq", ADAPTER), ("primer", "GTGYCAGCMGCCGCGGTAA"), ("short", "ACGTTAGCTTCCGA"),
         ("nextera", "CTGTCTCTTATACACATCT")]
_COMPLEMENT = str.maketrans("ACGTRYKMN", "TGCAYRMKN")


def _mutated(rng: random.Random, text: str) -> str:
    out = []
    for letter in text:
        roll = rng.random()
        if roll < 0.03:
            out.append(rng.choice("ACGT"))
        elif roll < 0.045:
            out.append(letter + rng.choice("ACGT"))
        elif roll >= 0.06:
            out.append(letter)
    return "".join(out)


def generated_reads(seed: int, count: int, fasta: bool = False, prefix: str = "g") -> list[Record]:
    """Reads of 0-110 bp: about half carry a pattern (whole or cut off by
    the read's end, mutated, on either strand, IUPAC letters resolved),
    some N and lowercase letters."""
    rng = random.Random(seed)
    reads = []
    for k in range(count):
        length = rng.choice([0, 1, 12, 40, 60, 90, 110]) if k % 7 == 3 else rng.randint(30, 110)
        sequence = "".join(rng.choice("ACGT") for _ in range(length))
        if length and rng.random() < 0.55:
            _, pattern = rng.choice(PANEL)
            insert = _mutated(rng, "".join(rng.choice({"Y": "CT", "M": "AC"}.get(c, c)) for c in pattern))
            if rng.random() < 0.3:
                insert = insert.translate(_COMPLEMENT)[::-1]
            at = rng.randint(0, length) if rng.random() < 0.6 else max(0, length - rng.randint(3, 20))
            sequence = (sequence[:at] + insert + sequence[at:])[:length + len(insert) // 2]
        letters = list(sequence)
        for i in range(len(letters)):
            if rng.random() < 0.01:
                letters[i] = "N"
            elif rng.random() < 0.02:
                letters[i] = letters[i].lower()
        sequence = "".join(letters)
        header = f"{prefix}{k}" + (f" c={rng.randint(0, 99)}" if k % 3 else "")
        quality = None if fasta else "".join(rng.choice("#,:FI") for _ in sequence)
        reads.append(Record(header, sequence, quality))
    return reads


def write(path: Path, records: list[Record]) -> Path:
    text = "".join(r.text() for r in records).encode()
    path.write_bytes(gzip.compress(text) if path.suffix == ".gz" else text)
    return path


def patterns_file(path: Path, headers: dict[str, str] | None = None) -> Path:
    headers = headers or {}
    return write(path, [Record(f"{name} {headers.get(name, '')}".strip(), sequence) for name, sequence in PANEL])


def read_text(path: Path) -> str:
    return "".join(r.text() for r in load(path))


def check_run(tmp_path: Path, reads: list[Record], patterns: Path, options: Options, *, reads2=None,
              interleaved=False, split=True, demux=False, chunk_size=7, suffix=".fq") -> None:
    """Run the command with every output, and compare each with the oracle."""
    out = tmp_path / "out"
    out.mkdir()
    paired = reads2 is not None or interleaved
    inputs = [write(tmp_path / f"r1{suffix}", reads)]
    if reads2 is not None:
        inputs += ["-2", write(tmp_path / f"r2{suffix}", reads2)]
    if interleaved:
        inputs.append("--interleaved")
    mates = ("1", "2") if paired and split else ("1",)
    outputs = ["-o", out / "hits.paf.gz", "--json", out / "s.json"]
    for kind in ("matched", "unmatched") + (("trimmed",) if options.action != "none" else ()):
        for mate in mates:
            option = f"--{kind}" + ("2" if mate == "2" else "")
            name = "{name}" if demux and kind == "matched" else kind
            outputs += [option, out / f"{name}_{mate}{suffix}"]
    run(*inputs, patterns, *options.args(), "--chunk-size", chunk_size, *outputs)
    want = expected(reads, load(patterns), options, reads2, interleaved)
    with gzip.open(out / "hits.paf.gz", "rt") as handle:
        assert handle.read() == want.paf
    assert summary_of(out / "s.json") == want.summary
    for kind in ("matched", "unmatched", "trimmed"):
        for mate in mates:
            mate_ = None if paired and not split else int(mate)
            if demux and kind == "matched":
                for name in want.demux:
                    assert read_text(out / f"{name}_{mate}{suffix}") == want.text(kind, mate_, name=name), name
            elif (out / f"{kind}_{mate}{suffix}").exists() or kind != "trimmed":
                assert read_text(out / f"{kind}_{mate}{suffix}") == want.text(kind, mate_), (kind, mate)
    if demux:
        made = {path.name for path in out.iterdir() if not path.name.startswith(("unmatched", "trimmed"))}
        assert made == {"hits.paf.gz", "s.json"} | {f"{name}_{m}{suffix}" for name in want.demux for m in mates}
    assert want.paf and want.units["matched"] and want.units["unmatched"]  # the comparisons compared something


SCREEN_OPTIONS = {
    "default": Options(threshold=24),
    "forward-eqx": Options(threshold=20, strands=("+",), eqx=True),
    "fraction": Options(min_score_fraction="0.75"),
    "scoring": Options(threshold=12, scoring=Scoring(1, 1, 1, 1)),
    "scoring-2": Options(threshold=30, scoring=Scoring(3, 2, 4, 1)),
}


@pytest.mark.parametrize("name", sorted(SCREEN_OPTIONS))
def test_single_reads_every_output_is_the_oracles(tmp_path, name):
    check_run(tmp_path, generated_reads(1, 80), patterns_file(tmp_path / "p.fa"), SCREEN_OPTIONS[name])


def test_thresholds_in_pattern_headers_and_fasta_reads(tmp_path):
    patterns = patterns_file(tmp_path / "p.fa", {"short": "threshold=20", "primer": "threshold=30 x"})
    check_run(tmp_path, generated_reads(2, 60, fasta=True), patterns, Options(min_score_fraction="0.7"),
              suffix=".fa")


@pytest.mark.parametrize("pair_filter", ["any", "both"])
@pytest.mark.parametrize("layout", ["two files", "interleaved", "interleaved split"])
def test_pairs_every_output_is_the_oracles(tmp_path, layout, pair_filter):
    first, second = generated_reads(3, 50, prefix="p"), generated_reads(4, 50, prefix="p")
    second = [Record(f"{a.id}/2 x", b.sequence, b.qualities) for a, b in zip(first, second)]
    options = Options(threshold=26, pair_filter=pair_filter)
    if layout == "two files":
        check_run(tmp_path, first, patterns_file(tmp_path / "p.fa"), options, reads2=second)
    else:
        mixed = [record for pair in zip(first, second) for record in pair]
        check_run(tmp_path, mixed, patterns_file(tmp_path / "p.fa"), options, interleaved=True,
                  split=layout == "interleaved split")


@pytest.mark.parametrize("ends", [20, 35])
def test_ends_every_output_is_the_oracles(tmp_path, ends):
    """--ends N (the README's Usage table): the PAF, matched and unmatched
    reads and --json equal the oracle's screen of each read's first and last
    N bases, coordinates the read's."""
    check_run(tmp_path, generated_reads(9, 80), patterns_file(tmp_path / "p.fa"), Options(threshold=22, ends=ends))
    hits = [line.split("\t") for line in gzip.open(tmp_path / "out" / "hits.paf.gz", "rt").read().splitlines()]
    inner = [f for f in hits if int(f[1]) > 2 * ends and int(f[2]) >= ends and int(f[3]) <= int(f[1]) - ends]
    assert not inner and any(int(f[1]) > 2 * ends and int(f[3]) > int(f[1]) - ends for f in hits)


def _with_nul_in_names(reads: list[Record]) -> list[Record]:
    """Every other name holds NUL bytes: after its first letters, or before a space."""
    return [Record(read.header[:2] + "\0\0x" + read.header[2:] if k % 4 == 0 else
                   read.header.replace(" ", "\0 ", 1) if k % 4 == 1 else read.header, read.sequence, read.qualities)
            for k, read in enumerate(reads)]


@pytest.mark.parametrize("route", ["fastq", "fastq.gz", "fasta", "pairs"])
def test_names_holding_nul_bytes_end_there_as_dnaios_id(tmp_path, route):
    """Found by the fuzz's oracle (cases 148 and 7128 of seed 47): a read's
    name in the PAF ended at its first NUL on the routes that read through
    dnaio (FASTA, its ``id``) and not on plain FASTQ's own route. The name
    is dnaio's ``id`` on every route: up to the first space, tab or NUL;
    the records written keep their whole header (fails before on the
    FASTQ routes)."""
    import dnaio

    assert dnaio.SequenceRecord("r1\0x y", "A").id == "r1"  # the reference this follows
    fasta = route == "fasta"
    reads = _with_nul_in_names(generated_reads(7, 60, fasta=fasta, prefix="n"))
    suffix = {"fastq": ".fq", "fastq.gz": ".fq.gz", "fasta": ".fa", "pairs": ".fq"}[route]
    reads2 = _with_nul_in_names(generated_reads(8, 60, prefix="n")) if route == "pairs" else None
    check_run(tmp_path, reads, patterns_file(tmp_path / "p.fa"), Options(threshold=24), reads2=reads2, suffix=suffix)
    assert "\0" in "".join(record.header for record in load(tmp_path / "out" / f"matched_1{suffix}"))


@pytest.mark.parametrize("paired", [False, True])
def test_demultiplexed_files_are_the_oracles(tmp_path, paired):
    reads = generated_reads(5, 90, prefix="d")
    if paired:
        check_run(tmp_path, reads, patterns_file(tmp_path / "p.fa"), Options(threshold=24),
                  reads2=generated_reads(6, 90, prefix="d"), demux=True)
    else:
        check_run(tmp_path, reads, patterns_file(tmp_path / "p.fa"), Options(threshold=24), demux=True)


TRIM_OPTIONS = {
    "trim": GOLDEN_TRIM.with_(action="trim"),
    "mask": GOLDEN_TRIM.with_(action="mask"),
    "trim-5prime": GOLDEN_TRIM.with_(action="trim", adapter_kind="5prime", min_overlap=4),
    "trim-anywhere-both-strands": GOLDEN_TRIM.with_(action="trim", adapter_kind="anywhere", trim_strand="both"),
    "mask-anywhere": GOLDEN_TRIM.with_(action="mask", adapter_kind="anywhere", min_overlap=1),
    "trim-min-length": Options(threshold=22, action="trim", min_length=30),
}


@pytest.mark.parametrize("name", sorted(TRIM_OPTIONS))
def test_trimmed_and_masked_reads_are_the_oracles(tmp_path, name):
    patterns = patterns_file(tmp_path / "p.fa", {"short": "adapter=5prime", "nextera": "adapter=anywhere"})
    check_run(tmp_path, generated_reads(7, 80), patterns, TRIM_OPTIONS[name])


@pytest.mark.parametrize("action", ["trim", "mask"])
def test_trimmed_pairs_and_their_demultiplexed_files_are_the_oracles(tmp_path, action):
    reads2 = [Record(f"t{k}", r.sequence, r.qualities) for k, r in enumerate(generated_reads(9, 60, prefix="t"))]
    check_run(tmp_path, generated_reads(8, 60, prefix="t"), patterns_file(tmp_path / "p.fa"),
              GOLDEN_TRIM.with_(action=action, min_length=12, pair_filter="both"), reads2=reads2, demux=True)


def test_run_files_appear_together_and_only_when_committed(tmp_path):
    """bpbc.outputs.RunFiles: nothing under the final names until commit; the
    JSON summary asked for and written then; a run that fails leaves none."""
    from contextlib import ExitStack

    from bpbc.io import SequenceSource
    from bpbc.outputs import RunFiles

    reads = tmp_path / "r.fq"
    reads.write_text("@a\nACGT\n+\nIIII\n@b\nTTTT\n+\nIIII\n")
    names = {"paf": tmp_path / "o.paf", "matched": tmp_path / "m.fq.gz", "json": tmp_path / "s.json"}
    asked = []
    with ExitStack() as stack:
        source = stack.enter_context(SequenceSource(reads, raw_fastq=True))
        files = RunFiles(stack.enter_context(ExitStack()), compress=0)
        write_paf = files.paf_writer(names["paf"])
        sink = files.reads_sink("matched", (names["matched"], None), (source, source))
        assert files.reads_sink("unmatched", (None, None), (source, source)) is None
        files.json_summary(names["json"])
        chunk = next(source.chunks(10))
        write_paf(b"a\tline\n")
        sink.write(chunk, [1], None)
        assert not any(path.exists() for path in names.values())
        files.commit(lambda: asked.append(1) or b"{}")
    assert asked == [1] and names["json"].read_bytes() == b"{}"
    assert names["paf"].read_bytes() == b"a\tline\n"
    assert gzip.decompress(names["matched"].read_bytes()) == b"@b\nTTTT\n+\nIIII\n"
    failed = {name: tmp_path / f"failed{path.suffix}" for name, path in names.items()}
    with pytest.raises(RuntimeError), ExitStack() as stack:
        files = RunFiles(stack.enter_context(ExitStack()), compress=0)
        files.paf_writer(failed["paf"])(b"x\n")
        files.json_summary(failed["json"])
        raise RuntimeError("the run failed")
    assert not any(path.exists() for path in failed.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.fq.gz", "o.paf", "r.fq", "s.json"]


def test_a_paf_sent_to_the_null_device_is_not_formatted(tmp_path, monkeypatch):
    """``-o /dev/null`` (or a link to it): no PAF line is made, and the other
    outputs and the counts are those of a run that writes the PAF."""
    import os

    import bpbc.pipeline
    from bpbc.outputs import is_null_device

    null_link = tmp_path / "null"
    null_link.symlink_to(os.devnull)
    assert is_null_device(os.devnull) and is_null_device(null_link)
    assert not is_null_device(tmp_path / "o.paf") and not is_null_device(tmp_path)
    reads = write(tmp_path / "r.fq", generated_reads(3, 40))
    patterns = patterns_file(tmp_path / "p.fa")
    run(reads, patterns, "-o", tmp_path / "o.paf", "--matched", tmp_path / "m1.fq", "--json", tmp_path / "s1.json")
    assert (tmp_path / "o.paf").stat().st_size  # the reads have hits, so a PAF writer would be called

    def refused(*args):
        raise AssertionError("PAF formatted for the null device")

    monkeypatch.setattr(bpbc.pipeline, "chunk_paf", refused)
    run(reads, patterns, "-o", null_link, "--matched", tmp_path / "m2.fq", "--json", tmp_path / "s2.json")
    assert (tmp_path / "m1.fq").read_bytes() == (tmp_path / "m2.fq").read_bytes()
    assert summary_of(tmp_path / "s1.json") == summary_of(tmp_path / "s2.json")
