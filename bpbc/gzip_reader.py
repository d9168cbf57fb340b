"""Large gzip input decompressed in parallel by rapidgzip, in a child process.

rapidgzip's Python ``readinto`` copies each decompressed block into the
caller's buffer with the GIL held, so in a run whose other stages hold the
GIL too (parsing, encoding, formatting) the reading thread kept waiting for
it: in the 40M-read run on 64 cores it spent 894 of 900 samples in
``readinto``, and reading took 10.6 s where alone it took 7.2 s. Here a
child process (``python -m bpbc.gzip_reader``) does the decompression and
its checks with :class:`ParallelGzip` and writes the data into a pipe, and
the run reads the pipe (:class:`GzipPipe`) with the GIL released.

This module imports nothing heavy (no numpy, numba or dnaio): the child
starts in tens of milliseconds.
"""

from __future__ import annotations

import io
import os
import signal
import stat
import subprocess
import sys
import threading

#: gzip input is decompressed by rapidgzip on this many threads or more (one
#: ISA-L thread is faster below: 0.41 s against 0.77 s with 2 threads for 348 MB)
PARALLEL_GZIP_MIN_THREADS = 4
#: ... and only when the compressed file is at least this large: for a small
#: file starting the threads costs more than they save, and rapidgzip reports
#: some damage in a small file on stderr besides raising
PARALLEL_GZIP_MIN_BYTES = 16 << 20
#: compressed bytes a rapidgzip thread decompresses at a time: its default 4 MiB
#: held 540-660 MB for a 100 MB file where 1 MiB held 180-400 MB (2 to 16
#: threads), and the whole file took 1.08 s instead of 1.41 s on 2 cores
PARALLEL_GZIP_CHUNK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
#: a gzip file of several members (not BGZF) up to this size is decompressed a
#: second time at its end, on one thread, for what rapidgzip leaves unchecked
#: (ParallelGzip._check_end). A larger one is not: ISA-L gave 0.26 GB/s a thread
#: on the 64-core benchmark host (bench/results/host_scaling_x4_h200.txt), about
#: 50 s for its 4.15 GB file of 32 members, where the whole run takes 14 s
END_CHECK_MAX_BYTES = 64 << 20
#: the empty member that ends a BGZF file (the SAM/BAM specification, section 4.1.2)
_BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


class GzipError(OSError):
    """Corrupt gzip data found by rapidgzip (errno None: not a file system error)."""


class ParallelGzip(io.RawIOBase):
    """A gzip (or BGZF) file decompressed by rapidgzip on ``threads`` threads.

    rapidgzip returns the data before a truncation without complaint: at the
    end of the stream this checks that the decompressor consumed the whole
    file, and what it leaves unchecked (:meth:`_check_end`). Its own errors
    (RuntimeError, ValueError) become the decompression errors that
    :meth:`SequenceSource._translate` names."""

    def __init__(self, path, threads: int):
        self._path, self._threads = os.fspath(path), threads
        self._size = os.path.getsize(path)
        self._end: int | None = None  # the decompressed size, once the end was read and the file released
        self._open()

    def _open(self) -> None:
        import rapidgzip

        try:
            self._file = rapidgzip.RapidgzipFile(self._path, parallelization=self._threads,
                                                 chunk_size=PARALLEL_GZIP_CHUNK)
        except (RuntimeError, ValueError) as error:  # no gzip header after all
            raise GzipError(str(error)) from None

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
            raise GzipError(str(error)) from None
        except ValueError as error:  # a bad header, CRC or size
            raise GzipError(str(error)) from None
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
            handle.seek(max(0, self._size - len(_BGZF_EOF)))
            tail = handle.read()
        if tail == _BGZF_EOF or (size and len(tail) >= 8 and int.from_bytes(tail[-4:], "little") == size % (1 << 32)):
            return
        try:
            from isal import igzip as gzip  # gzip's checks, at ISA-L's speed
        except ImportError:
            import gzip  # type: ignore[no-redef]
        with gzip.open(self._path, "rb") as whole:
            while whole.read(_CHECK_BLOCK):
                pass

    def close(self) -> None:
        file = getattr(self, "_file", None)  # None: rapidgzip refused the file
        if file is not None and not file.closed:
            file.close()  # joins its threads: the process must not end with them running
        super().close()


#: bytes read at a time when checking a file once more (ParallelGzip._check_end)
_CHECK_BLOCK = 4 << 20
#: the child writes the pipe this many bytes at a time
_CHILD_BLOCK = 4 << 20
#: the pipe's capacity (Linux's F_SETPIPE_SZ; 1 MiB is the most an
#: unprivileged process may set by default): fewer wake-ups than 64 KiB
_PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031
#: the child's exit status for a truncated file (else 1: corrupt data)
_TRUNCATED = 3


class GzipPipe(io.RawIOBase):
    """The decompressed data of a gzip file, read from a child process that
    decompresses it with :class:`ParallelGzip` on ``threads`` threads
    (``python -m bpbc.gzip_reader``). Sequential only: not seekable. The
    child's errors are raised where the data ends, as :class:`ParallelGzip`
    raises them: EOFError for a truncated file, GzipError for corrupt data.
    The child runs in a session of its own, so that Ctrl-C at the terminal
    reaches only this process, which stops it on :meth:`close`."""

    def __init__(self, path, threads: int):
        self._position = 0
        self._errors: list[bytes] = []
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bpbc.gzip_reader", os.fspath(path), str(threads), str(END_CHECK_MAX_BYTES)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
            start_new_session=True, env=_child_environment())
        self._pipe = self._process.stdout
        try:
            import fcntl

            fcntl.fcntl(self._pipe.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)  # type: ignore[union-attr]
        except (ImportError, OSError):
            pass  # the default capacity: slower, not wrong
        # the child's stderr, drained beside the data so that it never blocks on it
        self._stderr = threading.Thread(target=self._drain, name="bpbc-gzip-errors", daemon=True)
        self._stderr.start()

    def _drain(self) -> None:
        for line in self._process.stderr:  # type: ignore[union-attr]
            self._errors.append(line)

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer) -> int:
        got = self._pipe.readinto(buffer)  # type: ignore[union-attr]
        if got:
            self._position += got
            return got
        if len(buffer):
            self._raise_if_failed()
        return 0

    def _raise_if_failed(self) -> None:
        status = self._process.wait()
        self._stderr.join()
        if status == 0:
            return
        lines = [line.decode("utf-8", "replace").strip() for line in self._errors]
        message = next((line for line in reversed(lines) if line), f"the decompressor ended with status {status}")
        if status == _TRUNCATED:
            raise EOFError(message)
        raise GzipError(message)

    def close(self) -> None:
        process = getattr(self, "_process", None)
        if process is not None:
            if process.poll() is None:
                process.kill()  # stopped before the end: the child is not needed any more
            process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
        super().close()


def _child_environment() -> dict:
    """This environment, with this package importable in the child from where
    it was imported here (a run from a source tree)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def parallel_gzip(path, threads: int | None):
    """``path`` opened for parallel decompression (:class:`GzipPipe`, in a
    BufferedReader: dnaio peeks at the first bytes of what it reads) when
    that pays: a regular gzip file of at least PARALLEL_GZIP_MIN_BYTES and at
    least PARALLEL_GZIP_MIN_THREADS threads to spend (``threads``, None: the
    usable cores); else None (stdin, pipes, other formats, small files, no
    rapidgzip: ISA-L on one thread)."""
    import importlib.util

    from .resources import usable_cores

    threads = usable_cores() if threads is None else threads
    if threads < PARALLEL_GZIP_MIN_THREADS or importlib.util.find_spec("rapidgzip") is None:
        return None
    if not stat.S_ISREG(os.stat(path).st_mode) or os.path.getsize(path) < PARALLEL_GZIP_MIN_BYTES:
        return None
    with open(path, "rb") as probe:
        if probe.read(2) != _GZIP_MAGIC:
            return None
    return io.BufferedReader(GzipPipe(path, threads))


def decompress_to(path: str, threads: int, out_fd: int) -> int:
    """The child's work: ``path`` decompressed by :class:`ParallelGzip` on
    ``threads`` threads into ``out_fd``. Returns the exit status: 0, or
    _TRUNCATED or 1 once the error's message is on stderr."""
    buffer = bytearray(_CHILD_BLOCK)
    view = memoryview(buffer)
    try:
        with ParallelGzip(path, threads) as stream:
            while got := stream.readinto(view):
                done = 0
                while done < got:
                    done += os.write(out_fd, view[done:got])
    except EOFError as error:
        print(error, file=sys.stderr)
        return _TRUNCATED
    except GzipError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    """``python -m bpbc.gzip_reader PATH THREADS END_CHECK_MAX_BYTES``: the child."""
    global END_CHECK_MAX_BYTES
    path, threads, END_CHECK_MAX_BYTES = argv[0], int(argv[1]), int(argv[2])
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # the reader went away: end at once, quietly
    return decompress_to(path, threads, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
