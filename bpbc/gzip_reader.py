"""rapidgzip's parallel decompression of one gzip file, in this process or in one of its own.

:class:`ParallelGzip` reads a gzip (or BGZF) file through rapidgzip's
threads and checks what rapidgzip leaves unchecked. :class:`GzipProcess`
runs a :class:`ParallelGzip` in a child process that decompresses into
shared memory ahead of the reading: rapidgzip's reader gives up the GIL
while it waits for its threads and takes it back many times a chunk, so
beside threads that run Python code (every stage of a run does) it
delivered 0.10-0.15 GB/s where alone it delivered 1.7-2.1 GB/s (32-core
Xeon, two threads running Python bytecode; a thread that holds the GIL in C
calls cost it 20-35 %: bench/results/read_path_x2_h200.txt).

Only the standard library is imported here (rapidgzip and ISA-L when used):
the child process imports this module alone.
"""

from __future__ import annotations

import io
import mmap
import os
import pickle
import re
import signal
import stat
import struct
import subprocess
import sys
import threading
from collections import deque

#: compressed bytes a rapidgzip thread decompresses at a time: its default 4 MiB
#: held 540-660 MB for a 100 MB file where 1 MiB held 180-400 MB (2 to 16
#: threads), and the whole file took 1.08 s instead of 1.41 s on 2 cores
PARALLEL_GZIP_CHUNK = 1 << 20
#: a gzip file of several members (not BGZF) up to this size is decompressed a
#: second time at its end, on one thread, for what rapidgzip leaves unchecked
#: (ParallelGzip._check_end). A larger one is not: ISA-L gave 0.26 GB/s a thread
#: on the 64-core benchmark host (bench/results/host_scaling_x4_h200.txt), about
#: 50 s for its 4.15 GB file of 32 members, where the whole run takes 14 s
END_CHECK_MAX_BYTES = 64 << 20
#: gzip input is decompressed by rapidgzip on this many threads or more (one
#: ISA-L thread is faster below: 0.41 s against 0.77 s with 2 threads for 348 MB)
PARALLEL_GZIP_MIN_THREADS = 4
#: ... and only when the compressed file is at least this large: for a small
#: file starting the threads costs more than they save, and rapidgzip reports
#: some damage in a small file on stderr besides raising
PARALLEL_GZIP_MIN_BYTES = 16 << 20
#: ... in a process of its own from this size on (GzipProcess: beside the
#: run's threads rapidgzip's reader in this process ran at a tenth of its
#: speed); below, the process's start is not repaid
GZIP_PROCESS_MIN_BYTES = 64 << 20
_GZIP_MAGIC = b"\x1f\x8b"
#: the empty member that ends a BGZF file (the SAM/BAM specification, section 4.1.2)
_BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


class GzipError(OSError):
    """Corrupt gzip data found by rapidgzip (errno None: not a file system error)."""


def _without_thread(message: str) -> str:
    """rapidgzip's message without the thread it names ('[Thread 139796615674752] '):
    another number in every process, and of no use to the user (the fuzz: the same
    input gave two messages)."""
    return re.sub(r"\[Thread \d+\]", "", message)


class _ChildGone(GzipError):
    """The decompressing process ended before it answered."""


class FileRange(io.RawIOBase):
    """Bytes ``start`` to ``end`` of the file at ``path`` as a file of their own."""

    def __init__(self, path, start: int, end: int):
        self._file = open(path, "rb", buffering=0)
        self._start, self._size = start, end - start
        self._file.seek(start)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._file.tell() - self._start

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.tell(), io.SEEK_END: self._size}[whence]
        return self._file.seek(self._start + min(max(0, base + offset), self._size)) - self._start

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        return self._file.readinto(view[:max(0, min(len(view), self._size - self.tell()))])

    def close(self) -> None:
        self._file.close()
        super().close()


class ParallelGzip(io.RawIOBase):
    """A gzip (or BGZF) file decompressed by rapidgzip on ``threads`` threads;
    with ``start`` and ``end``, those bytes of it (whole gzip members); with
    ``index``, rapidgzip's index of it (seeks go to the checkpoint before).

    rapidgzip returns the data before a truncation without complaint: at the
    end of the stream this checks that the decompressor consumed the whole
    file, and what it leaves unchecked (:meth:`_check_end`). Its own errors
    (RuntimeError, ValueError) become the decompression errors that
    :meth:`SequenceSource._translate` names."""

    def __init__(self, path, threads: int, start: int = 0, end: int | None = None, index: str | None = None):
        self._path, self._threads, self._index = os.fspath(path), threads, index
        self._start, self._whole = start, start == 0 and end is None
        self._size = (os.path.getsize(path) if end is None else end) - start
        self._end: int | None = None  # the decompressed size, once the end was read and the file released
        self._open()

    def _compressed(self):
        """The compressed bytes: the file, or its range."""
        return self._path if self._whole else FileRange(self._path, self._start, self._start + self._size)

    def _open(self) -> None:
        import rapidgzip

        try:
            self._file = rapidgzip.RapidgzipFile(self._compressed(), parallelization=self._threads,
                                                 chunk_size=PARALLEL_GZIP_CHUNK)
            if self._index is not None:
                self._file.import_index(self._index)
        except (RuntimeError, ValueError) as error:  # no gzip header after all
            raise GzipError(_without_thread(str(error))) from None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True  # dnaio looks at the first bytes and seeks back

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if self._end is not None:  # released at the end (see readinto)
            target = offset if whence == io.SEEK_SET else self._end + offset
            if target == self._end:
                return target
            # back from the end (dnaio seeks back to the start after looking at
            # the first bytes, which may have been all of a small file): open again
            self._open()
            self._end = None
            return self._file.seek(target)
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell() if self._end is None else self._end

    def readinto(self, buffer) -> int:
        if self._end is not None:
            return 0  # the end, reached before
        try:
            got = self._file.readinto(buffer)
            if not got and len(buffer):
                if self._file.tell_compressed() < 8 * self._size:
                    raise EOFError("compressed data ended before the end-of-stream marker was reached")
                self._check_end(self._file.tell())
                # the whole file read: its threads and buffers go now, in the
                # reading thread, not at the end of the run (0.3 s on a 10M-read file)
                self._end = self._file.tell()
                self._file.close()
        except RuntimeError as error:  # rapidgzip's 'End of file reached!' and the like
            if "end of file" in str(error).lower():
                raise EOFError(str(error)) from None
            raise GzipError(_without_thread(str(error))) from None
        except ValueError as error:  # a bad header, CRC or size
            raise GzipError(_without_thread(str(error))) from None
        return got

    def _check_end(self, size: int) -> None:
        """What rapidgzip (0.16) does not check, checked once the whole file
        (``size`` bytes of data) is read: the CRC and length of members that
        hold no data, and 1 to 4 bytes after the last member, which it takes
        for part of the file (found by the fuzz, with rapidgzip forced onto
        small files: a corrupt or trailing-garbage gzip ran as an empty or
        whole input). Where the file ends in the footer of one member that
        holds all the data (its length field is ``size``), or in BGZF's end
        block, that is so; otherwise (no data, several members, or bytes
        after the last) a file of at most END_CHECK_MAX_BYTES is decompressed
        once more, here on one thread, and its errors raised (gzip's)."""
        if self._size > END_CHECK_MAX_BYTES:
            return  # not checked: decompressing it again on one thread would cost more than the run
        with open(self._path, "rb") as handle:
            handle.seek(self._start + max(0, self._size - len(_BGZF_EOF)))
            tail = handle.read(min(self._size, len(_BGZF_EOF)))
        if tail == _BGZF_EOF or (size and len(tail) >= 8 and int.from_bytes(tail[-4:], "little") == size % (1 << 32)):
            return
        try:
            from isal import igzip as gzip  # gzip's checks, at ISA-L's speed
        except ImportError:
            import gzip  # type: ignore[no-redef]
        with gzip.open(self._compressed(), "rb") as whole:
            while whole.read(_CHECK_BLOCK):
                pass

    def close(self) -> None:
        file = getattr(self, "_file", None)  # None: rapidgzip refused the file
        if file is not None and not file.closed:
            file.close()  # joins its threads: the process must not end with them running
        super().close()


#: the child's shared memory: slots of this many decompressed bytes, one
#: handed out to the reading while the child fills the others (read ahead)
GZIP_PROCESS_SLOT = 16 << 20
GZIP_PROCESS_SLOTS = 4
#: bytes read from a file at a time to check its end (ParallelGzip._check_end)
_CHECK_BLOCK = 4 << 20
#: a message between the processes: (what, value, extra)
_MESSAGE = struct.Struct("<bqq")
_READ, _SEEK = 1, 2
_DONE, _FAILED = 0, 1
_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); "
          "from bpbc.gzip_reader import serve_in_child; serve_in_child(sys.argv[2:])")


class GzipProcess(io.RawIOBase):
    """A gzip file decompressed by a :class:`ParallelGzip` on ``threads``
    threads in a child process, into shared memory (Linux: ``memfd_create``),
    :data:`GZIP_PROCESS_SLOTS` slots read ahead; the same bytes, errors
    (raised here) and seeks as :class:`ParallelGzip` in this process. Its
    reads copy out of the shared memory without the GIL (numpy) and wait for
    the child in a system call, so this process's threads do not slow the
    decompression. The child ends with this object's close (or this
    process: its command pipe closes)."""

    def __init__(self, path, threads: int, start: int = 0, end: int | None = None, index: str | None = None):
        self._child = None
        self._slot_size, self._slots = GZIP_PROCESS_SLOT, GZIP_PROCESS_SLOTS
        self._shm_fd = os.memfd_create("bpbc-gzip")
        size = self._slot_size * self._slots
        os.ftruncate(self._shm_fd, size)
        self._shm: mmap.mmap | None = mmap.mmap(self._shm_fd, size)
        command_r, self._commands = os.pipe()
        self._answers, answer_w = os.pipe()
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-c", _CHILD, root, os.fspath(path), str(threads), str(self._slot_size),
                 str(self._slots), str(self._shm_fd), str(command_r), str(answer_w), str(start),
                 str(-1 if end is None else end), index or ""],
                pass_fds=(self._shm_fd, command_r, answer_w), stdin=subprocess.DEVNULL)
        finally:
            os.close(command_r)
            os.close(answer_w)
        self._pending: deque[int] = deque()  # slots with a read asked for, in order
        self._slot = -1  # the slot being handed out
        self._start = self._left = 0  # its bytes not yet handed out
        self._ended = False  # the child said 0 bytes: the end
        self._position = 0
        try:
            self._answer()  # the file opened there, or its error raised here
            self._ask_all()
        except BaseException:
            self.close()
            raise

    def _send(self, what: int, value: int = 0, extra: int = 0) -> None:
        try:
            os.write(self._commands, _MESSAGE.pack(what, value, extra))
        except BrokenPipeError:
            self._gone()

    def _receive(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            got = os.read(self._answers, size - len(data))
            if not got:
                self._gone()
            data += got
        return data

    def _gone(self):
        status = self._child.wait() if self._child is not None else None
        raise _ChildGone(f"the decompressing process ended unexpectedly (exit status {status})")

    def _answer(self) -> int:
        """The child's answer to the oldest command: a value, or its error raised."""
        what, value, _ = _MESSAGE.unpack(self._receive(_MESSAGE.size))
        if what == _FAILED:
            raise pickle.loads(self._receive(value))
        return value

    def _ask_all(self) -> None:
        for slot in range(self._slots):
            self._ask(slot)

    def _ask(self, slot: int) -> None:
        self._send(_READ, slot)
        self._pending.append(slot)

    def _next_slot(self) -> bool:
        """The next slot filled, its read asked for again once handed out; False at the end."""
        if self._slot >= 0 and not self._ended:
            self._ask(self._slot)
        self._slot = -1
        if self._ended:
            return False
        slot = self._pending.popleft()
        got = self._answer()
        if got == 0:
            self._ended = True
            return False
        self._slot, self._start, self._left = slot, slot * self._slot_size, got
        return True

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True  # dnaio looks at the first bytes and seeks back

    def readinto(self, buffer) -> int:
        import numpy as np

        assert self._shm is not None, "read after close"
        target = np.frombuffer(buffer, np.uint8)
        shared = np.frombuffer(self._shm, np.uint8)
        done = 0
        try:
            while done < len(target):
                if not self._left and not self._next_slot():
                    break
                size = min(self._left, len(target) - done)
                np.copyto(target[done:done + size], shared[self._start:self._start + size])  # without the GIL
                done += size
                self._start += size
                self._left -= size
        finally:
            # no view of the shared memory may outlive the call (in a traceback's frame):
            # close() could not unmap it, and its file descriptor would stay open
            del target, shared
        self._position += done
        return done

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset, whence = self._position + offset, io.SEEK_SET
        while self._pending:  # the reads ahead are dropped (an error among them comes again if it is read)
            self._pending.popleft()
            try:
                self._answer()
            except _ChildGone:
                raise
            except Exception:  # noqa: BLE001, S110 - a read ahead's error: not the seek's
                pass
        self._send(_SEEK, offset, whence)
        self._position = self._answer()
        self._slot, self._left, self._ended = -1, 0, False
        self._ask_all()
        return self._position

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        if self._child is not None:
            self._child.kill()  # nothing of it is kept: no output, and rapidgzip's threads go with it
            self._child.wait()
            self._child = None
        for fd in ("_commands", "_answers", "_shm_fd"):
            if getattr(self, fd, None) is not None:
                os.close(getattr(self, fd))
                setattr(self, fd, None)
        if getattr(self, "_shm", None) is not None:
            self._shm.close()  # type: ignore[union-attr]
            self._shm = None
        super().close()


def serve_in_child(argv: list[str]) -> None:
    """The child of a :class:`GzipProcess`: a :class:`ParallelGzip` of the
    file, read into the shared memory's slots as the parent asks, each
    answer a value or the pickled error; ends when the parent closes its
    end of the command pipe. Ctrl-C is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    path = argv[0]
    threads, slot_size, slots, shm_fd, commands, answers, start, end = (int(arg) for arg in argv[1:9])
    index = argv[9] or None
    shm = mmap.mmap(shm_fd, slot_size * slots)
    stream = None

    def answer(call) -> None:
        try:
            value = call()
        except BaseException as error:  # noqa: BLE001 - every error is the parent's to raise
            try:
                data = pickle.dumps(error)
            except Exception:  # noqa: BLE001 - an error that does not pickle: its text
                data = pickle.dumps(GzipError(f"{type(error).__name__}: {error}"))
            os.write(answers, _MESSAGE.pack(_FAILED, len(data), 0) + data)
            return
        os.write(answers, _MESSAGE.pack(_DONE, value, 0))

    def opened() -> int:
        nonlocal stream
        stream = ParallelGzip(path, threads, start, None if end < 0 else end, index)
        return 0

    answer(opened)
    with open(commands, "rb", buffering=0) as pipe:
        while (message := pipe.read(_MESSAGE.size)) and len(message) == _MESSAGE.size:
            what, value, extra = _MESSAGE.unpack(message)
            if stream is None:
                answer(lambda: 0)
            elif what == _READ:
                view = memoryview(shm)[value * slot_size:(value + 1) * slot_size]
                answer(lambda: stream.readinto(view))
            else:
                answer(lambda: stream.seek(value, extra))
    if stream is not None:
        stream.close()


def _reader_for(path, threads: int, start: int = 0, end: int | None = None) -> type | None:
    """GzipProcess or ParallelGzip where decompressing ``path`` (bytes
    ``start`` to ``end``) on ``threads`` threads pays (see
    :func:`parallel_gzip`), else None."""
    if threads < PARALLEL_GZIP_MIN_THREADS:
        return None
    status = os.stat(path)
    size = (status.st_size if end is None else end) - start
    if not stat.S_ISREG(status.st_mode) or size < PARALLEL_GZIP_MIN_BYTES:
        return None
    with open(path, "rb") as probe:
        probe.seek(start)
        if probe.read(2) != _GZIP_MAGIC:
            return None
    return GzipProcess if size >= GZIP_PROCESS_MIN_BYTES and hasattr(os, "memfd_create") else ParallelGzip


def open_indexed(path, threads: int, index: str, start: int, end: int):
    """A gzip file read through rapidgzip's ``index`` of it from ``start`` (an
    offset of its data) on: in a process of its own where bytes ``start`` to
    ``end`` are as many as a whole file read so (GZIP_PROCESS_MIN_BYTES,
    counted as data), else here."""
    large = end - start >= GZIP_PROCESS_MIN_BYTES and hasattr(os, "memfd_create")
    reader = (GzipProcess if large else ParallelGzip)(path, max(1, threads), index=index)
    try:
        reader.seek(start)
    except BaseException:
        reader.close()
        raise
    return reader


def parallel_gzip(path, threads: int | None, start: int = 0, end: int | None = None):
    """``path`` opened for parallel decompression when that pays: a regular
    gzip file of at least PARALLEL_GZIP_MIN_BYTES and at least
    PARALLEL_GZIP_MIN_THREADS threads to spend (``threads``, None: the
    usable cores), decompressed in a process of its own
    (:class:`GzipProcess`, the one :func:`start_early` started if it did)
    from GZIP_PROCESS_MIN_BYTES on, else in this one (:class:`ParallelGzip`);
    None for stdin, pipes, other formats and small files. With ``start``
    and ``end``, those bytes of it (whole gzip members), decided as for a
    file of their size."""
    from .resources import usable_cores

    threads = usable_cores() if threads is None else threads
    try:
        started = _STARTED.pop(_started_key(path, threads), None) if start == 0 and end is None else None
        if started is not None:
            return started.result()
        reader = _reader_for(path, threads, start, end)
        return None if reader is None else reader(path, threads, start, end)
    except ImportError:
        return None  # rapidgzip missing: ISA-L on one thread


class _Starting:
    """A GzipProcess being started in a thread of its own (its child's
    start: a Python process that imports rapidgzip and opens the file)."""

    def __init__(self, path, threads: int):
        self._made: GzipProcess | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._make, args=(path, threads), name="bpbc-gzip-start", daemon=True)
        self._thread.start()

    def _make(self, path, threads: int) -> None:
        try:
            self._made = GzipProcess(path, threads)
        except BaseException as error:  # noqa: BLE001 - raised where the run opens the file
            self._error = error

    def result(self) -> GzipProcess:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._made is not None
        return self._made


#: the processes start_early started, by (absolute path, threads), until parallel_gzip takes them
_STARTED: dict[tuple[str, int], _Starting] = {}


def _started_key(path, threads: int) -> tuple[str, int]:
    return os.path.abspath(os.fspath(path)), threads


def start_early(path, threads: int) -> None:
    """Start the decompressing process of ``path`` now, where
    :func:`parallel_gzip` would start one for ``threads`` threads: the
    command does so as soon as it knows its reads file, so that the child's
    start and its first chunks run beside the command's imports, not after
    them; parallel_gzip of the same path and threads takes it, and raises
    any error it met. Nothing for any other file, or one that cannot be
    looked at (the run names its problem)."""
    try:
        if _reader_for(path, threads) is not GzipProcess:
            return
    except OSError:
        return
    key = _started_key(path, threads)
    if key not in _STARTED:
        _STARTED[key] = _Starting(path, threads)


def close_unused() -> None:
    """End the processes :func:`start_early` started that no run took (the
    command stopped before reading, or read the file otherwise)."""
    while _STARTED:
        _, starting = _STARTED.popitem()
        try:
            starting.result().close()
        except Exception:  # noqa: BLE001, S110 - its error is of no use now: no run reads the file
            pass
