"""Plain FASTQ scanned for records: ``python -m bench.fastq_scan FILE.fq [--threads 1 2 ...]``.

GB/s of :func:`bpbc.chunks.scan_fastq` (one thread) and of the parallel
scan of :func:`bpbc.fastq_scan.scan_fastq_parallel` at each thread count
(on one thread the function calls scan_fastq), on the whole file in memory (make one with ``python -m bench.host_data FILE.fq
--reads 1000000``); the parallel scan's records are checked against the
sequential one's. Best of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import platform
import time

import numba
import numpy as np


def best_seconds(scan, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        scan()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    from bpbc.chunks import scan_fastq
    from bpbc.fastq_scan import SEGMENT, scan_fastq_parallel

    parser = argparse.ArgumentParser(prog="python -m bench.fastq_scan", description=__doc__)
    parser.add_argument("fastq", help="plain FASTQ file")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, numba.config.NUMBA_NUM_THREADS])  # type: ignore[attr-defined]
    parser.add_argument("--segment", type=int, default=SEGMENT, help="bytes per parallel task")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    buf = np.fromfile(args.fastq, np.uint8)
    size = buf.shape[0] // 8 + 1  # more than the records: a record is at least 8 bytes
    want = [np.empty(size, np.int64) for _ in range(3)]
    got = [np.empty(size, np.int64) for _ in range(3)]
    sequential = scan_fastq(buf, 0, buf.shape[0], size, *want)
    records = sequential[0]
    print(f"{args.fastq}: {buf.shape[0] / 1e6:.0f} MB, {records} records; {platform.processor() or platform.machine()}, "
          f"numba {numba.__version__}, {numba.config.NUMBA_NUM_THREADS} threads at most")  # type: ignore[attr-defined]
    seconds = best_seconds(lambda: scan_fastq(buf, 0, buf.shape[0], size, *want), args.repeats)
    print(f"scan_fastq             1 thread : {buf.shape[0] / seconds / 1e9:6.2f} GB/s")

    def scan():
        return scan_fastq_parallel(buf, 0, buf.shape[0], size, *got, segment=args.segment, min_span=0)

    before = numba.get_num_threads()
    try:
        for threads in args.threads:
            numba.set_num_threads(threads)
            result = scan()
            if result != sequential or not all(np.array_equal(a[:records], b[:records]) for a, b in zip(got, want)):
                raise SystemExit(f"the parallel scan ({threads} threads) differs from scan_fastq: {result} {sequential}")
            seconds = best_seconds(scan, args.repeats)
            print(f"parallel scan       {threads:4d} thread{'s' if threads > 1 else ' '}: "
                  f"{buf.shape[0] / seconds / 1e9:6.2f} GB/s")
    finally:
        numba.set_num_threads(before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
