"""Plain loop implementations of the transposes: the oracle of the tests.

One bit at a time with Python integers, straight from the layout
definitions in :mod:`transpose.cpu`; slow, meant for small inputs.
"""

from __future__ import annotations

import numpy as np

from .cpu import PLANES, word_dtype


def reference_transpose_block(block: np.ndarray) -> np.ndarray:
    """Bit c of word r becomes bit r of word c, for every W-word block of
    the last axis (W = 32 for uint32, 64 for uint64; bit 0 = LSB)."""
    block = np.asarray(block)
    width = block.dtype.itemsize * 8
    rows = block.reshape(-1, width)
    result = np.zeros_like(rows)
    for b in range(rows.shape[0]):
        for r in range(width):
            word = int(rows[b, r])
            for c in range(width):
                if (word >> c) & 1:
                    result[b, c] |= result.dtype.type(1 << r)
    return result.reshape(block.shape)


def _plane_bits(code: int) -> tuple[int, int, int]:
    """(low, high, valid) bits of one read code; INVALID gives (0, 0, 0)."""
    if code >= 4:
        return 0, 0, 0
    return code & 1, code >> 1, 1


def reference_codes_to_streams(codes: np.ndarray, word_bits: int) -> np.ndarray:
    """Instance streams (N, 3, ceil(L / W)): bit p of stream[i, k, c] is plane
    k of read i at position c * W + p."""
    dtype = word_dtype(word_bits)
    n, length = codes.shape
    streams = np.zeros((n, PLANES, -(-length // word_bits)), dtype)
    for i in range(n):
        for pos in range(length):
            for k, bit in enumerate(_plane_bits(int(codes[i, pos]))):
                if bit:
                    streams[i, k, pos // word_bits] |= dtype(1 << (pos % word_bits))
    return streams


def reference_pack_codes(codes: np.ndarray, word_bits: int = 64) -> np.ndarray:
    """Bit planes (G, L, 3): bit j of planes[g, pos, k] is plane k of read
    g * W + j at position pos (plane 0 = low code bit, 1 = high, 2 = valid)."""
    dtype = word_dtype(word_bits)
    n, length = codes.shape
    planes = np.zeros((-(-n // word_bits), length, PLANES), dtype)
    for i in range(n):
        for pos in range(length):
            for k, bit in enumerate(_plane_bits(int(codes[i, pos]))):
                if bit:
                    planes[i // word_bits, pos, k] |= dtype(1 << (i % word_bits))
    return planes


def reference_unpack_planes(planes: np.ndarray, n: int) -> np.ndarray:
    """Values int64 (n,): bit k of value i is bit i % W of planes[i // W, k]."""
    width = planes.dtype.itemsize * 8
    values = np.zeros(n, np.int64)
    for i in range(n):
        value = 0
        for k in range(planes.shape[1]):
            value |= ((int(planes[i // width, k]) >> (i % width)) & 1) << k
        values[i] = value
    return values
