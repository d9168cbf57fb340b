"""SW kernel alone on long reads against a long pattern: a chain's stripes
in turn against in parallel (a warp each), side by side.

``python -m bench.probes.stripes_ab [--reads N] [--pattern-length M] [--rows R ...]``:
``--reads`` random reads of ``--min-length``..``--max-length`` bases (one
batch, sorted by length as the engine sorts them) against one random
pattern, for each plane count the median kernel time (CUDA events on the
engine's stream, after a warm-up launch on a small batch that compiles the
kernel) of each stripe mode (``BPBC_GPU_STRIPES``) and rows per lane, and
device TCUPS over the reads' own cells. Checks that every variant gives
the same best planes and flags. Needs a GPU. The defaults are one batch
of the lambda case (``bench long-reads --cases lambda``: 64 Mb a chunk).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np


def main(argv: list[str] | None = None) -> int:
    import cupy

    from bpbc import gpu_engine
    from bpbc.alphabet import encode_pattern
    from bpbc.gpu_engine import WORD_BITS, GpuEngine, PreparedReads, chain_shape
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring

    from bench.gpu_kernel import time_sw_kernel
    from bench.logic_ceiling import LogicCeiling

    parser = argparse.ArgumentParser(prog="python -m bench.probes.stripes_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=5_400)
    parser.add_argument("--min-length", type=int, default=5_000)
    parser.add_argument("--max-length", type=int, default=20_000)
    parser.add_argument("--pattern-length", type=int, default=48_502)
    parser.add_argument("--planes", type=int, nargs="+", default=[10, 11],
                        help="plane counts; the first pass's flag-only kernel below the largest")
    parser.add_argument("--rows", type=int, nargs="+", default=[0], help="rows per lane (0: chain_shape's)")
    parser.add_argument("--modes", nargs="+", default=["parallel", "turn"], choices=sorted(gpu_engine.STRIPE_MODES))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    scoring = Scoring()
    rng = np.random.default_rng(1)
    masks = encode_pattern("".join(rng.choice(list("ACGT"), args.pattern_length)))
    lengths = np.sort(rng.integers(args.min_length, args.max_length + 1, args.reads))
    groups = -(-args.reads // WORD_BITS)
    planes_rng = cupy.random.default_rng(1)
    words = planes_rng.integers(0, 1 << 32, size=(groups, args.max_length, 3), dtype=cupy.uint64).astype(cupy.uint32)
    words[:, :, 2] = 0xFFFFFFFF
    group_length = lengths[np.minimum(np.arange(groups) * WORD_BITS + WORD_BITS - 1, args.reads - 1)]
    prepared = PreparedReads(args.reads, np.arange(args.reads), words, cupy.asarray(group_length.astype(np.int32)))
    small = PreparedReads(64, np.arange(64), words[:2, :200].copy(), cupy.full(2, 200, cupy.int32))
    cupy.cuda.get_current_stream().synchronize()
    cells = float(lengths.sum()) * args.pattern_length
    ceiling = LogicCeiling.of_device()
    top = max(args.planes)
    print(f"# {args.reads} reads of {args.min_length}-{args.max_length} bp ({lengths.sum() / 1e6:.1f} Mb, {groups} word"
          f" groups) x {args.pattern_length} bp, chain_shape {chain_shape(args.pattern_length)}, "
          f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    default_rows = gpu_engine.ROWS_PER_LANE
    outputs: dict = {}
    for planes in args.planes:
        best = planes == top
        for rows in args.rows:
            for mode in args.modes:
                os.environ[gpu_engine.STRIPES_ENV] = mode
                gpu_engine.ROWS_PER_LANE = default_rows if rows == 0 else (rows,)
                table = PatternTable.of([masks])  # its launches are cached: one table a variant
                engine = GpuEngine()
                engine.launch(small, table, scoring, planes, track_best=best)  # compiles
                launch = gpu_engine._launches(table)[0]
                kernel = gpu_engine._kernel(planes, launch.rows, launch.lanes, scoring, engine.cell, best,
                                            gpu_engine.stripe_mode(launch.stripes), gpu_engine._device())
                resident = engine._resident_threads(kernel) // WORD_BITS

                def run():
                    return engine.launch(prepared, table, scoring, planes, track_best=best)

                seconds = time_sw_kernel(_Launcher(run, engine), prepared, table, scoring, planes, args.repeats, warmup=0)
                tcups = ceiling.rate(f"stripes_ab {mode}", cells, seconds, planes) / 1e12
                out_best, out_flag = run()
                result = (out_best.get(), out_flag.get())
                key = (planes, best)
                same = "" if key not in outputs else (
                    "same" if all(np.array_equal(a, b) for a, b in zip(outputs[key], result)) else "DIFFERENT")
                outputs.setdefault(key, result)
                print(f"planes {planes:2} {'best' if best else 'flag'} rows {launch.rows} lanes {launch.lanes} "
                      f"stripes {launch.stripes:3} {mode:8} {seconds * 1e3:10.1f} ms {tcups:6.3f} TCUPS "
                      f"(regs {kernel.num_regs}, {resident} warps resident) {same}", flush=True)
                if same == "DIFFERENT":
                    return 1
    return 0


class _Launcher:
    """time_sw_kernel's engine: ``launch`` runs the variant's call (on its engine's stream)."""

    def __init__(self, run, engine):
        self.run, self.engine = run, engine

    def launch(self, *_):
        self.run()

    def screening_stream(self):
        return self.engine.screening_stream()


if __name__ == "__main__":
    sys.exit(main())
