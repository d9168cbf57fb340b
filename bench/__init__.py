"""Benchmark suite of bpbc: ``python -m bench NAME`` (see bench/README.md and docs/benchmarks.md)."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager


def median_seconds_cpu(call, repeats: int, warmup: int = 1) -> float:
    """Median wall time of ``call()`` after ``warmup`` untimed calls."""
    import numpy as np

    for _ in range(warmup):
        call()
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def gpu_seconds(call, stream) -> float:
    """Seconds of the work ``call()`` queues on ``stream``, by CUDA events
    recorded on that stream before and after it; waits for the work to end.
    Events on any other stream time nothing of it: ``GpuEngine.launch``
    queues its kernels on ``engine.screening_stream()``, a non-blocking
    stream (events on the default stream timed its 15.9 ms launch at 0.1 ms)."""
    import cupy

    start = stream.record()
    call()
    stop = stream.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / 1e3


def median_seconds_gpu(call, repeats: int, warmup: int = 1, stream=None) -> float:
    """Median :func:`gpu_seconds` of ``call()`` after ``warmup`` untimed
    calls; ``stream``: the one ``call()`` queues its work on (default: the
    current stream, where a bare kernel launch or CuPy call queues it)."""
    import cupy
    import numpy as np

    stream = cupy.cuda.get_current_stream() if stream is None else stream
    for _ in range(warmup):
        call()
    stream.synchronize()
    return float(np.median([gpu_seconds(call, stream) for _ in range(max(1, repeats))]))


def gpu_unavailable() -> str | None:
    """None when cupy and a CUDA device are usable, else why not."""
    from bpbc.engines import gpu_unavailable_reason

    return gpu_unavailable_reason()


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def progress_bar(total: int, description: str):
    """``advance(label)`` callback driving a rich progress bar on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[case]}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task(description, total=total, case="")

        def advance(label: str = "") -> None:
            bar.update(task, advance=1, case=label)

        def start(label: str) -> None:
            bar.update(task, case=label)

        advance.start = start
        yield advance


def error_text(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".replace("\n", " ")
    return text[:300]
