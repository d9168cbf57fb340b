"""Bit transposes on the GPU (CuPy RawModule over kernels.cu), W = 32.

cupy is imported, and kernels.cu compiled with NVRTC, on first use only. The
layouts are those of :mod:`transpose.cpu` with 32-bit words; inputs and
outputs are cupy arrays on the current device.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

WORD_BITS = 32
PLANES = 3
KERNELS_PATH = Path(__file__).with_name("kernels.cu")
WARPS_PER_BLOCK = 4  #: must match kernels.cu
THREADS_PER_BLOCK = WARPS_PER_BLOCK * WORD_BITS
MAX_BLOCKS = 1 << 16  #: warps loop over further word groups (grid stride)
INFLIGHT = 8  #: must match kernels.cu: units of (one or two) groups a warp of the unpack kernels loads at once

@cache
def _kernels():
    """The compiled RawModule of kernels.cu (compiled on first use, then kept)."""
    import cupy
    from cupy.cuda.compiler import CompileException

    module = cupy.RawModule(code=KERNELS_PATH.read_text(), options=("-std=c++17",))
    try:
        module.compile()
    except CompileException as exc:
        from bpbc.errors import InternalError  # the package ships with bpbc

        raise InternalError(f"NVRTC failed to compile {KERNELS_PATH}:\n{exc}") from exc
    return module


def _grid(groups: int) -> tuple[int]:
    return (max(1, min(-(-groups // WARPS_PER_BLOCK), MAX_BLOCKS)),)


def _require_uint32(array, name: str):
    import cupy

    if not isinstance(array, cupy.ndarray):
        raise TypeError(f"{name} must be a cupy array on the device, got {type(array).__name__}")
    if array.dtype != cupy.uint32:
        raise TypeError(f"{name} must be uint32, got dtype {array.dtype}")
    array = cupy.ascontiguousarray(array)
    if array.data.ptr % 16:  # the kernels read and write 16 bytes at a time
        array = array.copy()
    return array


def _streams_to_planes(kernel_name: str, streams_gpu, length: int):
    import cupy

    streams = _require_uint32(streams_gpu, "streams")
    length = int(length)
    if length < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    blocks = -(-length // WORD_BITS)
    if streams.ndim != 3 or streams.shape[1:] != (PLANES, blocks):
        raise ValueError(
            f"streams for length {length} must have shape (N, {PLANES}, {blocks}), got {streams.shape}"
        )
    n = streams.shape[0]
    groups = -(-n // WORD_BITS)
    planes = cupy.empty((groups, length, PLANES), cupy.uint32)
    if groups and length:
        kernel = _kernels().get_function(kernel_name)
        kernel(
            _grid(groups),
            (THREADS_PER_BLOCK,),
            (streams, planes, np.int64(n), np.int32(length), np.int32(blocks), np.int64(groups)),
        )
    return planes


def planes_ballot(streams_gpu, length: int):
    """Bit planes (G, L, 3) uint32 of instance streams (N, 3, ceil(L / 32))
    uint32, by warp ballots: lane = instance, one ``__ballot_sync`` per
    (position, plane) yields the plane word."""
    return _streams_to_planes("planes_ballot_kernel", streams_gpu, length)


def planes_swap(streams_gpu, length: int):
    """Same result as :func:`planes_ballot`, by 32 x 32 swap transposes in
    registers (5 rounds of ``__shfl_xor_sync`` and masked swaps)."""
    return _streams_to_planes("planes_swap_kernel", streams_gpu, length)


def pack_bytes_gpu(data_gpu, starts_gpu, lengths_gpu, length: int, code_table_gpu, flag_out=None):
    """Bit planes (G, L = ``length``, 3) uint32 of byte sequences on the
    device, encoded on the way: instance i is ``data[starts[i]:starts[i] +
    lengths[i]]`` (uint8, int64, int32 cupy arrays), each byte coded by
    ``code_table`` (256 uint8, as for :func:`transpose.cpu.pack_bytes`: 0-3
    a base, 4 one that matches nothing, 255 not allowed); positions past an
    instance are invalid. Returns (planes, bad): bad is True when some byte
    is coded 255 (the planes are then not to be used). ``flag_out``: an
    int32 (1,) host array to read the flag into (in pinned memory: the
    driver copies it without staging)."""
    import cupy

    length = int(length)
    n = int(starts_gpu.shape[0])
    if lengths_gpu.shape != (n,) or starts_gpu.dtype != cupy.int64 or lengths_gpu.dtype != cupy.int32:
        raise ValueError("starts must be int64 and lengths int32, one of each per instance")
    if data_gpu.dtype != cupy.uint8 or code_table_gpu.dtype != cupy.uint8 or code_table_gpu.shape != (256,):
        raise ValueError("data must be uint8 and the code table 256 uint8")
    groups = -(-n // WORD_BITS)
    planes = cupy.empty((groups, length, PLANES), cupy.uint32)
    bad = cupy.zeros(1, cupy.int32)
    if groups and length:
        kernel = _kernels().get_function("pack_bytes_kernel")
        kernel(_grid(groups), (THREADS_PER_BLOCK,), (
            data_gpu, starts_gpu, lengths_gpu, code_table_gpu, planes, bad,
            np.int64(n), np.int32(length), np.int64(groups)))
    return planes, bool(bad.get(out=flag_out)[0])


_UNPACK_KERNELS = {"ballot": "unpack_ballot_kernel", "swap": "unpack_swap_kernel"}


def unpack_planes_gpu(planes_gpu, n: int, method: str = "ballot"):
    """Values int32 (n,) of score planes (G, b) uint32, b <= 31: bit k of
    value i is bit i % 32 of planes[i // 32, k]. ``method`` is "ballot" or
    "swap"; both give the same values."""
    import cupy

    try:
        kernel_name = _UNPACK_KERNELS[method]
    except KeyError:
        raise ValueError(f"method must be 'ballot' or 'swap', got {method!r}") from None
    planes = _require_uint32(planes_gpu, "planes")
    n = int(n)
    groups = -(-n // WORD_BITS)
    if planes.ndim != 2 or planes.shape[0] != groups:
        raise ValueError(f"planes for {n} instances must have shape ({groups}, b), got {planes.shape}")
    bits = planes.shape[1]
    if bits > WORD_BITS - 1:
        raise ValueError(f"at most {WORD_BITS - 1} planes fit an int32 value, got {bits}")
    values = cupy.empty(n, cupy.int32)
    if n:
        kernel = _kernels().get_function(kernel_name)
        units = -(-groups // (2 if bits <= 16 else 1))  # a warp unit: two groups when bits <= 16
        kernel(_grid(-(-units // INFLIGHT)), (THREADS_PER_BLOCK,),
               (planes, values, np.int64(n), np.int32(bits), np.int64(groups)))
    return values
