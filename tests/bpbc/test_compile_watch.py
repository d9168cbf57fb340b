"""bpbc.compile_watch: numba's compiles seen, timed and announced once; cache loads unseen."""

from __future__ import annotations

import threading

import numpy as np
from numba import njit

from bpbc.compile_watch import CompileWatch, watching_compiles


def _fresh_kernels():
    """Two jitted functions never compiled before (no disk cache), the second calling the first."""
    @njit
    def inner(x):
        return x * 3 + 1

    @njit
    def outer(values):
        total = 0
        for v in values:
            total += inner(v)
        return total

    return inner, outer


def test_a_compile_is_timed_and_announced_once():
    _, outer = _fresh_kernels()
    announced = []
    with watching_compiles(lambda: announced.append(True)) as watch:
        assert outer(np.arange(4)) == 3 * 6 + 4
        assert outer(np.arange(5)) == 3 * 10 + 5  # the same signature: no compile
    # the inner function compiles inside the outer one: one compile, its time counted once
    assert (announced, watch.compiles) == ([True], 1)
    assert 0 < watch.seconds


def test_several_compiles_in_several_threads_add_up():
    inner, outer = _fresh_kernels()
    announced = []
    with watching_compiles(lambda: announced.append(True)) as watch:
        thread = threading.Thread(target=inner, args=(2.5,))
        thread.start()
        thread.join()
        outer(np.arange(3))
    assert announced == [True] and watch.compiles == 2  # inner(float64), then outer (inner(int64) within it)


def test_nothing_is_seen_outside_the_block_or_for_compiled_functions():
    inner, _ = _fresh_kernels()
    inner(1)
    with watching_compiles() as watch:
        inner(2)  # compiled already
    inner(1.5)  # compiles after the block
    assert (watch.compiles, watch.seconds) == (0, 0.0)


def test_an_end_without_a_start_is_ignored(monkeypatch):
    """A compile that began before the watch was installed ends inside it:
    no negative depth, no time; the compile between counts its seconds
    (a clock that says 2.5 s)."""
    import bpbc.compile_watch

    ticks = iter([10.0, 12.5])
    monkeypatch.setattr(bpbc.compile_watch.time, "perf_counter", lambda: next(ticks))
    watch = CompileWatch()
    watch.on_end(None)
    watch.on_start(None)
    watch.on_end(None)
    assert (watch.compiles, watch.seconds) == (1, 2.5)
    watch.on_end(None)
    assert (watch.compiles, watch.seconds) == (1, 2.5)
