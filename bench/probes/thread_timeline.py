"""What each thread of one ``bpbc-screen`` process does over time, sampled from inside it: a
timeline of the process's start, set-up and first chunks without py-spy (the CUDA hosts have
none).

    python -m bench.probes.thread_timeline OUT.txt [--every 0.005] [--min 0.015] -- READS PATTERNS [OPTIONS...]

The command runs in this process (``bpbc.server.command``, as the console script runs it) while
a thread takes every other thread's Python stack every ``--every`` seconds. ``OUT.txt`` gets,
per thread, the runs of one label at least ``--min`` seconds long, each as its start (seconds
since the process began, from /proc), its length and its label: the two outermost frames of
bpbc (or transpose) on the stack, then the innermost frame, whatever its package. A thread in
C code that let go of the GIL shows the Python frame that called it (``cupy ... empty`` for a
screen waiting on its device); where the samples stop for all threads, something held the GIL.
Two caveats: a thread that ended may leave its identity to a newer one, whose name its runs
then carry, and the sampling itself takes the GIL about every ``--every`` seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path


def _process_start() -> float:
    """``time.perf_counter()`` at the moment this process began (Linux: /proc)."""
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    ticks = float(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    return time.perf_counter() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


def _label(frame) -> str:
    ours, outer = [], frame
    while outer is not None:
        path = outer.f_code.co_filename
        if "/bpbc/" in path or "/transpose/" in path:
            ours.append(f"{Path(path).name}:{outer.f_code.co_name}")
        outer = outer.f_back
    inner = f"{frame.f_code.co_filename.rsplit('/site-packages/', 1)[-1][-48:]}:{frame.f_code.co_name}"
    return f"{' < '.join(ours[-2:]) or '-'} || {inner}"


class Sampler:
    """Every other thread's stack every ``every`` seconds, from ``start()`` to ``stop()``."""

    def __init__(self, every: float):
        self.every, self.origin = every, _process_start()
        self.samples: list[tuple[float, int, str]] = []
        self.names: dict[int | None, str] = {}
        self.marks: list[tuple[str, float]] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="timeline-sampler", daemon=True)

    def now(self) -> float:
        return time.perf_counter() - self.origin

    def mark(self, what: str) -> None:
        self.marks.append((what, self.now()))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _sample(self) -> None:
        me = threading.get_ident()
        while not self._stopped.is_set():
            at = self.now()
            self.samples.extend((at, ident, _label(frame)) for ident, frame in sys._current_frames().items()
                                if ident != me)
            self.names.update((thread.ident, thread.name) for thread in threading.enumerate())
            time.sleep(self.every)

    def runs(self, shortest: float) -> dict[int, list[tuple[float, float, str]]]:
        """Per thread, (start, length, label) of each run of one label, gaps under 50 ms bridged."""
        runs: dict[int, list[list]] = {}
        for at, ident, label in self.samples:
            thread = runs.setdefault(ident, [])
            if thread and thread[-1][2] == label and at - thread[-1][1] < 0.05:
                thread[-1][1] = at
            else:
                thread.append([at, at, label])
        return {ident: [(begin, end - begin, label) for begin, end, label in thread if end - begin >= shortest]
                for ident, thread in runs.items()}

    def write(self, path: str, shortest: float) -> None:
        with open(path, "w") as out:
            for what, at in self.marks:
                print(f"{at:7.3f} MARK {what}", file=out)
            for ident, thread in self.runs(shortest).items():
                print(f"== thread {self.names.get(ident, ident)}", file=out)
                for begin, length, label in thread:
                    print(f"{begin:7.3f} {length:6.3f} {label}", file=out)


def main() -> None:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="python -m bench.probes.thread_timeline", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the timeline, a text file")
    parser.add_argument("--every", type=float, default=0.005, help="seconds between samples")
    parser.add_argument("--min", type=float, default=0.015, help="shortest run written, seconds")
    args = parser.parse_args(argv[:split])
    sampler = Sampler(args.every)
    sampler.start()
    sampler.mark("sampler started")
    written = threading.Lock()

    def finish() -> None:
        if written.acquire(blocking=False):  # once, whichever way the command ends
            sampler.mark("command ended")
            sampler.stop()
            sampler.write(args.out, args.min)

    real_exit = os._exit

    def exit_after_writing(status: int) -> None:  # the command ends with os._exit (bpbc.cli.run)
        finish()
        real_exit(status)

    os._exit = exit_after_writing
    sys.argv = ["bpbc-screen", *argv[split + 1:]]
    from bpbc.server import command

    sampler.mark("bpbc.server imported")
    try:
        command()
    finally:
        finish()


if __name__ == "__main__":
    main()
