"""Plain FASTQ scanned on every core: :func:`scan_fastq_parallel`.

The same records, end and verdict as :func:`bpbc.chunks._scan_fastq_exact`,
the byte-by-byte definition of :func:`bpbc.chunks.scan_fastq`, with the
span cut into segments handled in parallel:

1. per segment, its '\\n' count and the OR of its bytes (one vectorised pass);
2. a prefix sum gives each segment the index of its first newline, so it
   knows exactly where the first record that starts in it begins (after a
   newline whose index is 3 mod 4) and which record that is; from there it
   reads its records as ``scan_fastq`` does (the header, then the bytes at
   the expected line ends), writing them under their own indices;
3. in order, each segment's records are taken when its walk ends where the
   next segment's first record begins, as that record: then no newline but
   the four of each record lies between, so the lines are the true ones; and
   when they lie before the first byte >= 128. The last segment taken (or
   one that does not link up) is checked by counting its newlines, and
   walked again line by line if a guessed line end misled it.

What comes after the records taken (a record that is not plain, shifting
the line phase of all that follows, or one that is not complete) is left
to the definition: it scans on from there (finding nothing more unless a
segment's records could not be checked as a whole: then it reads that
segment's records again) and decides as always whether the next record is
damaged (irregular) or merely incomplete.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .chunks import _AT, _NEWLINE, _PLUS, _RETURN, _line_end, _newlines_and_bits, _scan_fastq_exact, scan_fastq

#: bytes per segment, the unit of parallel work
SEGMENT = 256 << 10
#: spans shorter than this are scanned by :func:`bpbc.chunks.scan_fastq` (threads do not pay:
#: on 2 cores the parallel scan is 1.5x faster at 1 MiB, 0.65x at 256 KiB)
MIN_SPAN = 1 << 20


@njit(cache=True, nogil=True, inline="always")
def _first_record(buf, pos, start, stop, line):
    """(start, index) of the first record that starts in ``buf[start:stop]``
    (start: stop when none does), ``line`` the index of the span's first
    newline at or after ``start``. Exact: the line phases are counted."""
    if start == pos:
        return pos, 0
    if line % 4 == 0 and buf[start - 1] == _NEWLINE:  # that newline ends line 4k - 1
        return start, line // 4
    p = start
    while p < stop:
        if buf[p] == _NEWLINE:
            if line % 4 == 3:
                return p + 1, (line + 1) // 4
            line += 1
        p += 1
    return stop, 0


@njit(cache=True, nogil=True)
def _walk_records(buf, p, k, stop, end, records, rec_start, seq_start, seq_len, guessing):
    """The records from ``p`` (record ``k``) on that start before ``stop``,
    at most up to record ``records``, read as :func:`bpbc.chunks._scan_fastq_fast`
    reads them: the header, then the bytes at the expected line ends, a
    sequence line first tried at the previous one's length when
    ``guessing``. Returns (index after the last, position after it, ok): ok
    False when a record is not plain or not complete, as far as this can
    see. A newline inside a sequence or quality line, or a byte >= 128, is
    not seen here; nor is a guess that jumped over a sequence line's end."""
    guess = -1
    while k < records and p < stop:
        if buf[p] != _AT:
            return k, p, False
        header_end, _ = _line_end(buf, p, end)
        if header_end >= end:
            return k, p, False
        s = header_end + 1
        i = s + guess
        q_end = i + 3 + guess
        if (guess < 0 or q_end >= end or buf[i] != _NEWLINE or buf[i + 1] != _PLUS or buf[i + 2] != _NEWLINE
                or buf[q_end] != _NEWLINE):
            i, _ = _line_end(buf, s, end)
            if i + 2 >= end:
                return k, p, False
        length = i - s
        q_end = i + 3 + length
        if q_end >= end:
            return k, p, False
        if (buf[header_end - 1] == _RETURN or (length > 0 and (buf[i - 1] == _RETURN or buf[q_end - 1] == _RETURN))
                or buf[i + 1] != _PLUS or buf[i + 2] != _NEWLINE or buf[q_end] != _NEWLINE):
            return k, p, False
        rec_start[k] = p
        seq_start[k] = s
        seq_len[k] = length
        if guessing:
            guess = length
        k += 1
        p = q_end + 1
    return k, p, True


@njit(cache=True, nogil=True, parallel=True)
def _plain_records(buf, pos, end, records, rec_start, seq_start, seq_len, segment):
    """(n, position after them): plain records at the start of
    ``buf[pos:end]``, at most ``records``, found in parallel. The record
    after them, if any within ``records``, need not be plain or complete:
    the definition goes on from there (it finds nothing more unless a
    segment's records could not be verified: then it scans from that
    segment on). Entries past n of the arrays may be overwritten."""
    span = end - pos
    if records <= 0 or span <= 0:
        return 0, pos
    segments = (span + segment - 1) // segment
    counts = np.empty(segments, np.int64)
    bits = np.empty(segments, np.uint8)
    for g in prange(segments):
        a = pos + g * segment
        counts[g], bits[g] = _newlines_and_bits(buf, a, min(a + segment, end))
    first_line = np.empty(segments, np.int64)
    total = 0
    first_high = end  # the first byte >= 128: every record before it is ASCII
    for g in range(segments):
        first_line[g] = total
        total += counts[g]
        if bits[g] & 128 and first_high == end:
            p = pos + g * segment
            while buf[p] < 128:
                p += 1
            first_high = p
    records = min(records, total // 4)  # complete or not, no more records can be plain
    if records == 0:
        return 0, pos
    # each segment walks the records that start in it, from the first one its line count places
    starts = np.empty(segments, np.int64)
    first = np.empty(segments, np.int64)
    stops = np.empty(segments, np.int64)
    after = np.empty(segments, np.int64)
    ok = np.empty(segments, np.bool_)
    for g in prange(segments):
        a = pos + g * segment
        b = min(a + segment, end)
        p, k = _first_record(buf, pos, a, b, first_line[g])
        starts[g] = p
        first[g] = k
        if p < b and k < records:
            after[g], stops[g], ok[g] = _walk_records(buf, p, k, b, end, records, rec_start, seq_start, seq_len,
                                                       True)
    # in order: a segment's records are the true ones when its walk ends where
    # the next segment's first record starts, as that record (no newline but
    # the four of each record lies between), or else when its newlines,
    # counted, are four per record (walked again without guesses if not)
    n, position = 0, pos
    g = 0
    while True:
        h = g + 1
        while h < segments and (starts[h] >= min(pos + (h + 1) * segment, end) or first[h] >= records):
            h += 1
        if not (ok[g] and h < segments and stops[g] == starts[h] and after[g] == first[h]):
            newlines, _ = _newlines_and_bits(buf, starts[g], stops[g])
            if newlines != 4 * (after[g] - first[g]):
                after[g], stops[g], ok[g] = _walk_records(buf, starts[g], first[g], min(pos + (g + 1) * segment, end),
                                                          end, records, rec_start, seq_start, seq_len, False)
                newlines, _ = _newlines_and_bits(buf, starts[g], stops[g])
                if newlines != 4 * (after[g] - first[g]):
                    return n, position
        if stops[g] > first_high:
            return n, position
        n, position = after[g], stops[g]
        if not (ok[g] and h < segments and stops[g] == starts[h] and after[g] == first[h]):
            return n, position
        g = h


@njit(cache=True, nogil=True)
def _scan_parallel(buf, pos, end, max_records, rec_start, seq_start, seq_len, segment):
    """:func:`scan_fastq_parallel` at any span: the plain run in parallel,
    the record after it decided by the definition."""
    records = min(max_records, rec_start.shape[0], seq_start.shape[0], seq_len.shape[0])
    n, pos = _plain_records(buf, pos, end, records, rec_start, seq_start, seq_len, segment)
    if n >= records:
        return n, pos, False
    more, pos, irregular = _scan_fastq_exact(buf, pos, end, records - n, rec_start[n:], seq_start[n:], seq_len[n:])
    return n + more, pos, irregular


def scan_fastq_parallel(buf: np.ndarray, pos: int, end: int, max_records: int, rec_start: np.ndarray,
                        seq_start: np.ndarray, seq_len: np.ndarray, segment: int = SEGMENT,
                        min_span: int = MIN_SPAN) -> tuple[int, int, bool]:
    """:func:`bpbc.chunks.scan_fastq` on numba's threads (as many as
    ``numba.set_num_threads`` allows the calling thread): the same (records,
    position after the last one, irregular) and the same ``rec_start``,
    ``seq_start``, ``seq_len`` up to the count, for every input (entries past
    it may be overwritten). At most ``max_records`` and the arrays' size.
    A span shorter than ``min_span`` bytes, or a single thread, is scanned by
    :func:`bpbc.chunks.scan_fastq`; ``segment``: bytes per parallel task.
    (Python, not numba: numba's thread count read in numba code would keep
    the kernel out of the cache.)"""
    records = min(max_records, len(rec_start), len(seq_start), len(seq_len))
    if end - pos < min_span or numba.get_num_threads() == 1:
        return scan_fastq(buf, pos, end, records, rec_start, seq_start, seq_len)
    return _scan_parallel(buf, pos, end, records, rec_start, seq_start, seq_len, segment)
