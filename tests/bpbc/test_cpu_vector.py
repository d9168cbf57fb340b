"""The 16-lane int32 vectors of bpbc.cpu_vector (the traceback's forward
pass), each operation against numpy on random lanes, extremes included.
The traceback itself is checked against the reference in test_traceback.py."""

from __future__ import annotations

import numpy as np
from numba import njit

from bpbc.cpu_vector import base_masks64, vload16, vmax16, vselect16, vsplat16, vstore16


@njit
def _lane_ops(a, b, small, out, out_bytes):
    x = vload16(a, 0)
    y = vload16(b, 16)  # an offset load
    z = vload16(small, 0)  # uint8, zero-extended
    vstore16(out, 0, x + y)
    vstore16(out, 16, x - y)
    vstore16(out, 32, x & y)
    vstore16(out, 48, x | y)
    vstore16(out, 64, vmax16(x, y))
    vstore16(out, 80, vselect16(x > y, x, y - vsplat16(7)))
    vstore16(out, 96, vselect16(x >= y, vsplat16(1), vsplat16(0)))
    vstore16(out, 112, vselect16(x != y, z, vsplat16(-3)))
    vstore16(out_bytes, 0, x)  # the low bytes


def test_lanes_equal_numpy():
    rng = np.random.default_rng(3)
    extremes = np.array([-(1 << 31), (1 << 31) - 1, -1, 0], dtype=np.int32)
    for trial in range(20):
        a = rng.integers(-(1 << 31), 1 << 31, 16, dtype=np.int64).astype(np.int32)
        b = rng.integers(-(1 << 31), 1 << 31, 32, dtype=np.int64).astype(np.int32)
        if trial % 2:  # ties and extremes
            a[:4], b[16:20] = extremes, extremes[::-1]
            b[20:24] = a[4:8]
        small = rng.integers(0, 256, 16, dtype=np.int64).astype(np.uint8)
        out = np.zeros(128, np.int32)
        out_bytes = np.zeros(16, np.uint8)
        _lane_ops(a, b, small, out, out_bytes)
        x, y = a.astype(np.int64), b[16:].astype(np.int64)
        wrap = lambda v: ((v + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)  # noqa: E731
        expected = [wrap(x + y), wrap(x - y), a & b[16:], a | b[16:], np.maximum(a, b[16:]),
                    np.where(x > y, x, wrap(y - 7)), (x >= y).astype(np.int32),
                    np.where(x != y, small.astype(np.int32), -3)]
        for k, want in enumerate(expected):
            assert np.array_equal(out[16 * k:16 * k + 16], want), (trial, k)
        assert np.array_equal(out_bytes, (a & 0xFF).astype(np.uint8))


@njit
def _base_masks(data, index):
    return base_masks64(data, index)


def test_base_masks_are_the_read_codes_bits():
    """Bit q of (low, high, acgt) is bit 0, bit 1 of READ_CODE[byte q] and
    whether it is below 4, for every byte value, in either case, at every
    offset (unaligned loads)."""
    from bpbc.alphabet import READ_CODE

    rng = np.random.default_rng(8)
    letters = np.frombuffer(b"ACGTUacgtuNnRyX@`\x00\xff\xc1\xe1", np.uint8)
    buffers = [np.arange(256, dtype=np.uint8), rng.integers(0, 256, 300, dtype=np.int64).astype(np.uint8),
               letters[rng.integers(0, len(letters), 300)]]
    for data in buffers:
        for index in range(0, len(data) - 63, 7):
            codes = READ_CODE[data[index:index + 64]].astype(np.uint64)
            below = codes < 4
            bits = np.uint64(1) << np.arange(64, dtype=np.uint64)
            expected = [int(np.bitwise_or.reduce(bits[below & (codes & np.uint64(1) == 1)], initial=0)),
                        int(np.bitwise_or.reduce(bits[below & (codes >> np.uint64(1) == 1)], initial=0)),
                        int(np.bitwise_or.reduce(bits[below], initial=0))]
            assert [int(m) for m in _base_masks(data, index)] == expected, index
