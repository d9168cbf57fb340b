"""Bit transposes between instance-major and bit-plane (BPBC) layouts.

W instances share one word (W = 64 on the CPU, 32 on the GPU): instance i
lives in word group i // W at bit i % W, bit 0 being the least significant.
The layouts are described in :mod:`transpose.cpu`; the CUDA versions in
:mod:`transpose.gpu` compile on first use (importing this package imports
neither cupy nor compiles anything).
"""

from .cpu import (
    codes_to_streams,
    pack_bytes,
    pack_codes,
    pack_flags,
    pack_values,
    streams_to_planes,
    transpose_block,
    unpack_flags,
    unpack_planes,
    word_dtype,
)
from .gpu import pack_bytes_gpu, planes_ballot, planes_swap, unpack_planes_gpu

__all__ = [
    "codes_to_streams",
    "pack_bytes",
    "pack_bytes_gpu",
    "pack_codes",
    "pack_flags",
    "pack_values",
    "planes_ballot",
    "planes_swap",
    "streams_to_planes",
    "transpose_block",
    "unpack_flags",
    "unpack_planes",
    "unpack_planes_gpu",
    "word_dtype",
]
