"""CPU SW kernel alone, kernel shapes side by side, one thread.

``python -m bench.cpu_cell_ab [--reads N] [--planes 5 6] [--shapes SHAPE ...]
[--with-best] [--asm] [--out DIR]``: one random pattern of ``--pattern-length`` over
``--reads`` random full-length reads; for every plane count (6: scores and
flag, the usual full pass; 5: flag only, the usual first pass, unless
``--with-best``: the library's dense first pass) and every
shape (``words,rows,gates,loads[,vector[,stripe_bytes]]``; default: the target's shape), the median
time of the kernel on one thread over all superblocks, the shapes
alternating within each repeat, and GCUPS per core. Checks that every shape
gives the same best planes and flags as the first. ``--asm``: also counts
the vector instructions of each kernel's word loop by class
(bench/cpu_asm_count.py). ``--screen T``: also the screen as
``bpbc.Screener`` runs it at threshold T on one thread (forward strand, the
target's shape): the flag-only pass one plane short over every read, then
the flagged (read, pattern) pairs alone with scores; on the same reads, and
with the pattern planted in every 16th read; its hits checked against the
one-pass kernel's scores at T's plane count.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from .cpu_asm_count import count_kernel, parse_shape


def main(argv: list[str] | None = None) -> int:
    from bpbc.alphabet import encode_pattern
    from bpbc.cpu_engine import CpuEngine, PreparedReads, cpu_target, kernel_shape
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring

    parser = argparse.ArgumentParser(prog="python -m bench.cpu_cell_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=32768)
    parser.add_argument("--read-length", type=int, default=150)
    parser.add_argument("--pattern-length", type=int, default=128)
    parser.add_argument("--planes", type=int, nargs="+", default=[6, 5])
    parser.add_argument("--shapes", nargs="+", default=None,
                        help="words,rows,gates,loads[,vector[,stripe_bytes]] (default: the target's)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--with-best", action="store_true",
                        help="best planes at every plane count (5: the library's dense first pass)")
    parser.add_argument("--asm", action="store_true")
    parser.add_argument("--screen", type=int, default=None, metavar="T")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    scoring = Scoring()
    rng = np.random.default_rng(1)
    pattern = "".join(rng.choice(list("ACGT"), args.pattern_length))
    masks = encode_pattern(pattern)
    table = PatternTable.of([masks])
    codes = rng.integers(0, 4, size=(args.reads, args.read_length), dtype=np.uint8)
    lengths = np.full(args.reads, args.read_length, dtype=np.int64)
    shapes = [parse_shape(s) for s in args.shapes] if args.shapes else [kernel_shape()]
    cells = args.reads * args.read_length * args.pattern_length
    target = cpu_target()
    print(f"target {target.label}; {args.reads} reads x {args.read_length} vs {args.pattern_length}", flush=True)
    rows = []
    for planes in args.planes:
        track_best = planes != 5 or args.with_best
        runs = []
        for shape in shapes:
            prepared = PreparedReads(codes, lengths, words=shape.words)
            engine = CpuEngine(threads=1, shape=shape)
            tasks = engine._all_tasks(prepared, table)

            def go(engine=engine, prepared=prepared, tasks=tasks):
                return engine._run(prepared, table, scoring, planes, *tasks, track_best=track_best)

            t0 = time.perf_counter()
            out = go()  # compile (or load from numba's cache) and warm up
            compile_s = time.perf_counter() - t0
            runs.append((shape, go, out, compile_s, []))
        # outputs in lane order: superblocks of different words hold the same lanes in the same order
        def lanes(best):
            return best.transpose(0, 2, 1).reshape(best.shape[0] * best.shape[2], best.shape[1])

        ref_best, ref_flag = lanes(runs[0][2][0]), runs[0][2][1].reshape(-1)
        for shape, _, (best, flag), _, _ in runs[1:]:
            same = np.array_equal(lanes(best), ref_best) and np.array_equal(flag.reshape(-1), ref_flag)
            if not same:
                print(f"MISMATCH: planes={planes} shape {shape} differs from {runs[0][0]}")
                return 1
        for _ in range(args.repeats):
            for _, go, _, _, times in runs:
                t0 = time.perf_counter()
                go()
                times.append(time.perf_counter() - t0)
        base = float(np.median(runs[0][4]))
        for shape, _, _, compile_s, times in runs:
            seconds = float(np.median(times))
            row = {"target": target.name, "planes": planes, "track_best": track_best, "shape": str(shape),
                   "seconds": f"{seconds:.4f}", "gcups_per_core": f"{cells / seconds / 1e9:.3f}",
                   "vs_first": f"{base / seconds:.3f}", "first_call_s": f"{compile_s:.1f}"}
            if args.asm:
                row.update(count_kernel(planes, scoring, track_best, shape))
            rows.append(row)
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if args.screen is not None:
        rows += screen_rows(codes, lengths, pattern, args.screen, args.repeats, target.name, cells)
    if args.out:
        from .environment import device_kind, environment, write_csv

        write_csv(args.out / f"cpu_cell_ab_{device_kind(None)}.csv", rows, environment(None))
    return 0


def screen_rows(codes, lengths, pattern: str, threshold: int, repeats: int, target: str, cells: int) -> list[dict]:
    """The two-pass screen's rows (see ``--screen``), one per planting."""
    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.cpu_engine import CpuEngine
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring, score_planes
    from bpbc.screener import ReadBatch, Screener

    masks = encode_pattern(pattern)
    pattern_codes = encode_reads([pattern])[0][0]
    planes = score_planes(threshold)
    rows = []
    for every in (0, 16):
        planted = codes.copy()
        if every:  # the pattern's bases over columns 10.. of every 16th read
            planted[::every, 10:10 + len(pattern)] = pattern_codes
        engine = CpuEngine(threads=1)
        screener = Screener([pattern], threshold, strand="forward", engine=engine, threads=1)
        batch = ReadBatch.from_codes(planted, lengths, engine)
        hits = screener.hits(batch)  # compile and warm up
        scores, overflow = engine.scores(batch.prepared, PatternTable.of([masks]), Scoring(), planes)
        expected = np.flatnonzero((scores[:, 0] >= threshold) | overflow[:, 0])
        if not np.array_equal(hits.read, expected):
            raise AssertionError("the two-pass screen's hits differ from the one-pass kernel's")
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            screener.hits(batch)
            times.append(time.perf_counter() - t0)
        seconds = float(np.median(times))
        row = {"target": target, "planes": planes, "track_best": "two passes", "shape": f"screen T={threshold}",
               "planted": f"1/{every}" if every else "none", "hits": len(hits), "seconds": f"{seconds:.4f}",
               "gcups_per_core": f"{cells / seconds / 1e9:.3f}"}
        rows.append(row)
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
