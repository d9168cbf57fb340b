"""Run tests many times over under CPU load, and record how many failed (not in CI: tens of minutes).

    pip install pytest-repeat
    python scripts/flaky_under_load.py --count 300 --busy 2 --out bench/results/flaky_signal_cpu.txt \\
        tests/bpbc/test_cli.py::test_sigterm_in_any_stage_exits_143_and_leaves_no_files ...
    python scripts/flaky_under_load.py --count 300 --busy 0 -n 2 --out ... TESTS   (two pytest processes at once)

``--busy`` processes spin (``while 1: pass``) beside the run, as ``stress
--cpu N`` would; pytest-repeat runs each test ``--count`` times in a row in
one pytest process. The file written holds the command, the date, the CPU,
the load before and after, the time taken and pytest's counts (passed,
failed, errors), with the ids of any test that failed.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    arguments = argparse.ArgumentParser(prog="python scripts/flaky_under_load.py", description=__doc__.split("\n\n")[0])
    arguments.add_argument("tests", nargs="+", help="pytest node ids or files")
    arguments.add_argument("--count", type=int, default=300, help="runs of each test (default 300)")
    arguments.add_argument("--busy", type=int, default=2, help="spinning processes beside the run (default 2)")
    arguments.add_argument("-k", dest="keyword", default=None, help="pytest's -k")
    arguments.add_argument("-n", dest="workers", type=int, default=None,
                           help="pytest-xdist's -n: the runs spread over that many pytest processes at once (the "
                           "tests load each other; default: one process)")
    arguments.add_argument("--out", type=Path, required=True, help="the text file to write")
    arguments.add_argument("--log", type=Path, default=None, help="pytest's output, as it comes (default: OUT.log)")
    arguments.add_argument("--summarize", nargs=5, default=None, metavar=("LOG", "SECONDS", "LOAD_BEFORE", "LOAD_AFTER",
                                                                          "DATE"),
                           help="write OUT from the LOG of a run already made (its seconds, loads and date)")
    args = arguments.parse_args(argv)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--count", str(args.count),
               "-o", "faulthandler_timeout=600", "-rfE", *args.tests] + (["-k", args.keyword] if args.keyword else []) \
        + (["-n", str(args.workers)] if args.workers else [])
    if args.summarize:
        log, seconds, before, after, date = args.summarize
        return write_record(args, argv, command, Path(log).read_text(), float(seconds),
                            tuple(map(float, before.split(","))), tuple(map(float, after.split(","))), 1, date)
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    load_before = os.getloadavg()
    started = time.time()
    log = args.log or args.out.with_suffix(".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log, "w") as handle:  # pytest's output as it comes: a hang shows where it is
            returncode = subprocess.run(command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT).returncode
        output = log.read_text()
    finally:
        for process in busy:
            process.kill()
            process.wait()
    return write_record(args, argv, command, output, time.time() - started, load_before, os.getloadavg(), returncode,
                        datetime.now(timezone.utc).isoformat(timespec="seconds"))


def write_record(args, argv, command, output: str, seconds: float, load_before, load_after, returncode: int,
                 date: str) -> int:
    # pytest's last line of counts ("8 failed, 7792 passed, 300 deselected in 1269.10s"); warnings may follow it
    tail = next((line.strip("= ") for line in reversed(output.splitlines())
                 if re.search(r"\d+ (passed|failed|errors?)\b.* in [\d.]+s", line)), "")
    counts = {kind: int(number) for number, kind in re.findall(r"(\d+) (passed|failed|errors?|skipped|deselected)",
                                                                  tail)}
    failed = [line for line in output.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    text = "\n".join([
        "command: " + " ".join(["python", "scripts/flaky_under_load.py", *(argv if argv is not None else sys.argv[1:])]),
        "pytest: " + " ".join(["python", *command[1:]]),
        f"date: {date}",
        f"cpu: {cpu_model()}, {os.cpu_count()} cores; {args.busy} spinning processes beside the run"
        + (f"; pytest -n {args.workers} (that many test processes at once)" if args.workers else ""),
        f"load average (1, 5, 15 min) before: {' '.join(f'{x:.2f}' for x in load_before)}; after: "
        f"{' '.join(f'{x:.2f}' for x in load_after)}",
        f"seconds: {seconds:.0f}",
        f"pytest: {tail}",
        f"runs: {sum(counts.get(k, 0) for k in ('passed', 'failed', 'error', 'errors'))}, "
        f"failed: {counts.get('failed', 0)}, errors: {counts.get('error', 0) + counts.get('errors', 0)}, "
        f"passed: {counts.get('passed', 0)}" + (f", status {returncode}" if not args.summarize else ""),
        *failed,
    ]) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text, end="", file=sys.stderr)
    return returncode


if __name__ == "__main__":
    raise SystemExit(main())
