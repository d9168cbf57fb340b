"""Trimming and masking adapters with the screen's hits, and partial adapters at the read's ends.

``--action trim`` cuts an adapter off each read where one is found,
``--action mask`` replaces its bases with N (docs/trimming.md). Each
pattern is a 3' adapter (cut the adapter and everything after it), a 5'
adapter (the adapter and everything before it) or an anywhere adapter (5'
where it reaches the read's start, else 3', as cutadapt's ``-b``): the
``adapter=`` key of its FASTA header, else ``--adapter-kind``.

Where a read's adapter is, comes from two sources:

* the screen's hits on the trimmed strands (forward only unless
  ``--trim-strand both``), each aligned by the traceback. The adapter's span
  on the read is the alignment, extended by the pattern bases the local
  alignment left out at either end (a substitution in an adapter's first
  base does not move the cut);
* partial adapters cut off by the read's end: a 3' adapter's prefix of L
  bases (``--min-overlap`` <= L < its length) aligned to the read's last
  bases, a 5' adapter's suffix to its first bases, scored exactly with the
  same affine scoring. Such an overlap counts when its score reaches
  ceil(F x match x L), F the pattern's fraction (``--min-score-fraction``, or
  its threshold over its best score). :func:`end_overlaps` computes it for
  every read on the host (so a GPU run trims exactly as a CPU run).

The end-overlap DP (3' adapter, oriented pattern P of length m, read R of
length n; 5' adapters: the same on the reversed read and pattern), i over the
read, j over P, for i >= 0, j >= 1::

    H[i][0] = 0                      (the alignment starts at P's first base, anywhere on the read)
    E[i][j] = max(E[i-1][j] - extend, H[i-1][j] - (open + extend))    (E = -inf on row 0)
    F[i][j] = max(F[i][j-1] - extend, H[i][j-1] - (open + extend))    (F[i][0] = -inf)
    H[i][j] = max(H[i-1][j-1] + s(R[i-1], P[j-1]), E[i][j], F[i][j])  (the diagonal only for i >= 1)

no zero floor (the alignment ends at the read's last base: row n). The
overlap of length L scores H[n][L]. Ties: H takes the diagonal, then E, then
F; a gap state takes opening over extending; each cell carries the read
position its alignment starts at. A read's overlap is the passing L with the
highest score, then the smallest start (the longest cut), then the smallest
L. Only the read's last m - 1 + slack bases can take part in a passing
overlap (slack: the most inserted bases a passing score can pay for), and of
those only cells on a band, so the kernels compute that part in two passes:
whether a read has a passing overlap at all (from its end, stopping as soon
as none can pass: a few bases for most reads; bit-sliced, 512 reads per
vector, in :mod:`bpbc.end_overlap`, or 16 reads per vector here), then the DP
above, 16 reads per vector, for the reads that have one. Trimming leaves out reads whose
hits already cut further from the end than an overlap could. The result is
the full DP's, which tests/bpbc/test_trimming.py checks against a
plain-Python DP and against parasail.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from fractions import Fraction
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from .alphabet import INVALID, READ_CODE, as_bytes
from .cpu_vector import vload16, vmax16, vselect16, vsplat16, vstore16
from .errors import InputError
from .scoring import Scoring
from .thresholds import header_threshold, header_value

ACTIONS = ("none", "trim", "mask")
#: the kinds of adapter, by where they are cut from
ADAPTER_KINDS = ("3prime", "5prime", "anywhere")
ADAPTER_KEY = "adapter="
#: which strands' hits are trimmed: the choice and the strands
TRIM_STRANDS = {"forward": ("+",), "both": ("+", "-")}
DEFAULT_MIN_OVERLAP = 3

_THREE, _FIVE, _ANYWHERE = range(3)
#: end-overlap tasks: a 3' adapter's prefix at the read's end, a 5' adapter's suffix at its start
_END3, _END5 = 0, 1
_LANES = 16
#: window rows loaded at first by the first pass (from the read's end): most reads need no more
_FIRST_ROWS = 12
_NEG = -(1 << 29)
_N = 78  # 'N'
_NEWLINE, _PLUS = 10, 43
#: read code -> itself (0..3, INVALID): the table for reads given as codes
_CODE_IDENTITY = np.full(256, INVALID, np.uint8)
_CODE_IDENTITY[:4] = np.arange(4, dtype=np.uint8)
_NO_ROWS = np.zeros(0, np.int64)


# ----------------------------------------------------------------- settings


def adapter_kinds(patterns, file_name: str, default: str) -> list[str]:
    """Each pattern's kind: ``adapter=KIND`` in its header, else ``default``;
    an unknown value raises InputError naming the file and the record."""
    if default not in ADAPTER_KINDS:
        raise InputError(f"--adapter-kind must be one of {', '.join(ADAPTER_KINDS)}, got {default!r}")
    kinds = []
    for number, record in enumerate(patterns, start=1):
        value = header_value(getattr(record, "name", ""), ADAPTER_KEY)
        if value is not None and value not in ADAPTER_KINDS:
            raise InputError(f"{file_name}: pattern {record.id!r} (record {number}): {ADAPTER_KEY}{value} in the "
                             f"header is not one of {', '.join(ADAPTER_KINDS)}")
        kinds.append(default if value is None else value)
    return kinds


def pattern_fractions(patterns, thresholds, scoring: Scoring, min_score_fraction: float | None) -> list[Fraction]:
    """Each pattern's fraction F: ``--min-score-fraction`` where that set its
    threshold, else its threshold over its best score."""
    fractions = []
    for record, threshold in zip(patterns, thresholds):
        length = len(as_bytes(record))
        from_header = header_threshold(getattr(record, "name", "")) is not None
        if min_score_fraction is not None and not from_header:
            fractions.append(Fraction(str(min_score_fraction)))
        else:
            fractions.append(Fraction(int(threshold), scoring.max_score(length)))
    return fractions


def overlap_thresholds(fraction: Fraction, match: int, length: int) -> np.ndarray:
    """int32 (length,): entry L is ceil(F x match x L), the score an overlap of L bases needs (entry 0 unused)."""
    return np.array([math.ceil(fraction * match * overlap) for overlap in range(length)], np.int32)


def overlap_slack(thresholds: np.ndarray, scoring: Scoring) -> int:
    """The most bases an overlap that passes can have inserted: a passing
    overlap of L bases scores at most match x L - (open + extend x inserted)."""
    slack = 0
    for overlap in range(1, len(thresholds)):
        room = scoring.match * overlap - int(thresholds[overlap]) - scoring.gap_open
        if room > 0:
            slack = max(slack, room // scoring.gap_extend)
    return slack


# ----------------------------------------------------------------- the end-overlap kernel


@njit(cache=True, nogil=True)
def _overlap_lanes(bits, rows, start_row, pattern, m, band, thresholds, min_overlap, match, mismatch, gap_open,
                   gap_extend, h_column, e_column, start_h, start_e, best):
    """The end-overlap DP (module docstring) for 16 reads at once, and each
    read's best passing overlap. ``bits`` (rows x 16) holds the window's read
    bases as IUPAC bits (0 for N), lane q's read starting at row
    ``start_row[q]`` (rows before it do not exist); ``pattern[:m]`` the masks
    of P without its last base; cells (i, j) with j > i + band are not
    computed (no passing overlap goes through them). The columns are scratch
    space of at least (m + 1) x 16. Writes best[0:16] (score, 0: none),
    best[16:32] (start row: the start of every cell's alignment is carried
    along) and best[32:48] (overlap length)."""
    K = _LANES
    negative = vsplat16(_NEG)
    zero = vsplat16(0)
    for j in range(m + 1):
        vstore16(h_column, j * K, negative)
        vstore16(e_column, j * K, negative)
        vstore16(start_h, j * K, zero)
        vstore16(start_e, j * K, zero)
    first_rows = vload16(start_row, 0)
    open_cost = vsplat16(gap_open + gap_extend)
    extend_cost = vsplat16(gap_extend)
    match_score = vsplat16(match)
    mismatch_score = vsplat16(-mismatch)
    for i in range(rows + 1):
        row = vsplat16(i)
        read_bits = vload16(bits, (i - 1) * K) if i > 0 else zero
        # column 0: H[i][0] = 0 where the read has begun, its alignment starting here
        h_left = vselect16(row >= first_rows, zero, negative)
        start_left = row
        h_diag = vselect16(row > first_rows, zero, negative) if i > 0 else negative  # H[i-1][0]
        start_diag = vsplat16(i - 1)
        f = negative
        start_f = zero
        for j in range(1, min(m, i + band) + 1):
            s = vselect16((read_bits & vsplat16(pattern[j - 1])) != zero, match_score, mismatch_score)
            h_up = vload16(h_column, j * K)
            e_open = h_up - open_cost
            e_extend = vload16(e_column, j * K) - extend_cost
            e = vmax16(e_open, e_extend)
            f_open = h_left - open_cost
            f_extend = f - extend_cost
            f = vmax16(f_open, f_extend)
            diag = h_diag + s
            gap = vmax16(e, f)
            h = vmax16(diag, gap)
            vstore16(h_column, j * K, h)
            vstore16(e_column, j * K, e)
            start_up = vload16(start_h, j * K)
            start_e_now = vselect16(e_open >= e_extend, start_up, vload16(start_e, j * K))
            start_f = vselect16(f_open >= f_extend, start_left, start_f)
            start_gap = vselect16(e >= f, start_e_now, start_f)
            start = vselect16(diag >= gap, start_diag, start_gap)
            vstore16(start_h, j * K, start)
            vstore16(start_e, j * K, start_e_now)
            start_diag = start_up
            start_left = start
            h_diag = h_up
            h_left = h
    # row W: the passing overlap with the highest score, then the smallest start, then the shortest
    best_score = zero
    best_start = zero
    best_length = zero
    for j in range(min_overlap, m + 1):
        h = vload16(h_column, j * K)
        candidate = vselect16(h >= vsplat16(thresholds[j]), h, negative)
        start = vload16(start_h, j * K)
        length = vsplat16(j)
        higher = candidate > best_score
        lower = best_score > candidate
        earlier = best_start > start
        best_start_next = vselect16(higher, start, vselect16(lower, best_start, vselect16(earlier, start,
                                                                                          best_start)))
        best_length = vselect16(higher, length, vselect16(lower, best_length, vselect16(earlier, length,
                                                                                        best_length)))
        best_start = best_start_next
        best_score = vmax16(best_score, candidate)
    vstore16(best, 0, best_score)
    vstore16(best, K, best_start)
    vstore16(best, 2 * K, best_length)


@njit(cache=True, nogil=True)
def _any_overlap_lanes(bits, rows, start_row, pattern, m, slack, thresholds, min_overlap, match, mismatch,
                       gap_open, gap_extend, h_column, e_column, best, done, until):
    """Whether each of 16 reads has a passing end overlap, and nothing more:
    the DP of :func:`_overlap_lanes` run from the read's end (the bits'
    last row) towards its start, against P reversed, each overlap length L
    starting at column m - L with value -ceil(F x match x L), so that a read
    passes where some alignment reaches P's first base with a value >= 0.
    Every cell can gain at most match x (m - column) more, so once no cell of
    a row can reach 0 no later row can: the DP stops where every read of the
    16 has passed or cannot pass any more (a read without an adapter after a
    few rows). A passing alignment inserts at most ``slack`` read bases, so
    cells (i, c) with c < i - slack are left out.

    Resumable: it computes rows done + 1 to ``until`` (row 0 when done is
    -1) from the columns and best[16:32] as the previous call left them, and
    only those rows of ``bits`` need to hold the read (bits row rows - i for
    DP row i). Returns the last row computed, or ``rows`` when finished:
    then best[0:16] is >= 0 where the read passes."""
    K = _LANES
    negative = vsplat16(_NEG)
    zero = vsplat16(0)
    open_cost = vsplat16(gap_open + gap_extend)
    extend_cost = vsplat16(gap_extend)
    match_score = vsplat16(match)
    mismatch_score = vsplat16(-mismatch)
    last_row = vsplat16(rows) - vload16(start_row, 0)  # the lane's read ends there (unused lanes: -1)
    if done < 0:
        # row 0: the overlaps' starts, and deletions along the row
        f = negative
        h_left = negative
        for c in range(m + 1):
            if c > 0:
                f = vmax16(h_left - open_cost, f - extend_cost)
            length = m - c
            start = vsplat16(-thresholds[length]) if length >= min_overlap else negative
            h_left = vmax16(start, f)
            vstore16(h_column, c * K, h_left)
            vstore16(e_column, c * K, negative)
        vstore16(best, K, h_left)
        done = 0
    found = vload16(best, K)
    for i in range(done + 1, until + 1):
        row = vsplat16(i)
        read_bits = vload16(bits, (rows - i) * K)
        left = i - slack  # the band's first column
        if left <= 0:
            h_diag = vload16(h_column, 0)
            e = vmax16(h_diag - open_cost, vload16(e_column, 0) - extend_cost)
            vstore16(h_column, 0, e)
            vstore16(e_column, 0, e)
            h_left = e
            hope = e + vsplat16(match * m)
            left = 1
        else:
            h_diag = vload16(h_column, (left - 1) * K)
            h_left = negative
            hope = negative
        f = negative
        for c in range(left, m + 1):
            s = vselect16((read_bits & vsplat16(pattern[m - c])) != zero, match_score, mismatch_score)
            h_up = vload16(h_column, c * K)
            e = vmax16(h_up - open_cost, vload16(e_column, c * K) - extend_cost)
            f = vmax16(h_left - open_cost, f - extend_cost)
            h = vmax16(h_diag + s, vmax16(e, f))
            vstore16(h_column, c * K, h)
            vstore16(e_column, c * K, e)
            h_diag = h_up
            h_left = h
            hope = vmax16(hope, h + vsplat16(match * (m - c)))
        alive = last_row >= row
        found = vmax16(found, vselect16(alive, h_left, negative))
        # a lane is settled once its read passes, or when no cell can still reach 0
        vstore16(best, 0, vselect16(found >= zero, negative, vselect16(alive, hope, negative)))
        hopeless = True
        for q in range(K):
            if best[q] >= 0:
                hopeless = False
        if hopeless:
            done = rows
            break
        done = i
    vstore16(best, K, found)
    if done == rows:
        vstore16(best, 0, found)
    return done


@njit(cache=True, nogil=True)
def _load_window(bits, first_row, stop_row, width, buf, seq_start, lengths, rows, first, count, bit_table, reverse):
    """Rows first_row to stop_row - 1 of the window (its last ``width`` read
    bases, the first ones for a 5' end read backwards) of reads
    rows[first:first + count] as IUPAC bits, lane q holding read q; rows
    before a short read's start and lanes without a read hold 0."""
    K = _LANES
    for q in range(count):
        r = rows[first + q]
        n = lengths[r]
        pad = max(0, width - n)
        for i in range(first_row, min(pad, stop_row)):
            bits[i * K + q] = 0
        base = seq_start[r] + (width - 1 if reverse else n - width)
        step = -1 if reverse else 1
        for i in range(max(pad, first_row), stop_row):
            bits[i * K + q] = bit_table[buf[base + step * i]]
    for q in range(count, K):
        for i in range(first_row, stop_row):
            bits[i * K + q] = 0


def _end_overlaps_body(buf, seq_start, lengths, rows, bit_table, task_masks, task_starts, task_end, task_slack,
                       task_thresholds, min_overlap, match, mismatch, gap_open, gap_extend, groups, score, cut,
                       overlap):
    """The end overlaps of reads ``rows`` for every task: read r's bases, as
    IUPAC bits, are bit_table[buf[seq_start[r]:][:lengths[r]]]; task k aligns masks
    task_masks[task_starts[k]:task_starts[k + 1]] (P without its last base;
    reversed for a 5' end) to the read's end (task_end[k] _END3) or start
    (_END5). Jobs of 16 reads and one task, ``groups`` groups of them in
    parallel, each with its own scratch space. The first pass (the global
    _TRACK False, fixed where the kernel is made: :func:`_pass_kernel`) sets
    score[r, k] to 1 where read r has an overlap (:func:`_any_overlap_lanes`);
    the second fills score[r, k] (0: none), cut[r, k] (3' end: where the
    adapter starts; 5' end: where it ends) and overlap[r, k]."""
    K = _LANES
    reads = rows.shape[0]
    tasks = task_starts.shape[0] - 1
    jobs = ((reads + K - 1) // K) * tasks
    longest_pattern = 0
    longest_reach = 1
    for k in range(tasks):
        longest_pattern = max(longest_pattern, task_starts[k + 1] - task_starts[k])
        longest_reach = max(longest_reach, task_starts[k + 1] - task_starts[k] + task_slack[k])
    for group in prange(groups):
        bits = np.empty(longest_reach * K, np.uint8)
        start_row = np.empty(K, np.int32)
        h_column = np.empty((longest_pattern + 1) * K, np.int32)
        e_column = np.empty_like(h_column)
        start_h = np.empty_like(h_column)
        start_e = np.empty_like(h_column)
        best = np.empty(3 * K, np.int32)
        for job in range(group * jobs // groups, (group + 1) * jobs // groups):
            k = job % tasks
            first = (job // tasks) * K
            count = min(K, reads - first)
            m = task_starts[k + 1] - task_starts[k]  # the longest overlap: the pattern's length - 1
            if m < min_overlap:
                continue
            reach = m + task_slack[k]
            longest = 0
            for q in range(count):
                longest = max(longest, lengths[rows[first + q]])
            width = min(longest, reach)
            reverse = task_end[k] == _END5
            if _TRACK and k == tasks - 1:
                # the next 16 reads' ends: in memory, not in cache, more often than not (the second pass takes a
                # few reads of a batch, far apart); asked for now, they come while this job's DP runs
                ahead = first + K
                for q in range(min(K, reads - ahead)):
                    r = rows[ahead + q]
                    _prefetch(buf, seq_start[r])
                    _prefetch(buf, seq_start[r] + min(lengths[r], longest_reach) - 1)
                    _prefetch(buf, seq_start[r] + max(lengths[r] - longest_reach, 0))
                    _prefetch(buf, seq_start[r] + max(lengths[r] - 1, 0))
            for q in range(K):
                start_row[q] = width + 1  # lanes without a read never start
            for q in range(count):
                start_row[q] = max(0, width - lengths[rows[first + q]])
            if not _TRACK:  # does the read have an overlap at all: most reads tell within a few bases
                done = -1
                loaded = width
                while done < width:
                    # the window's rows from its end, a few at first, then the rest
                    ahead = min(_FIRST_ROWS, width) if loaded == width else loaded
                    _load_window(bits, loaded - ahead, loaded, width, buf, seq_start, lengths, rows, first, count,
                                 bit_table, reverse)
                    loaded -= ahead
                    done = _any_overlap_lanes(bits, width, start_row, task_masks[task_starts[k]:], m,
                                              task_slack[k], task_thresholds[k], min_overlap, match, mismatch,
                                              gap_open, gap_extend, h_column, e_column, best, done,
                                              width - loaded)
                for q in range(count):
                    if best[q] >= 0:
                        score[rows[first + q], k] = 1
                continue
            _load_window(bits, 0, width, width, buf, seq_start, lengths, rows, first, count, bit_table, reverse)
            _overlap_lanes(bits, width, start_row, task_masks[task_starts[k]:], m, reach - width,
                           task_thresholds[k], min_overlap, match, mismatch, gap_open, gap_extend, h_column,
                           e_column, start_h, start_e, best)
            for q in range(count):
                if best[q] > 0:
                    r = rows[first + q]
                    score[r, k] = best[q]
                    cut[r, k] = width - best[K + q] if reverse else lengths[r] - width + best[K + q]
                    overlap[r, k] = best[2 * K + q]


_TRACK = True  # the pass of _end_overlaps_body (a constant of each kernel: _pass_kernel)


@njit(cache=True, nogil=True)
def _prefetch(array, index):
    """bpbc.end_overlap.prefetch in the kernels :func:`_pass_kernel` makes (bound there: that module is
    imported with the first kernel, not with this one); a no-op elsewhere."""


@cache
def _pass_kernel(track: bool, parallel: bool):
    """A pass's kernel (``track``: the second), made on first use from
    :func:`_end_overlaps_body` with _TRACK fixed: each holds one pass's code
    (the second pass's serial kernel, the one most runs load, 4.3 ms to load
    from numba's cache against 6.8 for both passes'). Serial twins are for a
    few reads: starting a parallel region cost more than the reads
    themselves (2,098 flagged reads of 100,000 adapter-free ones: 0.4 ms
    serial, 5.2 ms parallel on 2 cores with another process busy; 28,375
    reads: 7.0 and 7.8 ms). Made here, not at import: bpbc.traceback's
    import (and bpbc.cpu_engine's under it, about 18 ms) would otherwise come
    with this module's, which the command imports before the reading
    starts; the screen imports them later, beside it."""
    from .end_overlap import prefetch
    from .traceback import _named

    suffix = ("_second" if track else "_first") + ("_parallel" if parallel else "_serial")
    return njit(parallel=parallel, cache=True, nogil=True)(_named(_end_overlaps_body, suffix, _TRACK=track,
                                                                  _prefetch=prefetch))


_PARALLEL_FROM = 256  #: reads from which the first pass's jobs are shared out between threads
_SECOND_PARALLEL_FROM = 16384  #: the same for the second pass,
#: where this many threads may run it: on 2 cores the screen of the next chunk keeps the other one busy, and
#: the parallel kernel's load (about 10 ms) and start cost more than it saves (planted reads, 28,375 of 100,000
#: flagged: 7.8 ms against 7.0 serial)
_SECOND_PARALLEL_THREADS = 3


@dataclass(frozen=True)
class EndTasks:
    """The end overlaps to compute: per task, the (oriented) pattern, the strand, which end."""

    pattern: np.ndarray  #: int64 pattern index
    strand: np.ndarray  #: int64 index into the screen's strands
    end: np.ndarray  #: _END3 or _END5
    masks: np.ndarray  #: uint8, the tasks' DP patterns back to back (5' ends reversed)
    starts: np.ndarray  #: int64 (tasks + 1,)
    slack: np.ndarray  #: int64
    #: int32 (tasks, longest + 1): [k, L] is the score an overlap of L bases needs in task k
    thresholds: np.ndarray

    def __len__(self) -> int:
        return len(self.starts) - 1


def end_overlaps(buf, seq_start, lengths, table, tasks: EndTasks, min_overlap: int, scoring: Scoring,
                 rows: np.ndarray | None = None, decision=None, first_pass: str = "bits",
                 flagged: np.ndarray | None = None, prepared=None):
    """(score, cut, overlap), each int32 (reads, tasks): every read's best
    passing end overlap per task (score 0: none), of the reads ``rows``
    (default all; the others get 0). The reads: bytes
    ``buf[seq_start[r]:][:lengths[r]]`` through ``table`` (READ_CODE for
    sequence text, :data:`_CODE_IDENTITY` for codes).

    The first pass decides which reads have an overlap at all:
    ``first_pass`` 'bits' is the bit-sliced pass of :mod:`bpbc.end_overlap`
    (512 reads a vector; ``decision``: its :class:`~bpbc.end_overlap.Decision`
    for these tasks, made here when None), 'gpu' the same on the GPU
    (bpbc/end_overlap.cu, through CuPy), 'lanes' the 16-lane vector DP here
    (also taken where the bit-sliced pass would need more than
    ``end_overlap.MAX_PLANES`` planes). ``flagged`` (bool (reads, tasks)),
    where given, is a first pass run already, over every read (on the GPU,
    over the screen's copy of the batch: :meth:`Trimmer.inputs`): of
    ``rows``, the reads it flags go to the second pass. ``prepared``, where
    given, is the CPU screen's batch of these reads
    (bpbc.cpu_engine.PreparedReads): the bit-sliced pass over every read
    (``rows`` None) reads their bases from its bit planes, not from
    ``buf``. All are exact; the second pass is the same."""
    return _end_overlaps(buf, seq_start, lengths, table, tasks, min_overlap, scoring, rows, decision, first_pass,
                         flagged, prepared)[:3]


def _end_overlaps(buf, seq_start, lengths, table, tasks: EndTasks, min_overlap: int, scoring: Scoring,
                  rows: np.ndarray | None, decision, first_pass: str, flagged: np.ndarray | None, prepared):
    """:func:`end_overlaps`, and the rows of the second pass (in the order
    of ``rows``, ascending by default): no other row holds a score."""
    reads = len(lengths)
    shape = (reads, len(tasks))
    score, cut, overlap = np.zeros(shape, np.int32), np.zeros(shape, np.int32), np.zeros(shape, np.int32)
    # the bit-sliced pass over every read, from the CPU batch's planes: no list of every row needed
    planes = rows is None and prepared is not None and prepared.n == reads and first_pass == "bits" \
        and flagged is None
    if rows is not None:
        rows = np.ascontiguousarray(rows, np.int64)
    elif not planes:
        rows = np.arange(reads, dtype=np.int64)
    if not reads or not len(tasks) or (rows is not None and not len(rows)):
        return score, cut, overlap, _NO_ROWS
    buf = np.asarray(buf).view(np.uint8).reshape(-1)
    seq_start = np.ascontiguousarray(seq_start, np.int64)
    lengths = np.ascontiguousarray(lengths, np.int64)
    # a read base as the IUPAC bit of its code (0 for N)
    bit_table = np.where(table < 4, np.left_shift(1, np.minimum(table, 7)), 0).astype(np.uint8)
    if flagged is not None:
        assert rows is not None
        rows = rows[flagged[rows].any(axis=1)]
    else:  # the first pass: which reads have an overlap at all
        if first_pass in ("bits", "gpu"):
            from .end_overlap import BASE_BIT, Decision, gpu_flags

            decision = decision if decision is not None else Decision(tasks, min_overlap, scoring)
            if not decision.usable:
                first_pass = "lanes"
        listed = None
        if first_pass == "bits" and planes:
            listed = decision.plane_flags(prepared, lengths, score)
        elif first_pass == "bits":
            assert rows is not None
            decision.flags(buf, seq_start, lengths, bit_table | np.uint8(BASE_BIT), rows, score)
        elif first_pass == "gpu":
            assert rows is not None
            gpu_flags(decision, buf, seq_start, lengths, bit_table, rows, score)
        else:
            rows = np.arange(reads, dtype=np.int64) if rows is None else rows
            _run_pass(False, len(rows) >= _PARALLEL_FROM, buf, seq_start, lengths, rows, bit_table, tasks,
                      min_overlap, scoring, score, cut, overlap)
        rows = np.flatnonzero((score > 0).any(axis=1)) if listed is None else listed
        score[rows] = 0  # the first pass marks them; the second scores them
    if len(rows):  # the second pass: the score and cut of the reads with an overlap
        parallel = len(rows) >= _SECOND_PARALLEL_FROM and numba.get_num_threads() >= _SECOND_PARALLEL_THREADS
        _run_pass(True, parallel, buf, seq_start, lengths, rows, bit_table, tasks, min_overlap, scoring,
                  score, cut, overlap)
    return score, cut, overlap, rows


def _found(score: np.ndarray, cut: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(read, task, cut), int64, of every passing end overlap (score > 0),
    by read then task, where only the reads ``rows`` (ascending) hold one."""
    scored = score[rows]
    at, task = np.nonzero(scored > 0)
    found_read = rows[at]
    return found_read, task.astype(np.int64), cut[found_read, task].astype(np.int64)


def _run_pass(track: bool, parallel: bool, buf, seq_start, lengths, rows, bit_table, tasks: EndTasks,
              min_overlap: int, scoring: Scoring, score, cut, overlap) -> None:
    """A pass of :func:`_end_overlaps_body` (``track``: the second) over the
    reads ``rows``, on its parallel kernel or its serial twin."""
    jobs = (len(rows) + _LANES - 1) // _LANES * len(tasks)
    groups = min(jobs, 8 * numba.get_num_threads()) if parallel else 1
    _pass_kernel(track, parallel)(buf, seq_start, lengths, rows, bit_table, tasks.masks, tasks.starts, tasks.end,
                                  tasks.slack, tasks.thresholds, min_overlap, scoring.match, scoring.mismatch,
                                  scoring.gap_open, scoring.gap_extend, groups, score, cut, overlap)


# ----------------------------------------------------------------- edited records


@njit(cache=True, nogil=True)
def _adapter_spans(read, pattern, strand, read_start, read_end, pattern_start, pattern_end, lengths, pattern_lengths,
                   kind):
    """Each hit's adapter span on its read (start, end) and whether it is cut
    as a 5' adapter: the alignment extended by the pattern bases it left out
    at either end (on strand '-', strand index 1, the pattern runs the other
    way), within the read; a 5' adapter, or an anywhere adapter that reaches
    the read's start. One call with the GIL released, in the trimmer's
    thread (as numpy, a dozen calls each waiting to take the GIL back)."""
    count = len(read)
    start = np.empty(count, np.int64)
    end = np.empty(count, np.int64)
    five = np.empty(count, np.bool_)
    for t in range(count):
        m = pattern_lengths[pattern[t]]
        if strand[t] == 1:
            left, right = m - pattern_end[t], pattern_start[t]
        else:
            left, right = pattern_start[t], m - pattern_end[t]
        start[t] = max(0, read_start[t] - left)
        end[t] = min(lengths[read[t]], read_end[t] + right)
        k = kind[pattern[t]]
        five[t] = k == _FIVE or (k == _ANYWHERE and start[t] == 0)
    return start, end, five


@njit(cache=True, nogil=True, parallel=True)
def _gather_edited(buf, rec_start, seq_start, lengths, keep_start, keep_end, span_first, span_start, span_end, rows,
                   out):
    """Plain FASTQ records ``rows`` rebuilt back to back into ``out``;
    returns the size. Record r keeps its header and bases
    keep_start[r]:keep_end[r] of its sequence and qualities, with the spans
    span_first[r]..span_first[r + 1] - 1 of its sequence set to N. Each
    record's place comes first, then the records are built on the calling
    thread's numba threads (on one, the 10M trimmed reads of a 16-core run
    kept their writing thread busy for most of the run). Copied through
    views with loops from 0, as :func:`bpbc.chunks._gather`."""
    places = np.empty(rows.shape[0] + 1, np.int64)
    places[0] = 0
    for t in range(rows.shape[0]):
        r = rows[t]
        places[t + 1] = places[t] + seq_start[r] - rec_start[r] + 2 * (keep_end[r] - keep_start[r]) + 4
    for t in prange(rows.shape[0]):
        r = rows[t]
        at = places[t]
        header = buf[rec_start[r]:seq_start[r]]
        target = out[at:at + header.shape[0]]
        for k in range(header.shape[0]):
            target[k] = header[k]
        s = at + header.shape[0]
        first, kept = keep_start[r], keep_end[r] - keep_start[r]
        source = buf[seq_start[r] + first:seq_start[r] + first + kept]
        target = out[s:s + kept]
        for k in range(kept):
            target[k] = source[k]
        for span in range(span_first[r], span_first[r + 1]):
            for k in range(max(span_start[span], first), min(span_end[span], keep_end[r])):
                out[s + k - first] = _N
        out[s + kept] = _NEWLINE
        out[s + kept + 1] = _PLUS
        out[s + kept + 2] = _NEWLINE
        source = buf[seq_start[r] + lengths[r] + 3 + first:seq_start[r] + lengths[r] + 3 + first + kept]
        target = out[s + kept + 3:s + 2 * kept + 3]
        for k in range(kept):
            target[k] = source[k]
        out[s + 2 * kept + 3] = _NEWLINE
    return places[rows.shape[0]]


def _spans_of(span_first: np.ndarray, span_start: np.ndarray, span_end: np.ndarray, rows: np.ndarray):
    """(span_first, span_start, span_end) of reads ``rows``, in that order."""
    firsts = span_first[rows]
    counts = span_first[rows + 1] - firsts
    first = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    picked = np.repeat(firsts - first[:-1], counts) + np.arange(first[-1])
    return first, span_start[picked], span_end[picked]


class EditedFastqChunk:
    """A :class:`bpbc.chunks.RawFastqChunk` whose reads keep bases
    keep_start:keep_end, spans (as :class:`ChunkEdit`'s) set to N. Nothing is
    copied until a record is written: :meth:`write` rebuilds the records into
    the output's scratch buffer in one pass, as the raw chunk gathers its own."""

    def __init__(self, chunk, keep_start: np.ndarray, keep_end: np.ndarray, span_first: np.ndarray,
                 span_start: np.ndarray, span_end: np.ndarray):
        self.chunk = chunk
        self.keep_start, self.keep_end = keep_start, keep_end
        self.span_first, self.span_start, self.span_end = span_first, span_start, span_end

    def __len__(self) -> int:
        return len(self.chunk)

    def subset(self, rows: np.ndarray) -> EditedFastqChunk:
        rows = np.asarray(rows, np.int64)
        return EditedFastqChunk(self.chunk.subset(rows), self.keep_start[rows], self.keep_end[rows],
                                *_spans_of(self.span_first, self.span_start, self.span_end, rows))

    def read_id(self, index: int) -> str:
        return self.chunk.read_id(index)

    def read_names(self, rows: np.ndarray):
        return self.chunk.read_names(rows)

    def write(self, output, rows: np.ndarray) -> None:
        """Write the edited records ``rows`` in one write."""
        if not len(rows):
            return
        rows = np.asarray(rows, np.int64)
        chunk = self.chunk
        size = int((chunk.seq_start[rows] - chunk.rec_start[rows]).sum()
                   + 2 * (self.keep_end[rows] - self.keep_start[rows]).sum()) + 4 * len(rows)
        out = output.scratch(size)
        _gather_edited(np.frombuffer(chunk.data, np.uint8), chunk.rec_start, chunk.seq_start, chunk.lengths,
                       self.keep_start, self.keep_end, self.span_first, self.span_start, self.span_end, rows, out)
        output.write_bytes(memoryview(out)[:size])


def _edited_records(chunk, keep_start: np.ndarray, keep_end: np.ndarray, span_first: np.ndarray,
                    span_start: np.ndarray, span_end: np.ndarray):
    """The chunk (raw FASTQ or dnaio records) with its reads trimmed to
    keep_start:keep_end and the spans set to N; a record chunk's untouched
    records are the same objects."""
    from .chunks import RawFastqChunk, RecordChunk

    if isinstance(chunk, RawFastqChunk):
        return EditedFastqChunk(chunk, keep_start, keep_end, span_first, span_start, span_end)
    records = list(chunk.records)
    lengths = np.array([len(record.sequence) for record in records], np.int64)
    touched = (keep_start > 0) | (keep_end < lengths) | (np.diff(span_first) > 0)
    for r in np.flatnonzero(touched).tolist():
        record = records[r]
        a, b = int(keep_start[r]), int(keep_end[r])
        sequence = bytearray(record.sequence[a:b].encode("ascii"))
        for span in range(int(span_first[r]), int(span_first[r + 1])):
            first, last = max(int(span_start[span]), a), min(int(span_end[span]), b)
            if last > first:
                sequence[first - a:last - a] = b"N" * (last - first)
        qualities = record.qualities[a:b] if record.qualities is not None else None
        records[r] = type(record)(record.name, sequence.decode("ascii"), qualities)
    return RecordChunk(records)


def edited_chunk(chunk, keep_start, keep_end, span_first, span_start, span_end):
    """A chunk as :mod:`bpbc.chunks` and :mod:`bpbc.pairs` make them (raw
    FASTQ, records, or pairs of either, rows mates interleaved) with its reads
    edited; the sinks write it as they write the chunk it came from."""
    from .pairs import PairedChunk

    if not isinstance(chunk, PairedChunk):
        return _edited_records(chunk, keep_start, keep_end, span_first, span_start, span_end)
    pairs = np.arange(len(chunk), dtype=np.int64)
    if chunk.whole is not None:  # interleaved: edit the file's chunk, then split it again
        whole = _edited_records(chunk.whole, keep_start, keep_end, span_first, span_start, span_end)
        return PairedChunk(whole.subset(2 * pairs), whole.subset(2 * pairs + 1), chunk.files, whole=whole)
    mates = []
    for rows, part in ((2 * pairs, chunk.first), (2 * pairs + 1, chunk.second)):
        mates.append(_edited_records(part, keep_start[rows], keep_end[rows],
                                     *_spans_of(span_first, span_start, span_end, rows)))
    return PairedChunk(mates[0], mates[1], chunk.files)


@njit(cache=True, nogil=True)
def _trim_cuts(lengths, read, pattern, five, cut, patterns):
    """Per read: keep what lies after every 5' cut and before every 3' one;
    each side's bases go to the pattern whose cut decided it (the first of
    equal ones). Returns (keep_start, keep_end, deciding pattern or -1,
    edited, per pattern reads and bases, bases in all). Beyond filling the
    per-read arrays, only the cuts and their reads are visited (a few in a
    hundred reads of most batches)."""
    reads = lengths.shape[0]
    keep_start = np.zeros(reads, np.int64)
    keep_end = lengths.copy()  # the first 3' cut, until the reads are settled below
    decided = np.full(reads, -1, np.int64)
    edited = np.zeros(reads, np.bool_)
    by_five = np.empty(reads, np.int64)  # set for the reads with a cut only
    by_three = np.empty(reads, np.int64)
    for t in range(read.shape[0]):
        by_five[read[t]] = -1
        by_three[read[t]] = -1
    for t in range(read.shape[0]):
        r, p, c = read[t], pattern[t], cut[t]
        if five[t]:
            if c > keep_start[r] or (c == keep_start[r] and (by_five[r] < 0 or p < by_five[r])):
                keep_start[r], by_five[r] = c, p
        elif c < keep_end[r] or (c == keep_end[r] and (by_three[r] < 0 or p < by_three[r])):
            keep_end[r], by_three[r] = c, p
    pattern_reads = np.zeros(patterns, np.int64)
    pattern_bases = np.zeros(patterns, np.int64)
    total = 0
    for t in range(read.shape[0]):
        r = read[t]
        if by_five[r] == -2:  # settled already (a read of several cuts)
            continue
        keep_end[r] = max(keep_start[r], keep_end[r])
        before, after = keep_start[r], lengths[r] - keep_end[r]
        if before > 0:
            decided[r] = by_five[r]
            pattern_reads[by_five[r]] += 1
            pattern_bases[by_five[r]] += before
        if after > 0:
            if decided[r] != by_three[r]:
                pattern_reads[by_three[r]] += 1
            if decided[r] < 0:
                decided[r] = by_three[r]
            pattern_bases[by_three[r]] += after
        edited[r] = before > 0 or after > 0
        total += before + after
        by_five[r] = -2
    return keep_start, keep_end, decided, edited, pattern_reads, pattern_bases, total


@njit(cache=True, nogil=True)
def _mask_spans(reads, read, pattern, start, end, patterns):
    """The spans by read (span_first; each read's sorted by pattern, then
    start), the pattern of each read's first span (or -1), per pattern the
    reads and bases it masks (its spans' union), and the bases masked in all
    (the union of every span of a read)."""
    count = np.zeros(reads + 1, np.int64)
    for t in range(read.shape[0]):
        count[read[t] + 1] += 1
    span_first = np.cumsum(count)
    at = span_first[:-1].copy()
    span_pattern = np.empty(read.shape[0], np.int64)
    span_start = np.empty(read.shape[0], np.int64)
    span_end = np.empty(read.shape[0], np.int64)
    for t in range(read.shape[0]):
        k = at[read[t]]
        at[read[t]] += 1
        # insertion into the read's spans so far, by (pattern, start)
        while k > span_first[read[t]] and (span_pattern[k - 1] > pattern[t] or (
                span_pattern[k - 1] == pattern[t] and span_start[k - 1] > start[t])):
            span_pattern[k], span_start[k], span_end[k] = span_pattern[k - 1], span_start[k - 1], span_end[k - 1]
            k -= 1
        span_pattern[k], span_start[k], span_end[k] = pattern[t], start[t], end[t]
    decided = np.full(reads, -1, np.int64)
    pattern_reads = np.zeros(patterns, np.int64)
    pattern_bases = np.zeros(patterns, np.int64)
    total = 0
    masked = np.zeros(0, np.bool_)
    for r in range(reads):
        a, b = span_first[r], span_first[r + 1]
        if a == b:
            continue
        decided[r] = span_pattern[a]
        reach = 0
        for k in range(a, b):
            if k == a or span_pattern[k] != span_pattern[k - 1]:
                pattern_reads[span_pattern[k]] += 1
                reach = span_start[k]
            if span_end[k] > reach:
                pattern_bases[span_pattern[k]] += span_end[k] - max(span_start[k], reach)
                reach = span_end[k]
        longest = 0
        for k in range(a, b):
            longest = max(longest, span_end[k])
        if masked.shape[0] < longest:
            masked = np.zeros(2 * longest, np.bool_)
        for k in range(a, b):
            for i in range(span_start[k], span_end[k]):
                if not masked[i]:
                    masked[i] = True
                    total += 1
        for k in range(a, b):
            masked[span_start[k]:span_end[k]] = False
    return span_first, span_start, span_end, decided, pattern_reads, pattern_bases, total


# ----------------------------------------------------------------- per chunk


@dataclass(frozen=True)
class EditInputs:
    """What :meth:`Trimmer.edit` needs of a batch besides its lengths (:meth:`Trimmer.inputs`)."""

    #: the reads' codes, or None for plain FASTQ (read from the chunk's bytes)
    codes: np.ndarray | None
    #: the end-overlap decision begun on the GPU (its ``result()``: bool (reads, tasks)), or None: the host's
    first_pass: Any = None
    #: the end overlaps of every read begun in the trimmer's thread (a future: ``result()`` gives (read, task,
    #: cut) of every passing one, by read then task), or None: :meth:`Trimmer.edit` computes them
    overlaps: Any = None


@dataclass
class ChunkEdit:
    """What trimming (masking) does to one chunk."""

    #: per read (rows of the batch): the bases kept, keep_start:keep_end
    keep_start: np.ndarray
    keep_end: np.ndarray
    #: masked spans, by read: read r's are span_first[r]..span_first[r + 1] - 1
    span_first: np.ndarray
    span_start: np.ndarray
    span_end: np.ndarray
    #: per read: trimmed or masked, and the pattern that decided it (-1: none)
    edited: np.ndarray
    pattern: np.ndarray
    #: per unit: kept (not shorter than --min-length)
    kept: np.ndarray
    #: per pattern: reads it trimmed (masked), and the bases
    pattern_reads: np.ndarray
    pattern_bases: np.ndarray
    #: bases trimmed (masked) in all
    bases: int

    def chunk(self, chunk):
        """``chunk`` with its reads edited (the chunk itself when nothing changes)."""
        if not self.edited.any():
            return chunk
        return edited_chunk(chunk, self.keep_start, self.keep_end, self.span_first, self.span_start,
                            self.span_end)

    def passing(self, passing_reads: np.ndarray, mates: int, pair_filter: str) -> np.ndarray:
        """Units that pass: by the screen, or with a read edited (a partial
        adapter), judged by the pair filter."""
        reads = passing_reads | self.edited
        if mates == 1:
            return reads
        reads = reads.reshape(-1, mates)
        return np.asarray(reads.all(axis=1) if pair_filter == "both" else reads.any(axis=1))

    def best_patterns(self, best: np.ndarray | None, mates: int) -> np.ndarray | None:
        """Demultiplexing: a unit without a hit but with a partial adapter
        goes to that adapter's pattern."""
        if best is None:
            return None
        best = best.copy()
        by_unit = self.pattern.reshape(-1, mates)
        fill = (best < 0) & (by_unit >= 0).any(axis=1)
        best[fill] = by_unit[fill].max(axis=1)
        return best


class Trimmer:
    """Trims or masks the adapters of every chunk of a run (module docstring).

    ``screener``: the run's :class:`bpbc.screener.Screener`; ``patterns`` its
    records (for the headers); bad settings raise InputError.
    """

    def __init__(self, action: str, screener, patterns, file_name: str, adapter_kind: str = "3prime",
                 min_overlap: int = DEFAULT_MIN_OVERLAP, trim_strand: str = "forward",
                 min_score_fraction: float | None = None, min_length: int | None = None):
        if action not in ACTIONS[1:]:
            raise InputError(f"--action must be one of {', '.join(ACTIONS)}, got {action!r}")
        if trim_strand not in TRIM_STRANDS:
            raise InputError(f"--trim-strand must be one of {', '.join(TRIM_STRANDS)}, got {trim_strand!r}")
        strands = TRIM_STRANDS[trim_strand]
        if any(sign not in screener.strands for sign in strands):
            raise InputError("--trim-strand both needs --strand both (the reverse strand screened)")
        if min_length is not None and min_length < 0:
            raise InputError(f"--min-length must be at least 0, got {min_length}")
        self.action = action
        self.scoring = screener.scoring
        self.min_overlap = min_overlap
        self.min_length = min_length
        self.lengths = screener.pattern_lengths
        patterns = list(patterns)
        kinds = adapter_kinds(patterns, file_name, adapter_kind)
        check_min_overlap(min_overlap, screener.pattern_names, self.lengths)
        self.kind = np.array([ADAPTER_KINDS.index(kind) for kind in kinds], np.int64)
        #: strand indices (into the screen's strands) whose hits are trimmed
        self.trim_strands = np.array([screener.strands.index(sign) for sign in strands], np.int64)
        self._every_strand = len(strands) == len(screener.strands)
        fractions = pattern_fractions(patterns, screener.thresholds, self.scoring, min_score_fraction)
        self.tasks = self._tasks(screener, fractions)
        #: the GPU of a GPU run (its end-overlap kernel is loaded by warm_up_gpu), else None
        self.gpu_device = getattr(screener.engine, "device", None) if screener.engine.name == "gpu" else None
        self._decision = None
        self._decision_lock = threading.Lock()
        #: the run's threads (None: the usable cores); 1: no thread of its own (its kernels' numba
        #: threads: these in a GPU run, 1 in a CPU run, see _submit)
        self.threads = screener.threads
        self._worker: ThreadPoolExecutor | None = None
        #: end overlaps begun before the batch's screen (:meth:`begin`): id(batch) -> (batch, future)
        self._begun: dict[int, tuple] = {}

    @property
    def decision(self):
        """The bit-sliced first pass's view of the tasks (bpbc.end_overlap),
        made on first use (by the first batch's edit, or a GPU run's
        :meth:`warm_up_gpu`), not in the thread that sets the run up
        (importing bpbc.end_overlap and making it cost about 5 ms there,
        before the reading starts)."""
        with self._decision_lock:
            if self._decision is None:
                from .end_overlap import Decision

                self._decision = Decision(self.tasks, self.min_overlap, self.scoring)
            return self._decision

    def _tasks(self, screener, fractions: list[Fraction]) -> EndTasks:
        pattern, strand, end, masks, slack, thresholds = [], [], [], [], [], []
        ends = {_THREE: (_END3,), _FIVE: (_END5,), _ANYWHERE: (_END3, _END5)}
        for p, kind in enumerate(self.kind.tolist()):
            length = int(self.lengths[p])
            needed = overlap_thresholds(fractions[p], self.scoring.match, length)
            for s in self.trim_strands.tolist():
                oriented = screener.table.oriented(p * len(screener.strands) + s)
                for side in ends[kind]:
                    pattern.append(p)
                    strand.append(s)
                    end.append(side)
                    # the overlap leaves out at least the adapter's last (5': first) base
                    masks.append(oriented[:-1] if side == _END3 else oriented[::-1][:-1])
                    thresholds.append(needed)
                    slack.append(overlap_slack(needed, self.scoring))
        starts = np.zeros(len(masks) + 1, np.int64)
        np.cumsum([len(m) for m in masks], out=starts[1:])
        joined = np.concatenate(masks).astype(np.uint8) if masks else np.zeros(0, np.uint8)
        needed = np.zeros((len(masks), int(self.lengths.max()) + 1), np.int32)
        for k, row in enumerate(thresholds):
            needed[k, :len(row)] = row
        return EndTasks(np.array(pattern, np.int64), np.array(strand, np.int64), np.array(end, np.int64), joined,
                        starts, np.array(slack, np.int64), needed)

    def begin(self, chunk, batch) -> None:
        """Begin the end overlaps of a CPU batch of raw FASTQ in the
        trimmer's thread as soon as it is prepared, before its screen
        (:func:`bpbc.pipeline._screened`); :meth:`inputs` takes them. They
        need neither the screen nor the traceback: begun after them, the
        writer waited for them (2M adapter-free reads on 2 cores: about 45
        ms in all, over 0.55-0.6 s of run; the run 0.685 -> 0.645 s,
        medians of 10). Other batches (the GPU's, whose decision starts on
        the device after its screen; reads as codes; ``--threads 1``) are
        left to :meth:`inputs`."""
        from .chunks import RawFastqChunk

        if self.threads == 1 or not len(batch) or not isinstance(chunk, RawFastqChunk) \
                or not _cpu_planes(batch.prepared):
            return
        self._begun[id(batch)] = (batch, self._submit(chunk, np.asarray(batch.lengths, np.int64), None, None,
                                                      batch.prepared))

    def _submit(self, chunk, lengths: np.ndarray, codes: np.ndarray | None, first_pass, prepared):
        """The end overlaps of every read of a batch, begun in the trimmer's thread (a future)."""
        if self._worker is None:
            from .engines import limit_numba_threads

            # one numba thread where the screen runs on the CPU: it keeps every core busy, and the trimmer's
            # parallel kernels beside it cost more CPU than they saved
            kernel_threads = self.threads if self.gpu_device is not None else 1
            self._worker = ThreadPoolExecutor(1, "bpbc-trim", limit_numba_threads, (kernel_threads,))
        return self._worker.submit(self._every_overlap, chunk, lengths, codes, first_pass, prepared)

    def inputs(self, chunk, batch) -> EditInputs:
        """What :meth:`edit` needs of a screened batch besides its lengths: the
        codes of its reads (None for plain FASTQ: read from the chunk's
        bytes), where the GPU screened it the end-overlap decision begun
        there on the screen's copy of its reads (running beside the
        traceback), and the end overlaps of every read begun in the
        trimmer's own thread (unless ``--threads 1``). They need no
        alignments, so they run beside the batch's traceback and the writing
        of the batch before, not in the thread that writes, which limits a
        run where writing is slow, or a GPU run with adapters in most reads
        (400,000 reads on 2 cores, the fastest third of 20 runs: trim /
        screen run wall 1.24 -> 1.20 without adapters, 1.15 -> 1.14 with,
        against computing them in :meth:`edit`)."""
        from .chunks import RawFastqChunk

        begun = self._begun.pop(id(batch), None)
        if begun is not None and begun[0] is batch:
            return EditInputs(None, None, begun[1])
        codes = None if isinstance(chunk, RawFastqChunk) else batch.codes
        begin = getattr(batch.engine, "end_overlap_flags", None)
        first_pass = None
        if begin is not None and batch.prepared is not None and len(batch) and self.decision.usable:
            first_pass = begin(batch.prepared, batch.lengths, self.decision)
        if self.threads == 1:
            return EditInputs(codes, first_pass)
        # the CPU screen's bit planes of the batch: the decision reads its rows there (it holds them meanwhile)
        prepared = batch.prepared if first_pass is None and _cpu_planes(batch.prepared) else None
        return EditInputs(codes, first_pass, self._submit(chunk, np.asarray(batch.lengths, np.int64), codes,
                                                          first_pass, prepared))

    def _every_overlap(self, chunk, lengths: np.ndarray, codes: np.ndarray | None, first_pass,
                       prepared=None) -> tuple:
        """(read, task, cut) of every passing end overlap of a batch's reads,
        by read then task (:meth:`inputs`); the GPU's decision is fetched
        first: it holds the batch's device memory until then."""
        score, cut, _, rows = self._overlaps(chunk, lengths, codes, None,
                                             None if first_pass is None else first_pass.result(), prepared)
        return _found(score, cut, rows)

    def end_overlaps(self, chunk, lengths: np.ndarray, codes: np.ndarray | None, rows: np.ndarray | None = None,
                     flagged: np.ndarray | None = None, prepared=None):
        """(score, cut, overlap) of the reads ``rows`` (default all) of a
        chunk (rows as its batch's), for every end task; ``flagged``: the
        first pass's flags where it ran on the GPU; ``prepared``: the CPU
        screen's batch, whose bit planes the first pass reads (see
        :func:`end_overlaps`)."""
        return self._overlaps(chunk, lengths, codes, rows, flagged, prepared)[:3]

    def _overlaps(self, chunk, lengths: np.ndarray, codes: np.ndarray | None, rows: np.ndarray | None,
                  flagged: np.ndarray | None, prepared) -> tuple:
        """:meth:`end_overlaps`, and the rows of the second pass (:func:`_end_overlaps`)."""
        if codes is None:
            return _end_overlaps(chunk.data, chunk.seq_start, chunk.lengths, READ_CODE, self.tasks,
                                 self.min_overlap, self.scoring, rows, self.decision, "bits", flagged, prepared)
        codes = np.ascontiguousarray(codes, np.uint8)
        width = codes.shape[1] if codes.ndim == 2 else 0
        seq_start = np.arange(len(lengths), dtype=np.int64) * width
        return _end_overlaps(codes.reshape(-1), seq_start, lengths, _CODE_IDENTITY, self.tasks, self.min_overlap,
                             self.scoring, rows, self.decision, "bits", flagged, prepared)

    def _overlaps_needed(self, lengths: np.ndarray, read: np.ndarray, five: np.ndarray, cut: np.ndarray):
        """Trimming: the reads whose end overlaps can change the cut, given the
        hits' cuts. A partial adapter's cut lies within ``reach`` bases of its
        end, so behind a 3' cut further from the end (before a 5' cut further
        from the start) it changes nothing, not even which pattern is credited
        (so the trimmer's thread, which runs before the hits are traced,
        computes every read's)."""
        needed = np.zeros(len(lengths), bool)
        for side in (_END3, _END5):
            ends = self.tasks.end == side
            if not ends.any():
                continue
            reach = int((np.diff(self.tasks.starts) + self.tasks.slack)[ends].max())
            if side == _END3:
                first = lengths.copy()
                np.minimum.at(first, read[~five], cut[~five])
                needed |= first >= lengths - reach
            else:
                last = np.zeros(len(lengths), np.int64)
                np.maximum.at(last, read[five], cut[five])
                needed |= last <= reach
        return np.flatnonzero(needed)

    def edit(self, chunk, lengths: np.ndarray, inputs: EditInputs, alignments, mates: int) -> ChunkEdit:
        """The edits of a chunk (its reads' ``lengths`` and :meth:`inputs`):
        its alignments (the screen's hits, traced) and the end overlaps of its
        reads, combined (docs/trimming.md)."""
        # first: the GPU's decision holds the batch's device memory until it is fetched
        flagged = None if inputs.first_pass is None or inputs.overlaps is not None else inputs.first_pass.result()
        lengths = np.asarray(lengths, np.int64)
        # the hits on the trimmed strands: the adapter's span, extended to the pattern's ends
        # (every hit where every screened strand is trimmed: views, not copies of the columns)
        use = slice(None) if self._every_strand else np.isin(alignments.strand, self.trim_strands)
        read = alignments.read_index[use]
        pattern = alignments.pattern_index[use]
        start, end, five = _adapter_spans(read, pattern, alignments.strand[use], alignments.read_start[use],
                                          alignments.read_end[use], alignments.pattern_start[use],
                                          alignments.pattern_end[use], lengths, self.lengths, self.kind)
        # the end overlaps found
        if inputs.overlaps is not None:  # every read's: those the hits leave out change nothing (below)
            found_read, task, found_cut = inputs.overlaps.result()
        else:  # trimming: of the reads where they can matter
            rows = None if self.action == "mask" else self._overlaps_needed(lengths, read, five, np.where(
                five, end, start))
            score, cut, _, scored = self._overlaps(chunk, lengths, inputs.codes, rows, flagged, None)
            found_read, task, found_cut = _found(score, cut, scored)
        found_pattern = self.tasks.pattern[task]
        found_five = self.tasks.end[task] == _END5
        read = np.concatenate([read, found_read])
        pattern = np.concatenate([pattern, found_pattern])
        five = np.concatenate([five, found_five])
        # a 3' adapter is cut from its start, a 5' one up to its end
        start = np.concatenate([start, np.where(found_five, 0, found_cut)])
        end = np.concatenate([end, np.where(found_five, found_cut, lengths[found_read])])
        if self.action == "trim":
            return self._trimmed(lengths, read, pattern, five, start, end, mates)
        return self._masked(lengths, read, pattern, start, end, mates)

    def submit_edit(self, chunk, lengths: np.ndarray, inputs: EditInputs, alignments, mates: int,
                    passing_reads: np.ndarray, pair_filter: str, best: np.ndarray | None) -> Future:
        """:meth:`edit_chunk` begun in the trimmer's thread, after the batch's
        end overlaps (inline with ``--threads 1``), beside the traceback of
        the next batch and the writing of the batch before: the threads that
        write take the result and only write."""
        if self._worker is None:
            done: Future = Future()
            done.set_result(self.edit_chunk(chunk, lengths, inputs, alignments, mates, passing_reads, pair_filter,
                                            best))
            return done
        return self._worker.submit(self.edit_chunk, chunk, lengths, inputs, alignments, mates, passing_reads,
                                   pair_filter, best)

    def edit_chunk(self, chunk, lengths: np.ndarray, inputs: EditInputs, alignments, mates: int,
                   passing_reads: np.ndarray, pair_filter: str, best: np.ndarray | None) -> tuple:
        """(edit, the chunk edited, passing units, best patterns) of a
        screened batch: :meth:`edit`, and the units that pass by the screen
        or with a read edited (a partial adapter), judged by the pair
        filter; demultiplexing's ``best`` (else None) filled in for them."""
        edit = self.edit(chunk, lengths, inputs, alignments, mates)
        return (edit, edit.chunk(chunk), edit.passing(passing_reads, mates, pair_filter),
                edit.best_patterns(best, mates))

    def _trimmed(self, lengths, read, pattern, five, start, end, mates) -> ChunkEdit:
        """Keep what lies after every 5' adapter and before every 3' one."""
        keep_start, keep_end, decided, edited, pattern_reads, pattern_bases, bases = _trim_cuts(
            lengths, read, pattern, five, np.where(five, end, start), len(self.lengths))
        no_spans = np.zeros(0, np.int64)
        kept = self._kept(None if self.min_length is None else keep_end - keep_start, len(lengths), mates)
        return ChunkEdit(keep_start, keep_end, np.zeros(len(lengths) + 1, np.int64), no_spans, no_spans, edited,
                         decided, kept, pattern_reads, pattern_bases, int(bases))

    def _masked(self, lengths, read, pattern, start, end, mates) -> ChunkEdit:
        """Every adapter's span set to N."""
        span_first, span_start, span_end, decided, pattern_reads, pattern_bases, bases = _mask_spans(
            len(lengths), read, pattern, start, end, len(self.lengths))
        return ChunkEdit(np.zeros(len(lengths), np.int64), lengths, span_first, span_start, span_end,
                         np.diff(span_first) > 0, decided, self._kept(lengths, len(lengths), mates), pattern_reads,
                         pattern_bases, int(bases))

    def warm_up_gpu(self) -> None:
        """A GPU run's end-overlap kernel loaded (NVRTC-compiled where CuPy's
        cache is cold: seconds, which the first batch would wait for in the
        thread that traces the hits), beside the device's own set-up."""
        if self.gpu_device is not None and self.decision.usable:
            from .end_overlap import warm_up_gpu

            warm_up_gpu(self.decision, self.gpu_device)

    def _kept(self, lengths: np.ndarray | None, reads: int, mates: int) -> np.ndarray:
        """Per unit of ``reads`` reads: all its reads' ``lengths`` (after the
        edits; None without --min-length) at least --min-length."""
        if not self.min_length:
            return np.ones(reads // mates, bool)
        assert lengths is not None
        return np.asarray((lengths >= self.min_length).reshape(-1, mates).all(axis=1))


def _cpu_planes(prepared) -> bool:
    """Whether ``prepared`` (a batch's prepared form) is the CPU screen's
    bit planes (bpbc.cpu_engine.PreparedReads), which the bit-sliced
    decision can read instead of the reads' bytes."""
    if prepared is None:
        return False
    from .cpu_engine import PreparedReads

    return isinstance(prepared, PreparedReads)


def check_min_overlap(min_overlap: int, names, lengths) -> None:
    """--min-overlap must be at least 1 and at most every pattern's length."""
    if min_overlap < 1:
        raise InputError(f"--min-overlap must be at least 1, got {min_overlap}")
    for name, length in zip(names, np.asarray(lengths).tolist()):
        if min_overlap > length:
            raise InputError(f"--min-overlap {min_overlap} is above the length of pattern {name!r} ({length} bp)")


# ----------------------------------------------------------------- the run


def check_settings(settings, trimmed_output: bool) -> None:
    """Reject trimming options that make no sense (InputError); ``settings``
    is a :class:`bpbc.pipeline.ScreenSettings`."""
    if settings.action not in ACTIONS:
        raise InputError(f"--action must be one of {', '.join(ACTIONS)}, got {settings.action!r}")
    if settings.min_overlap < 1:
        raise InputError(f"--min-overlap must be at least 1, got {settings.min_overlap}")
    if settings.action == "none":
        for given, option in ((trimmed_output, "--trimmed"), (settings.min_length is not None, "--min-length")):
            if given:
                raise InputError(f"{option} needs --action trim or mask")


def trimmer_for(settings, screener, patterns, file_name: str) -> Trimmer | None:
    """The run's Trimmer, or None for ``--action none``. A GPU run's
    end-overlap kernel starts loading now, in the background. The host
    kernels (about 25 ms of loading from numba's cache) load where the first
    batch first needs them (the end overlaps' in the trimmer's thread, the
    edits' in the writing thread), not at the start: loaded in a thread of
    their own beside the first batches, they took numba's lock and the GIL
    from the threads reading, encoding and screening them, whose own
    kernels load then (400,000 adapter-free reads on 2 cores, together with
    the late import of :func:`_pass_kernel`: trim / screen run wall
    1.31 -> 1.16, bench/results/trimming_startup_ab_cpu.txt)."""
    if settings.action == "none":
        return None
    trimmer = Trimmer(settings.action, screener, patterns, file_name, settings.adapter_kind, settings.min_overlap,
                      settings.trim_strand, settings.min_score_fraction, settings.min_length)
    if trimmer.gpu_device is not None:
        threading.Thread(target=trimmer.warm_up_gpu, name="bpbc-trim-gpu-warm-up", daemon=True).start()
    return trimmer
