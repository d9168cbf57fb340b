"""Several reads files screened on this host, several at once where it has the GPUs or cores.

``bpbc-screen a.fq.gz b.fq.gz ... PATTERNS -o out/{stem}.paf`` screens each
file whole with the local pipeline (:func:`bpbc.distributed.screen_file`, as
a Dask worker does), its outputs under hidden staging names until every file
has been screened, so that a failed run leaves none of them (docs/dask.md:
the same templates and checks as with ``--dask``).

The files are shared out among worker processes, one per GPU (each sees only
its own through ``CUDA_VISIBLE_DEVICES``) or, on the CPU, one per
:data:`bpbc.resources.CORES_PER_PROCESS` cores, each with its share of the
cores (:func:`bpbc.resources.file_processes` decides): one process kept
10-11 of a 32-core host's cores busy, where two, each on its own GPU and
half the reads, took 0.8x its time together (bench/results/
many_files_x2_h200.txt). Where one process is all the host calls for (one
GPU, a small CPU, small files), this one screens the files in turn.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import secrets
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace

from bpbc.distributed import Job, commit_files, many_files_paths, remove_files, screen_file, staging_path
from bpbc.io import STDIN, InputError, display_name, read_patterns
from bpbc.pipeline import ScreenSettings, make_screener
from bpbc.resources import CorePlan, file_processes, plan_run, usable_cores
from bpbc.sinks import is_template
from bpbc.summary import Summary

#: the plan of a worker process's runs, set when it starts (:func:`_start_worker`)
_worker_plan: CorePlan | None = None


def screen_many_files(
    reads: list,
    patterns_path,
    settings: ScreenSettings = ScreenSettings(),
    *,
    output=None,
    matched=None,
    unmatched=None,
    json_path=None,
    progress: Callable[[int], None] | None = None,
    processes: int | None = None,
) -> list[Summary]:
    """Screen each file of ``reads`` against the patterns of ``patterns_path``;
    one summary per file, in order. Output paths hold ``{stem}`` where there
    are several files (``output`` is required). ``progress(reads_done)`` is
    called as files finish. ``processes``: worker processes (None: as
    :func:`bpbc.resources.file_processes` says for this host; 1: the files
    in turn in this process). Problems raise :class:`bpbc.io.InputError`."""
    if patterns_path == STDIN:
        raise InputError("with several reads files, the patterns cannot come from stdin")
    if is_template(matched) or is_template(unmatched):
        raise InputError("demultiplexing ({name} in --matched) takes one reads file")
    paths = {"output": output, "matched": matched, "unmatched": unmatched, "json": json_path}
    per_file = many_files_paths([os.fspath(path) for path in reads], paths)
    patterns = read_patterns(patterns_path)
    make_screener(replace(settings, device="cpu"), patterns, display_name(patterns_path))  # checks the settings
    token = secrets.token_hex(4)
    staged = [{kind: None if path is None else staging_path(path, token) for kind, path in files.items()}
              for files in per_file]
    tasks = [(Job.of(settings, patterns, display_name(patterns_path), display_name(path)), os.path.abspath(path),
              os.path.abspath(patterns_path), files) for path, files in zip(reads, staged)]
    cores = settings.threads or usable_cores()
    processes = processes or file_processes(len(tasks), sum(_size(path) for path in reads), cores,
                                            lambda: 0 if settings.device == "cpu" else len(visible_gpus()))
    devices = [] if processes == 1 or settings.device == "cpu" else visible_gpus()
    try:
        if processes == 1:
            summaries = _in_turn(tasks, plan_run(settings.threads), progress)
        else:
            summaries = _in_processes(tasks, processes, devices, max(1, cores // processes), progress)
        commit_files([(path, per_file[index][kind]) for index, files in enumerate(staged)
                      for kind, path in files.items() if path is not None])
    except BaseException:
        remove_files([path for files in staged for path in files.values() if path is not None])
        raise
    return summaries


def _size(path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # the file's screen says what is wrong with it


@functools.cache
def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` names each
    for a process of its own; none where no GPU is usable."""
    from bpbc.engines import gpu_unavailable_reason

    if gpu_unavailable_reason() is not None:
        return []
    import cupy

    count = cupy.cuda.runtime.getDeviceCount()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [name.strip() for name in visible.split(",")][:count]
    return [str(device) for device in range(count)]


def _in_turn(tasks: list, plan: CorePlan, progress) -> list[Summary]:
    summaries: list[Summary] = []
    for job, reads_path, patterns_path, outputs in tasks:
        summaries.append(screen_file(job, reads_path, patterns_path, outputs, plan=plan))
        if progress is not None:
            progress(sum(summary.reads for summary in summaries))
    return summaries


def _in_processes(tasks: list, processes: int, devices: list[str], threads: int, progress) -> list[Summary]:
    """The tasks shared out among ``processes`` worker processes, each on one
    of ``devices`` (GPUs; none: the CPU) and ``threads`` cores. On any
    failure, Ctrl-C included, the workers are stopped before the caller
    removes what they wrote."""
    context = multiprocessing.get_context("spawn")  # no fork of a process with threads (and perhaps CUDA)
    assigned = context.Queue()
    for index in range(processes):
        assigned.put(devices[index % len(devices)] if devices else None)
    pool = ProcessPoolExecutor(processes, mp_context=context, initializer=_start_worker,
                               initargs=(assigned, threads, processes))
    try:
        futures = [pool.submit(_screen_in_worker, *task) for task in tasks]
        done = 0
        for future in as_completed(futures):
            done += future.result().reads
            if progress is not None:
                progress(done)
        summaries = [future.result() for future in futures]
    except BrokenProcessPool as error:
        _stop_workers(pool)
        raise InputError(f"a process screening the reads files ended abruptly (killed, or out of memory?): "
                         f"{error}") from None
    except BaseException:
        _stop_workers(pool)
        raise
    pool.shutdown()
    return summaries


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """No task starts, and the running ones are killed (their files half
    written), so that the caller can remove the outputs. This module's pools
    are the only children that multiprocessing starts in a run."""
    pool.shutdown(wait=False, cancel_futures=True)
    for child in multiprocessing.active_children():
        child.terminate()
    for child in multiprocessing.active_children():
        child.join()


def _start_worker(assigned, threads: int, processes: int) -> None:
    """A worker process's start: its GPU (None: the CPU) and its plan. Ctrl-C
    is left to the parent, which stops the workers and cleans up."""
    global _worker_plan
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    device = assigned.get()
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    _worker_plan = plan_run(threads, f"one of {processes} processes")


def _screen_in_worker(job: Job, reads_path: str, patterns_path: str, outputs: dict) -> Summary:
    return screen_file(job, reads_path, patterns_path, outputs, plan=_worker_plan)
