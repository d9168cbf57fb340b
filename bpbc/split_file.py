"""One large reads file screened in parts by several processes of this host.

One process does not grow with the host: its reader, its parser and its
Python threads share one GIL (docs/benchmarks.md, "Several reads files").
Where a host calls for several processes (:func:`bpbc.resources.file_processes`:
one per GPU, or one per 16 cores on the CPU, each with at least 500 MB of
the file) and the file can be cut without being decompressed
(:func:`bpbc.file_parts.plan_parts`: uncompressed FASTQ or FASTA, gzip at
member starts, so BGZF and concatenated gzip files), each process reads and
screens one part on its own GPU and share of the cores, its outputs under
staging names, joined in input order when every part is done, as a Dask run
of one file in parts does (:func:`bpbc.distributed.screen_parts`). The
outputs are the one-process run's: PAF and plain reads byte for byte,
compressed outputs one gzip member per part with the same content.

The command decides before its imports (:func:`start_split`), so that the
workers' imports and device set-up run beside its own. Elsewhere (stdin,
a gzip file of one member, a PAF to stdout, paired reads, demultiplexing,
one GPU, a small file), and where a part turns out not to decompress to its
end (:class:`~bpbc.file_parts.UnreadablePart`: a wrong cut, or damage, which
the one-process run then names), the file is screened by the command's own
process. This module imports nothing heavy.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bpbc.file_parts import FilePart, plan_parts
from bpbc.processes import ScreenProcesses
from bpbc.resources import file_processes, usable_cores, visible_gpus

if TYPE_CHECKING:
    from bpbc.settings import ScreenSettings
    from bpbc.summary import Summary

STDIN = "-"
#: the outputs a split run writes, and their options: anything else (paired reads' files) keeps the run in one process
_OPTIONS = {"output": "-o/--output", "matched": "--matched", "unmatched": "--unmatched", "trimmed": "--trimmed",
            "json": "--json"}
OUTPUTS = tuple(_OPTIONS)


@dataclass
class Split:
    """The parts of one reads file and the worker processes, started, that will screen them."""

    parts: list[FilePart]
    workers: ScreenProcesses


def start_split(reads, settings: ScreenSettings, outputs: dict, processes: int | None = None) -> Split | None:
    """The parts of ``reads`` and their worker processes, started now, where
    the file is screened in parts (the module's docstring); None where the
    command's process screens it. ``outputs`` maps the output kinds to
    their paths (None: not written); a kind not in :data:`OUTPUTS` given
    keeps the run in one process. ``processes``: how many (None: as
    :func:`bpbc.resources.file_processes` says for this host)."""
    if reads == STDIN or outputs.get("output") in (None, STDIN):
        return None
    if any(path is not None for kind, path in outputs.items() if kind not in OUTPUTS):
        return None
    if any(path is not None and "{name}" in os.fspath(path) for path in outputs.values()):
        return None  # demultiplexing: a file per pattern
    paths = [os.fspath(path) for path in outputs.values() if path is not None]
    if any(path == STDIN or (os.path.exists(path) and not os.path.isfile(path)) for path in paths):
        return None  # a part's output is a staged file, joined to the others
    if not all(os.access(os.path.dirname(os.path.abspath(path)), os.W_OK) for path in paths):
        return None  # the run names the problem, and the output as the user gave it
    try:
        size = os.path.getsize(reads)
    except OSError:
        return None  # the run names the problem
    cores = settings.threads or usable_cores()
    gpus = [] if settings.device == "cpu" else visible_gpus()
    count = processes or file_processes(None, size, cores, lambda: len(gpus))
    parts = plan_parts(reads, count) if count > 1 else None
    if parts is None:
        return None
    return Split(parts, ScreenProcesses(len(parts), gpus, max(1, cores // len(parts))))


def screen_split(split: Split, reads, patterns_path, settings: ScreenSettings, outputs: dict,
                 progress: Callable[[int], None] | None = None) -> Summary:
    """The run of :func:`bpbc.pipeline.screen_files` on ``reads`` (its
    ``outputs``), part by part in ``split``'s processes. Raises
    :class:`~bpbc.file_parts.UnreadablePart` where a part does not
    decompress to its end, having written nothing: the caller then screens
    the file in one process."""
    from bpbc.distributed import join_files, remove_files, screen_parts
    from bpbc.outputs import check_distinct_files

    started, token = time.perf_counter(), secrets.token_hex(4)
    check_distinct_files({"the reads file": reads, "the patterns file": patterns_path},
                         {_OPTIONS[kind]: path for kind, path in outputs.items()})
    if settings.action != "none" or outputs.get("trimmed") is not None:
        from bpbc.trimming import check_settings

        check_settings(settings, outputs.get("trimmed") is not None)

    def run(tasks: list[tuple], joins: list) -> list[Summary]:
        try:
            summaries = split.workers.run(tasks, progress)
            join_files(joins)
        except BaseException:
            remove_files([path for *_, files in tasks for path in files.values() if path is not None])
            raise
        return summaries

    paths = {kind: outputs.get(kind) for kind in OUTPUTS}
    try:
        return screen_parts(split.parts, reads, patterns_path, settings, paths, token, started, run,
                            {"processes": len(split.parts)})
    finally:
        split.workers.stop()  # those still waiting where the run failed before its tasks
