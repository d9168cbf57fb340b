"""Engine parity: every engine against the scalar reference and parasail.

:class:`EngineParity` holds the tests; each engine runs them once through a
subclass (the GPU one skipped where no GPU is usable).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy as np
import pytest
from numba import types
from numba.extending import intrinsic
from hypothesis import given, settings
from hypothesis import strategies as st

import bpbc
from bpbc.alphabet import SequenceError, encode_pattern, encode_reads
from bpbc.patterns import PatternTable
from bpbc.reference import sw_score_codes
from bpbc.scoring import Scoring, score_planes
from bpbc.screener import ReadBatch
from tests.bpbc.conftest import (
    EDGE_LENGTHS,
    SCORINGS,
    parasail_sw_codes,
    pattern_texts,
    random_pattern,
    random_read,
    raw_fastq_chunk,
    read_texts,
    related_pair,
    reverse_complement_masks,
    scoring_id,
    scorings,
)


def check_exactness(engine_scores, overflow, true_scores, planes):
    """The screen's contract: exact unless flagged; flagged means >= 2**planes."""
    true_scores = np.asarray(true_scores)
    exact = ~overflow
    assert np.array_equal(engine_scores[exact], true_scores[exact])
    assert np.all(true_scores[overflow] >= 1 << planes)


class EngineParity:
    """Tests every engine must pass. Subclasses provide ``make_engine``."""

    @classmethod
    def make_engine(cls):
        raise NotImplementedError

    @pytest.fixture(scope="class")
    @classmethod
    def engine(cls):
        return cls.make_engine()

    def run(self, engine, reads, pattern_masks, scoring, planes):
        codes, lengths = encode_reads(reads)
        prepared = engine.prepare(codes, lengths)
        scores, overflow = engine.scores(prepared, PatternTable.of([pattern_masks]), scoring, planes)
        return codes, lengths, scores[:, 0], overflow[:, 0]

    @settings(max_examples=60, deadline=None)
    @given(
        reads=st.lists(read_texts(max_size=70), min_size=1, max_size=12),
        pattern=pattern_texts(max_size=40),
        # half the examples on the scorings the other tests compile kernels for (CI's time)
        scoring=st.one_of(st.sampled_from(SCORINGS), scorings()),
        threshold_fraction=st.floats(min_value=0.0, max_value=1.0),
        reverse=st.booleans(),
    )
    def test_matches_reference(self, engine, reads, pattern, scoring, threshold_fraction, reverse):
        masks = encode_pattern(pattern)
        if reverse:
            masks = reverse_complement_masks(masks)
        threshold = max(1, round(threshold_fraction * scoring.max_score(len(masks))))
        planes = score_planes(threshold)
        codes, lengths, scores, overflow = self.run(engine, reads, masks, scoring, planes)
        truth = [sw_score_codes(codes[i, : lengths[i]], masks, scoring) for i in range(len(reads))]
        check_exactness(scores, overflow, truth, planes)
        # the screen decision is exact whatever the planes
        passed = (scores >= threshold) | overflow
        assert np.array_equal(passed, np.asarray(truth) >= threshold)

    @pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
    def test_edge_lengths_against_parasail(self, engine, scoring):
        """Lengths around word boundaries, patterns longer than reads, all-N
        reads, IUPAC patterns; enough planes that every score is exact."""
        rng = np.random.default_rng(7)
        read_lengths = EDGE_LENGTHS + [127, 128, 129, 300]
        reads = [random_read(rng, n, n_rate=0.05) for n in read_lengths for _ in range(9)]
        reads += ["N" * n for n in (1, 33, 64, 150)]
        for pattern_length in (1, 5, 32, 65, 140):
            masks = encode_pattern(random_pattern(rng, pattern_length, iupac_rate=0.1))
            planes = scoring.max_score(pattern_length).bit_length()
            codes, lengths, scores, overflow = self.run(engine, reads, masks, scoring, planes)
            truth = [parasail_sw_codes(codes[i, : lengths[i]], masks, scoring) for i in range(len(reads))]
            assert not overflow.any()
            assert np.array_equal(scores, truth)

    def test_thousands_of_related_pairs_against_parasail(self, engine):
        """A few thousand read/pattern pairs with planted, mutated matches
        (so gaps and mismatches matter), grouped by pattern."""
        rng = np.random.default_rng(11)
        scoring = Scoring()
        for pattern_index in range(6):
            pattern_length = int(rng.integers(15, 129))
            pattern = random_pattern(rng, pattern_length, iupac_rate=0.05)
            masks = encode_pattern(pattern)
            reads = []
            for _ in range(500):
                read, _ = related_pair(rng, int(rng.integers(0, 200)), pattern_length, rate=0.15, n_rate=0.01)
                reads.append(read)
            # plant this pattern (not related_pair's own) in half the reads
            for i in range(0, len(reads), 2):
                start = int(rng.integers(0, len(reads[i]) + 1))
                concrete = pattern.upper().translate(str.maketrans("RYSWKMBDHVNU", "ACGTGACAAAGT"))
                reads[i] = reads[i][:start] + concrete[: int(rng.integers(1, pattern_length + 1))] + reads[i][start:]
            planes = scoring.max_score(pattern_length).bit_length()
            codes, lengths, scores, overflow = self.run(engine, reads, masks, scoring, planes)
            truth = [parasail_sw_codes(codes[i, : lengths[i]], masks, scoring) for i in range(len(reads))]
            assert not overflow.any()
            assert np.array_equal(scores, truth), pattern_index

    @pytest.mark.parametrize("threshold", [1, 2, 3, 7, 8, 31, 32, 40, 63, 64, 100])
    def test_saturating_screen_property(self, engine, threshold):
        """With b = bit length of T: below T exact, at or above T detected."""
        rng = np.random.default_rng(threshold)
        scoring = Scoring()
        pattern = random_pattern(rng, 64)
        masks = encode_pattern(pattern)
        reads = [related_pair(rng, 150, 64, rate=float(rng.uniform(0, 0.4)))[0] for _ in range(300)]
        planes = score_planes(threshold)
        codes, lengths, scores, overflow = self.run(engine, reads, masks, scoring, planes)
        truth = np.array([parasail_sw_codes(codes[i, : lengths[i]], masks, scoring) for i in range(len(reads))])
        check_exactness(scores, overflow, truth, planes)
        assert np.array_equal((scores >= threshold) | overflow, truth >= threshold)

    def test_empty_batch(self, engine):
        codes, lengths = encode_reads([])
        prepared = engine.prepare(codes, lengths)
        scores, overflow = engine.scores(prepared, PatternTable.of([encode_pattern("ACGT")]), Scoring(), 6)
        assert scores.shape == (0, 1) and overflow.shape == (0, 1)

    def test_instance_order_is_input_order(self, engine):
        """Reads of very different lengths are sorted inside the engine; the
        scores must come back in input order."""
        rng = np.random.default_rng(3)
        pattern = "ACGTTGCAACGGTACA"
        reads = []
        for i in range(700):
            read = random_read(rng, int(rng.integers(0, 250)))
            if i % 3 == 0:
                read = read[:10] + pattern[: 4 + i % 12] + read[10:]
            reads.append(read)
        masks = encode_pattern(pattern)
        codes, lengths, scores, overflow = self.run(engine, reads, masks, Scoring(), 6)
        truth = [parasail_sw_codes(codes[i, : lengths[i]], masks, Scoring()) for i in range(len(reads))]
        check_exactness(scores, overflow, truth, 6)

    def _panel(self, engine, planes):
        """Reads of mixed lengths with planted pieces of a panel of patterns
        of mixed lengths, both strands, in one table."""
        rng = np.random.default_rng(planes)
        patterns = [random_pattern(rng, int(n), iupac_rate=0.05) for n in (12, 24, 24, 33, 70)]
        concrete = [p.translate(str.maketrans("RYSWKMBDHVNU", "ACGTGACAAAGT")) for p in patterns]
        reads = []
        for i in range(1500):
            read = random_read(rng, int(rng.integers(0, 180)), n_rate=0.01)
            if i % 4 == 0:
                piece = concrete[i % len(concrete)]
                start = int(rng.integers(0, len(read) + 1))
                read = read[:start] + piece[int(rng.integers(0, 4)):] + read[start:]
            reads.append(read)
        table = PatternTable.build([encode_pattern(p) for p in patterns], ("+", "-"))
        codes, lengths = encode_reads(reads)
        return codes, lengths, engine.prepare(codes, lengths), table

    @pytest.mark.parametrize("planes", [4, 6])
    def test_pattern_table_equals_one_pattern_at_a_time(self, engine, planes):
        codes, lengths, prepared, table = self._panel(engine, planes)
        scores, overflow = engine.scores(prepared, table, Scoring(), planes)
        assert scores.shape == (len(lengths), len(table))
        for k in range(len(table)):
            one, one_flag = engine.scores(prepared, PatternTable.of([table.oriented(k)]), Scoring(), planes)
            assert np.array_equal(scores[:, k], one[:, 0]) and np.array_equal(overflow[:, k], one_flag[:, 0])
        truth = np.array([[sw_score_codes(codes[i, : lengths[i]], table.oriented(k), Scoring())
                           for k in range(len(table))] for i in range(0, len(lengths), 7)])
        check_exactness(scores[::7], overflow[::7], truth, planes)
        assert (scores >= 1 << (planes - 1)).any() and overflow.any()

    def test_hits_are_the_dense_scores_that_pass(self, engine):
        codes, lengths, prepared, table = self._panel(engine, 6)
        thresholds = np.array([20, 40, 33, 36, 45, 60, 50, 50, 63, 40])
        scores, overflow = engine.scores(prepared, table, Scoring(), 6)
        reads, ks, values, flags = engine.hits(prepared, table, Scoring(), 6, thresholds)
        expect_reads, expect_ks = np.nonzero((scores >= thresholds) | overflow)
        assert np.array_equal(reads, expect_reads) and np.array_equal(ks, expect_ks)
        assert np.array_equal(values, scores[reads, ks]) and np.array_equal(flags, overflow[reads, ks])
        assert len(reads) > 100

    def test_flagged_pass_and_pair_scores(self, engine):
        """The two-pass screen's engine calls: the flagged instances of a
        short pass, then exact scores of just those instances."""
        if not engine.two_pass:
            pytest.skip("the Screener's two passes are the CPU engine's (the GPU takes its own inside hits)")
        codes, lengths, prepared, table = self._panel(engine, 5)
        scores, overflow = engine.scores(prepared, table, Scoring(), 5)
        reads, ks = engine.flagged(prepared, table, Scoring(), 5)
        expect_reads, expect_ks = np.nonzero(overflow)
        assert np.array_equal(reads, expect_reads) and np.array_equal(ks, expect_ks)
        full, full_flag = engine.scores(prepared, table, Scoring(), 8)
        values, flags = engine.pair_scores(codes, lengths, reads, ks, table, Scoring(), 8)
        assert np.array_equal(values, full[reads, ks]) and np.array_equal(flags, full_flag[reads, ks])
        assert len(reads) > 50


    def test_batch_from_raw_bytes_is_the_batch_from_codes(self, engine):
        """A chunk of raw FASTQ prepared from its bytes (the engine encodes)
        screens exactly as its codes do, whole or in parts, and gives the
        host the codes of any reads it asks for."""
        rng = np.random.default_rng(11)
        reads = [random_read(rng, int(rng.integers(0, 180)), n_rate=0.02, lower_rate=0.1) for _ in range(300)]
        reads[7] = ""
        for i in range(0, 300, 5):
            reads[i] = reads[i][:20] + "gattacagattacaggg" + reads[i][20:]
        chunk = raw_fastq_chunk(reads)
        table = PatternTable.build([encode_pattern(p) for p in ("ACGTTGCAACGGTA", "GATTACAGATTACAGGG")], ("+", "-"))
        codes, lengths = encode_reads(reads)
        from_codes = ReadBatch.from_codes(codes, lengths, engine)
        from_bytes = ReadBatch.from_chunk(chunk, engine)
        expected, expected_overflow = engine.scores(from_codes.prepared, table, Scoring(), 4)
        assert expected_overflow.any() and not expected_overflow.all()
        scores, overflow = engine.scores(from_bytes.prepared, table, Scoring(), 4)
        assert np.array_equal(scores, expected) and np.array_equal(overflow, expected_overflow)
        part = from_bytes.part(100, 250)
        scores, overflow = engine.scores(part.prepared, table, Scoring(), 4)
        assert np.array_equal(scores, expected[100:250]) and np.array_equal(overflow, expected_overflow[100:250])
        rows = np.array([3, 7, 150, 299])
        got_codes, got_lengths = from_bytes.codes_of(rows)
        assert np.array_equal(got_lengths, lengths[rows])
        assert all(np.array_equal(got_codes[t, :n], codes[r, :n]) for t, (r, n) in enumerate(zip(rows, lengths[rows])))
        assert np.array_equal(from_bytes.codes, codes)

    def test_batch_from_raw_bytes_names_a_read_outside_the_alphabet(self, engine):
        chunk = raw_fastq_chunk(["ACGT" * 10] * 40 + ["ACGTX"] + ["ACGT"] * 3)
        with pytest.raises(SequenceError, match="^read r40: character 'X' at position 5 "):
            ReadBatch.from_chunk(chunk, engine)


class TestCpuEngine(EngineParity):
    @classmethod
    def make_engine(cls):
        from bpbc.cpu_engine import CpuEngine

        return CpuEngine()


@pytest.mark.gpu
class TestGpuEngine(EngineParity):
    @classmethod
    def make_engine(cls):
        from bpbc.gpu_engine import GpuEngine

        return GpuEngine()


@pytest.mark.parametrize("words", [1, 2, 16])
def test_padding_lanes_are_not_packed_but_the_layout_is_the_same(words):
    """PreparedReads with ``padding`` (the second pass: a few reads per
    superblock, the rest an empty read) lays the reads out exactly as
    packing every lane does, whether real lanes are many, scattered, in a
    partial last group or absent."""
    from bpbc.cpu_engine import PreparedReads

    rng = np.random.default_rng(7)
    for n, lanes in ((5, 64 * words), (200, 64 * words * 3), (0, 64 * words), (70, 64 * words + 37)):
        width = 41
        codes = rng.integers(0, 5, size=(n + 1, width), dtype=np.uint8)
        codes[n] = 4  # the empty read
        lengths = np.concatenate([rng.integers(1, width + 1, size=n), [0]])
        order = np.full(lanes, n, dtype=np.int64)
        at = rng.choice(lanes, size=min(n, lanes), replace=False)
        order[at] = rng.permutation(n)[:len(at)]
        plain = PreparedReads(codes, lengths, order, words)
        padded = PreparedReads(codes, lengths, order, words, padding=n)
        assert np.array_equal(plain.cols, padded.cols) and np.array_equal(plain.block_length, padded.block_length)


@intrinsic
def _atomic_add(typingctx, counter, value):
    """counter[0] += value as one atomic step, giving the value before: the
    test's own, for its rendezvous (not the take_next under test)."""
    def codegen(context, builder, signature, args):
        start = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.atomic_rmw("add", start, args[1], "seq_cst")

    return types.int64(counter, types.int64), codegen


def sharing_a_count(take_next, threads: int = 4, rounds: int = 100, block: int = 2000) -> tuple[np.ndarray, int]:
    """Numbers taken by ``threads`` threads from one counter with
    ``take_next``, as the CPU kernel's threads take its tasks, in ``rounds``
    rounds: at each, every thread waits inside the compiled code (the GIL
    let go) until all have come, then takes ``block`` numbers with a little
    work between takes. (the numbers taken, the counter)."""
    import threading

    from numba import njit

    @njit(nogil=True)
    def take(counter, arrived, expected, got, count, block):
        _atomic_add(arrived, 1)
        while _atomic_add(arrived, 0) < expected:  # every thread is here and running
            pass
        sink = 0
        for _ in range(block):
            k = take_next(counter)
            work = k
            for _ in range(20):  # a little work between takes, as a task is
                work = (work * 6364136223846793005 + 1) & 0xFFFF
            sink ^= work
            got[count] = k
            count += 1
        return count, sink

    n = threads * rounds * block
    counter, arrived = np.zeros(1, np.int64), np.zeros(1, np.int64)
    got = [np.full(n, -1, np.int64) for _ in range(threads)]
    counts = [0] * threads

    def run(i):
        for r in range(rounds):
            counts[i] = take(counter, arrived, threads * (r + 1), got[i], counts[i], block)[0]

    take(np.zeros(1, np.int64), np.zeros(1, np.int64), 0, got[0], 0, 0)  # compiled before the threads start
    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return np.concatenate([numbers[:count] for numbers, count in zip(got, counts)]), int(counter[0])


def test_threads_sharing_a_count_each_take_numbers_of_their_own():
    """take_next, as the CPU kernel's threads take its tasks: each number
    goes to one thread only, none is left out, the threads let go together
    100 times from a rendezvous inside the compiled code. A race in
    hardware cannot be forced from here: planted once (take_next's atomic
    add replaced by a load, an add and a store, an intrinsic of the same
    signature), this failed 98 of 100 runs on 2 busy cores (the test before
    it, one round: 2 of 3); the next test, which reads the compiled code,
    fails on that plant every time."""
    from bpbc.cpu_vector import take_next

    taken, counter = sharing_a_count(take_next)
    assert np.array_equal(np.sort(taken), np.arange(len(taken))) and counter == len(taken)


def test_take_next_compiles_to_one_atomic_add():
    """The guarantee the test above can only sample: a kernel's take_next is
    one atomic read-modify-write of the counter (LLVM's atomicrmw add),
    not a load and a store (planted: fails 100 of 100 runs)."""
    import re

    from numba import njit

    from bpbc.cpu_vector import take_next

    @njit(nogil=True)
    def take(counter):
        return take_next(counter)

    counter = np.zeros(1, np.int64)
    assert (take(counter), take(counter), counter[0]) == (0, 1, 2)
    code = take.inspect_llvm(take.signatures[0])
    assert re.search(r"atomicrmw add [^\n]*i64 1 monotonic", code), code[-2000:]


def test_sorted_keys_and_lengths_are_found_sorted():
    """lexsort2 of keys in order already (the identity, found without
    sorting) and not quite in order; the check that lengths never fall, on
    one thread and in pieces on all, with the one fall anywhere: inside a
    piece, at a piece's first value, at the very end."""
    from bpbc.cpu_engine import _ASCENDING_PIECE, _ascending, lexsort2

    rng = np.random.default_rng(12)
    major = np.sort(rng.integers(0, 5, 3000))
    minor = np.zeros(3000, np.int64)
    for start in np.flatnonzero(np.diff(major, prepend=-1)):  # ascending within each major
        minor[start:] = np.sort(rng.integers(0, 151, 3000 - start))
    for a_major, a_minor in ((major, minor), (major, np.zeros(3000, np.int64)), (major, minor[::-1].copy())):
        assert np.array_equal(lexsort2(a_minor, a_major), np.lexsort((a_minor, a_major)))
    swapped = major.copy()
    swapped[[10, 2990]] = swapped[[2990, 10]]
    assert np.array_equal(lexsort2(minor, swapped), np.lexsort((minor, swapped)))
    for n in (0, 1, 1000, 2 * _ASCENDING_PIECE + 5, 5 * _ASCENDING_PIECE):
        lengths = np.sort(rng.integers(0, 300, n))
        assert _ascending(lengths)
        for fall in {1, n // 2, _ASCENDING_PIECE, 2 * _ASCENDING_PIECE + 1, n - 1} - {0} if n > 1 else ():
            if fall < n:
                fallen = lengths.copy()
                fallen[fall] = fallen[fall - 1] - 1
                assert not _ascending(fallen)


# ---------------------------------------------------------------- CPU targets and kernel shapes

def test_every_kernel_shape_gives_the_same_scores():
    """Each shape the CPU engine can take (the per-target table's and others:
    3-input gates, LUT3 cells, 2 and 3 rows per pass over patterns of lengths
    that are not multiples, LUT3 cells in stripes of 4 and 3 rows, 32 words,
    explicit 4-word vectors) gives
    the same scores and flags, and the flagged pass the same instances, on
    whatever target numba compiles for here."""
    from bpbc.cpu_engine import SHAPES, CpuEngine, KernelShape

    shapes = sorted(set(SHAPES.values()) | {KernelShape(16, 1, "ternary", "early"),
                                            KernelShape(32, 2, "ternary", "late"),
                                            KernelShape(16, 1, "lut3"), KernelShape(32, 3, "lut3"),
                                            KernelShape(16, 2, "lut3", stripe_bytes=4 * 960),
                                            KernelShape(16, 3, "lut3", stripe_bytes=1),
                                            KernelShape(8, 2, "binary", "late", vector=4)}, key=str)
    rng = np.random.default_rng(21)
    pairs = [related_pair(rng, int(rng.integers(1, 150)), 37, rate=0.1, iupac_rate=0.05) for _ in range(300)]
    codes, lengths = encode_reads([read for read, _ in pairs])
    table = PatternTable.of([encode_pattern(pairs[0][1]), encode_pattern("ACGTTGCA" * 3 + "A")])
    truth = np.array([[sw_score_codes(codes[i, : lengths[i]], table.oriented(k), Scoring()) for k in range(2)]
                      for i in range(len(pairs))])
    results = []
    for shape in shapes:
        engine = CpuEngine(threads=1, shape=shape)
        prepared = engine.prepare(codes, lengths)
        scores, overflow = engine.scores(prepared, table, Scoring(), 5)
        check_exactness(scores, overflow, truth, 5)
        results.append((scores, overflow, engine.flagged(prepared, table, Scoring(), 5)))
    for scores, overflow, (reads, ks) in results[1:]:
        assert np.array_equal(scores, results[0][0]) and np.array_equal(overflow, results[0][1])
        assert np.array_equal(reads, results[0][2][0]) and np.array_equal(ks, results[0][2][1])
    assert overflow.any() and (~overflow).any()


@pytest.mark.parametrize("name, features, arch, isa", [
    ("skylake-avx512", "+avx2,+avx512f,+avx512vl", "x86_64", "avx512"),
    ("skylake-avx512", "-avx512f", "x86_64", "avx2"),
    ("znver4", "", "x86_64", "avx512"),
    ("haswell", "+avx2,+fma,+bmi2,+popcnt,+sse4.2", "x86_64", "avx2"),
    ("znver3", "", "x86_64", "avx2"),
    ("x86-64", "+sse2", "x86_64", "generic"),
    ("neoverse-n1", "+neon", "aarch64", "neon"),
    ("apple-m1", "", "arm64", "neon"),
    ("pwr9", "", "ppc64le", "generic"),
])
def test_cpu_target_instruction_sets(name, features, arch, isa):
    from bpbc.cpu_engine import SHAPES, CpuTarget, kernel_shape

    target = CpuTarget(name, features, arch)
    assert target.isa == isa
    assert kernel_shape(target) == SHAPES[isa]
    assert name in target.label and arch in target.key


def test_kernel_source_and_cache_are_keyed_by_target(tmp_path, monkeypatch):
    """The generated source names its target and shape, and two targets get
    two cache files even where their sources agree."""
    import bpbc.cpu_engine as cpu_engine

    monkeypatch.setenv("BPBC_CACHE_DIR", str(tmp_path))
    source = cpu_engine._generate_kernel_source(4, Scoring(), False, cpu_engine.KernelShape(), "mytarget")
    assert "target mytarget, shape words=16 rows=1" in source
    here = cpu_engine.cpu_target()
    other = cpu_engine.CpuTarget("some-other-cpu", "+x", here.arch)
    names = set()
    for target in (here, other):
        monkeypatch.setattr(cpu_engine, "cpu_target", lambda target=target: target)
        cpu_engine.kernel.cache_clear()
        cpu_engine.kernel(3, Scoring(), False, cpu_engine.KernelShape())
        names |= {p.name for p in tmp_path.glob("bpbc_sw_cpu_b3_*.py")}
    cpu_engine.kernel.cache_clear()
    assert len(names) == 2


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")
def test_numba_threads_follow_the_cpu_affinity():
    """A process pinned to one core (taskset, a cpuset, a dask-cuda worker)
    runs numba's kernels on that many threads, not on every core of the host."""
    code = ("import os, numba\n"
            "from bpbc.engines import limit_numba_threads, usable_cores\n"
            "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
            "limit_numba_threads(None)\n"
            "print(usable_cores(), numba.get_num_threads())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1", "1"]


def test_the_library_call_runs_its_numba_kernels_on_the_threads_it_was_given(monkeypatch):
    """bpbc.screen(threads=1) runs the encoding and traceback kernels on one
    thread (numba's setting of the calling thread), and leaves the setting
    as it found it."""
    import numba

    from bpbc import cpu_engine

    seen = []
    align = cpu_engine.CpuEngine.hits

    def hits(self, *args):
        seen.append(numba.get_num_threads())
        return align(self, *args)

    monkeypatch.setattr(cpu_engine.CpuEngine, "hits", hits)
    monkeypatch.setattr(cpu_engine.CpuEngine, "two_pass", False)
    before = numba.get_num_threads()
    result = bpbc.screen(["ACGTTGCAACGGTAGGCT", "TTTT"], ["ACGTTGCAACGG"], threshold=20, device="cpu", threads=1)
    assert list(result.indices) == [0] and seen == [1]
    assert numba.get_num_threads() == before


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_freed_buffers_are_reused_where_the_environment_said_otherwise():
    """A Dask nanny sets MALLOC_TRIM_THRESHOLD_, which stops glibc adapting its
    mmap threshold: bpbc then sets the thresholds itself; without such a
    variable it leaves malloc alone. Each case in a process of its own."""
    code = "from bpbc.engines import reuse_freed_buffers; print(reuse_freed_buffers())"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    for extra, expected in (({}, "False"), ({"MALLOC_TRIM_THRESHOLD_": "65536"}, "True")):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**clean, **extra})
        assert done.stdout.strip() == expected
