"""Which numba kernels one ``bpbc-screen`` command compiles rather than loads from the cache.

    python -m bench.probes.compiled_kernels -- READS PATTERNS [OPTIONS...]

The command runs in this process (:func:`bpbc.cli.main`) with a listener on numba's
``numba:compile`` event, which numba sends only when it compiles, never when it loads a
kernel from its disk cache (:mod:`bpbc.compile_watch`). Each compile is printed as it ends:
the kernel's module and name, the argument types, and its seconds (a kernel compiled inside
another's compile is printed too, indented). After ``python -m bpbc.prepare`` a run should
print nothing: a line names what prepare leaves out (session 31: a 4M-read GPU run against
5000 patterns still compiled 0.455 s after prepare and a 20k-read warm-up).
"""

from __future__ import annotations

import sys
import threading
import time


def main() -> int:
    argv = sys.argv[1:]
    argv = argv[argv.index("--") + 1:] if "--" in argv else argv
    from numba.core import event

    started = threading.local()  # each thread's compiles under way, outermost first: their start times

    class Listener(event.Listener):
        def on_start(self, event_) -> None:
            started.__dict__.setdefault("times", []).append(time.perf_counter())

        def on_end(self, event_) -> None:
            times = started.__dict__.setdefault("times", [])
            seconds = time.perf_counter() - times.pop() if times else 0.0  # 0: begun before the listener
            level = len(times)
            dispatcher = event_.data.get("dispatcher")
            function = getattr(dispatcher, "py_func", None)
            name = f"{function.__module__}.{function.__qualname__}" if function is not None else repr(dispatcher)
            print(f"compiled {'  ' * level}{name}{event_.data.get('args')} in {seconds:.3f} s"
                  f" [{threading.current_thread().name}]", file=sys.stderr, flush=True)

    from bpbc.cli import main as command

    with event.install_listener("numba:compile", Listener()):
        return command(argv)


if __name__ == "__main__":
    raise SystemExit(main())
