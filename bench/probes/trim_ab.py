"""bench trimming's timed runs (the screen, and the same run with ``--action trim``) for two or
more source trees, round by round in turns, each run kept only where the rest of the machine
stayed idle while it ran: on a machine shared with other work, trim/screen ratios from runs
minutes apart differ by more than a change to the trimming does.

    python -m bench.probes.trim_ab --tree before=/tmp/base --tree after=. [--reads 400000] [--rounds 12]

The screen runs in the first tree only (trimming changes do not touch it). Prints per data set
(reads with planted adapters, reads without any; ``--data`` picks) the medians and minimums of
the run's wall time (``--json``), the process's wall time and its CPU time, each tree's trim /
screen of the medians, and the median of the per-round ratios (each trim run against the
screen run of its own round: slow drifts of the machine cancel). ``--raw FILE`` keeps every
run (JSON). ``--scratch /dev/shm`` keeps the reads and outputs in memory: on this VM the
disk's writeback of the last runs' 260 MB made runs of every tree 1.5-2x slower at times.
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


def timed(tree: Path, args: list[str], json_path: Path, slack: float) -> tuple[float, float, float]:
    """(run wall from --json, process wall, process CPU) of one run in ``tree``, repeated until
    the rest of the machine used under ``slack`` CPU seconds while it ran."""
    while True:
        _wait_for_idle()
        before, busy = resource.getrusage(resource.RUSAGE_CHILDREN), _busy()
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bpbc", *args], check=True, capture_output=True, cwd=tree,
                       env=_ENVIRONMENT)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        if _busy() - busy - cpu < slack:
            return json.loads(json_path.read_text())["wall_time_s"], wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probes.trim_ab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH, two or more")
    parser.add_argument("--reads", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--slack", type=float, default=0.08, help="CPU seconds others may use during a run")
    parser.add_argument("--data", default="planted,adapter-free", help="data sets, comma-separated")
    parser.add_argument("--device", default="cpu", help="the runs' --device (cpu, gpu)")
    parser.add_argument("--raw", type=Path, help="write every run here (JSON)")
    parser.add_argument("--scratch", type=Path, help="where the reads and outputs go (default: the temporary "
                        "directory; /dev/shm leaves out the disk's writeback, this VM's largest noise)")
    args = parser.parse_args(argv)
    raw: dict[str, dict[str, list]] = {}
    trees = dict(item.split("=", 1) for item in args.tree)
    with tempfile.TemporaryDirectory(prefix="bpbc-trim-ab-", dir=args.scratch) as scratch:
        work = Path(scratch)
        (work / "adapter.fa").write_text(f">truseq\n{ADAPTER}\n")
        for label, adapters in (("planted", True), ("adapter-free", False)):
            if label not in args.data.split(","):
                continue
            reads = work / f"{label}.fq"
            reads.write_bytes(planted_reads(args.reads, 150, 20, adapters=adapters)[0])
            common = [str(reads), str(work / "adapter.fa"), "--strand", "forward", "--min-score-fraction", "0.8",
                      "--device", args.device, "-o", str(work / "hits.paf"), "--matched", str(work / "m.fq"), "--unmatched",
                      str(work / "u.fq"), "-q", "--json", str(work / "s.json")]
            trim = ["--action", "trim", "--min-overlap", str(MIN_OVERLAP)]
            first = next(iter(trees))
            names = ["screen", *trees]
            runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
            for round_ in range(args.rounds + 1):  # round 0 warms the caches (numba's, the bytecode)
                for name in names[round_ % len(names):] + names[:round_ % len(names)]:
                    tree = Path(trees[first if name == "screen" else name]).resolve()
                    result = timed(tree, common + ([] if name == "screen" else trim), work / "s.json", args.slack)
                    if round_:
                        runs[name].append(result)
            raw[label] = runs
            screen = [statistics.median(run[k] for run in runs["screen"]) for k in range(3)]
            for name in names:
                cells = []
                for k, what in enumerate(("run wall", "process wall", "CPU")):
                    median = statistics.median(run[k] for run in runs[name])
                    low = min(run[k] for run in runs[name])
                    ratio = "" if name == "screen" else f" = {median / screen[k]:.3f}x"
                    paired = "" if name == "screen" else ", per round {:.3f}x".format(statistics.median(
                        run[k] / base[k] for run, base in zip(runs[name], runs["screen"])))
                    cells.append(f"{what} {median:.3f}{ratio}{paired} (min {low:.3f})")
                print(f"{label:12} {name:8} " + "; ".join(cells), flush=True)
    if args.raw is not None:
        args.raw.write_text(json.dumps(raw))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
