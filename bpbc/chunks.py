"""Chunks of reads as the pipeline handles them: raw FASTQ bytes, or dnaio records.

The fast route is :class:`RawFastqChunk`: the decompressed bytes of complete
four-line FASTQ records, scanned by numba for record and sequence spans,
encoded straight from the buffer, and written to matched/unmatched outputs as
the very bytes that were read. No Python object exists per record. Only
plain, regular FASTQ takes it (see :func:`scan_fastq`); anything else (FASTA,
Windows line ends, a name repeated on the '+' line, a damaged record, ...)
goes through dnaio records, :class:`RecordChunk`, exactly as before, so every
format error keeps dnaio's message.
"""

from __future__ import annotations

import numpy as np
from numba import get_num_threads, njit, prange

from .result import Texts
from .alphabet import INVALID, READ_CODE, SequenceError, describe_bad_byte, encode_reads, record_name

_NEWLINE, _AT, _PLUS, _RETURN = 10, 64, 43, 13


@njit(cache=True, nogil=True, inline="always")
def _line_end(buf, i, end):
    """Index of the next '\\n' at or after i (end when there is none) and
    the OR of the bytes before it (bit 7 set: a non-ASCII byte)."""
    seen = 0
    while i < end:
        byte = buf[i]
        if byte == _NEWLINE:
            break
        seen |= byte
        i += 1
    return i, seen


@njit(cache=True, nogil=True)
def _scan_fastq_exact(buf, pos, end, max_records, rec_start, seq_start, seq_len):
    """:func:`scan_fastq`, every line read byte by byte: the definition."""
    n = 0
    while n < max_records and pos < end:
        if buf[pos] != _AT:
            return n, pos, True
        header_end, seen = _line_end(buf, pos, end)
        if header_end >= end:
            break
        s = header_end + 1
        i, seen_sequence = _line_end(buf, s, end)
        if i + 2 >= end:
            break
        length = i - s
        q = i + 3
        stop = q + length
        if stop >= end:
            break
        quality_end, seen_quality = _line_end(buf, q, stop + 1)
        if ((seen | seen_sequence | seen_quality) & 128 or buf[header_end - 1] == _RETURN
                or (length > 0 and (buf[i - 1] == _RETURN or buf[stop - 1] == _RETURN))
                or buf[i + 1] != _PLUS or buf[i + 2] != _NEWLINE or quality_end != stop):
            return n, pos, True
        rec_start[n] = pos
        seq_start[n] = s
        seq_len[n] = length
        n += 1
        pos = stop + 1
    return n, pos, False


@njit(cache=True, nogil=True)
def _newlines_and_bits(buf, start, stop):
    """(number of '\\n' in buf[start:stop], OR of its bytes): one branch-free, vectorised pass."""
    # typed like this (a slice, uint8 OR, int64 count) LLVM vectorises it: 7x faster
    view = buf[start:stop]
    count = 0
    seen = np.uint8(0)
    for k in range(view.shape[0]):
        byte = view[k]
        count += np.int64(byte == np.uint8(_NEWLINE))
        seen |= byte
    return count, seen


@njit(cache=True, nogil=True)
def _scan_fastq_fast(buf, pos, end, max_records, rec_start, seq_start, seq_len):
    """The record structure of :func:`_scan_fastq_exact` assuming the plain
    form, reading only the header and the bytes at the expected line ends
    (a sequence line is first tried at the previous one's length). Returns
    (records, position after them, ok): ok False when a record is not plain
    where this could see it; nothing inside sequence and quality lines is
    read here."""
    n = 0
    guess = -1
    while n < max_records and pos < end:
        if buf[pos] != _AT:
            return n, pos, False
        header_end, _ = _line_end(buf, pos, end)
        if header_end >= end:
            break
        s = header_end + 1
        i = s + guess
        guessed = guess >= 0 and i + 2 < end and buf[i] == _NEWLINE
        stop = i + 3 + guess
        if not guessed or stop >= end or buf[stop] != _NEWLINE or buf[i + 1] != _PLUS or buf[i + 2] != _NEWLINE:
            # the guess may have jumped over the line's end: find it
            i, _ = _line_end(buf, s, end)
            if i + 2 >= end:
                break
        length = i - s
        guess = length
        stop = i + 3 + length
        if stop >= end:
            break
        if (buf[header_end - 1] == _RETURN or (length > 0 and (buf[i - 1] == _RETURN or buf[stop - 1] == _RETURN))
                or buf[i + 1] != _PLUS or buf[i + 2] != _NEWLINE or buf[stop] != _NEWLINE):
            return n, pos, False
        rec_start[n] = pos
        seq_start[n] = s
        seq_len[n] = length
        n += 1
        pos = stop + 1
    return n, pos, True


@njit(cache=True, nogil=True)
def scan_fastq(buf, pos, end, max_records, rec_start, seq_start, seq_len):
    """Scan complete records from ``buf[pos:end]``: at most ``max_records``
    (and the arrays' size), stopping before an incomplete one.

    A record is taken only in its plain form: '@' header line, sequence line,
    a '+' line holding nothing else, a quality line exactly as long as the
    sequence, every line ending in '\\n' alone, ASCII only. Returns (records,
    position after the last one, irregular): irregular is True when the next
    record is complete enough to see that it is not plain; the caller then
    reads the rest with dnaio.

    Fast route: the structure first (:func:`_scan_fastq_fast`), then one
    pass over the bytes taken: exactly four newlines per record (so none
    inside a sequence or quality line) and ASCII only. Anything else is
    scanned again byte by byte (:func:`_scan_fastq_exact`), the definition.
    """
    n, stop, ok = _scan_fastq_fast(buf, pos, end, max_records, rec_start, seq_start, seq_len)
    if ok:
        newlines, seen = _newlines_and_bits(buf, pos, stop)
        if newlines == 4 * n and not seen & 128:
            return n, stop, False
    return _scan_fastq_exact(buf, pos, end, max_records, rec_start, seq_start, seq_len)


@njit(cache=True, nogil=True, inline="always")
def _encode_span(buf, s, length, table, codes, i):
    """codes[i] = table[buf[s:s + length]], INVALID past its end; whether a
    byte is outside the alphabet. Byte by byte: a vectorised loop over
    slices was faster on reads in cache but slower on the second pass's
    reads, scattered over a buffer long out of cache (8000 of 400k reads x
    150 bp: 1.2-1.4 ms against 0.56-0.79, one thread, 2-core Zen 5)."""
    seen = np.uint8(0)
    for j in range(length):
        code = table[buf[s + j]]
        seen |= code
        codes[i, j] = code
    for j in range(length, codes.shape[1]):
        codes[i, j] = INVALID
    return seen == 255  # the table holds 0-4 and 255 only


@njit(cache=True, nogil=True, parallel=True)
def _encode_spans(buf, seq_start, seq_len, table, codes):
    """codes[i] = table[sequence i], INVALID past its end, in parallel over
    reads (the traceback's reads are encoded in the thread that waits for
    them); returns per read whether a byte is outside the alphabet."""
    n = codes.shape[0]
    bad = np.zeros(n, np.bool_)
    for i in prange(n):
        bad[i] = _encode_span(buf, seq_start[i], seq_len[i], table, codes, i)
    return bad


@njit(cache=True, nogil=True)
def _encode_spans_serial(buf, seq_start, seq_len, table, codes):
    """:func:`_encode_spans` on the calling thread, for a few reads."""
    n = codes.shape[0]
    bad = np.zeros(n, np.bool_)
    for i in range(n):
        bad[i] = _encode_span(buf, seq_start[i], seq_len[i], table, codes, i)
    return bad


#: reads from which _encode_sequences encodes on all the threads: fewer take
#: less time on one than waking the others (2 threads, 2-core Zen 5, 150 bp
#: reads: 800 0.047 ms on one against 0.067-0.081 on two, 2000 0.117
#: against 0.130, 4000 0.233 against 0.213), and a host with more threads
#: to wake pays more for it. On one thread the serial kernel runs (its loop
#: a third faster than the parallel one's)
ENCODE_PARALLEL_FROM = 2000


@njit(cache=True, nogil=True)
def _names(buf, rec_start, seq_start, rows):
    """Header text up to the first space, tab or NUL of each of ``rows``, as (buffer, offsets): dnaio's ``id``
    (which ends at a NUL too, as C strings do) on the other routes."""
    offsets = np.zeros(rows.shape[0] + 1, np.int64)
    out = np.empty(0, np.uint8)
    for rep in range(2):  # sizes first, then the text
        at = 0
        for t in range(rows.shape[0]):
            i = rec_start[rows[t]] + 1
            stop = seq_start[rows[t]] - 1
            while i < stop and buf[i] != 32 and buf[i] != 9 and buf[i] != 0:
                if rep:
                    out[at] = buf[i]
                at += 1
                i += 1
            offsets[t + 1] = at
        if rep == 0:
            out = np.empty(at, np.uint8)
    return out, offsets


@njit(cache=True, nogil=True)
def _gather(buf, first, last, out):
    """buf[first[r]:last[r]] for every r, back to back into ``out``; returns
    the size. Copied through views with a loop from 0: indices that numba
    cannot prove non-negative (out[at + k]) cost wraparound checks that kept
    the copy from vectorising (0.4 GB/s instead of memcpy's speed)."""
    at = 0
    for r in range(first.shape[0]):
        source = buf[first[r]:last[r]]
        target = out[at:at + source.shape[0]]
        for k in range(source.shape[0]):
            target[k] = source[k]
        at += source.shape[0]
    return at


@njit(cache=True, nogil=True)
def _runs(rec_start, rec_end, rows):
    """(first, last): the byte ranges of records ``rows``, consecutive
    records joined into one range."""
    first = np.empty(rows.shape[0], np.int64)
    last = np.empty(rows.shape[0], np.int64)
    count = 0
    t = 0
    while t < rows.shape[0]:
        first[count] = rec_start[rows[t]]
        stop = rec_end[rows[t]]
        t += 1
        while t < rows.shape[0] and rec_start[rows[t]] == stop:
            stop = rec_end[rows[t]]
            t += 1
        last[count] = stop
        count += 1
    return first[:count], last[:count]


#: runs at least this long on average are written in place (ReadsOutput.write_runs), not gathered first
_RUN_BYTES_MIN = 4096


def _encode_sequences(data, seq_start: np.ndarray, lengths: np.ndarray, name_of) -> tuple[np.ndarray, np.ndarray]:
    """(codes, lengths) of the sequences ``data[seq_start[i]:][:lengths[i]]``
    as :func:`bpbc.alphabet.encode_reads` gives them; a byte outside the
    alphabet raises SequenceError naming the read (``name_of(index)``)."""
    n = len(lengths)
    codes = np.empty((n, int(lengths.max()) if n else 0), np.uint8)
    encode = _encode_spans if n >= ENCODE_PARALLEL_FROM and get_num_threads() > 1 else _encode_spans_serial
    bad = encode(np.frombuffer(data, dtype=np.uint8), seq_start, lengths, READ_CODE, codes)
    if bad.any():
        index = int(np.argmax(bad))
        start = int(seq_start[index])
        sequence = bytes(memoryview(data)[start:start + int(lengths[index])])
        position = int(np.argmax(READ_CODE[np.frombuffer(sequence, np.uint8)] == 255))
        raise SequenceError(f"read {name_of(index)}: {describe_bad_byte(sequence, position)}")
    return codes, lengths.astype(np.int64)


class RawFastqChunk:
    """Records ``data[rec_start[i]:rec_end[i]]`` (``data``: bytes or a uint8 array), their sequences at
    ``seq_start``/``seq_len``. Fresh from the reader they lie back to back;
    :meth:`subset` may pick any of them."""

    def __init__(self, data, rec_start: np.ndarray, rec_end: np.ndarray, seq_start: np.ndarray,
                 seq_len: np.ndarray):
        self.data = data
        self.rec_start = rec_start
        self.rec_end = rec_end
        self.seq_start = seq_start
        self.lengths = seq_len

    def __len__(self) -> int:
        return len(self.rec_start)

    def subset(self, rows: np.ndarray) -> RawFastqChunk:
        """The records ``rows`` (indices), in that order, sharing this chunk's buffer."""
        return RawFastqChunk(self.data, self.rec_start[rows], self.rec_end[rows], self.seq_start[rows],
                             self.lengths[rows])

    def keeping(self, rows: np.ndarray) -> RawFastqChunk:
        """This chunk with only the records ``rows`` (increasing indices),
        copied out of its buffer into one of their size; the same indices,
        every other record empty: what a screened chunk's hits need of it
        (their sequences for the traceback, their names for the PAF), so
        that its buffer can go."""
        rows = np.asarray(rows, np.int64)
        first, last = self.rec_start[rows], self.rec_end[rows]
        sizes = last - first
        data = np.empty(int(sizes.sum()), np.uint8)
        _gather(np.frombuffer(self.data, np.uint8), first, last, data)
        at = np.cumsum(sizes) - sizes
        rec_start, rec_end, seq_start, seq_len = (np.zeros(len(self), np.int64) for _ in range(4))
        rec_start[rows], rec_end[rows] = at, at + sizes
        seq_start[rows], seq_len[rows] = self.seq_start[rows] - first + at, self.lengths[rows]
        return RawFastqChunk(data, rec_start, rec_end, seq_start, seq_len)

    def encode(self) -> tuple[np.ndarray, np.ndarray]:
        """(codes, lengths) as :func:`bpbc.alphabet.encode_reads` gives them."""
        return _encode_sequences(self.data, self.seq_start, self.lengths,
                                 lambda index: self.read_id(index) or f"read{index + 1}")

    def read_id(self, index: int) -> str:
        """The record's name up to the first space, tab or NUL, as dnaio's ``id``."""
        return self.read_names(np.array([index])).strings()[0]

    def read_names(self, rows: np.ndarray) -> Texts:
        """The names (up to the first space, tab or NUL) of ``rows``."""
        return Texts(*_names(np.frombuffer(self.data, np.uint8), self.rec_start, self.seq_start, rows))

    def write(self, output, rows: np.ndarray) -> None:
        """Write the records ``rows`` (increasing indices), byte for byte, in
        one write: gathered in ``output.scratch(size)``, a buffer it reuses
        (a fresh one cost a page fault per 4 KiB)."""
        if not len(rows):
            return
        first, last = _runs(self.rec_start, self.rec_end, np.asarray(rows, np.int64))
        if len(first) == 1:  # one run: no copy
            output.write_bytes(memoryview(self.data)[int(first[0]):int(last[0])])
            return
        if len(first) * _RUN_BYTES_MIN <= int(last[-1] - first[0]) and output.write_runs(
                memoryview(self.data), first, last):  # long runs, an uncompressed file: written from the buffer
            return
        out = output.scratch(int((last - first).sum()))
        size = _gather(np.frombuffer(self.data, np.uint8), first, last, out)
        output.write_bytes(memoryview(out)[:size])


class RecordChunk:
    """dnaio records (FASTA, or FASTQ that is not plain)."""

    def __init__(self, records: list):
        self.records = records

    def __len__(self) -> int:
        return len(self.records)

    def encode(self) -> tuple[np.ndarray, np.ndarray]:
        records = self.records
        return encode_reads(records, lambda index: record_name(records[index], index, "read"))

    def read_id(self, index: int) -> str:
        return self.records[index].id

    def read_names(self, rows: np.ndarray) -> Texts:
        return Texts.of([self.records[r].id for r in rows.tolist()])

    def subset(self, rows: np.ndarray) -> RecordChunk:
        return RecordChunk([self.records[r] for r in rows.tolist()])

    def write(self, output, rows: np.ndarray) -> None:
        output.write_records([self.records[r] for r in rows.tolist()])
