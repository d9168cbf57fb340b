"""The bit-sliced end-overlap decision (bpbc.end_overlap): exactly the reads
with a passing overlap, against the plain-Python DP of test_trimming.py
(itself checked against parasail there) and the 16-lane vector pass."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpbc import end_overlap
from bpbc.alphabet import READ_CODE, encode_pattern
from bpbc.end_overlap import Decision, LANES, bit_table, kernel_source, start_values
from bpbc.scoring import Scoring
from bpbc.trimming import _CODE_IDENTITY, _END3, _END5, EndTasks, end_overlaps, overlap_slack, overlap_thresholds
from tests.bpbc.conftest import SCORINGS, mutate, pattern_texts, random_pattern, random_read, read_texts, scoring_id
from tests.bpbc.test_trimming import codes_of, one_task, planted_reads, reference_overlap, reference_scores


def joined(reads: list[str]):
    data = np.frombuffer("".join(reads).encode(), np.uint8)
    lengths = np.array([len(read) for read in reads], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return data, starts, lengths


def decided(reads: list[str], tasks: EndTasks, min_overlap: int, scoring: Scoring, rows=None,
            first_rows: int = end_overlap.FIRST_ROWS) -> np.ndarray:
    """bool (reads, tasks): the bit-sliced pass's flags."""
    data, starts, lengths = joined(reads)
    out = np.zeros((len(reads), len(tasks)), np.int32)
    rows = np.arange(len(reads), dtype=np.int64) if rows is None else rows
    Decision(tasks, min_overlap, scoring).flags(data, starts, lengths, bit_table(READ_CODE), rows, out,
                                                first_rows)
    return out > 0


def tasks_of(patterns: list[str], ends: list[int], fractions: list[Fraction], scoring: Scoring) -> EndTasks:
    """Several end tasks at once (as a Trimmer makes them)."""
    masks, slack, needed = [], [], []
    for pattern, end, fraction in zip(patterns, ends, fractions):
        full = encode_pattern(pattern)
        masks.append(full[:-1] if end == _END3 else full[::-1][:-1])
        thresholds = overlap_thresholds(fraction, scoring.match, len(pattern))
        needed.append(thresholds)
        slack.append(overlap_slack(thresholds, scoring))
    starts = np.zeros(len(masks) + 1, np.int64)
    np.cumsum([len(m) for m in masks], out=starts[1:])
    table = np.zeros((len(masks), max(len(p) for p in patterns) + 1), np.int32)
    for k, row in enumerate(needed):
        table[k, :len(row)] = row
    count = len(patterns)
    return EndTasks(np.arange(count, dtype=np.int64), np.zeros(count, np.int64), np.array(ends, np.int64),
                    np.concatenate(masks).astype(np.uint8), starts, np.array(slack, np.int64), table)


def expected(reads: list[str], patterns, ends, fractions, min_overlap: int, scoring: Scoring) -> np.ndarray:
    out = np.zeros((len(reads), len(patterns)), bool)
    for k, (pattern, end, fraction) in enumerate(zip(patterns, ends, fractions)):
        masks = encode_pattern(pattern)
        thresholds = overlap_thresholds(fraction, scoring.match, len(pattern))
        for r, read in enumerate(reads):
            out[r, k] = reference_overlap(codes_of(read), masks, end, thresholds, min_overlap, scoring) is not None
    return out


def test_start_values_are_the_shifted_start_row():
    """u = max(0, v + match x (m - c) + 1) of row 0 of the DP run from the
    read's end: the threshold's start value, deletions along the row."""
    scoring = Scoring()
    thresholds = overlap_thresholds(Fraction(4, 5), scoring.match, 6)  # [0, 2, 4, 5, 7, 8]
    m = 5
    values = start_values(thresholds, m, 1, scoring)
    # column c starts L = 5 - c at 2L - ceil(1.6 L) + 1: L = 5, 4, 3, 2, 1 -> 3, 2, 2, 1, 1; column 5 (L = 0) none
    assert values.tolist() == [3, 2, 2, 1, 1, 0]
    assert start_values(thresholds, m, 3, scoring).tolist() == [3, 2, 2, 0, 0, 0]
    # a fraction of 0: L = 5 starts at 11, and a deletion from it (7 + 2 = 9 off) leaves 2 in the next column
    zero = overlap_thresholds(Fraction(0), scoring.match, 6)
    assert start_values(zero, m, 5, scoring).tolist() == [11, 2, 0, 0, 0, 0]


def test_the_kernel_source_folds_the_constants():
    source = kernel_source(4, Scoring())
    assert "B = 4" in source and "vstore(table, 120, s0 | s1 | s2 | s3)" in source
    # 2 + 3 = 5 off a mismatch: planes 0 and 2 subtract a one
    assert "dm0 = ~hd0" in source and "dm2 = ~(hd2 ^ bw)" in source


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
@pytest.mark.parametrize("end", [_END3, _END5], ids=["3prime", "5prime"])
def test_decision_is_the_reference(scoring, end):
    """Exactly the reads with a passing overlap: planted mutated pieces and
    reads without any, N, IUPAC patterns, reads shorter than the window,
    more than one superblock and a partial last one, every fraction."""
    rng = np.random.default_rng(100 + end * 10 + SCORINGS.index(scoring))
    flagged = unflagged = 0
    for trial in range(8):
        pattern = random_pattern(rng, int(rng.integers(2, 40)), iupac_rate=0.1)
        fraction = Fraction(int(rng.integers(3, 11)), 10)
        min_overlap = int(rng.integers(1, len(pattern) + 1))
        reads = planted_reads(rng, pattern, end, LANES + 77 if trial == 0 else 60)
        got = decided(reads, tasks_of([pattern], [end], [fraction], scoring), min_overlap, scoring)
        want = expected(reads, [pattern], [end], [fraction], min_overlap, scoring)
        assert np.array_equal(got, want), [(read, bool(w)) for read, g, w in zip(reads, got[:, 0], want[:, 0])
                                           if g != w][:5]
        flagged += int(want.sum())
        unflagged += int((~want).sum())
    assert flagged > 50 and unflagged > 50


def test_scores_at_the_threshold_exactly():
    """An overlap whose score is its threshold passes, one point below does not."""
    scoring = Scoring()
    pattern = "AGATCGGAAGAGCACACGTCTGAACT"
    fraction = Fraction(4, 5)
    thresholds = overlap_thresholds(fraction, scoring.match, len(pattern))
    reads, passing = [], []
    rng = np.random.default_rng(7)
    for length in range(8, 25):
        # one substitution: 2 (L - 1) - 3 = 2L - 5 against ceil(1.6 L)
        piece = list(pattern[:length])
        piece[length // 2] = "A" if piece[length // 2] != "A" else "C"
        flank = "".join("ACGT"[int(x)] for x in rng.integers(0, 4, 30))
        reads.append(flank + "".join(piece))
        passing.append(2 * length - 5 >= thresholds[length])
    assert any(passing) and not all(passing)
    got = decided(reads, tasks_of([pattern], [_END3], [fraction], scoring), 3, scoring)
    want = expected(reads, [pattern], [_END3], [fraction], 3, scoring)
    assert np.array_equal(got, want)


def test_several_tasks_share_the_reads():
    """3' and 5' tasks of several patterns at once, one read layout per end,
    rows loaded as the longest-reaching task needs them; a subset of rows."""
    scoring = Scoring()
    rng = np.random.default_rng(11)
    patterns = ["AGATCGGAAGAGCACACGTCTGAACTCCAGTCA", "GTGYCAGCMGCCGCGGTAA", "ACGTACGT", "CTGTCTCTTATACACATCT"]
    ends = [_END3, _END5, _END3, _END5]
    fractions = [Fraction(4, 5), Fraction(7, 10), Fraction(1, 2), Fraction(9, 10)]
    reads = []
    for k in range(4):
        reads += planted_reads(rng, patterns[k], ends[k], 300)
    order = rng.permutation(len(reads))
    reads = [reads[i] for i in order]
    tasks = tasks_of(patterns, ends, fractions, scoring)
    want = expected(reads, patterns, ends, fractions, 3, scoring)
    assert np.array_equal(decided(reads, tasks, 3, scoring), want)
    rows = np.flatnonzero(rng.random(len(reads)) < 0.4)
    got = decided(reads, tasks, 3, scoring, rows=rows)
    assert np.array_equal(got[rows], want[rows]) and not got[np.setdiff1d(np.arange(len(reads)), rows)].any()


@pytest.mark.parametrize("first_rows", [1, 2, 5, 40])
def test_rows_loaded_in_any_steps(first_rows):
    """The window's rows are transposed a few at first, the rest when the DP
    needs them: the decision does not depend on how many come first."""
    scoring = Scoring(1, 1, 1, 1)  # a wide band: slack up to the pattern's length
    rng = np.random.default_rng(first_rows)
    pattern = random_pattern(rng, 30)
    fraction = Fraction(3, 10)
    reads = planted_reads(rng, pattern, _END3, 600)
    tasks = tasks_of([pattern], [_END3], [fraction], scoring)
    got = decided(reads, tasks, 2, scoring, first_rows=first_rows)
    assert np.array_equal(got, expected(reads, [pattern], [_END3], [fraction], 2, scoring))


@settings(max_examples=60, deadline=None)
@given(pattern=pattern_texts(min_size=1, max_size=25), reads=st.lists(read_texts(max_size=40), min_size=1,
                                                                     max_size=20),
       end=st.sampled_from([_END3, _END5]), numerator=st.integers(1, 10), min_overlap=st.integers(1, 25))
def test_decision_on_any_input(pattern, reads, end, numerator, min_overlap):
    scoring = Scoring()
    fraction = Fraction(numerator, 10)
    tasks = tasks_of([pattern], [end], [fraction], scoring)
    got = decided(reads, tasks, min_overlap, scoring)
    assert np.array_equal(got, expected(reads, [pattern], [end], [fraction], min_overlap, scoring))


def test_end_overlaps_is_the_same_with_either_first_pass():
    """Score, cut and overlap of every read: the bit-sliced first pass and
    the 16-lane one, from sequence bytes and from codes."""
    rng = np.random.default_rng(3)
    scoring = Scoring(3, 2, 4, 1)
    for trial in range(4):
        pattern = random_pattern(rng, int(rng.integers(5, 35)), iupac_rate=0.1)
        end = (_END3, _END5)[trial % 2]
        masks = encode_pattern(pattern)
        thresholds = overlap_thresholds(Fraction(int(rng.integers(5, 10)), 10), scoring.match, len(pattern))
        tasks = one_task(masks, end, thresholds, scoring)
        reads = planted_reads(rng, pattern, end, 900)
        data, starts, lengths = joined(reads)
        bits = end_overlaps(data, starts, lengths, READ_CODE, tasks, 2, scoring, first_pass="bits")
        lanes = end_overlaps(data, starts, lengths, READ_CODE, tasks, 2, scoring, first_pass="lanes")
        width = max(len(read) for read in reads)
        codes = np.full((len(reads), width), 4, np.uint8)
        for r, read in enumerate(reads):
            codes[r, :len(read)] = codes_of(read)
        from_codes = end_overlaps(codes.reshape(-1), np.arange(len(reads), dtype=np.int64) * width, lengths,
                                  _CODE_IDENTITY, tasks, 2, scoring, first_pass="bits")
        for a, b, c in zip(bits, lanes, from_codes):
            assert np.array_equal(a, b) and np.array_equal(a, c)
        assert (bits[0] > 0).sum() > 100


def cpu_batches(reads: list[str], rng) -> list:
    """The reads as the CPU screen holds a batch (bpbc.cpu_engine.PreparedReads,
    lane i holding read order[i]), several ways: from their bytes (sorted by
    length; the identity order where they are in length order already) in
    superblocks of 16 words, from codes in superblocks of 8 and 3 words, and
    in a random order (word groups of many lengths, read lane by lane)."""
    from bpbc.cpu_engine import PreparedReads

    data, starts, lengths = joined(reads)
    codes = np.full((len(reads), max(1, int(lengths.max(initial=0)))), 4, np.uint8)
    for r, read in enumerate(reads):
        codes[r, :len(read)] = codes_of(read)
    padded = np.concatenate([data, np.zeros(64, np.uint8)])  # from_bytes may read 64 bytes at a time
    batches = [PreparedReads.from_bytes(padded, starts, lengths, 16), PreparedReads(codes, lengths, words=8),
               PreparedReads(codes, lengths, order=rng.permutation(len(reads)).astype(np.int64), words=3)]
    assert batches[0] is not None
    return batches


def plane_decided(prepared, reads: list[str], tasks: EndTasks, min_overlap: int, scoring: Scoring,
                  first_rows: int = end_overlap.FIRST_ROWS) -> np.ndarray:
    """bool (reads, tasks): the bit-sliced pass's flags from a CPU batch's
    bit planes (the reads it lists: those it flags, ascending)."""
    out = np.zeros((len(reads), len(tasks)), np.int32)
    lengths = np.array([len(read) for read in reads], np.int64)
    listed = Decision(tasks, min_overlap, scoring).plane_flags(prepared, lengths, out, first_rows)
    assert np.array_equal(listed, np.flatnonzero((out > 0).any(axis=1)))
    return out > 0


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_decision_from_a_cpu_batch_is_the_reference(scoring):
    """The decision reading the rows from the CPU screen's bit planes of the
    batch (Decision.plane_flags) flags exactly what the plain DP flags:
    several tasks of both ends, more than one superblock of 512 and a
    partial last one, reads of many lengths (word groups of one length and
    of several), short and empty reads, N and lowercase, IUPAC patterns;
    the batch laid out in any order and superblock width, rows loaded in
    any steps."""
    rng = np.random.default_rng(60 + SCORINGS.index(scoring))
    patterns = [random_pattern(rng, int(rng.integers(5, 34)), iupac_rate=0.1) for _ in range(3)]
    ends = [_END3, _END5, _END3]
    fractions = [Fraction(4, 5), Fraction(1, 2), Fraction(7, 10)]
    reads = ["", "A", "NNNNN", "acgtn"]
    for pattern, end in zip(patterns, ends):
        reads += planted_reads(rng, pattern, end, 400)
    reads += [random_read(rng, 150, n_rate=0.01, lower_rate=0.1) for _ in range(600)]  # groups of one length
    reads = [reads[i] for i in rng.permutation(len(reads))]
    tasks = tasks_of(patterns, ends, fractions, scoring)
    want = expected(reads, patterns, ends, fractions, 2, scoring)
    assert want.sum() > 100
    for prepared in cpu_batches(reads, rng):
        for first_rows in (1, end_overlap.FIRST_ROWS, 60):
            assert np.array_equal(plane_decided(prepared, reads, tasks, 2, scoring, first_rows), want)


@pytest.mark.parametrize("end", [_END3, _END5], ids=["3prime", "5prime"])
def test_decision_from_a_cpu_batch_of_one_length(end):
    """Reads of one length in input order (the identity order: no lanes
    reordered), as most runs' batches are, and a partial last word group."""
    scoring = Scoring()
    rng = np.random.default_rng(31 + end)
    pattern = "AGATCGGAAGAGCACACGTCTGAACTCCAGTCA"
    fraction = Fraction(4, 5)
    reads = []
    for _ in range(1100):
        overlap = int(rng.integers(0, 34))
        piece = pattern[:overlap] if end == _END3 else pattern[len(pattern) - overlap:]
        piece = mutate(rng, piece, 0.05)[:150]
        flank = random_read(rng, 150 - len(piece), n_rate=0.01)
        reads.append(flank + piece if end == _END3 else piece + flank)
    tasks = tasks_of([pattern], [end], [fraction], scoring)
    want = expected(reads, [pattern], [end], [fraction], 3, scoring)
    batches = cpu_batches(reads, rng)
    assert not len(batches[0].lane_order)  # the identity
    for prepared in batches:
        assert np.array_equal(plane_decided(prepared, reads, tasks, 3, scoring), want)
    assert 100 < want.sum() < 1000


@settings(max_examples=60, deadline=None)
@given(pattern=pattern_texts(min_size=1, max_size=25), reads=st.lists(read_texts(max_size=40), min_size=1,
                                                                     max_size=20),
       end=st.sampled_from([_END3, _END5]), numerator=st.integers(1, 10), min_overlap=st.integers(1, 25),
       seed=st.integers(0, 1 << 16))
def test_decision_from_a_cpu_batch_on_any_input(pattern, reads, end, numerator, min_overlap, seed):
    scoring = Scoring()
    fraction = Fraction(numerator, 10)
    tasks = tasks_of([pattern], [end], [fraction], scoring)
    want = expected(reads, [pattern], [end], [fraction], min_overlap, scoring)
    for prepared in cpu_batches(reads, np.random.default_rng(seed)):
        assert np.array_equal(plane_decided(prepared, reads, tasks, min_overlap, scoring), want)


def test_no_read_can_pass_needs_no_kernel():
    """Thresholds above every overlap's best score: no planes, nothing flagged."""
    scoring = Scoring()
    pattern = "ACGTACGTAC"
    thresholds = overlap_thresholds(Fraction(1), scoring.match, len(pattern)) + 1
    tasks = one_task(encode_pattern(pattern), _END3, thresholds, scoring)
    decision = Decision(tasks, 1, scoring)
    assert decision.planes == 0
    reads = ["TTTT" + pattern[:9]]
    assert not decided(reads, tasks, 1, scoring).any()
    scores, _ = reference_scores(codes_of(reads[0]), encode_pattern(pattern), _END3, scoring)
    assert scores[9] == thresholds[9] - 1  # one point short


# --- the GPU kernels (bpbc/end_overlap.cu) ------------------------------------

_HOST_SHIM = r"""
#include <algorithm>
#define __global__
#define __device__
#define __forceinline__ inline
struct Dim3 { unsigned x, y, z; };
static Dim3 blockIdx, threadIdx, blockDim;
using std::max;
using std::min;
#include "end_overlap.cu"
static void at_thread(long long t) {
    blockDim.x = 128;
    blockIdx.x = (unsigned)(t / 128);
    threadIdx.x = (unsigned)(t % 128);
}
extern "C" void run_all(const unsigned char* buf, const long long* seq_start, const long long* lengths,
                        const long long* rows, long long n_rows, const unsigned char* bit_table, const int* columns,
                        const long long* starts, const int* end, const int* slack, const int* values, int tasks,
                        int* flags, long long threads) {
    for (long long t = 0; t < threads; ++t) {
        at_thread(t);
        BYTES_EXPRESSION(buf, seq_start, lengths, rows, n_rows, bit_table, columns, starts, end, slack, values, tasks,
                         flags);
    }
}
extern "C" void run_planes(const unsigned* planes, int plane_width, const int* lengths, long long n,
                           const int* columns, const long long* starts, const int* end, const int* slack,
                           const int* values, int tasks, unsigned* found, long long threads) {
    for (long long t = 0; t < threads; ++t) {
        at_thread(t);
        PLANES_EXPRESSION(planes, plane_width, lengths, n, columns, starts, end, slack, values, tasks, found);
    }
}
"""


def host_library(decision: Decision, tmp_path):
    """bpbc/end_overlap.cu's two kernels for ``decision`` compiled for the
    host (a C++ compiler, the CUDA keywords defined away, one call per
    thread): ``run_all`` (bytes) and ``run_planes``."""
    import ctypes
    import shutil
    import subprocess
    from pathlib import Path

    import bpbc

    compiler = shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler to run the CUDA kernels' source on the host")
    longest = int(np.diff(decision.starts).max())
    expressions = [end_overlap.gpu_expression(max(decision.planes, 1), decision.scoring, longest, kernel)
                   for kernel in end_overlap.GPU_KERNELS]
    source = tmp_path / "host.cpp"
    source.write_text(_HOST_SHIM.replace("BYTES_EXPRESSION", expressions[0])
                      .replace("PLANES_EXPRESSION", expressions[1]))
    library = tmp_path / f"host_{abs(hash(tuple(expressions)))}.so"
    subprocess.run([compiler, "-std=c++17", "-O1", "-shared", "-fPIC", "-I", str(Path(bpbc.__file__).parent),
                    str(source), "-o", str(library)], check=True)
    loaded = ctypes.CDLL(str(library))
    loaded.run_all.restype = loaded.run_planes.restype = None
    return loaded


def _task_pointers(decision: Decision) -> tuple[list, list]:
    """The task arrays as the kernels take them (kept alive by the first list) and their pointers."""
    import ctypes

    arrays = [decision.columns.astype(np.int32), decision.starts, decision.end.astype(np.int32),
              decision.slack.astype(np.int32), decision.values.astype(np.int32)]
    return arrays, [a.ctypes.data_as(ctypes.c_void_p) for a in arrays]


def kernel_flags(library, decision: Decision, reads: list[str], table) -> np.ndarray:
    """What the bytes kernel flags, run on the host as the GPU launch would."""
    import ctypes

    data, starts, lengths = joined(reads)
    rows = np.arange(len(reads), dtype=np.int64)
    tasks = len(decision.starts) - 1
    flags = np.zeros((len(reads), tasks), np.int32)
    arrays = [np.ascontiguousarray(data if len(data) else np.zeros(1, np.uint8)), starts, lengths, rows,
              np.ascontiguousarray(table, np.uint8)]
    pointers = [a.ctypes.data_as(ctypes.c_void_p) for a in arrays]
    kept, task_pointers = _task_pointers(decision)
    threads = -(-len(reads) // 32) * tasks
    library.run_all(*pointers[:4], ctypes.c_longlong(len(reads)), pointers[4], *task_pointers, ctypes.c_int(tasks),
                    flags.ctypes.data_as(ctypes.c_void_p), ctypes.c_longlong(threads))
    return flags > 0


def screen_planes(reads: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(planes, lengths in that order, order): the reads as the GPU screen
    holds a batch (bpbc.gpu_engine.PreparedReads: sorted by length, 32 a
    word group, transpose/cpu.py's bit planes), made here on the host."""
    from transpose import pack_codes

    from bpbc.order import length_order

    lengths = np.array([len(read) for read in reads], np.int64)
    codes = np.full((len(reads), max(1, int(lengths.max()))), 4, np.uint8)
    for r, read in enumerate(reads):
        codes[r, :len(read)] = codes_of(read)
    order = length_order(lengths)
    return pack_codes(codes[order], 32), lengths[order].astype(np.int32), order


def plane_kernel_words(library, decision: Decision, planes: np.ndarray, sorted_lengths: np.ndarray) -> np.ndarray:
    """What the planes kernel writes (uint32 (groups, tasks)), run on the host as the GPU launch would."""
    import ctypes

    n, tasks = len(sorted_lengths), len(decision.starts) - 1
    groups = -(-n // 32)
    words = np.zeros((groups, tasks), np.uint32)
    planes = np.ascontiguousarray(planes, np.uint32)
    sorted_lengths = np.ascontiguousarray(sorted_lengths, np.int32)
    kept, task_pointers = _task_pointers(decision)
    library.run_planes(planes.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(planes.shape[1]),
                       sorted_lengths.ctypes.data_as(ctypes.c_void_p), ctypes.c_longlong(n), *task_pointers,
                       ctypes.c_int(tasks), words.ctypes.data_as(ctypes.c_void_p), ctypes.c_longlong(groups * tasks))
    return words


def plane_flags(library, decision: Decision, reads: list[str]) -> np.ndarray:
    """bool (reads, tasks): the planes kernel's flags, in input order."""
    planes, sorted_lengths, order = screen_planes(reads)
    return end_overlap.lane_flags(plane_kernel_words(library, decision, planes, sorted_lengths), order)


@pytest.mark.parametrize("scoring", [Scoring(), Scoring(1, 1, 1, 1), Scoring(4, 1, 2, 3)], ids=scoring_id)
def test_the_cuda_kernels_decide_as_the_reference_on_the_host(scoring, tmp_path):
    """bpbc/end_overlap.cu, compiled as C++ for the host: both kernels (from
    sequence bytes, and from the screen's bit planes of reads sorted by
    length) flag what the plain DP flags, over several tasks of both ends,
    reads of many lengths (many runs of one length in a word group), short
    and empty reads, N, IUPAC."""
    rng = np.random.default_rng(SCORINGS.index(scoring) if scoring in SCORINGS else 9)
    patterns = [random_pattern(rng, int(rng.integers(5, 34)), iupac_rate=0.1) for _ in range(3)]
    ends = [_END3, _END5, _END3]
    fractions = [Fraction(4, 5), Fraction(1, 2), Fraction(7, 10)]
    reads = ["", "A"]
    for pattern, end in zip(patterns, ends):
        reads += planted_reads(rng, pattern, end, 70)
    reads = [reads[i] for i in rng.permutation(len(reads))]
    tasks = tasks_of(patterns, ends, fractions, scoring)
    decision = Decision(tasks, 2, scoring)
    library = host_library(decision, tmp_path)
    want = expected(reads, patterns, ends, fractions, 2, scoring)
    table = np.where(READ_CODE < 4, np.left_shift(1, np.minimum(READ_CODE, 7)), 0)
    assert np.array_equal(kernel_flags(library, decision, reads, table), want)
    assert np.array_equal(plane_flags(library, decision, reads), want)
    assert want.sum() > 30


@pytest.mark.parametrize("end", [_END3, _END5], ids=["3prime", "5prime"])
def test_the_planes_kernel_on_reads_of_one_length_and_a_partial_group(end, tmp_path):
    """Reads of one length (one run a word group, as in most runs) and of
    two, 100 reads (a last word group of 4), a pattern with IUPAC codes."""
    scoring = Scoring()
    rng = np.random.default_rng(21 + end)
    pattern = "AGATCGGAAGAGCACACGTCTGAACTCCAGTCA"
    fraction = Fraction(4, 5)
    for lengths in ([60] * 100, [40] * 50 + [55] * 50):
        reads = []
        for length in lengths:
            overlap = int(rng.integers(0, 20))
            piece = pattern[:overlap] if end == _END3 else pattern[len(pattern) - overlap:]
            piece = mutate(rng, piece, 0.05)[:length]
            flank = random_read(rng, length - len(piece), n_rate=0.02)
            reads.append(flank + piece if end == _END3 else piece + flank)
        tasks = tasks_of([pattern], [end], [fraction], scoring)
        decision = Decision(tasks, 3, scoring)
        want = expected(reads, [pattern], [end], [fraction], 3, scoring)
        assert np.array_equal(plane_flags(host_library(decision, tmp_path), decision, reads), want)
        assert 10 < want.sum() < 90


def test_lane_flags_puts_the_sorted_lanes_back_in_input_order():
    order = np.array([2, 0, 3, 1, 4] + list(range(5, 40)), np.int64)  # 40 reads: two word groups
    words = np.zeros((2, 3), np.uint32)
    words[0, 1] = (1 << 0) | (1 << 3)  # lanes 0 and 3: reads 2 and 1, task 1
    words[1, 2] = 1 << 7  # lane 39: read 39, task 2
    words[1, 0] = 1 << 31  # lane 63: no read (the last group holds 8)
    flags = end_overlap.lane_flags(words, order)
    assert flags.shape == (40, 3)
    assert sorted(zip(*np.nonzero(flags))) == [(1, 1), (2, 1), (39, 2)]


def test_a_first_pass_begun_by_the_engine_replaces_the_hosts(monkeypatch, tmp_path):
    """Trimmer.inputs begins the decision where the batch's engine offers it
    (the GPU engine's end_overlap_flags), and edit takes the reads it flags
    instead of running the host's pass: here a stand-in engine runs the
    planes kernel on the host over the batch packed as the GPU holds it.
    The edits are those of the host's pass, trimming and masking, 3', 5' and
    anywhere adapters on both strands."""
    from bench.trimming import ADAPTER, planted_reads as bench_reads

    from bpbc.io import SequenceSource, read_patterns
    from bpbc.screener import ReadBatch, Screener
    from bpbc.trimming import EditInputs, Trimmer

    data, _, _ = bench_reads(700, 150, 20, seed=5)
    reads_path = tmp_path / "r.fq"
    reads_path.write_bytes(data)
    (tmp_path / "p.fa").write_text(f">a adapter=3prime\n{ADAPTER}\n>b adapter=anywhere\nGTGYCAGCMGCCGCGGTAA\n"
                                   f">c adapter=5prime\n{ADAPTER[::-1]}\n")
    patterns = read_patterns(tmp_path / "p.fa")
    screener = Screener(patterns, 30, Scoring(), "both", device="cpu")
    with SequenceSource(reads_path, kind="reads", raw_fastq=True) as source:
        chunk = next(iter(source.chunks(10_000)))
    lengths = np.asarray(chunk.lengths, np.int64)
    buffer = np.frombuffer(chunk.data, np.uint8)
    reads = [buffer[s:s + n].tobytes().decode() for s, n in zip(chunk.seq_start.tolist(), lengths.tolist())]
    batch = ReadBatch.from_chunk(chunk, screener.engine)
    alignments = screener.align(batch, screener.hits(batch))
    planes, sorted_lengths, order = screen_planes(reads)
    for action in ("trim", "mask"):
        trimmer = Trimmer(action, screener, patterns, "p.fa", min_overlap=3, trim_strand="both",
                          min_score_fraction=0.8)
        library = host_library(trimmer.decision, tmp_path)
        begun = []

        class StandInEngine:
            def end_overlap_flags(self, prepared, batch_lengths, decision):
                assert decision is trimmer.decision and np.array_equal(batch_lengths, lengths)
                begun.append(prepared)
                words = plane_kernel_words(library, decision, planes, sorted_lengths)
                return SimpleNamespace(result=lambda: end_overlap.lane_flags(words, order))

        stand_in = ReadBatch(None, lengths, SimpleNamespace(planes=planes, order=order), StandInEngine(), chunk)
        host = trimmer.edit(chunk, lengths, EditInputs(None), alignments, 1)
        with monkeypatch.context() as patched:
            patched.setattr(end_overlap.Decision, "flags", _no_host_pass)
            inputs = trimmer.inputs(chunk, stand_in)
            assert len(begun) == 1 and inputs.codes is None and inputs.first_pass is not None
            engine = trimmer.edit(chunk, lengths, inputs, alignments, 1)
            # the same with the trimmer's thread left out (--threads 1): the flags taken in edit
            inline = trimmer.edit(chunk, lengths, EditInputs(None, inputs.first_pass), alignments, 1)
        for edit in (engine, inline):
            for field in ("keep_start", "keep_end", "span_first", "span_start", "span_end", "edited", "pattern",
                          "pattern_reads", "pattern_bases"):
                assert np.array_equal(getattr(host, field), getattr(edit, field)), field
            assert host.bases == edit.bases and host.edited.sum() > 100
    # a CPU batch: no pass begun on the engine (it offers none), the host's begun in the trimmer's thread
    # (from the batch's bit planes: no pass over the reads' bytes)
    with monkeypatch.context() as patched:
        patched.setattr(end_overlap.Decision, "flags", _no_host_pass)
        inputs = trimmer.inputs(chunk, batch)
        assert inputs.codes is None and inputs.first_pass is None
        found_read, task, found_cut = inputs.overlaps.result()
    score, cut, _ = trimmer.end_overlaps(chunk, lengths, None)
    want = np.nonzero(score > 0)
    assert np.array_equal(found_read, want[0]) and np.array_equal(task, want[1]) and len(task) > 50
    assert np.array_equal(found_cut, cut[want])
    # begun when the batch is prepared, before its screen (Trimmer.begin): inputs takes them, the same
    trimmer.begin(chunk, batch)
    begun = trimmer.inputs(chunk, batch)
    assert not trimmer._begun and begun.codes is None and begun.first_pass is None
    for a, b in zip(begun.overlaps.result(), (found_read, task, found_cut)):
        assert np.array_equal(a, b)
    edits = [trimmer.edit(chunk, lengths, given, alignments, 1) for given in (begun, trimmer.inputs(chunk, batch))]
    for field in ("keep_start", "keep_end", "edited", "pattern", "pattern_reads", "pattern_bases"):
        assert np.array_equal(getattr(edits[0], field), getattr(edits[1], field)), field
    # nothing begun for a batch the trimmer's thread does not take (--threads 1)
    trimmer.threads = 1
    trimmer.begin(chunk, batch)
    assert not trimmer._begun and trimmer.inputs(chunk, batch).overlaps is None


def _no_host_pass(*args, **kwargs):
    raise AssertionError("the host's first pass ran")


@pytest.mark.gpu
@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_gpu_decision_is_the_cpu_one(scoring):
    """The GPU pass (bpbc/end_overlap.cu through CuPy) flags the reads the
    CPU pass and the plain DP flag, from sequence bytes and from a batch as
    the GPU engine prepares it (from the bytes, and from codes); end_overlaps
    with it is the CPU's."""
    from bpbc.gpu_engine import GpuEngine

    rng = np.random.default_rng(40 + SCORINGS.index(scoring))
    patterns = [random_pattern(rng, int(rng.integers(5, 40)), iupac_rate=0.1) for _ in range(3)]
    ends = [_END3, _END5, _END3]
    fractions = [Fraction(4, 5), Fraction(3, 5), Fraction(9, 10)]
    reads = [""]
    for pattern, end in zip(patterns, ends):
        reads += planted_reads(rng, pattern, end, 400)
    reads = [reads[i] for i in rng.permutation(len(reads))]
    tasks = tasks_of(patterns, ends, fractions, scoring)
    decision = Decision(tasks, 3, scoring)
    data, starts, lengths = joined(reads)
    rows = np.flatnonzero(rng.random(len(reads)) < 0.9)
    gpu = np.zeros((len(reads), len(tasks)), np.int32)
    end_overlap.gpu_flags(decision, data, starts, lengths, np.where(READ_CODE < 4, np.left_shift(1, np.minimum(
        READ_CODE, 7)), 0).astype(np.uint8), rows, gpu)
    cpu = decided(reads, tasks, 3, scoring, rows=rows)
    assert np.array_equal(gpu > 0, cpu)
    want = expected(reads, patterns, ends, fractions, 3, scoring)
    assert np.array_equal(cpu[rows], want[rows])
    for a, b in zip(end_overlaps(data, starts, lengths, READ_CODE, tasks, 3, scoring, first_pass="gpu"),
                    end_overlaps(data, starts, lengths, READ_CODE, tasks, 3, scoring, first_pass="bits")):
        assert np.array_equal(a, b)
    # the planes kernel, over the batch as the engine prepared it for the screen
    engine = GpuEngine()
    codes = np.full((len(reads), int(lengths.max())), 4, np.uint8)
    for r, read in enumerate(reads):
        codes[r, :len(read)] = codes_of(read)
    for prepared in (engine.prepare_bytes(data, starts, lengths), engine.prepare(codes, lengths)):
        flags = engine.end_overlap_flags(prepared, lengths, decision).result()
        assert np.array_equal(flags, want)


@pytest.mark.gpu
def test_gpu_planes_decision_of_a_large_batch():
    """400,000 reads of 150 bp (bench trimming's): the planes kernel flags
    what the CPU pass flags."""
    import tempfile
    from pathlib import Path

    from bench.trimming import ADAPTER, planted_reads as bench_reads

    from bpbc.chunks import RawFastqChunk
    from bpbc.gpu_engine import GpuEngine
    from bpbc.io import SequenceSource

    scoring = Scoring()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "r.fq"
        for adapters in (True, False):
            path.write_bytes(bench_reads(400_000, 150, 20, adapters=adapters)[0])
            with SequenceSource(path, kind="reads", raw_fastq=True) as source:
                chunk = next(iter(source.chunks(1 << 20)))
            assert isinstance(chunk, RawFastqChunk) and len(chunk) == 400_000
            tasks = tasks_of([ADAPTER], [_END3], [Fraction(4, 5)], scoring)
            decision = Decision(tasks, 3, scoring)
            lengths = np.asarray(chunk.lengths, np.int64)
            cpu = np.zeros((len(lengths), 1), np.int32)
            decision.flags(np.frombuffer(chunk.data, np.uint8), chunk.seq_start, lengths, bit_table(READ_CODE),
                           np.arange(len(lengths), dtype=np.int64), cpu)
            engine = GpuEngine()
            prepared = engine.prepare_bytes(chunk.data, chunk.seq_start, lengths)
            assert np.array_equal(engine.end_overlap_flags(prepared, lengths, decision).result(), cpu > 0)
            assert (cpu > 0).sum() > 0.01 * len(lengths)
