"""Worker processes of this host that screen reads files, or parts of one, a task at a time.

A :class:`ScreenProcesses` starts its workers when it is made, one per GPU
(each sees only its own through ``CUDA_VISIBLE_DEVICES`` and sets it up
while it waits for its first task) or, on the CPU, each with its share of
the cores, so that the command can make one before its own imports and
the workers' start runs beside them. Each task is a
:func:`bpbc.distributed.screen_file` call (the local pipeline on one file or
one :class:`~bpbc.file_parts.FilePart`, its outputs under staging names);
:meth:`ScreenProcesses.run` hands the tasks out in order and returns their
summaries. This module imports nothing heavy: a worker imports the pipeline
itself.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import struct
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, cast

from bpbc.errors import InputError
from bpbc.resources import CorePlan, plan_run

if TYPE_CHECKING:
    from bpbc.summary import Summary

#: the length of a worker's answer, before it
_LENGTH = struct.Struct("!Q")


class ScreenProcesses:
    """``count`` worker processes, started now: the i-th on GPU
    ``devices[i % len(devices)]`` (none: the CPU), each planning for
    ``threads`` cores. :meth:`run` takes them once; :meth:`stop` ends
    workers that no run took."""

    def __init__(self, count: int, devices: list[str], threads: int) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process with threads (and perhaps CUDA)
        self.count = count
        self._workers: dict[Connection, BaseProcess] = {}  # this process's end of each worker's pipe: the worker
        try:
            for index in range(count):
                ours, theirs = context.Pipe()
                device = devices[index % len(devices)] if devices else None
                # daemon: killed at this interpreter's exit if still running (a second Ctrl-C cut the clean-up short)
                self._workers[ours] = context.Process(target=_work, args=(theirs, device, threads, count),
                                                      daemon=True, name=f"bpbc-worker-{index}")
                self._workers[ours].start()
                theirs.close()
        except BaseException:
            self.stop()
            raise

    def run(self, tasks: list[tuple], progress: Callable[[int], None] | None = None) -> list[Summary]:
        """The summaries of ``tasks`` (:func:`bpbc.distributed.screen_file`'s
        arguments but the last two), in order; ``progress(reads_done)`` as
        they finish. The workers end with the last task. On any failure,
        Ctrl-C included, they are killed and waited for before the caller
        removes what they wrote. Where tasks fail, the first failure in task
        order is raised once the tasks before it are done (a part whose
        start was wrong may fail only after the part before it found that
        out); no task is started after a failure.

        This thread alone reads the workers' answers, and only what has come
        (an answer may come in parts), so that it never waits inside a read:
        with concurrent.futures' ProcessPoolExecutor, a worker killed half-way
        through sending its answer left the executor's thread waiting for the
        rest for good, and the interpreter's exit waiting on that thread. A
        dead worker's pipe ends (EOF): its end is closed here once the worker
        has it."""
        todo = list(enumerate(tasks))[::-1]  # taken from the end: in order
        running: dict[Connection, tuple[int, bytearray]] = {}  # the ends of the workers screening: task, answer so far
        summaries: list = [None] * len(tasks)
        failures: dict[int, BaseException] = {}  # task: what it raised

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
            for pipe in self._workers:
                give_next(pipe)
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
                        failures[index] = result
                        todo.clear()  # nothing more is started
                    else:
                        summaries[index] = result
                        done += result.reads
                        if progress is not None:
                            progress(done)
                    give_next(pipe)
                    first = min(failures, default=None)
                    if first is not None and all(other > first for other, _ in running.values()):
                        raise failures[first]
        except BaseException:
            self.stop()  # their files half written
            raise
        self._join()
        return summaries

    def stop(self) -> None:
        """Kill the workers and wait for them."""
        for worker in self._workers.values():
            if worker.pid is not None:  # started
                worker.kill()
        self._join()

    def _join(self) -> None:
        for pipe, worker in self._workers.items():
            pipe.close()
            if worker.pid is not None:
                worker.join()


def _ended_abruptly() -> InputError:
    return InputError("a process screening the reads ended abruptly (killed, or out of memory?)")


def start_worker(device: str | None, threads: int, processes: int) -> CorePlan:
    """A worker process's start: its GPU (None: the CPU), set up in the
    background while it waits for its first task; its plan returned.
    Ctrl-C is left to the parent, which stops the workers and cleans up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from bpbc.engines import set_up_process

    set_up_process()
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
        from bpbc.gpu_engine import warm_up_in_background

        warm_up_in_background()
    return plan_run(threads, f"one of {processes} processes")


def _work(pipe: Connection, device: str | None, threads: int, processes: int) -> None:
    """A worker process: the tasks sent through ``pipe``, one at a time,
    each answered with (failed, its summary or error) pickled, after its
    length (:data:`_LENGTH`), until the pipe is closed."""
    plan = start_worker(device, threads, processes)
    from bpbc.distributed import screen_file

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
