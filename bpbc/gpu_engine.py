"""Bit-sliced Smith-Waterman on an NVIDIA GPU (CuPy), 32 instances per word.

Reads travel packed (2 bits per base plus a validity bit, as instance
streams), are bit-transposed on the GPU (ballot or swap kernel of
:mod:`transpose.gpu`), screened by ``sw.cu`` and inverse-transposed; only
the per-instance scores and flags come back. cupy is imported and kernels are
compiled (NVRTC, then cached by CuPy on disk) on first use only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from .engines import in_input_order, length_order
from .scoring import Scoring

WORD_BITS = 32
KERNEL_PATH = Path(__file__).with_name("sw.cu")
THREADS_PER_BLOCK = 128  #: matches __launch_bounds__ in sw.cu
ROWS_PER_LANE = (4, 5, 3, 6, 2, 8, 7, 1)  #: candidates, best first on a tie


def chain_shape(pattern_length: int) -> tuple[int, int, int]:
    """(rows per lane R, lanes per chain P, stripes) for a pattern: little
    padding first, then more rows per lane (fewer shuffles per cell)."""
    best: tuple[float, int, int, int] | None = None
    for rows in ROWS_PER_LANE:
        lanes = 1
        while lanes < 32 and lanes * rows < pattern_length:
            lanes *= 2
        stripes = -(-pattern_length // (lanes * rows))
        cost = lanes * rows * stripes * (1 + 0.5 / rows)
        if best is None or cost < best[0]:
            best = (cost, rows, lanes, stripes)
    assert best is not None  # ROWS_PER_LANE is not empty
    return best[1:]


@cache
def _module_source() -> str:
    return KERNEL_PATH.read_text()


def _compiled(name: str):
    import cupy
    from cupy.cuda.compiler import CompileException

    from .errors import InternalError

    module = cupy.RawModule(code=_module_source(), options=("-std=c++17",), name_expressions=(name,))
    try:
        return module.get_function(name)
    except CompileException as error:
        raise InternalError(f"NVRTC failed to compile {KERNEL_PATH} ({name}):\n{error}") from error


@cache
def _kernel(planes: int, rows: int, lanes: int, scoring: Scoring):
    return _compiled(f"sw_screen<{planes},{rows},{lanes},{scoring.match},{scoring.mismatch},"
                     f"{scoring.first_gap},{scoring.gap_extend}>")


@cache
def _hit_words_kernel():
    return _compiled("hit_words")


#: at most this many oriented patterns share one launch (a grid dimension's limit)
MAX_PATTERNS_PER_LAUNCH = 65535


@dataclass
class _Launch:
    """Oriented patterns (indices into the table) that share one chain shape."""

    ks: np.ndarray
    rows: int
    lanes: int
    stripes: int
    masks: Any  # cupy uint8: their masks back to back
    starts: Any  # cupy int64 (len(ks) + 1,)


def _launches(table) -> list[_Launch]:
    """The table cut into launches: patterns of one chain shape together
    (a pattern that needs stripes alone: its stripe buffers are per launch)."""
    import cupy

    cached = table.engine_cache.get("gpu")
    if cached is not None:
        return cached
    shapes: dict[tuple[int, int, int], list[int]] = {}
    for k, m in enumerate(table.lengths.tolist()):
        shapes.setdefault(chain_shape(m), []).append(k)
    launches = []
    for (rows, lanes, stripes), ks in shapes.items():
        step = 1 if stripes > 1 else MAX_PATTERNS_PER_LAUNCH
        for first in range(0, len(ks), step):
            part = np.array(ks[first:first + step], dtype=np.int64)
            sub = table.subset(part)
            launches.append(_Launch(part, rows, lanes, stripes, cupy.asarray(sub.masks), cupy.asarray(sub.starts)))
    table.engine_cache["gpu"] = launches
    return launches


@dataclass
class PreparedReads:
    """A batch on the device: bit planes (G, L, 3) of the reads sorted by
    length, each word group's length, and the sorting permutation."""

    n: int
    order: np.ndarray
    planes: Any  # cupy uint32 (G, L, 3)
    group_length: Any  # cupy int32 (G,), each >= 1

    @property
    def groups(self) -> int:
        return self.planes.shape[0]

    @property
    def width(self) -> int:
        return self.planes.shape[1]

    @classmethod
    def from_codes(cls, codes: np.ndarray, lengths: np.ndarray, transpose_method: str) -> "PreparedReads":
        """Sort, pack (2 bits per base plus validity), upload, transpose on the GPU."""
        import cupy

        from transpose import codes_to_streams, planes_ballot, planes_swap

        n = len(lengths)
        order = length_order(lengths)
        sorted_lengths = lengths[order]
        sorted_codes = codes[order]
        if sorted_codes.shape[1] == 0:  # only empty reads: one invalid column
            sorted_codes = np.full((n, 1), 4, np.uint8)
        streams = codes_to_streams(sorted_codes, WORD_BITS)
        to_planes = {"ballot": planes_ballot, "swap": planes_swap}[transpose_method]
        planes = to_planes(cupy.asarray(streams), sorted_codes.shape[1])
        groups = -(-n // WORD_BITS)
        last = np.minimum((np.arange(groups) + 1) * WORD_BITS, n) - 1
        group_length = np.maximum(sorted_lengths[last], 1) if n else np.zeros(0, np.int64)
        return cls(n, order, planes, cupy.asarray(group_length.astype(np.int32)))


class GpuEngine:
    """The CuPy engine. ``transpose`` picks the swap (default: faster on an
    H100, see README) or the ballot kernel. One launch covers every oriented
    pattern of a chain shape; only words holding a hit come back."""

    name = "gpu"
    word_bits = WORD_BITS
    #: the SW pass is cheap next to the rest of the run: one full pass
    two_pass = False

    def __init__(self, transpose: str = "swap"):
        import cupy

        if transpose not in ("ballot", "swap"):
            raise ValueError(f"transpose must be 'ballot' or 'swap', got {transpose!r}")
        self.transpose = transpose
        self.multiprocessors = cupy.cuda.Device().attributes["MultiProcessorCount"]
        #: what running out of device (or pinned host) memory raises; the
        #: Screener then frees the pools and splits the batch
        self.out_of_memory = (cupy.cuda.memory.OutOfMemoryError, MemoryError)

    def release_memory(self) -> None:
        """Hand CuPy's cached blocks back to the driver (after running out of memory)."""
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()

    def prepare(self, codes: np.ndarray, lengths: np.ndarray) -> PreparedReads:
        return PreparedReads.from_codes(codes, lengths, self.transpose)

    def launch(self, prepared: PreparedReads, table, scoring: Scoring, planes: int):
        """Run the SW kernel on every oriented pattern of ``table``; returns
        the device arrays best planes (K, G, planes) and flags (K, G)."""
        import cupy

        groups = prepared.groups
        best = cupy.zeros((len(table), groups, planes), cupy.uint32)
        flag = cupy.zeros((len(table), groups), cupy.uint32)
        for launch in _launches(table):
            kernel = _kernel(planes, launch.rows, launch.lanes, scoring)
            count = len(launch.ks)
            # chains in one wave of resident threads over all patterns of the
            # launch; chain c walks groups c, c + chains, ... so that long and
            # short groups spread evenly
            registers = -(-kernel.num_regs // 8) * 8 * THREADS_PER_BLOCK
            resident_blocks = max(1, min(32, 65536 // registers))
            resident = self.multiprocessors * resident_blocks * THREADS_PER_BLOCK
            chains = max(1, min(groups, -(-resident // (launch.lanes * count))))
            if launch.stripes > 1:
                stripe_columns = cupy.empty((groups, prepared.width, 2 * planes), cupy.uint32)
                stripe_best = cupy.empty((groups, planes + 1), cupy.uint32)
            else:
                stripe_columns = stripe_best = cupy.empty(1, cupy.uint32)
            contiguous = count == launch.ks[-1] - launch.ks[0] + 1
            out_best = best[launch.ks[0]:launch.ks[-1] + 1] if contiguous else cupy.empty(
                (count, groups, planes), cupy.uint32)
            out_flag = flag[launch.ks[0]:launch.ks[-1] + 1] if contiguous else cupy.empty((count, groups), cupy.uint32)
            blocks = -(-chains * launch.lanes // THREADS_PER_BLOCK)
            kernel((blocks, count), (THREADS_PER_BLOCK,), (
                prepared.planes, prepared.group_length, launch.masks, launch.starts,
                stripe_columns, stripe_best, out_best, out_flag,
                np.int32(groups), np.int32(prepared.width), np.int32(chains),
            ))
            if not contiguous:
                ks = cupy.asarray(launch.ks)
                best[ks] = out_best
                flag[ks] = out_flag
        return best, flag

    def scores(self, prepared: PreparedReads, table, scoring: Scoring,
               planes: int) -> tuple[np.ndarray, np.ndarray]:
        """Screen scores (int32) and overflow flags (bool), (n, K) in input order."""
        from transpose import unpack_planes_gpu

        count = len(table)
        if prepared.n == 0:
            return np.zeros((0, count), np.int32), np.zeros((0, count), bool)
        best, flag = self.launch(prepared, table, scoring, planes)
        lanes = prepared.groups * WORD_BITS
        values = unpack_planes_gpu(best.reshape(-1, planes), count * lanes, self.transpose)
        flags = unpack_planes_gpu(flag.reshape(-1, 1), count * lanes, self.transpose)
        values = values.reshape(count, lanes)[:, :prepared.n].get()
        flags = flags.reshape(count, lanes)[:, :prepared.n].get().astype(bool)
        return in_input_order(prepared.order, values, flags)

    def hits(self, prepared: PreparedReads, table, scoring: Scoring, planes: int,
             thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(read, oriented pattern, score, overflow) of every instance that
        reaches its pattern's threshold or overflows, sorted by read then
        pattern. Only the words that hold such an instance are copied back."""
        import cupy

        count, groups = len(table), prepared.groups
        best, flag = self.launch(prepared, table, scoring, planes)
        mask = cupy.empty((count, groups), cupy.uint32)
        words = count * groups
        _hit_words_kernel()((max(1, min(-(-words // 256), 1 << 16)),), (256,), (
            best, flag, cupy.asarray(np.asarray(thresholds, np.int32)), mask,
            np.int32(count), np.int32(groups), np.int32(planes), np.int64(prepared.n)))
        hot = cupy.flatnonzero(mask)
        hot_mask = mask.reshape(-1)[hot].get()
        hot_best = best.reshape(-1, planes)[hot].get()
        hot_flag = flag.reshape(-1)[hot].get()
        hot = hot.get()
        bits = np.arange(WORD_BITS, dtype=np.uint32)
        word, lane = np.nonzero((hot_mask[:, None] >> bits) & 1)
        lane = lane.astype(np.uint32)
        values = (((hot_best[word] >> lane[:, None]) & 1).astype(np.int32) << np.arange(planes)).sum(axis=1)
        overflow = ((hot_flag[word] >> lane) & 1).astype(bool)
        k, group = np.divmod(hot[word], groups)
        reads = prepared.order[group * WORD_BITS + lane]
        order = np.lexsort((k, reads))
        return reads[order], k[order], values[order].astype(np.int32), overflow[order]
