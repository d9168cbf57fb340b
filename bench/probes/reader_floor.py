"""How fast one process can take a gzip file's decompressed bytes into its own memory, the floor
under a run that reads the file (issue 40's PAF-only target is a ratio to ``rapidgzip -d -c -P N
> /dev/null``, which copies nothing):

    python -m bench.probes.reader_floor FILE.fq.gz [--threads 16] [--rounds 2]

Each round drains the file into one 16 MB buffer by ``readinto`` through: rapidgzip's Python
reader in this process (``ParallelGzip``); the run's reader, rapidgzip in a child process writing
into shared memory (``GzipProcess``); the rapidgzip command writing into a pipe of the default
64 KiB and of 1 MiB (the command on PATH). Prints seconds and GB for each.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import subprocess
import time

import numpy as np

from bpbc.gzip_reader import GzipProcess, ParallelGzip

BUFFER_BYTES = 16 << 20


class _CommandPipe:
    """The rapidgzip command's output through a pipe of ``pipe_size`` bytes (0: the default)."""

    def __init__(self, path: str, threads: int, pipe_size: int):
        read_end, write_end = os.pipe()
        if pipe_size:
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, pipe_size)
        self._process = subprocess.Popen(["rapidgzip", "-d", "-c", "-P", str(threads), path], stdout=write_end)
        os.close(write_end)
        self._file = open(read_end, "rb", buffering=0)

    def readinto(self, buffer) -> int:
        return self._file.readinto(buffer)

    def close(self) -> None:
        self._file.close()
        self._process.wait()


def drained(stream) -> int:
    view = memoryview(np.empty(BUFFER_BYTES, np.uint8))
    total = 0
    try:
        while got := stream.readinto(view):
            total += got
    finally:
        stream.close()
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    readers = {
        "ParallelGzip (this process)": lambda: ParallelGzip(args.path, args.threads),
        "GzipProcess (child, shared memory)": lambda: GzipProcess(args.path, args.threads),
        "rapidgzip command, pipe 64 KiB": lambda: _CommandPipe(args.path, args.threads, 0),
        "rapidgzip command, pipe 1 MiB": lambda: _CommandPipe(args.path, args.threads, 1 << 20),
    }
    for _ in range(args.rounds):
        for name, make in readers.items():
            start = time.perf_counter()
            size = drained(make())
            print(f"{name}: {time.perf_counter() - start:.2f} s, {size / 1e9:.2f} GB", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
