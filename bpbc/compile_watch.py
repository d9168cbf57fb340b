"""Knowing when numba compiles bpbc's CPU kernels, and for how long.

numba keeps every compiled kernel of bpbc on disk (the generated engine
kernels in ``~/.cache/bpbc``, the others beside their modules or in
``NUMBA_CACHE_DIR``) and a later process loads them in milliseconds. A run
on a machine (or with settings) whose kernels are not cached yet compiles
them first: tens of seconds on a few cores for the first run of all. numba
broadcasts its ``numba:compile`` event only when it compiles, never when it
loads from the cache (``numba.core.event``), so listening to it tells a cold
cache from a warm one exactly: :func:`watching_compiles` counts the seconds
spent compiling (for a rate that leaves them out) and can say so once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: what ``bpbc-screen`` says on stderr when a run compiles (once per run)
COMPILE_NOTICE = ("compiling the CPU kernels for this machine; they are cached, so this happens once "
                  "(python -m bpbc.prepare compiles them ahead, on every core)")


class CompileWatch:
    """Seconds numba spent compiling while the watch was installed (kernels
    compiled inside another's compile count in the outer one's time), and
    how many outermost compiles there were."""

    def __init__(self, on_first: Callable[[], None] | None = None):
        self._on_first = on_first
        self._lock = threading.Lock()
        self._depth = threading.local()  # numba compiles a callee inside its caller, in the same thread
        self._started: dict[int, float] = {}
        self.seconds = 0.0
        self.compiles = 0

    def on_start(self, event) -> None:
        depth = getattr(self._depth, "value", 0)
        self._depth.value = depth + 1
        if depth:
            return
        with self._lock:
            self._started[threading.get_ident()] = time.perf_counter()
            first = self.compiles == 0
            self.compiles += 1
        if first and self._on_first is not None:
            self._on_first()

    def on_end(self, event) -> None:
        depth = getattr(self._depth, "value", 0)
        if depth == 0:
            return  # a compile that began before the watch was installed
        self._depth.value = depth - 1
        if depth > 1:
            return
        with self._lock:
            started = self._started.pop(threading.get_ident(), None)
            if started is not None:
                self.seconds += time.perf_counter() - started


@contextmanager
def watching_compiles(on_first: Callable[[], None] | None = None) -> Iterator[CompileWatch]:
    """Inside the block, every compile by numba (in any thread) is timed;
    ``on_first()`` is called when the first one begins (a cold cache)."""
    from numba.core import event

    class _Listener(event.Listener):
        def on_start(self, event_) -> None:
            watch.on_start(event_)

        def on_end(self, event_) -> None:
            watch.on_end(event_)

    watch = CompileWatch(on_first)
    with event.install_listener("numba:compile", _Listener()):
        yield watch
