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

import os
import secrets
from collections.abc import Callable
from dataclasses import replace

from bpbc.distributed import Job, commit_files, many_files_paths, remove_files, screen_file, staging_path
from bpbc.io import STDIN, InputError, display_name, read_patterns
from bpbc.pipeline import ScreenSettings, make_screener
from bpbc.processes import ScreenProcesses
from bpbc.resources import CorePlan, file_processes, plan_run, usable_cores, visible_gpus
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
    devices = [] if processes == 1 or settings.device == "cpu" else visible_gpus()
    try:
        if processes == 1:
            summaries = _in_turn(tasks, plan_run(settings.threads), progress)
        else:
            summaries = ScreenProcesses(processes, devices, max(1, cores // processes)).run(tasks, progress)
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


def _in_turn(tasks: list, plan: CorePlan, progress) -> list[Summary]:
    summaries: list[Summary] = []
    for job, reads_path, patterns_path, outputs in tasks:
        summaries.append(screen_file(job, reads_path, patterns_path, outputs, plan=plan))
        if progress is not None:
            progress(sum(summary.reads for summary in summaries))
    return summaries
