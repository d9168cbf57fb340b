"""How a run uses the machine: the cores it may use, and each stage's share, decided once.

:func:`available_cores` finds the cores this process may run on (its CPU
affinity, a cgroup's CPU quota); :func:`plan_run` turns them, or the
user's ``--threads``, or a Dask worker's share, into a :class:`CorePlan`:
the threads of each stage of the pipeline. Every stage takes its threads
from the plan (the reads' decompression and parsing, encoding, the CPU
kernel, the traceback, each output's compression); ``--json`` reports it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass

#: at most this many threads compress one output (half the cores at most).
#: Half and a quarter of 64 cores were tried on 4 x H200 hosts (40M reads,
#: every output): 14.1-14.9 s against 13.9-14.4 s with 8, and 0.2 GB more
#: memory; reading bounds that run (its read stage took 11 s of 12)
COMPRESSION_THREADS = 8

#: batches traced at once from this many cores on: a batch's traceback has
#: serial parts (its setup in numpy, the reads' encoding) that left most of
#: 16 cores idle (10M trimmed reads: the traceback stage took 4.0 s of a
#: 4.4 s run, with 32 CPU-seconds used in all), so a second batch's traceback
#: runs beside it (that run, its edited reads gathered on several threads too:
#: 4.5-4.7 s against 5.0-5.3 s)
TRACEBACKS = 2
TRACEBACKS_FROM = 8

#: cores and GPUs that one process of a run over several reads files gets at
#: most (:func:`file_processes`). One process keeps 2 GPUs and 32 cores as
#: busy as two processes, each on one GPU and 16 cores, would (2 x H200, 32-core
#: Xeon, 2026-11-30, bench/results/many_files_x2_h200.txt: two 5M-read files in
#: turn in one process 4.61-4.85 s, in two processes 5.03-5.32 s; of one gzip
#: member each, 4.86-5.50 s against 5.43-5.65 s; one 10M file split between two
#: processes 5.16-5.42 s against 4.48-4.68 s in one), while
#: on 4 GPUs and 64 cores one process gave only 1.15-1.27x one GPU and 16 cores
#: (session 24)
CORES_PER_PROCESS = 32
GPUS_PER_PROCESS = 2
#: input (bytes on disk) that a process of such a run must have to pay for
#: its start (a worker's imports, CUDA context and kernel loads: 1.2-1.9 s
#: more for its first file on that host). Eight files of 1.25M reads (104 MB
#: each) took 6.5-7.5 s in two processes against 5.9-6.6 s in turn in one
MIN_BYTES_PER_PROCESS = 500_000_000
_CGROUP_V2_MAX = "/sys/fs/cgroup/cpu.max"
_CGROUP_V1_QUOTA = "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"
_CGROUP_V1_PERIOD = "/sys/fs/cgroup/cpu/cpu.cfs_period_us"


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this system
        return os.cpu_count() or 1


def cgroup_cpu_quota(v2: str = _CGROUP_V2_MAX, v1_quota: str = _CGROUP_V1_QUOTA,
                     v1_period: str = _CGROUP_V1_PERIOD) -> float | None:
    """The CPUs a cgroup's quota allows this process (``cpu.max`` of cgroup
    v2, else ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` of v1), or None
    where there is no quota (a container started with ``--cpus`` has one;
    its affinity still shows every core of the host)."""
    try:
        with open(v2) as file:
            quota, period = file.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open(v1_quota) as quota_file, open(v1_period) as period_file:
            quota_us, period_us = int(quota_file.read()), int(period_file.read())
        return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def available_cores() -> tuple[int, str]:
    """(cores, why): the cores this process may run on, its CPU affinity
    (taskset, a cpuset, a dask-cuda worker pinned near its GPU) or, where
    lower, its cgroup's CPU quota rounded up."""
    cores = _affinity()
    quota = cgroup_cpu_quota()
    if quota is not None and math.ceil(quota) < cores:
        return max(1, math.ceil(quota)), "cgroup CPU quota"
    return cores, "CPU affinity"


def usable_cores() -> int:
    """The cores this process may run on (:func:`available_cores`)."""
    return available_cores()[0]


@dataclass(frozen=True)
class CorePlan:
    """The threads of each stage of one run (see :func:`plan_run`)."""

    #: the cores the run may use, and where that number came from
    cores: int
    source: str
    #: threads that read each reads file: rapidgzip's, and numba's that
    #: parse a batch of plain FASTQ (bpbc.io decides where fewer pay better)
    read: int
    #: numba threads of each thread that encodes and transposes batches
    encode: int
    #: numba threads of the CPU kernel (CPU runs) and of the traceback
    kernel: int
    traceback: int
    #: batches traced at once, each on ``traceback`` numba threads
    tracebacks: int
    #: threads that compress each compressed output (0: in its writing thread)
    compress: int
    #: stages that run in threads of their own (reader, encoder, aligner,
    #: writers); False with one core: every stage in the calling thread
    threaded: bool

    def as_dict(self) -> dict:
        return asdict(self)


def plan_run(threads: int | None = None, source: str | None = None) -> CorePlan:
    """The plan for a run on ``threads`` cores (``--threads``, or a Dask
    worker's share, named by ``source``), or on every core it may use
    (:func:`available_cores`).

    The stages overlap, so the shares add up to more than the cores: a
    stage's threads wait while its neighbours work. Encoding's parallel
    kernels (packing, transposing) are short and run beside the screen,
    traceback and de/compression, so the encoder gets a quarter of the
    cores unless the user gave a count with ``--threads`` (a 10M-read GPU
    run on a 16-core host took 13-15 s with 16 numba threads everywhere,
    11.3 s with 4)."""
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    if threads is None:
        cores, why = available_cores()
    else:
        cores, why = threads, source or "--threads"
    return CorePlan(
        cores=cores,
        source=why,
        read=cores,
        encode=cores if threads is not None and source is None else max(1, cores // 4),
        kernel=cores,
        traceback=cores,
        tracebacks=TRACEBACKS if cores >= TRACEBACKS_FROM else 1,
        compress=min(COMPRESSION_THREADS, cores // 2),
        threaded=cores > 1,
    )


def file_processes(files: int, input_bytes: int, cores: int, gpus: Callable[[], int]) -> int:
    """Processes that screen ``files`` reads files (``input_bytes`` in all)
    at once on this host: one per :data:`GPUS_PER_PROCESS` GPUs (``gpus()``,
    asked only where the input is large enough for several), else one per
    :data:`CORES_PER_PROCESS` of ``cores``; never more than there are files
    or :data:`MIN_BYTES_PER_PROCESS` of input. One means this process
    screens them in turn."""
    most = min(files, input_bytes // MIN_BYTES_PER_PROCESS)
    if most < 2:
        return 1
    count = gpus()
    per_host = -(-count // GPUS_PER_PROCESS) if count else cores // CORES_PER_PROCESS
    return max(1, min(most, per_host))


def gpu_groups(gpus: list[str], processes: int) -> list[str]:
    """``gpus`` (``CUDA_VISIBLE_DEVICES`` names) shared out among
    ``processes`` processes in runs of neighbours (GPUs next to each other
    often share a switch), each group as its ``CUDA_VISIBLE_DEVICES``."""
    size, extra = divmod(len(gpus), processes)
    starts = [index * size + min(index, extra) for index in range(processes + 1)]
    return [",".join(gpus[start:end]) for start, end in zip(starts, starts[1:]) if end > start]
