"""The suite's GPU timers bracket the engine's work, and no rate above the
GPU's logic ceiling is printed. No GPU: a stand-in CuPy whose streams are
queues of simulated device time, and a stand-in engine that, like
``GpuEngine``, launches on a non-blocking stream of its own."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from bench.logic_ceiling import AboveLogicCeiling, LogicCeiling
from bpbc.patterns import PatternTable
from bpbc.scoring import Scoring

LAUNCH_MS = 15.9  # what one launch of 4M x 150 x 128 takes on an H200


class Stream:
    """A CUDA stream as a queue: the device time at which the work queued on
    it so far ends (every stream starts idle at 0, and none waits for another,
    as a non-blocking stream does not wait for the default stream)."""

    def __init__(self):
        self.ends_ms = 0.0

    def record(self, event=None):
        event = event or Event()
        event.at_ms = self.ends_ms
        return event

    def synchronize(self):
        pass


class Event:
    def __init__(self, *args, **kwargs):
        self.at_ms = None

    def record(self, stream=None):
        (stream or fake_cuda.current).record(self)

    def synchronize(self):
        assert self.at_ms is not None, "synchronize() on an event never recorded"


def get_elapsed_time(start, stop) -> float:
    return stop.at_ms - start.at_ms


# Event() and Device(): what the timer before this fix called (run against it, it read 0 s)
fake_cuda = types.SimpleNamespace(Stream=Stream, Event=Event, get_elapsed_time=get_elapsed_time,
                                  current=Stream(), Device=lambda *args: types.SimpleNamespace(synchronize=lambda: None))
fake_cuda.get_current_stream = lambda: fake_cuda.current


class StandInEngine:
    """``GpuEngine.launch`` in time alone: each launch queues LAUNCH_MS on the
    calling thread's screening stream, not on the current stream."""

    def __init__(self):
        self.stream = Stream()
        self.launches = 0

    def screening_stream(self):
        return self.stream

    def launch(self, prepared, table, scoring, planes, track_best=True):
        self.stream.ends_ms += LAUNCH_MS
        self.launches += 1
        return None, None


@pytest.fixture
def stand_in_cupy(monkeypatch):
    fake_cuda.current = Stream()
    pool = types.SimpleNamespace(free_all_blocks=lambda: None)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=fake_cuda, get_default_memory_pool=lambda: pool))


H200 = LogicCeiling(multiprocessors=132, clock_hz=1.98e9)


@pytest.mark.parametrize("back_to_back", [1, 10])
def test_the_kernel_timer_brackets_the_launch_on_the_engines_stream(stand_in_cupy, back_to_back):
    """Events recorded on the default stream (the timer before) read 0 s here:
    the launch queues nothing there."""
    from bench.gpu_kernel import time_sw_kernel

    engine = StandInEngine()
    table = PatternTable.of([np.ones(128, np.uint8)])
    seconds = time_sw_kernel(engine, None, table, Scoring(), 6, repeats=3, back_to_back=back_to_back)
    assert seconds == pytest.approx(LAUNCH_MS / 1e3)
    assert engine.launches == (1 + 3) * back_to_back  # a warm-up round, then three timed ones


def test_sw_times_bpbcs_kernel_on_the_engines_stream_and_checks_its_rate(stand_in_cupy, monkeypatch):
    """sw's table2 and screen rows: the launch's time, and an error for a
    launch too fast for the GPU."""
    from bench import sw_bench

    engine = StandInEngine()
    monkeypatch.setattr(sw_bench, "_gpu", lambda: (engine, H200))
    monkeypatch.setattr(sw_bench, "random_prepared", lambda *args, **kwargs: None)
    table = PatternTable.of([np.ones(128, np.uint8)])
    seconds = sw_bench.bpbc_gpu_seconds("sw table2: bpbc_gpu", 32768, 1024, table, Scoring(), 9, repeats=3)
    assert seconds == pytest.approx(LAUNCH_MS / 1e3)
    with pytest.raises(AboveLogicCeiling, match=r"^sw table2: bpbc_gpu, 40M reads: 48.302 TCUPS is above .* 5.35 TCUPS "):
        sw_bench.bpbc_gpu_seconds("sw table2: bpbc_gpu, 40M reads", 40_000_000, 150, table, Scoring(), 9, repeats=3)


def test_the_logic_ceiling_is_the_cells_logic_can_run_at():
    """132 SMs x 64 LOP3 a clock x 1.98 GHz x 32 cells = 535e12 gate-cells a
    second, over the fewest LUT3 of a cell at each plane count."""
    assert H200.cells_per_second(5) == pytest.approx(535.2e12 / 65, rel=1e-3)
    assert H200.cells_per_second(6) == pytest.approx(535.2e12 / 84, rel=1e-3)
    assert H200.cells_per_second(9) == H200.cells_per_second(7) == pytest.approx(535.2e12 / 100, rel=1e-3)
    assert H200.cells_per_second(4) == pytest.approx(535.2e12 / 48, rel=1e-3)
    # the rates measured right stay under it: 4.84 TCUPS (6 planes), the flag-only kernel's 6.80 (5 planes)
    cells = 4_000_000 * 150 * 128
    assert H200.rate("one pass", cells, 15.9e-3, 6) == pytest.approx(cells / 15.9e-3)
    assert H200.rate("flag only", cells, 11.3e-3, 5) == pytest.approx(cells / 11.3e-3)


def test_a_rate_above_the_ceiling_is_an_error_naming_the_figure_and_the_ceiling(monkeypatch, capsys):
    """The issue's figure: 4M x 150 x 128 at 6 planes in 0.099 ms, 777 TCUPS;
    ``python -m bench`` prints the error as one line and exits 1."""
    from bench import gpu_kernel
    from bench.__main__ import main

    def gpu_kernel_main(argv):
        H200.rate("gpu-kernel: the kernel, 4000000 reads of 150 bp against 128 bp", 4_000_000 * 150 * 128,
                  0.099e-3, 6)
        return 0

    monkeypatch.setattr(gpu_kernel, "main", gpu_kernel_main)
    assert main(["gpu-kernel"]) == 1
    error = capsys.readouterr().err
    assert error == ("bench gpu-kernel: error: gpu-kernel: the kernel, 4000000 reads of 150 bp against 128 bp: "
                     "775.758 TCUPS is above this GPU's logic ceiling of 6.37 TCUPS at 6 planes (132 SMs x 64 LOP3 "
                     "a clock x 1.98 GHz x 32 cells / 84 LUT3 a cell): its timer missed work\n")
