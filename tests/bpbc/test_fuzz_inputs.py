"""Fuzzing every input path of bpbc-screen (the short run of the normal suite).

Cases come from :func:`bench.fuzz.make_case` with hypothesis taking every
decision (so that a failure shrinks to a small input): valid seeds built
here (FASTQ plain or repeating the name on the '+' line, FASTA, Windows line
ends, a large regular FASTQ, empty files), mutated (bytes flipped, inserted,
deleted, duplicated, truncated, NUL bytes, CRLF stretches, enormous lines),
compressed or not and the compressed stream corrupted, under names whose
suffix may not say the compression; options vary the chunk size, strand,
output compression, stdin and the raw route's read block. Each case runs
through ``bpbc.cli.main`` in this process (``--device cpu --threads 1 -q``,
all four outputs in a scratch directory), and must end in exit 0 with
consistent outputs that are the oracle's (tests/oracle.py), or in exit 1 with
one line ``bpbc-screen: error: ...`` and no file left behind (never for a
valid input); never a traceback, another status, a hang, a thread or file
descriptor left over (see :func:`bench.fuzz.run_case`). Runs are
derandomized: the same examples every time. ``python -m bench fuzz`` is the
long run.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fuzz import Case, compress, fastq_seed, make_case, pattern_seed, run_case, run_twice

#: seconds after which a case counts as hung
TIMEOUT_S = 60


class DrawChooser:
    """:func:`bench.fuzz.make_case`'s decisions drawn by hypothesis; every
    decision shrinks towards the first option, the low end and 'no'."""

    def __init__(self, draw):
        self.draw = draw

    def integer(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def choice(self, options):
        return self.draw(st.sampled_from(options))

    def chance(self, p: float) -> bool:
        return self.draw(st.integers(0, 999)) >= round(1000 * (1 - p))

    def blob(self, size: int) -> bytes:
        return self.draw(st.binary(min_size=size, max_size=size))


@st.composite
def cases(draw, profile: str) -> Case:
    return make_case(DrawChooser(draw), profile)


def fuzz_settings(examples: int):
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def check(case: Case, workdir, twice: bool = False) -> None:
    outcome = (run_twice if twice else run_case)(case, workdir, TIMEOUT_S)
    assert outcome.good, outcome.report(case)


@fuzz_settings(250)
@given(case=cases("reads"))
def test_mutated_reads_files(workdir, case):
    check(case, workdir)


@fuzz_settings(150)
@given(case=cases("compressed"))
def test_corrupted_compressed_reads_files(workdir, case):
    check(case, workdir)


@fuzz_settings(60)
@given(case=cases("patterns"))
def test_mutated_pattern_files(workdir, case):
    check(case, workdir)


@fuzz_settings(60)
@given(case=cases("valid"))
def test_valid_inputs_succeed_the_same_way_twice(workdir, case):
    """An error on a valid case is a finding ('valid-rejected'), and its
    outputs are compared with the oracle's."""
    check(case, workdir, twice=True)


@fuzz_settings(40)
@given(case=cases("switch"))
def test_damage_far_into_a_large_fastq(workdir, case):
    """Plain FASTQ read raw until a damaged record far in, then dnaio, with
    small chunks and read blocks."""
    check(case, workdir)


# --- exhaustive truncation -----------------------------------------------------------

SMALL_FASTQ = fastq_seed(random.Random(7), 6, 10, 40, [b"ACGTACGTACGTAC"], plant=0.5, odd=0.0)
SMALL_PATTERNS = b">p0\nACGTACGTACGTAC\n>p1 iupac\nGGNNRYCC\n"


@pytest.mark.parametrize("fmt", [None, "gz", "bz2", "xz", "zst"])
def test_reads_truncated_at_every_position(workdir, fmt):
    data = compress(SMALL_FASTQ, fmt)
    if data is None:
        pytest.skip("no zstd compressor here")
    name = "reads.fq" + ("" if fmt is None else f".{fmt}")
    outputs = {"-o": "hits.paf", "--matched": "m.fq", "--unmatched": "u.fq.gz", "--json": "s.json"}
    ends = {}
    for cut in range(len(data) + 1):
        case = Case(reads=data[:cut], reads_name=name, patterns=SMALL_PATTERNS, patterns_name="p.fa", threshold=16,
                    chunk_size=2, outputs=outputs, notes=[f"truncated at {cut}"])
        outcome = run_case(case, workdir, TIMEOUT_S)
        assert outcome.good, outcome.report(case)
        ends[outcome.kind] = ends.get(outcome.kind, 0) + 1
    # only the whole file, and for plain FASTQ the cuts at a record's end, are complete files
    assert ends["ok"] >= 1 and ends["error"] >= len(data) // 2


def test_patterns_truncated_at_every_position(workdir):
    outputs = {"-o": "hits.paf", "--matched": "m.fq", "--unmatched": "u.fq", "--json": "s.json"}
    for cut in range(len(SMALL_PATTERNS) + 1):
        case = Case(reads=SMALL_FASTQ, reads_name="reads.fq", patterns=SMALL_PATTERNS[:cut], patterns_name="p.fa",
                    threshold=8, chunk_size=3, outputs=outputs, notes=[f"patterns truncated at {cut}"])
        outcome = run_case(case, workdir, TIMEOUT_S)
        assert outcome.good, outcome.report(case)


# --- the switch from the raw route to dnaio, mid-file --------------------------------------

def large_fastq() -> tuple[bytes, list[bytes]]:
    patterns_data, patterns = pattern_seed(random.Random(3))
    return fastq_seed(random.Random(4), 3000, 60, 150, patterns, plant=0.3, odd=0.0), patterns


@pytest.mark.parametrize("read_block", [None, 97, 4096])
@pytest.mark.parametrize("damage", ["quality one short", "second header differs", "second header repeated"])
def test_a_record_far_into_a_large_fastq(workdir, read_block, damage):
    """Record 2701 of 3000 stops the raw route: a damaged record fails on its
    line, a valid irregular one (the name repeated on its '+' line) is read
    by dnaio from there on, and every record is written exactly once."""
    import dnaio

    data, patterns = large_fastq()
    lines = data.split(b"\n")
    at = 4 * 2700  # the header line of record 2701
    name = lines[at][1:]
    if damage == "quality one short":
        lines[at + 3] = lines[at + 3][:-1]
    elif damage == "second header differs":
        lines[at + 2] = b"+" + name + b"x"
    else:
        lines[at + 2] = b"+" + name
    case = Case(reads=b"\n".join(lines), reads_name="reads.fq",
                patterns=b"".join(b">p%d\n%s\n" % (i, p) for i, p in enumerate(patterns)), patterns_name="p.fa",
                threshold=20, chunk_size=250, read_block=read_block,
                outputs={"-o": "hits.paf", "--matched": "m.fq", "--unmatched": "u.fq", "--json": "s.json"})
    outcome = run_case(case, workdir, TIMEOUT_S)
    assert outcome.good, outcome.report(case)
    if damage == "second header repeated":
        assert outcome.kind == "ok"
        written = []
        for output in ("m.fq", "u.fq"):
            with dnaio.open(workdir / "out" / output) as reader:
                written += [record.id for record in reader]
        assert sorted(written) == sorted(f"r{i}" for i in range(3000))
    else:
        line = at + 4 if damage == "quality one short" else at + 3
        assert outcome.kind == "error" and f"reads.fq: line {line}: " in outcome.stderr, outcome.stderr


def test_compressors_used_here_round_trip():
    """The helpers the cases are built with (so that a corrupt stream is corrupt on purpose only)."""
    assert gzip.decompress(compress(SMALL_FASTQ, "gz")) == SMALL_FASTQ
    assert bz2.decompress(compress(SMALL_FASTQ, "bz2")) == SMALL_FASTQ
    assert lzma.decompress(compress(SMALL_FASTQ, "xz")) == SMALL_FASTQ
    assert compress(SMALL_FASTQ, None) == SMALL_FASTQ
