"""Choosing the engine that computes screen scores: CPU (numba) or GPU (CuPy).

Both engines implement the same calls, so the Screener above them never
knows which one runs. ``table`` is a :class:`bpbc.patterns.PatternTable` of
oriented patterns; every call covers all of them:

* ``prepare(codes, lengths)``: sort and bit-transpose a batch of reads once;
  optionally ``prepare_bytes(data, seq_start, lengths)``, the same from the
  sequences where they lie in a buffer (None when a byte is outside the
  alphabet), which :meth:`bpbc.screener.ReadBatch.from_chunk` prefers;
* ``scores(prepared, table, scoring, planes)``: dense screen scores (int32)
  and overflow flags (bool), (n_reads, K), in input order;
* ``hits(prepared, table, scoring, planes, thresholds, exact_planes=0)``:
  only the instances at or above their pattern's threshold or overflowing,
  as (read, k, score, overflow) sorted by read then k; an engine that
  scores some instances a second time may do so in ``exact_planes`` planes
  where more than ``planes`` (scores exact up to 2**exact_planes; the
  GPU's, whose ``end_cells`` need them), others ignore it;
* optionally ``end_cells(prepared, table, scoring, planes, reads, ks,
  scores)``: the end cells of those instances by the traceback's tie rule
  (the GPU's), which the traceback then starts from;
* ``two_pass``: whether the Screener should run a pass one plane short
  first; an engine that says so also has ``flagged(prepared, table, scoring,
  planes)``, the (read, k) that overflow (no scores kept), and
  ``pair_scores(codes, lengths, reads, ks, table, scoring, planes)``, the
  scores of just those instances.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from .resources import usable_cores

DEVICES = ("auto", "cpu", "gpu")


class Engine(Protocol):
    """What the Screener needs of an engine (see the module docstring)."""

    name: str
    #: instances per machine word
    word_bits: int
    two_pass: bool
    #: exception types that mean the engine ran out of memory on a batch
    out_of_memory: tuple[Any, ...]

    def prepare(self, codes: np.ndarray, lengths: np.ndarray) -> Any: ...

    def scores(self, prepared: Any, table: Any, scoring: Any, planes: int) -> tuple[np.ndarray, np.ndarray]: ...

    def hits(self, prepared: Any, table: Any, scoring: Any, planes: int, thresholds: np.ndarray,
             exact_planes: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...

    def release_memory(self) -> None: ...


class TwoPassEngine(Engine, Protocol):
    """An engine whose ``two_pass`` is True."""

    def flagged(self, prepared: Any, table: Any, scoring: Any, planes: int) -> tuple[np.ndarray, np.ndarray]: ...

    def pair_scores(self, codes: np.ndarray, lengths: np.ndarray, reads: np.ndarray, ks: np.ndarray, table: Any,
                    scoring: Any, planes: int) -> tuple[np.ndarray, np.ndarray]: ...


class EndCellEngine(Engine, Protocol):
    """An engine that finds end cells (the GPU's)."""

    def end_cells(self, prepared: Any, table: Any, scoring: Any, planes: int, reads: np.ndarray, ks: np.ndarray,
                  scores: np.ndarray) -> np.ndarray: ...


def gpu_unavailable_reason() -> str | None:
    """None when a CUDA GPU is usable through CuPy, else why not."""
    try:
        import cupy
    except Exception as error:  # ImportError, or a broken CUDA install
        return f"cupy cannot be imported ({error}); install bpbc[cuda12] or bpbc[cuda13]"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:
        return f"no usable CUDA driver or device ({error})"
    if count == 0:
        return "no CUDA device found"
    return None


def select_engine(device: str = "auto", threads: int | None = None) -> Engine:
    """The engine for ``device``: 'cpu', 'gpu', or 'auto' (the GPU when one
    is usable, else the CPU, quietly)."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    if device in ("auto", "gpu"):
        reason = gpu_unavailable_reason()
        if reason is None:
            from .gpu_engine import GpuEngine

            return GpuEngine()
        if device == "gpu":
            raise RuntimeError(f"device='gpu' requested but {reason}")
    from .cpu_engine import CpuEngine

    return CpuEngine(threads=threads)


#: numba's OpenMP workers would otherwise spin after each short parallel region
#: (packing, traceback) on cores that decompression and compression threads
#: need (measured on a 16-core host: a 10M-read run 13-15 s, 11.5 s with
#: passive waiting)
OPENMP_ENVIRONMENT = {"OMP_WAIT_POLICY": "PASSIVE"}


def set_up_process() -> None:
    """Set :data:`OPENMP_ENVIRONMENT` where the user has not (the OpenMP
    runtime reads it when numba first loads it) and let malloc reuse freed
    buffers (:func:`reuse_freed_buffers`): the command does it first thing,
    bpbc-serve before it loads anything, a Dask worker before its first task."""
    for name, value in OPENMP_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    reuse_freed_buffers()


#: glibc's mallopt parameters (malloc.h) and the values its adaptive mmap
#: threshold grows to on 64-bit systems (the trim threshold follows at twice it)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_ADAPTIVE_MMAP_THRESHOLD_MAX = 32 << 20
_MALLOC_ENVIRONMENT = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def reuse_freed_buffers() -> bool:
    """Let glibc's malloc in this process keep freed buffers for reuse where
    its environment has turned that off; True where it did something.

    A Dask nanny starts its worker with MALLOC_TRIM_THRESHOLD_=65536, and
    setting any of these variables stops glibc from raising its mmap
    threshold: every buffer of a chunk (megabytes, allocated and freed chunk
    after chunk) is then new mmapped memory, faulted in page by page. A
    5M-read GPU run took 6.2-6.4 s with that variable against 4.3-4.6 s
    without (H200 host, 96 x 24 bp panel). This sets the thresholds that
    glibc's own adaptation would reach; memory that is still freed goes
    back to the system as before, above them."""
    if not any(name in os.environ for name in _MALLOC_ENVIRONMENT):
        return False  # glibc adapts by itself
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _ADAPTIVE_MMAP_THRESHOLD_MAX)
                and mallopt(_M_TRIM_THRESHOLD, 2 * _ADAPTIVE_MMAP_THRESHOLD_MAX))


@contextmanager
def numba_threads(threads: int | None):
    """Inside the block, numba's parallel kernels run by the calling thread
    use at most ``threads`` threads (None: unchanged); restored after."""
    if threads is None:
        yield
        return
    import numba

    before = numba.get_num_threads()
    limit_numba_threads(threads)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def limit_numba_threads(threads: int | None) -> None:
    """Cap the threads of numba's parallel kernels run by the calling thread
    (numba's setting is per thread) at ``threads``, None: the usable cores."""
    import numba

    threads = usable_cores() if threads is None else threads
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
