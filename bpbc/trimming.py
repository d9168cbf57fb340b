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
those only cells on a band, so the kernel computes that part, 16 reads per
vector; the result is the full DP's, which tests/bpbc/test_trimming.py checks
against a plain-Python DP and against parasail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

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
_NEG = -(1 << 29)
_N = 78  # 'N'
_NEWLINE, _PLUS = 10, 43
#: read code -> itself (0..3, INVALID): the table for reads given as codes
_CODE_IDENTITY = np.full(256, INVALID, np.uint8)
_CODE_IDENTITY[:4] = np.arange(4, dtype=np.uint8)


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
def _overlap_lanes(bits, start_row, pattern, band, match, mismatch, gap_open, gap_extend, last_h, last_start):
    """The end-overlap DP (module docstring) for 16 reads at once: ``bits``
    (W x 16) the window's read bases as IUPAC bits (0 for N), lane q's read
    starting at row ``start_row[q]`` (rows before it do not exist);
    ``pattern`` the masks of P[0:m']; cells (i, j) with j > i + band are not
    computed (no passing overlap goes through them). Fills ``last_h`` and
    ``last_start`` ((m' + 1) x 16): H[W][j] and the row its alignment starts at."""
    rows = bits.shape[0] // _LANES
    m = pattern.shape[0]
    K = _LANES
    h_column = np.full((m + 1) * K, _NEG, np.int32)
    e_column = np.full((m + 1) * K, _NEG, np.int32)
    start_h = np.zeros((m + 1) * K, np.int32)
    start_e = np.zeros((m + 1) * K, np.int32)
    first_rows = vload16(start_row, 0)
    open_cost = vsplat16(gap_open + gap_extend)
    extend_cost = vsplat16(gap_extend)
    match_score = vsplat16(match)
    mismatch_score = vsplat16(-mismatch)
    zero = vsplat16(0)
    negative = vsplat16(_NEG)
    for i in range(rows + 1):
        row = vsplat16(i)
        read_bits = vload16(bits, (i - 1) * K) if i > 0 else zero
        # column 0: H[i][0] = 0 where the read has begun, its alignment starting here
        h_left = vselect16(row >= first_rows, zero, negative)
        start_left = row
        if i > 0:
            h_diag = vselect16(row > first_rows, zero, negative)  # H[i-1][0]
        else:
            h_diag = negative
        start_diag = vsplat16(i - 1)
        f = negative
        start_f = zero
        for j in range(1, min(m, i + band) + 1):
            s = vselect16((read_bits & vsplat16(pattern[j - 1])) != zero, match_score, mismatch_score)
            h_up = vload16(h_column, j * K)
            start_up = vload16(start_h, j * K)
            e_open = h_up - open_cost
            e_extend = vload16(e_column, j * K) - extend_cost
            e = vmax16(e_open, e_extend)
            start_e_now = vselect16(e_open >= e_extend, start_up, vload16(start_e, j * K))
            f_open = h_left - open_cost
            f_extend = f - extend_cost
            f = vmax16(f_open, f_extend)
            start_f = vselect16(f_open >= f_extend, start_left, start_f)
            diag = h_diag + s
            gap = vmax16(e, f)
            start_gap = vselect16(e >= f, start_e_now, start_f)
            h = vmax16(diag, gap)
            start = vselect16(diag >= gap, start_diag, start_gap)
            vstore16(h_column, j * K, h)
            vstore16(e_column, j * K, e)
            vstore16(start_h, j * K, start)
            vstore16(start_e, j * K, start_e_now)
            h_diag = h_up
            start_diag = start_up
            h_left = h
            start_left = start
    for j in range(1, m + 1):
        vstore16(last_h, j * K, vload16(h_column, j * K))
        vstore16(last_start, j * K, vload16(start_h, j * K))


def _end_overlaps_body(buf, seq_start, lengths, table, task_masks, task_starts, task_end, task_slack,
                       task_thresholds, min_overlap, match, mismatch, gap_open, gap_extend, score, cut, overlap):
    """Every (read, task) end overlap, in parallel over (16 reads, task)
    blocks: read r's bases are table[buf[seq_start[r]:][:lengths[r]]]; task k
    aligns masks task_masks[task_starts[k]:task_starts[k + 1]] (P without its
    last base; reversed for a 5' end) to the read's end (task_end[k] _END3)
    or start (_END5). Fills score[r, k] (0: none), cut[r, k] (3' end: where
    the adapter starts; 5' end: where it ends) and overlap[r, k]."""
    reads = lengths.shape[0]
    tasks = task_starts.shape[0] - 1
    blocks = (reads + _LANES - 1) // _LANES
    K = _LANES
    for job in prange(blocks * tasks):
        k = job % tasks
        first = (job // tasks) * K
        count = min(K, reads - first)
        pattern = task_masks[task_starts[k]:task_starts[k + 1]]
        m = pattern.shape[0]  # the longest overlap: the pattern's length - 1
        if m < min_overlap:
            continue
        reach = m + task_slack[k]
        longest = 0
        for q in range(count):
            longest = max(longest, lengths[first + q])
        width = min(longest, reach)
        bits = np.zeros(max(width, 1) * K, np.int32)
        start_row = np.full(K, width + 1, np.int32)  # lanes without a read never start
        reverse = task_end[k] == _END5
        for q in range(count):
            r = first + q
            n = lengths[r]
            pad = max(0, width - n)
            start_row[q] = pad
            base = seq_start[r]
            for i in range(pad, width):
                position = width - 1 - i if reverse else n - width + i
                code = table[buf[base + position]]
                bits[i * K + q] = (1 << code) if code < 4 else 0
        last_h = np.empty((m + 1) * K, np.int32)
        last_start = np.empty((m + 1) * K, np.int32)
        _overlap_lanes(bits[:width * K], start_row, pattern, reach - width, match, mismatch, gap_open, gap_extend,
                       last_h, last_start)
        thresholds = task_thresholds[k]
        for q in range(count):
            r = first + q
            best = 0
            best_start = 0
            best_length = 0
            for length in range(min_overlap, m + 1):
                value = last_h[length * K + q]
                begin = last_start[length * K + q]
                if value >= thresholds[length] and (value > best or (value == best and begin < best_start)):
                    best, best_start, best_length = value, begin, length
            if best > 0:
                score[r, k] = best
                cut[r, k] = width - best_start if reverse else lengths[r] - width + best_start
                overlap[r, k] = best_length


_end_overlaps_parallel = njit(parallel=True, cache=True, nogil=True)(_end_overlaps_body)
_end_overlaps_serial = njit(cache=True, nogil=True)(_end_overlaps_body)
_PARALLEL_FROM = 256  #: reads from which the parallel kernel is used


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


def end_overlaps(buf, seq_start, lengths, table, tasks: EndTasks, min_overlap: int, scoring: Scoring):
    """(score, cut, overlap), each int32 (reads, tasks): every read's best
    passing end overlap per task (score 0: none). The reads: bytes
    ``buf[seq_start[r]:][:lengths[r]]`` through ``table`` (READ_CODE for
    sequence text, :data:`_CODE_IDENTITY` for codes)."""
    reads = len(lengths)
    shape = (reads, len(tasks))
    score, cut, overlap = np.zeros(shape, np.int32), np.zeros(shape, np.int32), np.zeros(shape, np.int32)
    if reads and len(tasks):
        kernel = _end_overlaps_parallel if reads >= _PARALLEL_FROM else _end_overlaps_serial
        kernel(np.asarray(buf).view(np.uint8).reshape(-1), np.ascontiguousarray(seq_start, np.int64),
               np.ascontiguousarray(lengths, np.int64), table, tasks.masks, tasks.starts, tasks.end, tasks.slack,
               tasks.thresholds, min_overlap, scoring.match, scoring.mismatch, scoring.gap_open, scoring.gap_extend,
               score, cut, overlap)
    return score, cut, overlap


# ----------------------------------------------------------------- edited records


@njit(cache=True, nogil=True, parallel=True)
def _edited_fastq(buf, rec_start, seq_start, lengths, keep_start, keep_end, span_first, span_start, span_end):
    """Plain FASTQ records rebuilt: record r keeps its header and bases
    keep_start[r]:keep_end[r] of its sequence and qualities, with the spans
    span_first[r]..span_first[r + 1] - 1 of its sequence set to N. Returns
    (buffer, rec_start, rec_end, seq_start, lengths) of the new records."""
    n = rec_start.shape[0]
    sizes = np.empty(n, np.int64)
    for r in prange(n):
        sizes[r] = seq_start[r] - rec_start[r] + 2 * (keep_end[r] - keep_start[r]) + 4
    ends = np.cumsum(sizes)
    out = np.empty(ends[n - 1] if n else 0, np.uint8)
    new_seq_start = np.empty(n, np.int64)
    for r in prange(n):
        at = ends[r] - sizes[r]
        header = buf[rec_start[r]:seq_start[r]]
        target = out[at:at + header.shape[0]]
        for t in range(header.shape[0]):
            target[t] = header[t]
        s = at + header.shape[0]
        new_seq_start[r] = s
        kept = keep_end[r] - keep_start[r]
        source = buf[seq_start[r] + keep_start[r]:seq_start[r] + keep_end[r]]
        target = out[s:s + kept]
        for t in range(kept):
            target[t] = source[t]
        for span in range(span_first[r], span_first[r + 1]):
            for t in range(max(span_start[span], keep_start[r]), min(span_end[span], keep_end[r])):
                out[s + t - keep_start[r]] = _N
        out[s + kept] = _NEWLINE
        out[s + kept + 1] = _PLUS
        out[s + kept + 2] = _NEWLINE
        quality = seq_start[r] + lengths[r] + 3
        source = buf[quality + keep_start[r]:quality + keep_end[r]]
        target = out[s + kept + 3:s + 2 * kept + 3]
        for t in range(kept):
            target[t] = source[t]
        out[s + 2 * kept + 3] = _NEWLINE
    return out, ends - sizes, ends, new_seq_start, keep_end - keep_start


@njit(cache=True, nogil=True)
def _union_lengths(group, start, end):
    """Per span (sorted by group, then start): the bases it adds to its
    group's union of spans (overlapping spans counted once)."""
    added = np.zeros(group.shape[0], np.int64)
    reach = 0
    for t in range(group.shape[0]):
        if t == 0 or group[t] != group[t - 1]:
            reach = start[t]
        if end[t] > reach:
            added[t] = end[t] - max(start[t], reach)
            reach = end[t]
    return added


def _edited_records(chunk, keep_start: np.ndarray, keep_end: np.ndarray, span_first: np.ndarray,
                    span_start: np.ndarray, span_end: np.ndarray):
    """The chunk (raw FASTQ or dnaio records) with its reads trimmed to
    keep_start:keep_end and the spans set to N; a record chunk's untouched
    records are the same objects."""
    from .chunks import RawFastqChunk, RecordChunk

    if isinstance(chunk, RawFastqChunk):
        if not len(chunk):
            return chunk
        data = np.frombuffer(chunk.data, np.uint8) if not isinstance(chunk.data, np.ndarray) else chunk.data
        return RawFastqChunk(*_edited_fastq(data, chunk.rec_start, chunk.seq_start, chunk.lengths, keep_start,
                                            keep_end, span_first, span_start, span_end))
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

    def mate(rows: np.ndarray, part):
        firsts = span_first[rows]
        counts = span_first[rows + 1] - firsts
        picked = np.repeat(firsts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        first = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(counts, out=first[1:])
        return _edited_records(part, keep_start[rows], keep_end[rows], first, span_start[picked], span_end[picked])

    pairs = np.arange(len(chunk), dtype=np.int64)
    if chunk.whole is not None:  # interleaved: edit the file's chunk, then split it again
        whole = _edited_records(chunk.whole, keep_start, keep_end, span_first, span_start, span_end)
        return PairedChunk(whole.subset(2 * pairs), whole.subset(2 * pairs + 1), chunk.files, whole=whole)
    return PairedChunk(mate(2 * pairs, chunk.first), mate(2 * pairs + 1, chunk.second), chunk.files)


# ----------------------------------------------------------------- per chunk


@dataclass
class TrimCounts:
    """Running totals of a run's edits (the summary's figures)."""

    patterns: int
    #: per pattern: reads it trimmed (masked), and their bases removed (masked)
    reads: np.ndarray = field(init=False)
    bases: np.ndarray = field(init=False)
    #: reads with any base trimmed or masked, and those bases
    reads_edited: int = 0
    bases_edited: int = 0
    #: units (reads, or pairs) left out for --min-length
    dropped: int = 0

    def __post_init__(self):
        self.reads = np.zeros(self.patterns, np.int64)
        self.bases = np.zeros(self.patterns, np.int64)


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
        reads = (passing_reads | self.edited).reshape(-1, mates)
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

    def count(self, totals: TrimCounts) -> None:
        totals.reads += self.pattern_reads
        totals.bases += self.pattern_bases
        totals.reads_edited += int(self.edited.sum())
        totals.bases_edited += self.bases
        totals.dropped += int((~self.kept).sum())


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
        fractions = pattern_fractions(patterns, screener.thresholds, self.scoring, min_score_fraction)
        self.tasks = self._tasks(screener, fractions)

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

    def end_overlaps(self, chunk, batch):
        """(score, cut, overlap) of every read of a chunk (rows as the batch's) and end task."""
        from .chunks import RawFastqChunk

        if isinstance(chunk, RawFastqChunk):
            return end_overlaps(chunk.data, chunk.seq_start, chunk.lengths, READ_CODE, self.tasks,
                                self.min_overlap, self.scoring)
        codes = np.ascontiguousarray(batch.codes, np.uint8)
        width = codes.shape[1] if codes.ndim == 2 else 0
        seq_start = np.arange(len(batch), dtype=np.int64) * width
        return end_overlaps(codes.reshape(-1), seq_start, batch.lengths, _CODE_IDENTITY, self.tasks,
                            self.min_overlap, self.scoring)

    def edit(self, chunk, batch, alignments, mates: int) -> ChunkEdit:
        """The edits of a chunk: its alignments (the screen's hits, traced)
        and the end overlaps of its reads, combined (docs/trimming.md)."""
        lengths = np.asarray(batch.lengths, np.int64)
        score, cut, _ = self.end_overlaps(chunk, batch)
        # the hits on the trimmed strands: the adapter's span, extended to the pattern's ends
        use = np.isin(alignments.strand, self.trim_strands)
        read = alignments.read_index[use]
        pattern = alignments.pattern_index[use]
        m = self.lengths[pattern]
        minus = np.asarray(alignments.strand[use]) == 1
        left = np.where(minus, m - alignments.pattern_end[use], alignments.pattern_start[use])
        right = np.where(minus, alignments.pattern_start[use], m - alignments.pattern_end[use])
        start = np.maximum(0, alignments.read_start[use] - left)
        end = np.minimum(lengths[read], alignments.read_end[use] + right)
        kind = self.kind[pattern]
        five = (kind == _FIVE) | ((kind == _ANYWHERE) & (start == 0))
        # the end overlaps found
        found_read, task = np.nonzero(score > 0)
        found_cut = cut[found_read, task].astype(np.int64)
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

    def _trimmed(self, lengths, read, pattern, five, start, end, mates) -> ChunkEdit:
        """Keep what lies after every 5' adapter and before every 3' one."""
        reads, patterns = len(lengths), len(self.lengths)
        cut = np.where(five, end, start)
        keep_start = np.zeros(reads, np.int64)
        np.maximum.at(keep_start, read[five], cut[five])
        first_three = lengths.copy()
        np.minimum.at(first_three, read[~five], cut[~five])
        keep_end = np.maximum(keep_start, first_three)
        decided = np.full(reads, -1, np.int64)
        credited = []
        pattern_bases = np.zeros(patterns, np.int64)
        # each side's bases go to the pattern whose cut decided it (the first of equal ones)
        for side, decisive, removed in ((five, keep_start, keep_start), (~five, first_three, lengths - keep_end)):
            chosen = side & (cut == decisive[read])
            rows, which = _first_pattern_per_read(read[chosen], pattern[chosen])
            bases = removed[rows]
            rows, which, bases = rows[bases > 0], which[bases > 0], bases[bases > 0]
            np.add.at(pattern_bases, which, bases)
            decided[rows] = np.where(decided[rows] < 0, which, decided[rows])
            credited.append(rows * patterns + which)
        pattern_reads = np.bincount(np.unique(np.concatenate(credited)) % patterns, minlength=patterns)
        edited = (keep_start > 0) | (keep_end < lengths)
        new_lengths = keep_end - keep_start
        no_spans = np.zeros(0, np.int64)
        return ChunkEdit(keep_start, keep_end, np.zeros(reads + 1, np.int64), no_spans, no_spans, edited, decided,
                         self._kept(new_lengths, mates), pattern_reads.astype(np.int64), pattern_bases,
                         int(lengths.sum() - new_lengths.sum()))

    def _masked(self, lengths, read, pattern, start, end, mates) -> ChunkEdit:
        reads, patterns = len(lengths), len(self.lengths)
        order = np.lexsort((start, pattern, read))
        read, pattern, start, end = read[order], pattern[order], start[order], end[order]
        group = read * patterns + pattern
        added = _union_lengths(group, start, end)
        pattern_bases = np.bincount(pattern, weights=added, minlength=patterns).astype(np.int64)
        first_of_group = np.r_[True, group[1:] != group[:-1]] if len(group) else np.zeros(0, bool)
        pattern_reads = np.bincount(pattern[first_of_group], minlength=patterns).astype(np.int64)
        span_first = np.zeros(reads + 1, np.int64)
        np.cumsum(np.bincount(read, minlength=reads), out=span_first[1:])
        edited = np.diff(span_first) > 0
        decided = np.full(reads, -1, np.int64)
        decided[read[::-1]] = pattern[::-1]  # each read's first pattern
        by_read = np.lexsort((start, read))
        bases = int(_union_lengths(read[by_read], start[by_read], end[by_read]).sum())
        return ChunkEdit(np.zeros(reads, np.int64), lengths.copy(), span_first, start, end, edited, decided,
                         self._kept(lengths, mates), pattern_reads, pattern_bases, bases)

    def _kept(self, lengths: np.ndarray, mates: int) -> np.ndarray:
        if not self.min_length:
            return np.ones(len(lengths) // mates, bool)
        return np.asarray((lengths >= self.min_length).reshape(-1, mates).all(axis=1))


def check_min_overlap(min_overlap: int, names, lengths) -> None:
    """--min-overlap must be at least 1 and at most every pattern's length."""
    if min_overlap < 1:
        raise InputError(f"--min-overlap must be at least 1, got {min_overlap}")
    for name, length in zip(names, np.asarray(lengths).tolist()):
        if min_overlap > length:
            raise InputError(f"--min-overlap {min_overlap} is above the length of pattern {name!r} ({length} bp)")


def _first_pattern_per_read(read: np.ndarray, pattern: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct reads, for each the lowest of its patterns)."""
    order = np.lexsort((pattern, read))
    read, pattern = read[order], pattern[order]
    first = np.r_[True, read[1:] != read[:-1]] if len(read) else np.zeros(0, bool)
    return read[first], pattern[first]


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
    """The run's Trimmer, or None for ``--action none``."""
    if settings.action == "none":
        return None
    return Trimmer(settings.action, screener, patterns, file_name, settings.adapter_kind, settings.min_overlap,
                   settings.trim_strand, settings.min_score_fraction, settings.min_length)


def fill_summary(summary, totals: TrimCounts) -> None:
    """Put a run's trimming figures into its :class:`bpbc.pipeline.Summary` (patterns filled already)."""
    summary.reads_trimmed = totals.reads_edited
    summary.bases_trimmed = totals.bases_edited
    summary.too_short = totals.dropped
    for pattern, reads, bases in zip(summary.patterns, totals.reads.tolist(), totals.bases.tolist()):
        pattern.trimmed_reads = reads
        pattern.trimmed_bases = bases
