"""bench trimming's timed runs (the screen, and the same run with ``--action trim``) for one or
more source trees, round by round in turns, each run kept only where the rest of the machine
stayed idle while it ran: on a machine shared with other work, trim/screen ratios from runs
minutes apart differ by more than a change to the trimming does.

    python -m bench.probes.trim_ab --tree before=/tmp/base --tree after=. [--reads 400000] [--rounds 12]

Each tree runs the screen and the trim (a change to the pipeline moves both). Prints per data
set (reads with planted adapters, reads without any; ``--data`` picks) and tree the medians and
minimums of the run's wall time (``--json``), the process's wall time and its CPU time, the
trim / screen of the medians and of the minimums, and the median of the per-round ratios (each
trim run against its tree's screen run of the same round: slow drifts of the machine cancel).
``--raw FILE`` keeps every run (JSON). ``--scratch /dev/shm`` keeps the reads and outputs in
memory: on this VM the disk's writeback of the last runs' 260 MB made runs of every tree
1.5-2x slower at times. ``--any-load`` keeps every run (a machine of its own, the GPU's host).
``--warm`` runs each tree's rounds in one process instead, each timed run after a run of 1,000
reads in the same mode: every kernel loaded and module imported, what trimming costs per read
without what it costs a process once (run wall only).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.trimming import ADAPTER, MIN_OVERLAP, planted_reads

_HZ = os.sysconf("SC_CLK_TCK")


def _busy() -> float:
    """CPU seconds the whole machine has been busy (all but idle and iowait)."""
    with open("/proc/stat") as fh:
        values = list(map(int, fh.readline().split()[1:]))
    return (sum(values) - values[3] - values[4]) / _HZ


def _wait_for_idle(limit: float = 0.03) -> None:
    while True:
        before = _busy()
        time.sleep(0.5)
        if _busy() - before < limit:
            return


#: the runs' environment: Python may write bytecode, as an installed package has it (this
#: sandbox sets PYTHONDONTWRITEBYTECODE, and every run compiled every module from source:
#: 56 ms of bpbc's, 9 of them trimming's two modules, which only the trim runs import)
_ENVIRONMENT = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def timed(tree: Path, args: list[str], json_path: Path, slack: float | None) -> tuple[float, float, float]:
    """(run wall from --json, process wall, process CPU) of one run in ``tree``, repeated until
    the rest of the machine used under ``slack`` CPU seconds while it ran (None: once)."""
    while True:
        if slack is not None:
            _wait_for_idle()
        before, busy = resource.getrusage(resource.RUSAGE_CHILDREN), _busy()
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bpbc", *args], check=True, capture_output=True, cwd=tree,
                       env=_ENVIRONMENT)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        if slack is None or _busy() - busy - cpu < slack:
            return json.loads(json_path.read_text())["wall_time_s"], wall, cpu


#: one process's warm rounds (``--warm``): argv[1] is JSON [common args, trim args, tiny reads, rounds, json path];
#: prints {"screen": [run walls], "trim": [...]}
_WARM_DRIVER = """
import json, sys
from bpbc.cli import main
common, trim, tiny, rounds, json_path = json.loads(sys.argv[1])
walls = {"screen": [], "trim": []}
for round_ in range(rounds + 1):
    for mode in ("screen", "trim") if round_ % 2 else ("trim", "screen"):
        extra = trim if mode == "trim" else []
        assert main([tiny, *common[1:], *extra]) == 0
        assert main([*common, *extra]) == 0
        if round_:
            with open(json_path) as fh:
                walls[mode].append(json.load(fh)["wall_time_s"])
print(json.dumps(walls))
"""


def warm_runs(tree: Path, common: list[str], trim: list[str], tiny: Path, rounds: int,
              json_path: Path) -> dict[str, list[float]]:
    """Run walls of ``rounds`` screen and trim runs in one process in ``tree``, each after a run of ``tiny``."""
    done = subprocess.run([sys.executable, "-c", _WARM_DRIVER, json.dumps([common, trim, str(tiny), rounds,
                                                                           str(json_path)])],
                          check=True, capture_output=True, cwd=tree, env=_ENVIRONMENT, text=True)
    return json.loads(done.stdout.splitlines()[-1])


def compared(what: str, screen: list[float], trimmed: list[float]) -> str:
    """One figure of paired screen and trim runs: medians and minimums, trim / screen of each, and the
    median of the per-round ratios."""
    medians, lows = (statistics.median(screen), statistics.median(trimmed)), (min(screen), min(trimmed))
    paired = statistics.median(t / s for s, t in zip(screen, trimmed))
    return (f"{what} {medians[0]:.3f} -> {medians[1]:.3f} (min {lows[0]:.3f} -> {lows[1]:.3f}): "
            f"{medians[1] / medians[0]:.3f}x, min {lows[1] / lows[0]:.3f}x, per round {paired:.3f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probes.trim_ab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH, one or more")
    parser.add_argument("--reads", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--slack", type=float, default=0.08, help="CPU seconds others may use during a run")
    parser.add_argument("--any-load", action="store_true", help="keep every run, whatever else the machine did")
    parser.add_argument("--data", default="planted,adapter-free", help="data sets, comma-separated")
    parser.add_argument("--device", default="cpu", help="the runs' --device (cpu, gpu)")
    parser.add_argument("--warm", action="store_true",
                        help="every tree's runs in one process, each after a run of 1,000 reads (run wall only)")
    parser.add_argument("--raw", type=Path, help="write every run here (JSON)")
    parser.add_argument("--scratch", type=Path, help="where the reads and outputs go (default: the temporary "
                        "directory; /dev/shm leaves out the disk's writeback, this VM's largest noise)")
    args = parser.parse_args(argv)
    raw: dict[str, dict] = {}
    trees = dict(item.split("=", 1) for item in args.tree)
    with tempfile.TemporaryDirectory(prefix="bpbc-trim-ab-", dir=args.scratch) as scratch:
        work = Path(scratch)
        (work / "adapter.fa").write_text(f">truseq\n{ADAPTER}\n")
        for label, adapters in (("planted", True), ("adapter-free", False)):
            if label not in args.data.split(","):
                continue
            reads = work / f"{label}.fq"
            data = planted_reads(args.reads, 150, 20, adapters=adapters)[0]
            reads.write_bytes(data)
            common = [str(reads), str(work / "adapter.fa"), "--strand", "forward", "--min-score-fraction", "0.8",
                      "--device", args.device, "-o", str(work / "hits.paf"), "--matched", str(work / "m.fq"), "--unmatched",
                      str(work / "u.fq"), "-q", "--json", str(work / "s.json")]
            trim = ["--action", "trim", "--min-overlap", str(MIN_OVERLAP)]
            if args.warm:
                tiny = work / f"{label}_tiny.fq"
                end = 0
                for _ in range(4000):  # the first 1,000 records
                    end = data.index(b"\n", end) + 1
                tiny.write_bytes(data[:end])
                raw[label] = {}
                for tree in trees:
                    walls = warm_runs(Path(trees[tree]).resolve(), common, trim, tiny, args.rounds, work / "s.json")
                    raw[label][tree] = walls
                    print(f"{label:12} {tree:8} warm, in one process: "
                          + compared("run wall", walls["screen"], walls["trim"]), flush=True)
                continue
            names = [(mode, tree) for tree in trees for mode in ("screen", "trim")]
            runs: dict[str, list[tuple[float, float, float]]] = {f"{mode} {tree}": [] for mode, tree in names}
            for round_ in range(args.rounds + 1):  # round 0 warms the caches (numba's, the bytecode)
                for mode, tree in names[round_ % len(names):] + names[:round_ % len(names)]:
                    result = timed(Path(trees[tree]).resolve(), common + (trim if mode == "trim" else []),
                                   work / "s.json", None if args.any_load else args.slack)
                    if round_:
                        runs[f"{mode} {tree}"].append(result)
            raw[label] = runs
            for tree in trees:
                screen, trimmed = runs[f"screen {tree}"], runs[f"trim {tree}"]
                cells = [compared(what, [run[k] for run in screen], [run[k] for run in trimmed])
                         for k, what in enumerate(("run wall", "process wall", "CPU"))]
                print(f"{label:12} {tree:8} screen -> trim: " + "; ".join(cells), flush=True)
    if args.raw is not None:
        args.raw.write_text(json.dumps(raw))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
