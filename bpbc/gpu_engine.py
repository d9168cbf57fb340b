"""Bit-sliced Smith-Waterman on an NVIDIA GPU (CuPy), 32 instances per word.

Reads travel packed (2 bits per base plus a validity bit, as instance
streams), are bit-transposed on the GPU (ballot or swap kernel of
:mod:`transpose.gpu`), screened by ``sw.cu`` and inverse-transposed; only
the per-instance scores and flags come back. cupy is imported and kernels are
compiled (NVRTC, then cached by CuPy on disk) on first use only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .scoring import Scoring

WORD_BITS = 32
KERNEL_PATH = Path(__file__).with_name("sw.cu")
THREADS_PER_BLOCK = 128  #: matches __launch_bounds__ in sw.cu
ROWS_PER_LANE = (4, 5, 3, 6, 2, 8, 7, 1)  #: candidates, best first on a tie


def chain_shape(pattern_length: int) -> tuple[int, int, int]:
    """(rows per lane R, lanes per chain P, stripes) for a pattern: little
    padding first, then more rows per lane (fewer shuffles per cell)."""
    best = None
    for rows in ROWS_PER_LANE:
        lanes = 1
        while lanes < 32 and lanes * rows < pattern_length:
            lanes *= 2
        stripes = -(-pattern_length // (lanes * rows))
        cost = lanes * rows * stripes * (1 + 0.5 / rows)
        if best is None or cost < best[0]:
            best = (cost, rows, lanes, stripes)
    return best[1:]


@lru_cache(maxsize=None)
def _module_source() -> str:
    return KERNEL_PATH.read_text()


@lru_cache(maxsize=None)
def _kernel(planes: int, rows: int, lanes: int, scoring: Scoring):
    import cupy
    from cupy.cuda.compiler import CompileException

    name = (f"sw_screen<{planes},{rows},{lanes},{scoring.match},{scoring.mismatch},"
            f"{scoring.first_gap},{scoring.gap_extend}>")
    module = cupy.RawModule(code=_module_source(), options=("-std=c++17",), name_expressions=(name,))
    try:
        return module.get_function(name)
    except CompileException as error:
        raise RuntimeError(f"NVRTC failed to compile {KERNEL_PATH} ({name}):\n{error}") from error


@dataclass
class PreparedReads:
    """A batch on the device: bit planes (G, L, 3) of the reads sorted by
    length, each word group's length, and the sorting permutation."""

    n: int
    order: np.ndarray
    planes: object  # cupy uint32 (G, L, 3)
    group_length: object  # cupy int32 (G,), each >= 1

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
        order = np.argsort(lengths, kind="stable")
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
    H100, see README) or the ballot kernel."""

    name = "gpu"
    word_bits = WORD_BITS

    def __init__(self, transpose: str = "swap"):
        import cupy

        if transpose not in ("ballot", "swap"):
            raise ValueError(f"transpose must be 'ballot' or 'swap', got {transpose!r}")
        self.transpose = transpose
        self.multiprocessors = cupy.cuda.Device().attributes["MultiProcessorCount"]

    def prepare(self, codes: np.ndarray, lengths: np.ndarray) -> PreparedReads:
        return PreparedReads.from_codes(codes, lengths, self.transpose)

    def launch(self, prepared: PreparedReads, pattern_masks: np.ndarray, scoring: Scoring, planes: int):
        """Run the SW kernel; returns the device arrays (best planes, flags)."""
        import cupy

        m = len(pattern_masks)
        rows, lanes, stripes = chain_shape(m)
        groups = prepared.groups
        kernel = _kernel(planes, rows, lanes, scoring)
        # as many chains as stay resident (one wave); chain k walks groups
        # k, k + chains, ... so that long and short groups spread evenly
        registers = -(-kernel.num_regs // 8) * 8 * THREADS_PER_BLOCK
        resident_blocks = max(1, min(32, 65536 // registers))
        resident = self.multiprocessors * resident_blocks * THREADS_PER_BLOCK
        chains = max(1, min(groups, resident // lanes))
        best = cupy.zeros((groups, planes), cupy.uint32)
        flag = cupy.zeros(groups, cupy.uint32)
        if stripes > 1:
            stripe_columns = cupy.empty((groups, prepared.width, 2 * planes), cupy.uint32)
            stripe_best = cupy.empty((groups, planes + 1), cupy.uint32)
        else:
            stripe_columns = stripe_best = cupy.empty(1, cupy.uint32)
        threads = chains * lanes
        blocks = -(-threads // THREADS_PER_BLOCK)
        kernel((blocks,), (THREADS_PER_BLOCK,), (
            prepared.planes, prepared.group_length, cupy.asarray(pattern_masks.astype(np.uint8)),
            stripe_columns, stripe_best, best, flag,
            np.int32(m), np.int32(groups), np.int32(prepared.width), np.int32(chains), np.int32(stripes),
        ))
        return best, flag

    def scores(self, prepared: PreparedReads, pattern_masks: np.ndarray, scoring: Scoring,
               planes: int) -> tuple[np.ndarray, np.ndarray]:
        """Screen scores (int64, input order) and overflow flags (bool)."""
        from transpose import unpack_planes_gpu

        if prepared.n == 0:
            return np.zeros(0, np.int64), np.zeros(0, bool)
        best, flag = self.launch(prepared, pattern_masks, scoring, planes)
        values = unpack_planes_gpu(best, prepared.n, self.transpose).get()
        flags = unpack_planes_gpu(flag[:, None], prepared.n, self.transpose).get().astype(bool)
        scores = np.empty(prepared.n, dtype=np.int64)
        overflow = np.empty(prepared.n, dtype=bool)
        scores[prepared.order] = values
        overflow[prepared.order] = flags
        return scores, overflow
