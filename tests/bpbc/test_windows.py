"""Long reads screened as overlapping windows (bpbc/windows.py): the bound at
its edge, the windowed screen against the whole-read screen and parasail,
``--ends``, the traceback in segments of rows, and a pair that cannot fit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import bpbc
import bpbc.traceback as tb
import bpbc.windows as windows
from bpbc.alphabet import encode_pattern, encode_reads
from bpbc.cli import main
from bpbc.cpu_engine import CpuEngine
from bpbc.patterns import PatternTable
from bpbc.reference import sw_score
from bpbc.scoring import Scoring
from bpbc.windows import WindowPlan, read_span
from tests.bpbc.conftest import (SCORINGS, mutate, parasail_sw, random_pattern, random_read, related_pair,
                                 scoring_id)

COMPLEMENT = str.maketrans("ACGTNRY", "TGCANYR")


def reverse_complement(text: str) -> str:
    return text.translate(COMPLEMENT)[::-1]


@pytest.fixture
def whole_reads(monkeypatch):
    """A function that runs its argument with no read cut (the screen as before windows)."""
    def run(call):
        with monkeypatch.context() as patch:
            patch.setattr(windows, "MIN_WINDOW", 1 << 40)
            return call()
    return run


@pytest.fixture
def cut_fine(monkeypatch):
    """Every read longer than the overlap cut, windows a few bases apart: many windows and seams."""
    monkeypatch.setattr(windows, "MIN_WINDOW", 1)
    monkeypatch.setattr(windows, "MIN_STEP", 3)


@pytest.fixture(params=["engine", "flags", "vector"])
def screen_by(request, monkeypatch):
    """Windows screened by the engine, by its flags-only pass and the vector
    score pass on what it flags, or by the vector score pass alone (on the CPU)."""
    cost = 0.0 if request.param == "vector" else float("inf")
    monkeypatch.setattr(windows, "VECTOR_CELL", cost)
    monkeypatch.setattr(windows, "VECTOR_CELL32", cost)
    monkeypatch.setattr(windows, "MIN_FLAG_PLANES", 3 if request.param == "flags" else 99)
    return request.param


def long_reads(rng, patterns: list[str], count: int, longest: int) -> list[str]:
    """Random reads (N and IUPAC codes in them) carrying 0-3 mutated copies
    of the patterns, either strand, some side by side."""
    reads = []
    for _ in range(count):
        read = random_read(rng, int(rng.integers(0, longest)), n_rate=0.02)
        for _ in range(int(rng.integers(0, 4))):
            pattern = patterns[int(rng.integers(len(patterns)))]
            concrete = "".join(str(rng.choice(list({"R": "AG", "Y": "CT", "N": "ACGT"}.get(c, c))))
                               for c in pattern.upper())
            copy = mutate(rng, concrete, float(rng.choice([0.0, 0.03, 0.12])))
            copy = reverse_complement(copy) if rng.random() < 0.5 else copy
            at = int(rng.integers(0, len(read) + 1))
            read = read[:at] + copy + read[at:]
        if rng.random() < 0.2:  # an IUPAC code in the read: never matches
            at = int(rng.integers(0, len(read) + 1))
            read = read[:at] + "R" + read[at:]
        reads.append(read)
    return reads


def flags_on_windows(monkeypatch, min_window: int, planes: int) -> None:
    """Reads cut from ``min_window`` bases, and their windows screened by the
    engine's flags-only pass at ``planes`` planes (never the vector pass alone)."""
    monkeypatch.setattr(windows, "MIN_WINDOW", min_window)
    monkeypatch.setattr(windows, "VECTOR_CELL", float("inf"))
    monkeypatch.setattr(windows, "VECTOR_CELL32", float("inf"))
    monkeypatch.setattr(windows, "flag_planes", lambda *args: planes)


def assert_same_results(whole, cut) -> None:
    for field in ("read", "pattern", "strand", "score", "capped"):
        assert np.array_equal(getattr(whole.hits, field), getattr(cut.hits, field)), field
    assert whole.alignments.to_list() == cut.alignments.to_list()


# --- the bound ---------------------------------------------------------------

@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_read_span_is_the_longest_span_of_a_passing_alignment(scoring):
    """A pattern matched in full with one gap of I read bases in its middle
    scores T = match x m - open - I x extend; read_span(m, T) is m + I, and
    one base more (I + 1) scores below T."""
    rng = np.random.default_rng(1)
    for m in (20, 41, 64):
        inserted = int(rng.integers(1, 6))
        threshold = scoring.match * m - scoring.gap_open - inserted * scoring.gap_extend
        if threshold <= scoring.match * m // 2:
            continue
        assert read_span(m, threshold, scoring) == m + inserted
        assert read_span(m, threshold + scoring.gap_extend, scoring) == m + inserted - 1
        assert read_span(m, scoring.match * m, scoring) == m  # a perfect copy: no room for a gap


def gapped_copy(rng, m: int, inserted: int, scoring: Scoring) -> tuple[str, str, int]:
    """(pattern, read, threshold): the read is one base, then the pattern with
    ``inserted`` bases in its middle, then 40 random bases; the only
    alignment that reaches the threshold spans m + inserted = read_span read bases."""
    pattern = random_read(rng, m)
    middle = "".join("T" if c != "T" else "A" for c in random_read(rng, inserted))
    read = "C" + pattern[:m // 2] + middle + pattern[m // 2:] + random_read(rng, 40)
    threshold = scoring.match * m - scoring.gap_open - inserted * scoring.gap_extend
    return pattern, read, threshold


@pytest.mark.parametrize("scoring", SCORINGS[:3], ids=scoring_id)
def test_overlap_of_span_minus_one_keeps_the_alignment_one_less_loses_it(scoring, monkeypatch, screen_by):
    """The bound at its edge: windows two bases apart, overlapping by
    read_span - 1, hold the alignment (the read's screen score is T); by one
    base less, no window holds it, and the screen misses it (so the test can fail)."""
    rng = np.random.default_rng(7)
    pattern, read, threshold = gapped_copy(rng, 48, 4, scoring)
    assert sw_score(read, pattern, scoring) == threshold
    span = int(read_span(len(pattern), threshold, scoring))
    assert span == len(pattern) + 4

    def screened(overlap: int):
        screener = bpbc.Screener([pattern], threshold, scoring, strand="forward", device="cpu")
        screener.windows = WindowPlan(overlap)
        monkeypatch.setattr(WindowPlan, "window_length", lambda self, *args, **kwargs: (self.overlap + 2, 1.0))
        batch = screener.prepare([read])
        assert isinstance(batch, windows.WindowedBatch) and len(batch.windows) > 10
        assert not batch.windows.whole.any()
        return screener.run(batch)

    kept = screened(span - 1)
    assert kept.hits.score.tolist() == [threshold]
    assert kept.alignments.to_list()[0].read_start == 1
    assert kept.alignments.to_list()[0].read_end == 1 + span
    assert len(screened(span - 2).hits) == 0


def test_every_window_plan_covers_each_span(monkeypatch):
    """Every stretch of overlap + 1 bases (and with ends, of its region) lies in a window of the cut."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        overlap = int(rng.integers(0, 40))
        ends = None if rng.random() < 0.5 else int(rng.integers(1, 120))
        plan = WindowPlan(overlap, ends)
        lengths = rng.integers(0, 300, 5)
        window = overlap + 1 + int(rng.integers(1, 50))
        cut = plan.cut(lengths, window)
        assert (cut.length <= window).all() and ((cut.length > 0) | (lengths[cut.read] == 0)).all()
        read, start, length = plan.regions(lengths)
        for r, s, n in zip(read, start, length):
            mine = cut.read == r
            for a in range(s, s + max(n - overlap, 1)):
                b = min(a + overlap + 1, s + n)
                assert ((cut.start[mine] <= a) & (cut.start[mine] + cut.length[mine] >= b)
                        & (cut.region[mine] == s)).any()


# --- the flags-only pass's windows ---------------------------------------------

@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_flag_overlap_is_the_span_over_the_pieces(scoring):
    """The flags-only pass's windows overlap by ceil(L / floor(T / 2**p)) - 1:
    fewer bases than the plan's where the threshold holds several 2**p; L
    no more than the longest read where given."""
    lengths, thresholds = np.array([32, 500, 500]), np.array([64, 300, 900])
    oriented = windows.Oriented(lengths, thresholds, scoring)
    span = read_span(lengths, thresholds, scoring)
    for p in (3, 4, 5, 6):
        assert oriented.flag_overlap(p) == max(-(-int(s) // (int(t) >> p)) for s, t in zip(span, thresholds)) - 1
    alone = windows.Oriented(lengths[:1], thresholds[:1], scoring)  # 64 holds one 2**6: the plan's overlap
    assert alone.flag_overlap(6) == int(span[0]) - 1
    assert oriented.flag_overlap(3) < int(span.max()) // 4
    for longest in (100, 10_000):  # reads no longer than that: the span no longer either
        assert oriented.flag_overlap(5, longest) == max(
            -(-min(int(s), longest) // (int(t) >> 5)) for s, t in zip(span, thresholds)) - 1
    assert oriented.flag_overlap(5, 100) < oriented.flag_overlap(5) == oriented.flag_overlap(5, 10_000)
    with pytest.raises(ValueError):
        oriented.flag_overlap(7)  # 2**7 above the threshold 64


def test_windows_flag_at_a_share_of_random_windows_where_the_scoring_is_fitted():
    """Windows of 2.5 kb against a 5 kb pattern at T = 2000 (11 planes): the
    bound's 6 planes; then, once the flags pass is chosen, 5 with the default
    scoring, whose random best is fitted (about 1 % of random windows reach
    32), the same 6 with cheaper gaps and the same lambda (not fitted); and
    never more than it was given."""
    assert windows.flag_planes(Scoring(), 2500, 5000, 11) == 6
    assert windows.shared_flag_planes(Scoring(), 2500, 5000, 6) == 5
    assert windows.shared_flag_planes(Scoring(2, 3, 3, 1), 2500, 5000, 6) == 6
    assert windows.shared_flag_planes(Scoring(), 2500, 5000, 4) == 4
    assert windows.shared_flag_planes(Scoring(), 20_000, 48_502, 6) == 6


def _long_read_case(case: str):
    """(read lengths, oriented patterns, their plan) of the issue's long-read
    cases: 400 reads of 5-10 kb against 5 kb at T = 2000, one 50 kb read
    against 5 kb at T = 1000."""
    rng = np.random.default_rng(2)
    if case == "batch":
        lengths, pattern, threshold = rng.integers(5000, 10_001, 400), 5000, 2000
    else:
        lengths, pattern, threshold = np.array([50_000]), 5000, 1000
    table = PatternTable.build([encode_pattern(random_pattern(rng, pattern))], ("+", "-"))
    thresholds = np.full(len(table), threshold)
    return lengths, windows.Oriented(table.lengths, thresholds, Scoring()), WindowPlan.of(table.lengths, thresholds,
                                                                                         Scoring())


def test_the_long_read_batch_is_flagged_at_a_share_of_random_windows():
    """The batch (400 reads of 5-10 kb) takes the flags pass at 5 planes (the
    bound's 6 before the random share), on windows shorter than MIN_WINDOW:
    they overlap by 145 bases only."""
    lengths, oriented, plan = _long_read_case("batch")
    choice = windows.how_to_screen(lengths, CpuEngine(threads=2), plan, oriented, 2)
    assert choice.flag_planes == 5 and not choice.vector and choice.flag_window < windows.MIN_WINDOW


def test_a_lone_long_pair_goes_to_the_vector_pass_alone():
    """The pair (one 50 kb read against 5 kb, two strands: fewer instances
    than a block has lanes) goes to the vector pass alone, each strand's
    read one span scored alone (bpbc.traceback._score_skewed_body), not
    to the flags pass over windows of 432 bases."""
    lengths, oriented, plan = _long_read_case("pair")
    assert windows.how_to_screen(lengths, CpuEngine(threads=2), plan, oriented, 2).vector


def test_the_flags_windows_give_every_thread_a_task():
    """On 16 threads the batch's flags windows are cut short enough for 16
    tasks (8 blocks of lanes, two strands): in windows of 2 kb or more its
    3 Mb are 6 or 8 tasks, and it went to the vector pass alone, 25 blocks
    of 32 lanes."""
    lengths, oriented, plan = _long_read_case("batch")
    engine = CpuEngine(threads=16)
    for threads, least in ((2, 1), (16, 16)):
        choice = windows.how_to_screen(lengths, engine, plan, oriented, threads)
        flagged = WindowPlan(choice.flag_overlap).cut(lengths, choice.flag_window)
        assert choice.flag_planes and len(oriented) * -(-len(flagged) // engine.lanes) >= least


def test_the_makespan_counts_rounds_of_tasks():
    """18 equal tasks on 16 threads take two tasks' time; 16 take one; on
    one thread the sum; never less than the longest task."""
    sixteen = windows.Packing(lanes=512, copies=1, tasks=2, threads=16)
    assert sixteen.makespan(np.full(9, 100)) == 200
    assert sixteen.makespan(np.full(8, 100)) == 100
    assert sixteen.makespan(np.array([500, 10, 10])) == 500
    assert windows.Packing(512, 1, 2, 1).makespan(np.array([100, 50, 25])) == 350


@pytest.mark.parametrize("bound", ["pattern", "read"])
def test_flag_overlap_keeps_a_piece_one_less_loses_it(bound, monkeypatch):
    """The flags-only pass's bound at its edge: a perfect copy of 32 bases
    (T = 64) in windows of overlap + 1 bases, flagged at 2**4: windows
    overlapping by the flag overlap (7) hold 8 of its bases (16 = 2**4)
    and flag it, so the vector pass finds the hit; by one base less no
    window reaches 16 and the screen misses it (so the test can fail).
    "pattern": the pattern is the copy, its read_span bounds the span;
    "read": the read is the copy, of a pattern of 64 bases whose read_span
    (93) alone would give 23, so the read's length bounds it."""
    rng = np.random.default_rng(23)
    if bound == "pattern":
        pattern = random_read(rng, 32)
        read = "".join("T" if c != "T" else "A" for c in random_read(rng, 30)) + pattern + \
            "".join("C" if c != "C" else "G" for c in random_read(rng, 30))
        copy = (30, 62)
    else:
        pattern = random_read(rng, 64)
        read, copy = pattern[16:48], (0, 32)
    scoring = Scoring()
    flags_on_windows(monkeypatch, 1, 4)
    monkeypatch.setattr(WindowPlan, "window_length", lambda self, *args, **kwargs: (self.overlap + 1, 1.0))
    oriented = windows.Oriented([len(pattern)], [64], scoring)
    edge = oriented.flag_overlap(4, len(read))
    assert edge == 7 and oriented.flag_overlap(4) == (7 if bound == "pattern" else 23)

    def screened(shorter: int):
        monkeypatch.setattr(windows.Oriented, "flag_overlap", lambda self, p, longest=None: edge - shorter)
        screener = bpbc.Screener([pattern], 64, scoring, strand="forward", device="cpu")
        batch = screener.prepare([read])
        assert isinstance(batch, windows.WindowedBatch) and batch.flag_planes == 4
        assert batch.flag_windows is not None and (batch.flag_windows.length == edge - shorter + 1).all()
        return screener.run(batch)

    kept = screened(0)
    assert kept.hits.score.tolist() == [64]
    assert (kept.alignments.to_list()[0].read_start, kept.alignments.to_list()[0].read_end) == copy
    assert len(screened(1).hits) == 0


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_flags_on_windows_of_their_own_equal_the_whole_read_screen(scoring, whole_reads, monkeypatch):
    """Long patterns at thresholds many times 2**p: the flags-only pass runs
    on windows overlapping far less than the plan's, and the hits and
    alignments are still the whole reads' (and parasail's scores)."""
    rng = np.random.default_rng(29)
    patterns = [random_pattern(rng, int(rng.integers(200, 500)), iupac_rate=0.02) for _ in range(2)]
    reads = long_reads(rng, patterns, 24, 4000)
    threshold = [int(scoring.match * len(p) * 0.4) for p in patterns]
    screener = bpbc.Screener(patterns, threshold, scoring, device="cpu", threads=2)
    flags_on_windows(monkeypatch, 256, 3)
    batch = screener.prepare(reads)
    assert isinstance(batch, windows.WindowedBatch) and batch.flag_planes == 3
    assert batch.flag_windows is not None and len(batch.flag_windows) > len(reads)
    assert screener._preparing[1].flag_overlap(3) < batch.plan.overlap // 4
    cut = screener.run(batch)
    monkeypatch.setattr(windows, "MIN_FLAG_PLANES", 99)
    whole = whole_reads(lambda: screener.run(reads))
    assert len(whole.hits) > 10
    assert_same_results(whole, cut)
    for alignment in cut.alignments.to_list()[:12]:
        pattern = patterns[alignment.pattern_index]
        strand_pattern = pattern if alignment.strand == "+" else \
            pattern.translate(str.maketrans("ACGTRYKMSWBDHVN", "TGCAYRMKSWVHDBN"))[::-1]  # every IUPAC code
        assert alignment.score == parasail_sw(reads[alignment.read_index], strand_pattern, scoring)


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_flags_windows_bounded_by_the_reads_equal_the_whole_read_screen(scoring, whole_reads, monkeypatch):
    """Patterns longer than the reads, which hold mutated pieces of them: an
    alignment spans no more than its read, so the flags' windows overlap by
    the longest read over the pieces, a fraction of what the patterns' span
    gives, and the hits and alignments are still the whole reads'."""
    rng = np.random.default_rng(31)
    patterns = [random_pattern(rng, int(rng.integers(1500, 2500)), iupac_rate=0.01) for _ in range(2)]
    reads = []
    for _ in range(40):
        pattern = patterns[int(rng.integers(2))].translate(str.maketrans("RYSWKMBDHVN", "ACGTGACAAAG"))
        start, size = int(rng.integers(0, 1000)), int(rng.integers(150, 700))
        piece = mutate(rng, pattern[start:start + size], float(rng.choice([0.0, 0.03, 0.1])))
        piece = reverse_complement(piece) if rng.random() < 0.5 else piece
        reads.append(random_read(rng, int(rng.integers(0, 300))) + piece + random_read(rng, int(rng.integers(0, 300))))
    threshold = int(scoring.match * 120)
    screener = bpbc.Screener(patterns, threshold, scoring, device="cpu", threads=2)
    flags_on_windows(monkeypatch, 64, 3)
    batch = screener.prepare(reads)
    assert isinstance(batch, windows.WindowedBatch) and batch.flag_planes == 3
    assert batch.flag_windows is not None and len(batch.flag_windows) > 2 * len(reads)
    oriented, longest = screener._preparing[1], max(map(len, reads))
    assert oriented.flag_overlap(3, longest) < oriented.flag_overlap(3) // 2
    assert (batch.flag_windows.length <= 2 * oriented.flag_overlap(3)).any()
    cut = screener.run(batch)
    monkeypatch.setattr(windows, "MIN_FLAG_PLANES", 99)
    whole = whole_reads(lambda: screener.run(reads))
    assert len(whole.hits) > 10
    assert_same_results(whole, cut)


def test_a_batch_flagged_on_windows_of_its_own_gives_dense_scores_of_the_whole_reads(whole_reads, monkeypatch):
    """Where a batch's plan is the one for every score, a batch prepared for
    the flags on windows of their own is still cut again for dense scores,
    which are those of the whole reads."""
    rng = np.random.default_rng(31)
    pattern = random_pattern(rng, 40)
    reads = long_reads(rng, [pattern], 12, 3000)
    scoring = Scoring()
    screener = bpbc.Screener([pattern], scoring.match * 40, scoring, device="cpu", threads=2)
    screener.windows = screener.dense_windows
    flags_on_windows(monkeypatch, 128, 3)
    batch = screener.prepare(reads)
    assert isinstance(batch, windows.WindowedBatch) and batch.flag_windows is not None
    cut = screener.run(batch, dense=True)
    monkeypatch.setattr(windows, "MIN_FLAG_PLANES", 99)
    whole = whole_reads(lambda: screener.run(reads, dense=True))
    assert np.array_equal(cut.scores, whole.scores) and np.array_equal(cut.capped, whole.capped)
    assert_same_results(whole, cut)


# --- windows against the whole read ------------------------------------------

@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_windowed_screen_equals_the_whole_read_screen(scoring, whole_reads, cut_fine, screen_by):
    """Hits (scores, capped flags), alignments and dense scores of reads cut
    into many windows are those of the whole reads."""
    rng = np.random.default_rng(11)
    patterns = [random_pattern(rng, int(rng.integers(16, 90)), iupac_rate=0.05) for _ in range(3)]
    reads = long_reads(rng, patterns, 40, 900)
    threshold = [int(scoring.match * len(p) * 0.5) for p in patterns]
    screener = bpbc.Screener(patterns, threshold, scoring, device="cpu", threads=2)
    batch = screener.prepare(reads)
    assert isinstance(batch, windows.WindowedBatch) and len(batch.windows) > len(reads)
    assert (batch.inner is None) == (screen_by == "vector")
    assert (batch.flag_planes > 0) == (screen_by == "flags")
    cut = screener.run(batch)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(windows, "VECTOR_CELL", float("inf"))
        patch.setattr(windows, "VECTOR_CELL32", float("inf"))
        patch.setattr(windows, "MIN_FLAG_PLANES", 99)
        whole = whole_reads(lambda: screener.run(reads))
    assert len(whole.hits) > 20
    assert_same_results(whole, cut)
    dense_cut = screener.run(reads, dense=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(windows, "VECTOR_CELL", float("inf"))
        patch.setattr(windows, "VECTOR_CELL32", float("inf"))
        patch.setattr(windows, "MIN_FLAG_PLANES", 99)
        dense_whole = whole_reads(lambda: screener.run(reads, dense=True))
    assert np.array_equal(dense_cut.scores, dense_whole.scores)
    assert np.array_equal(dense_cut.capped, dense_whole.capped)
    assert_same_results(dense_whole, dense_cut)


def test_windowed_scores_against_parasail(cut_fine, screen_by):
    """Every read's best window score, where it passes, is parasail's score of the whole read."""
    rng = np.random.default_rng(5)
    scoring = Scoring()
    for _ in range(4):
        read, pattern = related_pair(rng, int(rng.integers(300, 1500)), int(rng.integers(30, 200)), rate=0.08,
                                     iupac_rate=0.03, n_rate=0.01)
        threshold = max(1, len(pattern) // 2)
        screener = bpbc.Screener([pattern], threshold, scoring, device="cpu", exact_scores=True)
        result = screener.run([read] * 3 + [read[::-1]])
        assert isinstance(screener.prepare([read]), windows.WindowedBatch)
        for hit, alignment in zip(result.hits.read.tolist(), result.alignments.to_list()):
            text = read if hit < 3 else read[::-1]
            strand_pattern = pattern if alignment.strand == "+" else reverse_complement(pattern)
            assert alignment.score == parasail_sw(text, strand_pattern, scoring)



@pytest.mark.parametrize("by", ["vector", "flags"])
def test_a_few_long_reads_scored_alone_are_the_whole_read_screen(by, whole_reads, cut_fine, monkeypatch):
    """A few long reads against long patterns, their windows' runs scored as
    spans by the vector pass (alone, or on what the flags pass flags), each
    span alone, a stripe of its rows a lane (lanes of a few rows here): the
    hits and alignments are the whole reads', their scores parasail's."""
    from bpbc import traceback

    rng = np.random.default_rng(37)
    scoring = Scoring()
    patterns = [random_pattern(rng, int(rng.integers(150, 300)), iupac_rate=0.02) for _ in range(2)]
    reads = long_reads(rng, patterns, 3, 3000)
    threshold = [int(scoring.match * len(p) * 0.4) for p in patterns]
    for name in ("VECTOR_CELL", "VECTOR_CELL32"):
        monkeypatch.setattr(windows, name, 0.0 if by == "vector" else float("inf"))
    monkeypatch.setattr(windows, "MIN_FLAG_PLANES", 3 if by == "flags" else 99)
    monkeypatch.setattr(traceback, "_SKEWED_LANE_ROWS", 2)
    alone = []
    monkeypatch.setattr(traceback, "_score_skewed_instances", lambda *args, inner=traceback._score_skewed_instances:
                        alone.append(len(args[2])) or inner(*args))
    screener = bpbc.Screener(patterns, threshold, scoring, device="cpu", threads=2)
    batch = screener.prepare(reads)
    assert isinstance(batch, windows.WindowedBatch) and (batch.inner is None) == (by == "vector")
    cut = screener.run(batch)
    assert alone
    for name in ("VECTOR_CELL", "VECTOR_CELL32"):
        monkeypatch.setattr(windows, name, float("inf"))
    monkeypatch.setattr(windows, "MIN_FLAG_PLANES", 99)
    whole = whole_reads(lambda: screener.run(reads))
    assert len(whole.hits) >= 3
    assert_same_results(whole, cut)
    for alignment in cut.alignments.to_list():
        pattern = patterns[alignment.pattern_index]
        strand_pattern = pattern if alignment.strand == "+" else \
            pattern.translate(str.maketrans("ACGTRYKMSWBDHVN", "TGCAYRMKSWVHDBN"))[::-1]  # every IUPAC code
        assert alignment.score == parasail_sw(reads[alignment.read_index], strand_pattern, scoring)

def test_paf_of_long_reads_is_the_whole_read_screens(tmp_path, capsys, monkeypatch, screen_by):
    """bpbc-screen on long reads: the PAF, byte for byte, of the screen with no read cut."""
    rng = np.random.default_rng(17)
    patterns = [random_pattern(rng, 400, iupac_rate=0.02), random_pattern(rng, 150)]
    reads = long_reads(rng, patterns, 30, 6000)
    (tmp_path / "p.fa").write_text("".join(f">p{i}\n{p}\n" for i, p in enumerate(patterns)))
    (tmp_path / "r.fq").write_text("".join(f"@r{i} x\n{r}\n+\n{'I' * len(r)}\n" for i, r in enumerate(reads)))

    def paf(name: str, *options: str) -> str:
        status = main([str(tmp_path / "r.fq"), str(tmp_path / "p.fa"), "-t", "150", "--device", "cpu", "-q",
                       "-o", str(tmp_path / name), *options])
        assert status == 0, capsys.readouterr().err
        return (tmp_path / name).read_text()

    monkeypatch.setattr(windows, "MIN_WINDOW", 1)
    cut = paf("cut.paf")
    monkeypatch.setattr(windows, "MIN_WINDOW", 1 << 40)
    monkeypatch.setattr(windows, "VECTOR_CELL", float("inf"))
    monkeypatch.setattr(windows, "VECTOR_CELL32", float("inf"))
    monkeypatch.setattr(windows, "MIN_FLAG_PLANES", 99)
    whole = paf("whole.paf")
    assert cut == whole and len(whole.splitlines()) > 10


# --- --ends ------------------------------------------------------------------

def test_ends_screen_is_the_screen_of_each_end(whole_reads, cut_fine, screen_by):
    """With ends=N a read's hit is the better of its first and last N bases'
    (screened as reads of their own), the first where they tie, its
    alignment theirs in the read's coordinates; reads up to 2N bases are
    screened whole."""
    rng = np.random.default_rng(23)
    patterns = [random_pattern(rng, 30), random_pattern(rng, 45, iupac_rate=0.05)]
    reads = long_reads(rng, patterns, 40, 700)
    ends = 120
    screener = bpbc.Screener(patterns, 30, Scoring(), device="cpu", ends=ends)
    result = screener.run(reads)
    plain = bpbc.Screener(patterns, 30, Scoring(), device="cpu")
    heads = whole_reads(lambda: plain.run([r[:ends] if len(r) > 2 * ends else r for r in reads]))
    tails = whole_reads(lambda: plain.run([r[-ends:] if len(r) > 2 * ends else "" for r in reads]))
    expected = {}
    for part, shift in ((heads, lambda r: 0), (tails, lambda r: len(reads[r]) - ends)):
        for a in part.alignments.to_list():
            moved = dataclasses.replace(a, read_start=a.read_start + shift(a.read_index),
                                        read_end=a.read_end + shift(a.read_index))
            key = (a.read_index, a.pattern_index, a.strand)
            if key not in expected or a.score > expected[key].score:
                expected[key] = moved
    found = {(a.read_index, a.pattern_index, a.strand): a for a in result.alignments.to_list()}
    assert found == expected and len(found) > 10


def test_ends_option_coordinates_stay_the_reads(tmp_path, capsys):
    """--ends 100: an adapter at a long read's end is found at its place in
    the read, one in the middle is not; demultiplexing by {name} works."""
    rng = np.random.default_rng(29)
    adapter = random_read(rng, 40)
    middle = random_read(rng, 2000)
    read = random_read(rng, 30) + adapter + middle + adapter + random_read(rng, 20)
    inner = random_read(rng, 1000) + adapter + random_read(rng, 1000)
    (tmp_path / "a.fa").write_text(f">ad\n{adapter}\n")
    (tmp_path / "r.fq").write_text(f"@end\n{read}\n+\n{'I' * len(read)}\n@mid\n{inner}\n+\n{'I' * len(inner)}\n")
    status = main([str(tmp_path / "r.fq"), str(tmp_path / "a.fa"), "-t", "70", "--ends", "100", "--device", "cpu",
                   "-q", "-o", str(tmp_path / "out.paf"), "--matched", str(tmp_path / "m.{name}.fq")])
    assert status == 0, capsys.readouterr().err
    lines = [line.split("\t") for line in (tmp_path / "out.paf").read_text().splitlines()]
    assert [(f[0], f[1], f[2], f[3], f[4]) for f in lines] == [("end", str(len(read)), "30", "70", "+")]
    assert (tmp_path / "m.ad.fq").read_text().startswith("@end\n")


# --- the traceback -----------------------------------------------------------

@pytest.mark.parametrize("scoring", SCORINGS[:3], ids=scoring_id)
def test_traceback_in_segments_of_rows_is_the_one_pass_traceback(scoring, monkeypatch):
    """Blocks over the pointer budget, aligned in segments of rows from
    checkpoints, give the alignments (and CIGARs) of one pass, int16 and int32
    cells; so does an instance alone, on one lane."""
    rng = np.random.default_rng(31)
    patterns = [random_pattern(rng, int(rng.integers(5, 200)), iupac_rate=0.05) for _ in range(4)]
    reads = long_reads(rng, patterns, 120, 500)
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(p) for p in patterns], ("+", "-"))
    rows = np.arange(len(reads))
    ks = rng.integers(0, len(table), len(reads))
    for bits in (16, 32):
        one, one_cigars = tb._run_batch(codes, lengths, rows, table, ks, scoring, False, ks % 2 == 1, bits)
        monkeypatch.setattr(tb, "POINTER_BUDGET", 5000)
        cut, cut_cigars = tb._run_batch(codes, lengths, rows, table, ks, scoring, False, ks % 2 == 1, bits)
        for t in range(0, 120, 7):  # alone in its block, over the budget: one lane
            lone, lone_cigar = tb._run_batch(codes, lengths, rows[t:t + 1], table, ks[t:t + 1], scoring, False,
                                             ks[t:t + 1] % 2 == 1, bits)
            assert np.array_equal(one[t:t + 1], lone) and lone_cigar.strings() == one_cigars.strings()[t:t + 1]
        monkeypatch.setattr(tb, "SEGMENTED_BUDGET", 0)  # every instance of every block on a lane of its own
        lanes, lanes_cigars = tb._run_batch(codes, lengths, rows, table, ks, scoring, False, ks % 2 == 1, bits)
        assert np.array_equal(one, lanes) and one_cigars.strings() == lanes_cigars.strings()
        monkeypatch.setattr(tb, "SEGMENTED_BUDGET", 8 * (64 << 20))
        monkeypatch.setattr(tb, "POINTER_BUDGET", 64 << 20)
        assert np.array_equal(one, cut)
        assert one_cigars.strings() == cut_cigars.strings()
        assert (one[:, 0] > 0).sum() > 50


LONG_PAIR = """
import resource, sys
import numpy as np
import bpbc
from tests.bpbc.conftest import mutate, random_read
rng = np.random.default_rng(37)
pattern = random_read(rng, 2000)
read = random_read(rng, 9000) + mutate(rng, pattern, 0.03) + random_read(rng, 9000)
screener = bpbc.Screener([pattern], 1000, device="cpu", threads=1)
batch = screener.prepare([read])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
alignments = screener.align(batch, screener.hits(batch))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(alignments.score[0], (after - before) // 1024, read, pattern)
"""


def test_traceback_of_a_long_pair_stays_in_bounded_memory():
    """A 20 kb read against a 2 kb pattern, in a process of its own: the
    pointers of one block of it would be 20 kb x 2 kb x 16 lanes (640 MB);
    the screen and the traceback (the rows the hit can span, in segments)
    add less than 100 MB to the process's peak, and the alignment's score
    is parasail's."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", LONG_PAIR], capture_output=True, text=True, cwd=root, timeout=300,
                          check=True)
    score, grown_mb, read, pattern = done.stdout.split()
    assert int(grown_mb) < 100
    assert int(score) == parasail_sw(read, pattern, Scoring())


# --- what cannot fit ---------------------------------------------------------

def test_a_pair_that_cannot_fit_is_one_line_naming_the_read(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(41)
    pattern = random_read(rng, 3000)
    (tmp_path / "p.fa").write_text(f">big\n{pattern}\n")
    (tmp_path / "r.fq").write_text(f"@short\nACGT\n+\nIIII\n@long_one\n{random_read(rng, 40000)}\n+\n"
                                   f"{'I' * 40000}\n")
    monkeypatch.setattr(windows, "available_memory", lambda: 16 << 20)
    out = tmp_path / "out.paf"
    status = main([str(tmp_path / "r.fq"), str(tmp_path / "p.fa"), "-t", "500", "--device", "cpu", "-o", str(out)])
    err = capsys.readouterr().err
    assert status == 1
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "long_one" in err and "big" in err and "GiB" in err
    assert not out.exists()


@pytest.mark.gpu
def test_windowed_screen_on_the_gpu_equals_the_cpu(cut_fine):
    """The GPU engine screens the windows (prepared from their bytes) with the CPU's results."""
    rng = np.random.default_rng(43)
    patterns = [random_pattern(rng, int(rng.integers(16, 90)), iupac_rate=0.05) for _ in range(3)]
    reads = long_reads(rng, patterns, 300, 3000)
    results = [bpbc.Screener(patterns, 40, device=device).run(bpbc.Reads.of(reads)) for device in ("cpu", "gpu")]
    assert_same_results(*results)
    assert len(results[0].hits) > 50


@pytest.mark.parametrize("cost", [0.0, float("inf")], ids=["vector", "engine"])
def test_long_paired_reads_and_a_bad_byte(tmp_path, capsys, monkeypatch, cost):
    """Pairs of long reads (a chunk that only encodes) give the PAF of the
    whole reads; a byte outside the alphabet deep in a long read is one line
    naming the read and the byte's place in it, exit status 1."""
    monkeypatch.setattr(windows, "VECTOR_CELL", cost)
    monkeypatch.setattr(windows, "VECTOR_CELL32", cost)
    rng = np.random.default_rng(47)
    patterns = [random_pattern(rng, 300), random_pattern(rng, 120)]
    (tmp_path / "p.fa").write_text("".join(f">p{i}\n{p}\n" for i, p in enumerate(patterns)))
    for mate in (1, 2):
        reads = long_reads(rng, patterns, 12, 5000)
        (tmp_path / f"r{mate}.fq").write_text("".join(f"@r{i}\n{r}\n+\n{'I' * len(r)}\n" for i, r in enumerate(reads)))

    def run(name: str, reads: str) -> tuple[int, str]:
        paired = ["-2", str(tmp_path / "r2.fq")] if reads == "r1.fq" else []
        status = main([str(tmp_path / reads), *paired, str(tmp_path / "p.fa"), "-t", "120", "--device", "cpu",
                       "-q", "-o", str(tmp_path / name)])
        return status, capsys.readouterr().err

    bad = "A" * 4000 + "0" + "C" * 3000
    (tmp_path / "bad.fq").write_text(f"@good\nACGT\n+\nIIII\n@broken\n{bad}\n+\n{'I' * len(bad)}\n")
    monkeypatch.setattr(windows, "MIN_WINDOW", 1)
    assert run("cut.paf", "r1.fq") == (0, "")
    status, cut_error = run("bad.paf", "bad.fq")
    assert status == 1 and len(cut_error.strip().splitlines()) == 1 and "Traceback" not in cut_error
    assert "broken" in cut_error and not (tmp_path / "bad.paf").exists()
    monkeypatch.setattr(windows, "MIN_WINDOW", 1 << 40)
    assert run("whole.paf", "r1.fq") == (0, "")
    assert run("bad.paf", "bad.fq") == (1, cut_error)  # the same line, the byte placed in the read
    assert (tmp_path / "cut.paf").read_text() == (tmp_path / "whole.paf").read_text()
    assert len((tmp_path / "whole.paf").read_text().splitlines()) > 5


def test_library_call_takes_ends_and_windowed_batches(cut_fine):
    """bpbc.screen(..., ends=N) is the Screener's screen with ends; a batch
    of long reads prepared ahead (windows) gives what the reads give, dense scores too."""
    rng = np.random.default_rng(53)
    patterns = [random_pattern(rng, 40), random_pattern(rng, 70)]
    reads = long_reads(rng, patterns, 20, 800)
    ends = bpbc.screen(reads, patterns, 40, device="cpu", ends=100)
    assert ends.alignments == bpbc.Screener(patterns, 40, device="cpu", ends=100).run(reads).alignments.to_list()
    plain = bpbc.screen(reads, patterns, 40, device="cpu")
    batch = bpbc.Screener(patterns, 40, device="cpu").prepare(reads)
    assert isinstance(batch, windows.WindowedBatch)
    ahead = bpbc.screen(batch, patterns, 40)
    assert ahead.alignments == plain.alignments and len(plain.alignments) > len(ends.alignments) > 0
    assert np.array_equal(ahead.scores, plain.scores) and np.array_equal(ahead.capped, plain.capped)
