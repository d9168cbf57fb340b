"""``python -m bench transpose|sw [--quick] [--out DIR]``: run a benchmark, write CSV and PNG;
``python -m bench fuzz --inputs N [--out DIR]``: fuzz the command's input paths (see bench/fuzz.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import say
from .environment import RESULTS_DIR, device_kind, environment, gpu_info, write_csv
from .plots import plot


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["fuzz"]:
        from .fuzz import main as fuzz

        return fuzz(argv[1:], prog="python -m bench fuzz")
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("command", choices=("transpose", "sw"))
    parser.add_argument("--quick", action="store_true", help="CPU only, small sizes, seconds (CI)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="output directory (default bench/results)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repetitions (median)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="transpose: instance counts")
    parser.add_argument("--length", type=int, default=150, help="transpose: read length")
    parser.add_argument("--e2e-reads", type=int, nargs="+", default=[1 << 20],
                        help="sw: reads in the end-to-end runs (default 1048576)")
    parser.add_argument("--check-cpu", action="store_true",
                        help="sw: end-to-end runs on the GPU are repeated on the CPU and their PAF compared")
    parser.add_argument("--only", choices=("table2", "library", "screen", "e2e"), nargs="+", default=None,
                        help="sw: run only these parts")
    args = parser.parse_args(argv)

    gpu = None if args.quick else gpu_info()
    kind = device_kind(gpu)
    env = environment(gpu)
    stem = f"{args.command}_{'quick_' if args.quick else ''}{kind}"
    if args.command == "transpose":
        from .transpose_bench import run

        rows, _ = run(args.sizes, args.length, args.repeats or (3 if args.quick else 5), args.quick)
        plot(rows, "instances", args.out / f"{stem}.png", f"bit transposes, L={args.length} ({kind})",
             series=("direction", "method"))
    else:
        from .sw_bench import run

        rows, _ = run(args.quick, args.repeats or (2 if args.quick else 3), args.e2e_reads, args.only, args.check_cpu)
        plot(rows, "read_length", args.out / f"{stem}_table2.png", f"SW, pattern 128 ({kind})",
             where=lambda r: r.get("case") == "table2")
        plot(rows, "instances", args.out / f"{stem}_screening.png", f"screening, 150 bp reads ({kind})",
             series=("case", "method"), where=lambda r: str(r.get("case", "")).startswith("screen_"))
    path = write_csv(args.out / f"{stem}.csv", rows, env)
    say(f"bench {args.command}: {len(rows)} rows -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
