"""Plain FASTQ read in large blocks and parsed on several threads at once.

One thread reads the decompressed input block after block, straight into
the blocks' buffers (the only copy out of the decompressor); or, for a gzip
file of several members, a few threads each read ranges of whole members
(:mod:`bpbc.gzip_members`), in turn. A few threads find the records, each
block on its own: it starts at the block's first line
that begins with '@' and has a line beginning with '+' two lines on (in
plain FASTQ only a header line does: a quality line may begin with '@', but
two lines after it comes a sequence line).

The record that a block boundary cuts is joined in order. The end of block
k - 1 is copied in front of block k, and with the start of block k it must
scan, by :func:`bpbc.chunks.scan_fastq`, as whole records ending exactly
where block k's own records start. That link proves the start found was a
true record start, so every record is the one a scan from the start of the
file finds, and the chunks are those of the serial route cut elsewhere.

Anything else ends this route: a record that is not plain (the serial route
hands it to dnaio), a record longer than the room in front of a block, a
link that does not hold. Whatever was read from one stream and not handed
out is then given back (:attr:`BlockChunks.leftover`) and the serial route
of :class:`bpbc.io.SequenceSource` reads on from there; from ranges, the
serial route reads the file again from its start, past the records handed
out (:attr:`BlockChunks.restart`), as it does when a range but the last ends
in an error: its end was no member boundary after all, or it is damaged
(the data before is a true prefix either way). A read error of the one
stream, or of the last range, is raised after the records before it, where
it happened.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from .buffers import BufferPool
from .chunks import _AT, _NEWLINE, _PLUS, RawFastqChunk, _line_end, scan_fastq

#: bytes in front of each block for the end of the block before (the record
#: cut by the boundary); a record longer than this ends the route
ROOM = 1 << 20
#: the largest block: a chunk of long reads is not one block of gigabytes
MAX_BLOCK = 256 << 20
#: the smallest block
MIN_BLOCK = 1 << 20
_END = object()


@njit(cache=True, nogil=True)
def first_record(buf, start, end, at_line_start):
    """Index of the first line in ``buf[start:end]`` that begins with '@' and
    has a line beginning with '+' two lines on, all three complete; -1 when
    there is none. With ``at_line_start`` False the line at ``start`` is
    the rest of one begun before and is skipped."""
    p = start
    if not at_line_start:
        p, _ = _line_end(buf, start, end)
        p += 1
    while p < end:
        header_end, _ = _line_end(buf, p, end)
        if header_end >= end:
            return -1
        if buf[p] == _AT:
            sequence_end, _ = _line_end(buf, header_end + 1, end)
            if sequence_end + 1 >= end:
                return -1
            if buf[sequence_end + 1] == _PLUS:
                return p
        p = header_end + 1
    return -1


class _Parsed:
    """The records of one block, found by a parsing thread."""

    __slots__ = ("start", "pieces", "stop", "irregular")

    def __init__(self, start: int, pieces: list, stop: int, irregular: bool):
        self.start = start  # of the first record (-1: no record start found)
        self.pieces = pieces  # (rec_start, seq_start, seq_len, end of the last record) of at most `limit` records each
        self.stop = stop  # after the last record taken
        self.irregular = irregular  # the record at stop is not plain


def _parse(buf: np.ndarray, lo: int, hi: int, at_line_start: bool, first: bool, limit: int) -> _Parsed:
    start = lo if first else int(first_record(buf, lo, hi, at_line_start))
    if start < 0:
        return _Parsed(-1, [], lo, False)
    pieces = []
    position = start
    while True:
        rec_start = np.empty(limit, np.int64)
        seq_start = np.empty(limit, np.int64)
        seq_len = np.empty(limit, np.int64)
        found, stop, irregular = scan_fastq(buf, position, hi, limit, rec_start, seq_start, seq_len)
        if found:
            pieces.append((rec_start[:found], seq_start[:found], seq_len[:found], stop))
        position = stop
        if irregular or found < limit:
            return _Parsed(start, pieces, position, bool(irregular))


class BlockChunks:
    """The chunks of plain FASTQ read from ``ranges`` (calls that open each
    range's stream, in order: one stream, or ranges of a gzip file), after
    ``head`` (bytes already read from the first), by ``readers`` threads (each
    range's by one) into blocks parsed by ``workers`` threads. Each reader
    holds at most ``blocks_ahead`` blocks not yet handed out. Streams are
    closed when read unless ``own_streams`` is False. Iterate :meth:`chunks`
    once; when it ends, :attr:`leftover` holds what was read and not handed
    out (empty at the end of a plain file) and :attr:`error` an error of the
    stream to raise after it; or :attr:`restart` is True. :meth:`close` stops
    the reading threads (also when the iteration was abandoned)."""

    def __init__(self, ranges: Sequence[Callable[[], Any]], head, workers: int, bytes_per_record: float,
                 readers: int = 1, blocks_ahead: int | None = None, own_streams: bool = True):
        self._ranges = ranges
        self._head = head
        self._own_streams = own_streams
        self.bytes_per_record = bytes_per_record  # in the blocks so far: sizes the next
        self._limit = 1  # records a chunk may hold (set by chunks())
        self._target = 1  # records wanted in the next block
        self._readers = max(1, min(readers, len(ranges)))
        self._pool = ThreadPoolExecutor(workers, "bpbc-parse")
        ahead = workers + 2 if blocks_ahead is None else blocks_ahead
        self._in_flight = [threading.Semaphore(ahead) for _ in range(self._readers)]  # blocks not yet handed out
        self._blocks: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in ranges]  # per range:
        # (buffer, size, Future, reader); an error; _END at its end
        self._buffers = BufferPool(keep=self._readers * ahead + 4)
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self.leftover: list = []  # arrays of bytes read and not handed out, in order
        self.error: BaseException | None = None
        self.restart = False

    def _block_size(self) -> int:
        size = int(0.97 * self._target * self.bytes_per_record)
        return min(MAX_BLOCK, max(MIN_BLOCK, size))

    def _read(self, reader: int) -> None:
        """A reading thread: the ranges reader, reader + readers, ... read in
        blocks and handed to the parsing threads, in order."""
        for index in range(reader, len(self._ranges), self._readers):
            if self._stopping.is_set():
                return
            try:
                stream = self._ranges[index]()
            except BaseException as error:  # noqa: BLE001 - raised to the reader, at its place
                self._blocks[index].put(error)
                return
            try:
                if not self._read_range(index, stream, reader):
                    return
            finally:
                if self._own_streams:
                    stream.close()

    def _read_range(self, index: int, stream, reader: int) -> bool:
        """Read one range into blocks; False when the thread is to stop."""
        blocks, in_flight = self._blocks[index], self._in_flight[reader]
        first = at_line_start = index == 0  # a later range may start inside a line: its first is skipped
        head = np.frombuffer(self._head if index == 0 else b"", np.uint8)
        try:
            while not self._stopping.is_set():
                while not in_flight.acquire(timeout=0.1):
                    if self._stopping.is_set():
                        return False
                size = self._block_size()
                buffer = self._buffers.take(ROOM + size)
                filled = min(size, len(head))
                buffer[ROOM:ROOM + filled] = head[:filled]
                head = head[filled:]
                error = None
                try:
                    while filled < size:
                        got = stream.readinto(memoryview(buffer)[ROOM + filled:ROOM + size])  # type: ignore[arg-type]  # ndarray is a buffer
                        if not got:
                            break
                        filled += got
                except BaseException as raised:  # noqa: BLE001 - raised to the reader, at its place
                    error = raised
                if filled and self._stopping.is_set():  # read, not to be parsed: given back as it is
                    blocks.put((buffer[ROOM:ROOM + filled], filled, None, reader))
                    if error is not None:
                        blocks.put(error)
                    return False
                if filled:
                    future = self._pool.submit(_parse, buffer, ROOM, ROOM + filled, at_line_start, first, self._limit)
                    blocks.put((buffer, filled, future, reader))
                    at_line_start = buffer[ROOM + filled - 1] == _NEWLINE
                    first = False
                    self._target = min(self._limit, 2 * self._target)
                else:
                    in_flight.release()
                if error is not None:
                    blocks.put(error)
                    return False
                if filled < size:
                    return True
            return False
        finally:
            if len(head):  # stopped before the head was all read into blocks
                blocks.put((head, len(head), None, reader))
            blocks.put(_END)

    def _next_block(self, index: int):
        while True:
            try:
                return self._blocks[index].get(timeout=0.1)
            except queue.Empty:
                if self._stopping.is_set():
                    return _END

    def chunks(self, limit: Callable[[], int], target: int) -> Iterator[RawFastqChunk]:
        """Chunks of at most ``limit()`` records, the first sized for ``target``
        records and each next for twice as many (see :meth:`bpbc.io.SequenceSource.chunks`)."""
        self._limit, self._target = limit(), target
        self._threads = [threading.Thread(target=self._read, args=(reader,), name=f"bpbc-read-blocks-{reader}",
                                          daemon=True) for reader in range(self._readers)]
        for thread in self._threads:
            thread.start()
        tail = np.empty(0, np.uint8)  # the end of the block before: the start of a record
        last = len(self._ranges) - 1
        for index in range(len(self._ranges)):
            while True:
                item = self._next_block(index)
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    if index < last:
                        self._end(restart=True)
                    else:
                        self.leftover = [tail] if len(tail) else []
                        self.error = item
                    return
                buffer, filled, future, reader = item
                parsed: _Parsed = future.result()
                self._in_flight[reader].release()
                lo, hi = ROOM, ROOM + filled
                if parsed.start < 0 and len(tail) + filled <= ROOM:  # inside one record: it goes on in the next block
                    tail = np.concatenate((tail, buffer[lo:hi]))
                    continue
                linked = self._link(buffer, tail, parsed)
                if linked is None:
                    self._end(tail, buffer[lo:hi], index=index)
                    return
                front, pieces = linked
                self._limit = limit()
                count = 0
                for rec_start, seq_start, seq_len, stop in pieces:
                    count += len(rec_start)
                    yield RawFastqChunk(buffer[:stop], rec_start, np.append(rec_start[1:], stop), seq_start, seq_len)
                if count:
                    self.bytes_per_record = (parsed.stop - front) / count
                tail = buffer[parsed.stop:hi]
                if parsed.irregular:
                    self._end(tail, index=index)
                    return
        self.leftover = [tail] if len(tail) else []

    def _link(self, buffer: np.ndarray, tail: np.ndarray, parsed: _Parsed):
        """(start of the records, the pieces of records from there) when
        ``tail`` (the end of the block before), copied in front of the block,
        and the block's start scan as whole records ending where the block's
        own records start; None otherwise. The joined record goes into the
        block's first piece where it fits."""
        if parsed.start < 0 or len(tail) > ROOM:
            return None
        front = ROOM - len(tail)
        buffer[front:ROOM] = tail
        if front == parsed.start:
            return front, parsed.pieces
        count = (parsed.start - front) // 4 + 1  # a record holds four newlines at least
        rec_start = np.empty(count, np.int64)
        seq_start = np.empty(count, np.int64)
        seq_len = np.empty(count, np.int64)
        found, stop, irregular = scan_fastq(buffer, front, parsed.start, count, rec_start, seq_start, seq_len)
        if irregular or stop != parsed.start or not found:
            return None
        joined = (rec_start[:found], seq_start[:found], seq_len[:found], stop)
        pieces = parsed.pieces
        if pieces and found + len(pieces[0][0]) <= self._limit:
            first = pieces[0]
            merged = tuple(np.concatenate((a, b)) for a, b in zip(joined[:3], first[:3])) + (first[3],)
            return front, [merged] + pieces[1:]
        return front, [joined] + pieces

    def _end(self, *arrays: np.ndarray, index: int = 0, restart: bool = False) -> None:
        """End the route before the end of the input: what was read and not
        handed out, in order, into :attr:`leftover` (``arrays``, then the rest
        of range ``index``); with ranges, :attr:`restart` instead."""
        self._stopping.set()
        for thread in self._threads:
            thread.join()
        if restart or len(self._ranges) > 1:
            self.restart = True
            return
        rest = [array for array in arrays if len(array)]
        while True:
            item = self._blocks[index].get()
            if item is _END:
                break
            if isinstance(item, BaseException):
                self.error = item
                break
            buffer, filled, future, _ = item
            if future is None:  # the rest of the head, or a block read once the route was stopping
                rest.append(buffer)
                continue
            future.cancel()
            rest.append(buffer[ROOM:ROOM + filled])
        self.leftover = rest

    def close(self, timeout_s: float = 1.0) -> bool:
        """Stop the reading threads; False when one is still in a read of the
        stream after ``timeout_s`` (a pipe whose writer is idle): the stream
        must not be closed under it."""
        self._stopping.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout_s)
        self._pool.shutdown(wait=False, cancel_futures=True)  # a thread still reading submits nothing more
        return not any(thread.is_alive() for thread in self._threads)
