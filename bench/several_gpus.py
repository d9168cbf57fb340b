"""Several GPUs in one process: ``python -m bench several-gpus [--panels 5000x24 long2000] [--gpus 1 2 4]``.

Runs ``bpbc-screen READS PANEL --device gpu -t 40 -o PAF --matched FQ --json``
as a fresh process with ``CUDA_VISIBLE_DEVICES`` showing the first k GPUs,
for each k of ``--gpus`` the host has, each tree (``--trees``, as
``python -m bench host-pipeline`` takes them) and each panel, the rounds
(``--repeats``) alternating. A row gives the process wall, the ``--json``
wall and stages, the devices the run used, the cells of the run (reads x read
length x pattern bases x 2 strands) per second of ``--json`` wall and per
device second (the ``device`` stage is added up over the devices), the
speed-ups over the one-device run of the same tree and round by process wall
(issue 40's measure) and by ``--json`` wall, and whether the PAF and the
matched reads are byte for byte those of that run. A run that compiled
kernels (its ``compile`` stage) says so where it is printed: its walls hold that.

Panels: ``COUNTxLENGTH`` random patterns, or ``long2000``: 2000 patterns of
100-10,000 bp, lengths uniform (issue 28's long-pattern panel). Reads:
:mod:`bench.host_data` (150 bp, FASTQ.gz), made once in ``--work``. Each tree
first compiles its CPU kernels (``python -m bpbc.prepare``: without it the
first full run of each tree compiled numba's parallel kernels, 10-17 s in
session 30) and screens 20k reads against every panel on every GPU (the GPU
kernels compiled and cached). Writes ``several_gpus_<device>.csv`` under ``--out``.
``--quick`` (CI, no GPU): 2000 reads, a 10 x 24 bp panel, ``--device cpu``
with "1 and 2 GPUs" (the variable set, the CPU engine running), one round:
the machinery, not the speed.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from .environment import RESULTS_DIR, device_kind, environment, gpu_info, write_csv
from .host_pipeline import ROOT, random_patterns, timed

READ_LENGTH, THRESHOLD, STRANDS = 150, 40, 2
LONG_PANEL = "long2000"


def panel_file(work: Path, panel: str) -> Path:
    """The FASTA of ``panel`` (made once in ``work``), seeded."""
    path = work / f"panel_{panel}.fa"
    if path.exists():
        return path
    if panel != LONG_PANEL:
        count, _, length = panel.lower().partition("x")
        return random_patterns(path, int(count), int(length), 7)
    rng = np.random.default_rng(28)
    bases = np.frombuffer(b"ACGT", np.uint8)
    rows = [bases[rng.integers(0, 4, n)] for n in rng.integers(100, 10_001, 2000)]
    path.write_text("".join(f">p{i}\n{row.tobytes().decode()}\n" for i, row in enumerate(rows)))
    return path


def pattern_bases(path: Path) -> int:
    return sum(len(line.strip()) for line in path.read_text().splitlines() if not line.startswith(">"))


def visible_gpus() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no CuPy or no GPU
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench several-gpus", description=__doc__)
    parser.add_argument("--reads", type=int, default=1_000_000)
    parser.add_argument("--panels", nargs="+", default=["5000x24"], help="COUNTxLENGTH or long2000")
    parser.add_argument("--gpus", type=int, nargs="+", default=None, help="GPU counts (default: 1, 2, 4, ... up to the host's)")
    parser.add_argument("--trees", nargs="+", default=[f"new={ROOT}"], help="NAME=DIR: checkouts whose bpbc runs")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bpbc-gpus"), help="inputs (made once) and outputs")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--quick", action="store_true", help="CI: small, --device cpu, one round")
    args = parser.parse_args(argv)

    device = "cpu" if args.quick else "gpu"
    if args.quick:
        args.reads, args.panels, args.gpus, args.repeats = 2000, ["10x24"], [1, 2], 1
    available = visible_gpus()
    if device == "gpu" and not available:
        print("several-gpus: no GPU visible", file=sys.stderr)
        return 1
    counts = args.gpus or [k for k in (1, 2, 4, 8, 16) if k <= available]
    counts = sorted({k for k in counts if device == "cpu" or k <= available} | {1})
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    reads = work / f"reads_{args.reads}.fq.gz"
    warm = work / f"reads_{min(args.reads, 20_000)}.fq.gz"
    for path, count in ((reads, args.reads), (warm, min(args.reads, 20_000))):
        if not path.exists():
            subprocess.run([sys.executable, "-m", "bench.host_data", str(path), "--reads", str(count), "--seed",
                            str(count)], check=True, cwd=ROOT)
    panels = {name: panel_file(work, name) for name in args.panels}
    trees = dict(item.split("=", 1) for item in args.trees)

    def command(tree: str, reads_file: Path, panel: Path, gpus: int, out: str) -> tuple[list[str], dict, str]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([trees[tree], os.environ.get("PYTHONPATH", "")]),
               "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(gpus)))}
        return ([sys.executable, "-m", "bpbc", str(reads_file), str(panel), "--device", device, "-t", str(THRESHOLD),
                 "-q", "-o", str(work / f"{out}.paf"), "--matched", str(work / f"{out}.fq"),
                 "--json", str(work / f"{out}.json")], env, trees[tree])

    for tree in trees:
        if not args.quick:  # every CPU kernel, the parallel ones the 20k warm-up reads never reach among them
            timed([sys.executable, "-m", "bpbc.prepare", "-t", str(THRESHOLD), "--device", device],
                  {**os.environ, "PYTHONPATH": os.pathsep.join([trees[tree], os.environ.get("PYTHONPATH", "")])},
                  trees[tree])
        for panel in panels.values():
            for gpus in counts:
                timed(*command(tree, warm, panel, gpus, "warm"))
    rows: list[dict] = []
    for repeat in range(args.repeats):
        for name, panel in panels.items():
            cells = args.reads * READ_LENGTH * pattern_bases(panel) * STRANDS
            for tree in trees:
                for gpus in counts:
                    out = f"{tree}_{name}_{gpus}"
                    wall, rss, code = timed(*command(tree, reads, panel, gpus, out))
                    summary = json.loads((work / f"{out}.json").read_text()) if code == 0 else {}
                    stages = summary.get("stage_seconds", {})
                    row = {"panel": name, "tree": tree, "gpus": gpus, "round": repeat, "exit": code,
                           "process_wall_s": round(wall, 3), "peak_rss_gb": round(rss, 3),
                           "json_wall_s": summary.get("wall_time_s"), "devices": summary.get("devices"),
                           **{f"stage_{k}": round(v, 3) for k, v in stages.items()}, "cells": cells}
                    if code == 0:
                        row["tcups_by_wall"] = round(cells / summary["wall_time_s"] / 1e12, 3)
                        if stages.get("device"):
                            row["tcups_per_device_s"] = round(cells / stages["device"] / 1e12, 3)
                    one = f"{tree}_{name}_1"
                    base = next(r for r in rows if r["tree"] == tree and r["panel"] == name
                                and r["round"] == repeat and r["gpus"] == 1) if gpus > 1 else None
                    if base is not None and base["exit"] == 0 and code == 0:
                        # issue 40's target is by process wall; a run that compiled kernels says so below
                        row["speedup_by_process_wall"] = round(base["process_wall_s"] / row["process_wall_s"], 3)
                        row["speedup_by_run"] = round(base["json_wall_s"] / summary["wall_time_s"], 3)
                        row["identical_to_one"] = all(filecmp.cmp(work / f"{one}{s}", work / f"{out}{s}", shallow=False)
                                                      for s in (".paf", ".fq"))
                    rows.append(row)
                    compiled = stages.get("compile", 0.0)
                    print(f"{name:10} {tree:6} {gpus} GPU(s)  {wall:8.2f} s  --json {row['json_wall_s']}  "
                          f"x{row.get('speedup_by_process_wall', 1.0)} by process wall, "
                          f"x{row.get('speedup_by_run', 1.0)} by run  identical {row.get('identical_to_one', '-')}"
                          + (f"  (compiled kernels for {compiled:.2f} s of it)" if compiled else ""),
                          file=sys.stderr, flush=True)
    gpu = gpu_info()
    stem = "several_gpus_quick" if args.quick else "several_gpus"
    path = write_csv(args.out / f"{stem}_{device_kind(gpu)}.csv", rows, environment(gpu))
    print(f"{len(rows)} rows -> {path}", file=sys.stderr)
    return 0 if all(r["exit"] == 0 and r.get("identical_to_one", True) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
