"""SW kernel alone, synthesised cell against the hand-written one, side by side.

``python -m bench.probes.cell_ab [--reads N] [--planes 5 6 7 8] [--out DIR]``: for
each plane count, one random pattern of ``--pattern-length`` over ``--reads``
random full-length reads, the median kernel time (CUDA events, after a
warm-up) of ``GpuEngine(cell="hand")`` and ``GpuEngine(cell="synth")``
(sw_screen's CELL template argument 0 / 1), alternating, and TCUPS. Also
checks that both give the same best planes and flags. Needs a GPU.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    import cupy

    from bpbc.alphabet import encode_pattern
    from bpbc.gpu_engine import GpuEngine, chain_shape, kernel_expression, stripe_mode
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring
    from bpbc.sw_cells import available

    from bench.gpu_kernel import time_sw_kernel
    from bench.inputs import random_prepared
    from bench.logic_ceiling import LogicCeiling

    parser = argparse.ArgumentParser(prog="python -m bench.probes.cell_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=1_048_576)
    parser.add_argument("--read-length", type=int, default=150)
    parser.add_argument("--pattern-length", type=int, default=128)
    parser.add_argument("--planes", type=int, nargs="+", default=[5, 6, 7, 8])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    scoring = Scoring()
    rng = np.random.default_rng(1)
    masks = encode_pattern("".join(rng.choice(list("ACGT"), args.pattern_length)))
    prepared = random_prepared(args.reads, args.read_length, seed=1)
    cells = args.reads * args.read_length * args.pattern_length
    rows_per_lane, lanes, stripes = chain_shape(args.pattern_length)
    circuits = available()
    device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    ceiling = LogicCeiling.of_device()
    table = PatternTable.of([masks])
    rows = []
    for planes in args.planes:
        synthesised = (planes, scoring.match, scoring.mismatch, scoring.gap_open, scoring.gap_extend) in circuits
        outputs = {}
        for cell in ("hand", "synth"):
            engine = GpuEngine(cell=cell)
            seconds = time_sw_kernel(engine, prepared, table, scoring, planes, args.repeats)
            tcups = ceiling.rate(f"cell_ab: the {cell} cell, {planes} planes", cells, seconds, planes) / 1e12
            best, flag = engine.launch(prepared, table, scoring, planes)
            outputs[cell] = (best.get(), flag.get())
            row = {"device": device, "cell": cell, "synthesised": synthesised and cell == "synth", "planes": planes,
                   "kernel": kernel_expression(planes, rows_per_lane, lanes, scoring, engine.cell, True, stripe_mode(stripes)),
                   "reads": args.reads, "read_length": args.read_length, "pattern_length": args.pattern_length,
                   "seconds": f"{seconds:.6f}", "tcups": f"{tcups:.3f}"}
            rows.append(row)
            print(" ".join(f"{k}={v}" for k, v in row.items() if k != "device"), flush=True)
        same = all(np.array_equal(a, b) for a, b in zip(outputs["hand"], outputs["synth"]))
        print(f"planes={planes} hand and synth outputs equal: {same}", flush=True)
        if not same:
            print("MISMATCH between the hand and synthesised cells", file=sys.stderr)
            return 1
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        with open(args.out / "cell_ab.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
