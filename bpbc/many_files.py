"""Several reads files screened on this host, several at once where it has the GPUs or cores.

``bpbc-screen a.fq.gz b.fq.gz ... PATTERNS -o out/{stem}.paf`` screens each
file whole with the local pipeline (:func:`bpbc.distributed.screen_file`, as
a Dask worker does), its outputs under hidden staging names until every file
has been screened, so that a failed run leaves none of them (docs/dask.md:
the same templates and checks as with ``--dask``).

The files are shared out among worker processes, one per two GPUs (each
sees only its own through ``CUDA_VISIBLE_DEVICES``) or, on the CPU, one per
:data:`bpbc.resources.CORES_PER_PROCESS` cores, each with its share of the
cores (:func:`bpbc.resources.file_processes` decides): one process keeps
two GPUs and 32 cores busy, but not four and 64 (bench/results/
many_files_x2_h200.txt). Where one process is all the host calls for (one
or two GPUs, up to 63 cores, small files), this one screens the files in
turn.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import pickle
import secrets
import signal
import struct
import traceback
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import cast

from bpbc.distributed import Job, commit_files, many_files_paths, remove_files, screen_file, staging_path
from bpbc.io import STDIN, InputError, display_name, read_patterns
from bpbc.pipeline import ScreenSettings, make_screener
from bpbc.resources import CorePlan, file_processes, gpu_groups, plan_run, usable_cores
from bpbc.sinks import is_template
from bpbc.summary import Summary


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
    devices = [] if processes == 1 or settings.device == "cpu" else gpu_groups(visible_gpus(), processes)
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
    of ``devices`` (``CUDA_VISIBLE_DEVICES`` values; none: the CPU) and
    ``threads`` cores, one task at a time. On any failure, Ctrl-C included,
    the workers are killed and waited for before the caller removes what
    they wrote.

    This thread alone reads the workers' answers, and only what has come
    (an answer may come in parts), so that it never waits inside a read:
    with concurrent.futures' ProcessPoolExecutor, a worker killed half-way
    through sending its answer left the executor's thread waiting for the
    rest for good, and the interpreter's exit waiting on that thread. A
    dead worker's pipe ends (EOF): its end is closed here once the worker
    has it."""
    context = multiprocessing.get_context("spawn")  # no fork of a process with threads (and perhaps CUDA)
    todo = list(enumerate(tasks))[::-1]  # taken from the end: in order
    workers: dict[Connection, BaseProcess] = {}  # this process's end of each worker's pipe: the worker
    running: dict[Connection, tuple[int, bytearray]] = {}  # the ends of the workers screening: task, answer so far
    summaries: list = [None] * len(tasks)

    def give_next(pipe: Connection) -> None:
        if not todo:
            pipe.close()  # its worker ends
            return
        index, task = todo.pop()
        try:
            pipe.send(task)
        except OSError:  # the worker is dead
            raise _ended_abruptly() from None
        running[pipe] = index, bytearray()

    try:
        for index in range(min(processes, len(tasks))):
            ours, theirs = context.Pipe()
            device = devices[index % len(devices)] if devices else None
            # daemon: killed at this interpreter's exit if still running (a second Ctrl-C cut the clean-up short)
            workers[ours] = context.Process(target=_work, args=(theirs, device, threads, processes), daemon=True,
                                            name=f"bpbc-files-{index}")
            workers[ours].start()
            theirs.close()
            give_next(ours)
        done = 0
        while running:
            # a timeout: a SIGINT that came just before the wait began does not wake it, and is acted on after it
            for pipe in cast(list[Connection], wait(list(running), timeout=1)):
                index, answer = running[pipe]
                try:
                    part = os.read(pipe.fileno(), 1 << 20)  # there is something: returns at once
                except OSError:  # ECONNRESET: it died with a task unread
                    part = b""
                if not part:
                    raise _ended_abruptly()
                answer += part
                if len(answer) < _LENGTH.size or len(answer) < _LENGTH.size + _LENGTH.unpack_from(answer)[0]:
                    continue  # the rest is on its way
                del running[pipe]
                failed, result = pickle.loads(answer[_LENGTH.size:])
                if failed:
                    raise result
                summaries[index] = result
                done += result.reads
                if progress is not None:
                    progress(done)
                give_next(pipe)
    except BaseException:
        for worker in workers.values():
            if worker.pid is not None:  # started
                worker.kill()  # its files half written
        raise
    finally:
        for pipe, worker in workers.items():
            pipe.close()
            if worker.pid is not None:
                worker.join()
    return summaries


#: the length of a worker's answer, before it
_LENGTH = struct.Struct("!Q")


def _ended_abruptly() -> InputError:
    return InputError("a process screening the reads files ended abruptly (killed, or out of memory?)")


def _start_worker(device: str | None, threads: int, processes: int) -> CorePlan:
    """A worker process's start: its GPUs (None: the CPU); its plan returned.
    Ctrl-C is left to the parent, which stops the workers and cleans up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    return plan_run(threads, f"one of {processes} processes")


def _work(pipe: Connection, device: str | None, threads: int, processes: int) -> None:
    """A worker process: the tasks sent through ``pipe``, one at a time,
    each answered with (failed, its summary or error) pickled, after its
    length (:data:`_LENGTH`), until the pipe is closed."""
    plan = _start_worker(device, threads, processes)
    while True:
        try:
            job, reads_path, patterns_path, outputs = pipe.recv()
        except EOFError:
            return
        answer: tuple[bool, Summary | Exception]
        try:
            answer = (False, screen_file(job, reads_path, patterns_path, outputs, plan=plan))
        except Exception as error:  # raised in the parent
            if not isinstance(error, InputError):  # a bug: where it was raised
                error.add_note("in a worker process:\n" + "".join(traceback.format_exception(error)).rstrip())
            answer = (True, error)
        data = pickle.dumps(answer)
        message = memoryview(_LENGTH.pack(len(data)) + data)
        while message:
            message = message[os.write(pipe.fileno(), message):]
