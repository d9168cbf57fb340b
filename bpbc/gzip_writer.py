"""A gzip output compressed by ISA-L's threads in a process of its own.

The run's threads write the output's bytes into a pipe, in a system call
that does not hold the GIL; the child reads them in whole blocks and
compresses them with python-isal's threaded writer (the same writer as in
the run's process). In the run's process that writer copies every block
into a new ``bytes`` with the GIL held and its threads take the GIL for
each block, beside the stages that format the reads: the writing stage
bounded a run on 16 cores once rapidgzip's reading no longer did
(bench/results/read_path_h200.txt).

Only the standard library is imported here (ISA-L in the child): the child
imports this module alone.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys

_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); "
          "from bpbc.gzip_writer import compress_in_child; compress_in_child(sys.argv[2:])")


class GzipWriterProcess(io.RawIOBase):
    """``path`` written gzip-compressed (level 1, ``threads`` threads, blocks
    of ``block_size``) by a child process, from the bytes written here. An
    error of the child (a full disk, say) is raised here as the OSError it
    met, at the next write or at close."""

    def __init__(self, path, mode: str, threads: int, block_size: int):
        self._path = os.fspath(path)
        self._child = None
        data_r, self._data = os.pipe()
        self._status, status_w = os.pipe()
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-c", _CHILD, root, self._path, mode, str(threads), str(block_size), str(data_r),
                 str(status_w)], pass_fds=(data_r, status_w), stdin=subprocess.DEVNULL)
        except BaseException:
            os.close(self._data)
            os.close(self._status)
            raise
        finally:
            os.close(data_r)
            os.close(status_w)

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        view = memoryview(data)
        view = view.cast("B") if view.contiguous else memoryview(view.tobytes())
        done = 0
        while done < len(view):
            try:
                done += os.write(self._data, view[done:])
            except BrokenPipeError:
                self._finish()  # raises the child's error
                raise OSError(f"{self._path}: the compressing process ended early") from None
        return len(view)

    def _finish(self) -> None:
        """Wait for the child; raise its error, if it met one."""
        if self._child is None:
            return
        status = self._child.wait()
        self._child = None
        with open(self._status, "rb", closefd=True) as pipe:
            message = pipe.read().decode(errors="replace")
        self._status = -1
        if status != 0:
            number, _, text = message.partition("\t")
            if number.isdigit() and int(number):
                raise OSError(int(number), text, self._path)
            raise OSError(f"{self._path}: the compressing process failed ({text or f'exit status {status}'})")

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._data >= 0:
                os.close(self._data)  # the child's end of input: it compresses the rest and ends
                self._data = -1
            self._finish()
        finally:
            super().close()


def compress_in_child(argv: list[str]) -> None:
    """The child of a :class:`GzipWriterProcess`: its input read in whole
    blocks (so the file is the same however the parent wrote it) and written
    to ISA-L's threaded gzip writer; an error's errno and text go to the
    status pipe. Ctrl-C is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    path, mode, threads, block_size, data, status = argv[0], argv[1], *(int(arg) for arg in argv[2:6])
    try:
        from isal import igzip_threaded

        buffer = bytearray(block_size)
        with igzip_threaded.open(path, mode, compresslevel=1, threads=threads, block_size=block_size) as output, \
                open(data, "rb", buffering=0) as pipe:
            while True:
                filled = 0
                while filled < block_size and (got := pipe.readinto(memoryview(buffer)[filled:])):
                    filled += got
                if filled:
                    output.write(memoryview(buffer)[:filled])
                if filled < block_size:
                    break
    except BaseException as error:  # noqa: BLE001 - told to the parent, which raises it
        text = error.strerror if isinstance(error, OSError) and error.strerror else f"{type(error).__name__}: {error}"
        os.write(status, f"{getattr(error, 'errno', None) or 0}\t{text}".encode())
        sys.exit(1)
