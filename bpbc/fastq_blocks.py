"""Plain FASTQ read in large blocks and parsed on several threads at once.

One thread reads the decompressed input block after block, straight into
the blocks' buffers (the only copy out of the decompressor). A few threads
find the records, each block on its own: it starts at the block's first line
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
hands it to dnaio), a block holding no record start, a record longer than the
room in front of a block, a link that does not hold. Whatever was read and
not handed out is then given back (:attr:`BlockChunks.leftover`) and the
serial route of :class:`bpbc.io.SequenceSource` reads on from there. A read
error is raised after the records before it, where it happened.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable, Iterator
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
#: blocks read ahead of the chunks handed out take a slot (the parsing threads' and two
#: more) for each this many bytes they hold, leaving room for two: 34 MB blocks of 100k
#: short reads a slot each as before, 128 MB ones of long reads (a chunk of 64 Mb, seconds
#: of a GPU's work) two, so that with two parsing threads two are read ahead, not four
SLOT_BYTES = 64 << 20


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
    """The chunks of plain FASTQ in ``stream`` (after ``head``, the bytes
    already read from it), parsed by ``workers`` threads in blocks of at most
    ``max_block`` bytes (and MAX_BLOCK). Iterate
    :meth:`chunks` once; when it ends, :attr:`leftover` holds what was read
    and not handed out (empty at the end of a plain file), :attr:`error` an
    error of the stream to raise after it. :meth:`close` stops the reading
    thread (also when the iteration was abandoned)."""

    def __init__(self, stream, head, workers: int, bytes_per_record: float, max_block: int | None = None,
                 large_live: int | None = None):
        self._stream = stream
        self._head = head
        self._max_block = MAX_BLOCK if max_block is None else min(MAX_BLOCK, max_block)
        self.bytes_per_record = bytes_per_record  # in the blocks so far: sizes the next
        self._limit = 1  # records a chunk may hold (set by chunks())
        self._target = 1  # records wanted in the next block
        self._pool = ThreadPoolExecutor(workers, "bpbc-parse")
        self._slots = workers + 2
        self._in_flight = threading.Semaphore(self._slots)  # blocks read and not yet handed out, a slot each
        self._taken: queue.SimpleQueue[int] = queue.SimpleQueue()  # slots of each parsed block, in order
        self._blocks: queue.SimpleQueue = queue.SimpleQueue()  # (buffer, size, Future); an error; None at the end
        self._buffers = BufferPool(keep=workers + 6)
        #: with ``large_live``, a block of SLOT_BYTES or more is read only while fewer than that
        #: many such blocks are held (read ahead, or by chunks handed out and not yet let go)
        self._large_live = large_live
        self._large_taken = 0
        self._large_gone: queue.SimpleQueue[int] = queue.SimpleQueue()  # put by the blocks' finalizers
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.leftover: list = []  # arrays of bytes read and not handed out, in order
        self.error: BaseException | None = None

    def _block_size(self) -> int:
        size = int(0.97 * self._target * self.bytes_per_record)
        return min(self._max_block, max(MIN_BLOCK, size))

    def _slots_of(self, size: int) -> int:
        """Slots of the read-ahead a block of ``size`` bytes takes: one for
        each SLOT_BYTES, leaving room for two."""
        return max(1, min(self._slots // 2, -(-size // SLOT_BYTES)))

    def _wait_for_large(self) -> bool:
        """Wait (in the reading thread) while ``large_live`` large blocks are
        held; False once the route stops. A chunk of long reads is seconds
        of a GPU's work: four held (the screened, the encoded, the one being
        encoded, the read) keep it busy, and each more is 128 MB."""
        assert self._large_live is not None
        while True:
            while not self._large_gone.empty():
                self._large_taken -= self._large_gone.get_nowait()
            if self._large_taken < self._large_live:
                return True
            if self._stopping.wait(0.01):
                return False

    def _read(self) -> None:
        """The reading thread: blocks read and handed to the parsing threads, in order."""
        at_line_start, first = True, True
        head = np.frombuffer(self._head, np.uint8)
        try:
            while not self._stopping.is_set():
                size = self._block_size()
                slots = self._slots_of(size)
                for _ in range(slots):  # this thread alone takes slots
                    while not self._in_flight.acquire(timeout=0.1):
                        if self._stopping.is_set():
                            return
                if self._large_live is not None and size >= SLOT_BYTES and not self._wait_for_large():
                    return
                buffer = self._buffers.take(ROOM + size)
                if self._large_live is not None and size >= SLOT_BYTES:
                    self._large_taken += 1
                    weakref.finalize(buffer.base, self._large_gone.put, 1)
                filled = min(size, len(head))
                buffer[ROOM:ROOM + filled] = head[:filled]
                head = head[filled:]
                error = None
                try:
                    while filled < size:
                        got = self._stream.readinto(memoryview(buffer)[ROOM + filled:ROOM + size])  # type: ignore[arg-type]  # ndarray is a buffer
                        if not got:
                            break
                        filled += got
                except BaseException as raised:  # noqa: BLE001 - raised to the reader, at its place
                    error = raised
                if filled and self._stopping.is_set():  # read, not to be parsed: given back as it is
                    self._blocks.put((buffer[ROOM:ROOM + filled], filled, None))
                    if error is not None:
                        self._blocks.put(error)
                    return
                if filled:
                    future = self._pool.submit(_parse, buffer, ROOM, ROOM + filled, at_line_start, first, self._limit)
                    self._taken.put(slots)
                    self._blocks.put((buffer, filled, future))
                    at_line_start = buffer[ROOM + filled - 1] == _NEWLINE
                    first = False
                    self._target = min(self._limit, 2 * self._target)
                if error is not None:
                    self._blocks.put(error)
                    return
                if filled < size:
                    return
        finally:
            if len(head):  # stopped before the head was all read into blocks
                self._blocks.put((head, len(head), None))
            self._blocks.put(None)  # the end (after an error, never read)

    def _next_block(self):
        while True:
            try:
                return self._blocks.get(timeout=0.1)
            except queue.Empty:
                if self._stopping.is_set():
                    return None

    def chunks(self, limit: Callable[[], int], target: int) -> Iterator[RawFastqChunk]:
        """Chunks of at most ``limit()`` records, the first sized for ``target``
        records and each next for twice as many (see :meth:`bpbc.io.SequenceSource.chunks`)."""
        self._limit, self._target = limit(), target
        self._thread = threading.Thread(target=self._read, name="bpbc-read-blocks", daemon=True)
        self._thread.start()
        tail = np.empty(0, np.uint8)  # the end of the block before: the start of a record
        while True:
            item = self._next_block()
            if item is None or isinstance(item, BaseException):
                self.leftover = [tail] if len(tail) else []
                self.error = item
                return
            buffer, filled, future = item
            if future is None:  # close() came during the iteration: the reading thread stopped
                return
            parsed: _Parsed = future.result()
            self._in_flight.release(self._taken.get())
            lo, hi = ROOM, ROOM + filled
            if parsed.start < 0 and len(tail) + filled <= ROOM:  # inside one record: it goes on in the next block
                tail = np.concatenate((tail, buffer[lo:hi]))
                continue
            linked = self._link(buffer, tail, parsed)
            if linked is None:
                self._give_back(tail, buffer[lo:hi])
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
                self._give_back(tail)
                return

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

    def _give_back(self, *arrays: np.ndarray) -> None:
        """End the route: what was read and not handed out, in order, into :attr:`leftover`."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        rest = [array for array in arrays if len(array)]
        while True:
            item = self._blocks.get()
            if item is None:
                break
            if isinstance(item, BaseException):
                self.error = item
                break
            buffer, filled, future = item
            if future is None:  # the rest of the head, or a block read once the route was stopping
                rest.append(buffer)
                continue
            future.cancel()
            rest.append(buffer[ROOM:ROOM + filled])
        self.leftover = rest

    def close(self, timeout_s: float = 1.0) -> bool:
        """Stop the reading thread; False when it is still in a read of the
        stream after ``timeout_s`` (a pipe whose writer is idle): the stream
        must not be closed under it."""
        self._stopping.set()
        alive = False
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
            alive = self._thread.is_alive()
        self._pool.shutdown(wait=False, cancel_futures=True)  # a thread still reading submits nothing more
        return not alive
