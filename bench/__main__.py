"""``python -m bench BENCHMARK [options]``: run one benchmark of the suite (docs/benchmarks.md).

``transpose``, ``sw`` and ``dask`` are parsed here and write ``DIR/<benchmark>_<device>.csv``
(and PNG plots); the others are their own scripts, run through this entry point:
see ``python -m bench NAME --help``."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from . import say
from .environment import RESULTS_DIR, device_kind, environment, gpu_info, write_csv
from .logic_ceiling import AboveLogicCeiling
from .plots import plot

#: benchmarks that are scripts of their own: name -> module (each has ``main(argv)``)
SCRIPTS = {
    "sass": "sass_count",
    "dpx": "dpx_peer",
    "fuzz": "fuzz",
    "startup": "startup",
    "gpu-kernel": "gpu_kernel",
    "cpu-kernel": "cpu_cell_ab",
    "transpose-variants": "transpose_variants",
    "host-pipeline": "host_pipeline",
    "trimming": "trimming",
    "library-scaling": "library_scaling",
    "fastq-scan": "fastq_scan",
    "panel-rate": "panel_rate",
    "several-gpus": "several_gpus",
    "long-reads": "long_reads",
    "long-read-tools": "long_read_tools",
    "long-exact": "long_exact",
    "long-traceback": "long_traceback",
    "known-ends-traceback": "known_ends_traceback",
}


def result_stem(command: str, device: str, quick: bool = False, only: list[str] | None = None,
                serve: bool = False) -> str:
    """The name of a run's result files: one current file per benchmark and
    device, where the sw parts run alone (``--only``) and the dask runs through
    bpbc-serve count as benchmarks of their own."""
    parts = list(only or []) if command == "sw" else []
    served = ["serve"] if command == "dask" and serve else []
    return "_".join([command, *(["quick"] if quick else []), *parts, *served, device])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return run_benchmark(argv)
    except AboveLogicCeiling as error:  # a timer missed work: no result file is written
        say(f"bench {argv[0]}: error: {error}")
        return 1


def run_benchmark(argv: list[str]) -> int:
    if argv and argv[0] in SCRIPTS:
        script = importlib.import_module(f"{__package__}.{SCRIPTS[argv[0]]}")
        if argv[0] == "fuzz":
            return script.main(argv[1:], prog="python -m bench fuzz")
        return script.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("command", choices=("transpose", "sw", "dask"),
                        help=f"(also: {', '.join(SCRIPTS)}; see their --help)")
    parser.add_argument("--quick", action="store_true", help="CPU only, small sizes, seconds (CI)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="output directory (default bench/results)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repetitions (median)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="transpose: instance counts")
    parser.add_argument("--length", type=int, default=150, help="transpose: read length")
    parser.add_argument("--cpu-max", type=int, default=None,
                        help="transpose: CPU transposes only up to this many instances (0: none)")
    parser.add_argument("--v1", action="store_true",
                        help="transpose: also time the first kernels (bench/transpose_v1.cu) in the same run")
    parser.add_argument("--e2e-reads", type=int, nargs="+", default=[1 << 20],
                        help="sw: reads in the end-to-end runs (default 1048576)")
    parser.add_argument("--check-cpu", action="store_true",
                        help="sw: end-to-end runs on the GPU are repeated on the CPU and their PAF compared")
    parser.add_argument("--pairs-reads", type=int, default=1 << 20,
                        help="sw: pairs (and reads) in the paired-end and demultiplexing runs (default 1048576)")
    parser.add_argument("--stream-reads", type=int, nargs="+", default=[],
                        help="sw: reads piped to bpbc-screen's stdin in the stream rows (none by default)")
    parser.add_argument("--stream-device", choices=("cpu", "gpu"), default="cpu", help="sw: engine of the stream rows")
    parser.add_argument("--only", choices=("table2", "library", "screen", "e2e", "pairs", "stream", "tools"),
                        nargs="+", default=None,
                        help="sw: run only these parts (tools, against BBDuk and cutadapt, runs only when named)")
    parser.add_argument("--tools-reads", type=int, nargs=2, default=[1 << 20, 100_000],
                        help="sw: reads in the runs against BBDuk (one pattern) and cutadapt (the panel)")
    parser.add_argument("--dask-reads", type=int, default=10_000_000,
                        help="dask: reads in all (default 10000000; --quick: 4000)")
    parser.add_argument("--workers", type=int, nargs="+", default=None,
                        help="dask: cluster sizes (default 1 2 4, as far as there are GPUs; --quick: 1 2)")
    parser.add_argument("--check-reads", action="store_true",
                        help="dask: compare the matched and unmatched reads too (decompressed, md5)")
    parser.add_argument("--serve", action="store_true",
                        help="dask: every command through one bpbc-serve (no row pays a process start)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="dask: write the inputs and outputs under this directory and keep them")
    args = parser.parse_args(argv)

    gpu = None if args.quick else gpu_info()
    kind = device_kind(gpu)
    env = environment(gpu)
    stem = result_stem(args.command, kind, quick=args.quick, only=args.only, serve=args.serve)
    if args.command == "dask":
        from .dask_bench import run

        rows = run(4000 if args.quick else args.dask_reads, args.quick, args.workers, args.repeats or 1,
                   args.check_reads, args.keep, args.serve)
    elif args.command == "transpose":
        from .transpose_bench import run

        rows, _ = run(args.sizes, args.length, args.repeats or (3 if args.quick else 5), args.quick,
                      v1=args.v1, **({} if args.cpu_max is None else {"cpu_max": args.cpu_max}))
        plot(rows, "instances", args.out / f"{stem}.png", f"bit transposes, L={args.length} ({kind})",
             series=("direction", "method"))
    else:
        from .sw_bench import run

        rows, _ = run(args.quick, args.repeats or (2 if args.quick else 3), args.e2e_reads, args.only, args.check_cpu,
                       args.pairs_reads, args.stream_reads, args.stream_device, args.tools_reads)
        plot(rows, "read_length", args.out / f"{result_stem('sw', kind, args.quick, ['table2'])}.png",
             f"SW, pattern 128 ({kind})", where=lambda r: r.get("case") == "table2")
        plot(rows, "instances", args.out / f"{result_stem('sw', kind, args.quick, ['screen'])}.png",
             f"screening, 150 bp reads ({kind})", series=("case", "method"),
             where=lambda r: str(r.get("case", "")).startswith("screen_"))
    path = write_csv(args.out / f"{stem}.csv", rows, env)
    say(f"bench {args.command}: {len(rows)} rows -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
