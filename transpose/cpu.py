"""Bit transposes on the CPU (numba).

Bit convention, used everywhere in this package: bit 0 of a word is its least
significant bit. A W x W bit matrix is held as W words, one word per row; row
r, column c is bit c of word r. Instance i of a batch lives in word group
i // W at bit i % W.

Layouts (W = word_bits, 32 or 64):

- codes: uint8 (N, L), 0..3 = A, C, G, T; any code >= 4 is INVALID.
- instance streams: uint{W} (N, 3, ceil(L / W)); bit p of stream[i, k, c] is
  plane k of instance i at position c * W + p (0 past L).
- bit planes: uint{W} (G, L, 3), G = ceil(N / W); bit j of planes[g, pos, k]
  is plane k of instance g * W + j at position pos. Plane 0 = low bit of the
  code, plane 1 = high bit, plane 2 = valid (code < 4). INVALID codes and
  lanes past N have all three bits 0.
- score planes: uint{W} (G, b); bit j of planes[g, k] is bit k of the
  (unsigned) value of instance g * W + j.

Every conversion between instance-major and plane-major words goes through
the W x W swap transpose, so it costs O(W log W) word operations per W x W
bits instead of one operation per bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

WORD_DTYPES = {32: np.uint32, 64: np.uint64}
PLANES = 3  #: planes per read base: low bit, high bit, valid

# Byte tricks for eight codes at a time (byte p of a little-endian uint64 is
# the code at position p): multiplying bit 0 of every byte by GATHER lands
# byte p's bit at bit 56 + p, with no carries, so ">> 56" packs 8 bits.
_BYTE_BIT0 = np.uint64(0x0101010101010101)
_BYTE_LOW6 = np.uint64(0x3F3F3F3F3F3F3F3F)
_BYTE_BIT7 = np.uint64(0x8080808080808080)
_GATHER = np.uint64(0x0102040810204080)
_U64_1 = np.uint64(1)
_U64_2 = np.uint64(2)
_U64_3 = np.uint64(3)
_U64_56 = np.uint64(56)


def word_dtype(word_bits: int):
    """numpy dtype of a word of ``word_bits`` bits (32 or 64)."""
    try:
        return WORD_DTYPES[word_bits]
    except KeyError:
        raise ValueError(f"word_bits must be 32 or 64, got {word_bits!r}") from None


def _word_bits_of(array: np.ndarray) -> int:
    for bits, dtype in WORD_DTYPES.items():
        if array.dtype == dtype:
            return bits
    raise TypeError(f"expected a uint32 or uint64 array, got dtype {array.dtype}")


@njit(cache=True, nogil=True)
def _transpose_rows(rows, width):
    """Transpose ``rows[s, :width]`` in place for every set s (Hacker's
    Delight 7-3, LSB-first): round j swaps the off-diagonal j x j blocks of
    every 2j x 2j block, i.e. bits of row k with column bit j set against bits
    of row k + j with column bit j clear. ``rows`` is uint64, width <= 64."""
    j = width // 2
    mask = (_U64_1 << np.uint64(j)) - _U64_1  # columns whose bit j is clear
    while j > 0:
        shift = np.uint64(j)
        for s in range(rows.shape[0]):
            for base in range(0, width, 2 * j):
                for k in range(base, base + j):
                    t = ((rows[s, k] >> shift) ^ rows[s, k + j]) & mask
                    rows[s, k] ^= t << shift
                    rows[s, k + j] ^= t
        j //= 2
        mask ^= mask << np.uint64(j)


@njit(cache=True, nogil=True, inline="always")
def _rows_to_planes(rows, count, width, planes, g, start, stop):
    """``rows[k, r]``, r < count, hold plane k of instance r of word group g
    at positions [start, stop), bit p = position start + p: zero the rows of
    the group's missing instances, transpose, and store the positions' plane
    words in ``planes[g]``."""
    for r in range(count, width):
        for k in range(PLANES):
            rows[k, r] = 0
    _transpose_rows(rows, width)
    for p in range(stop - start):
        for k in range(PLANES):
            planes[g, start + p, k] = rows[k, p]


@njit(cache=True, nogil=True, parallel=True)
def _transpose_blocks(source, target, width):
    for b in prange(source.shape[0]):
        rows = np.empty((1, 64), np.uint64)
        for r in range(width):
            rows[0, r] = source[b, r]
        _transpose_rows(rows, width)
        for r in range(width):
            target[b, r] = rows[0, r]


def transpose_block(block: np.ndarray) -> np.ndarray:
    """W x W bit-matrix transpose of the last axis, batched over the others.

    ``block`` is uint32 with last axis 32 (W = 32) or uint64 with last axis
    64 (W = 64). Word r of a block is row r; bit c (bit 0 = least significant)
    of row r is column c. The result has bit r of word c equal to bit c of
    word r of the input, for every block. Returns a new array of the same
    shape and dtype, computed by log2(W) rounds of masked swaps.
    """
    block = np.asarray(block)
    width = _word_bits_of(block)
    if block.ndim == 0 or block.shape[-1] != width:
        raise ValueError(f"last axis must have {width} words for {block.dtype}, got shape {block.shape}")
    source = np.ascontiguousarray(block).reshape(-1, width)
    target = np.empty_like(source)
    _transpose_blocks(source, target, width)
    return target.reshape(block.shape)


@njit(cache=True, nogil=True, inline="always")
def _eight_codes(x):
    """Bits (low, high, valid) 0-7 of eight codes, byte q of the uint64 x
    being the code at position q; codes >= 4 give 0 in all three."""
    bad = (x >> _U64_2) & _BYTE_LOW6  # bits 2..7 of each code
    bad |= bad >> _U64_3
    bad |= bad >> _U64_1
    bad |= bad >> _U64_1  # bit 0 of each byte: any of bits 2..7 set
    ok = ~bad & _BYTE_BIT0
    return (((x & ok) * _GATHER) >> _U64_56, ((((x >> _U64_1) & ok) * _GATHER) >> _U64_56),
            ((ok * _GATHER) >> _U64_56))


@njit(cache=True, nogil=True, inline="always")
def _one_code(code):
    """Bit 0 of (low, high, valid) of one code (uint64); >= 4 gives 0 in all three."""
    ok = np.uint64(code < 4)
    return code & ok, (code >> _U64_1) & ok, ok


@njit(cache=True, nogil=True, inline="always")
def _code_words(codes, i, start, stop):
    """Planes (low, high, valid) of codes[i, start:stop] as uint64 words, bit
    p = position start + p; codes >= 4 give 0 in all three."""
    low = np.uint64(0)
    high = np.uint64(0)
    valid = np.uint64(0)
    p = 0
    # Eight codes per step: assemble them little-endian into one uint64, then
    # gather one bit per byte with a multiply.
    while start + p + 8 <= stop:
        x = np.uint64(0)
        for q in range(8):
            x |= np.uint64(codes[i, start + p + q]) << np.uint64(8 * q)
        shift = np.uint64(p)
        eight_low, eight_high, eight_valid = _eight_codes(x)
        low |= eight_low << shift
        high |= eight_high << shift
        valid |= eight_valid << shift
        p += 8
    while start + p < stop:
        shift = np.uint64(p)
        one_low, one_high, one_valid = _one_code(np.uint64(codes[i, start + p]))
        low |= one_low << shift
        high |= one_high << shift
        valid |= one_valid << shift
        p += 1
    return low, high, valid


@njit(cache=True, nogil=True, parallel=True)
def _codes_to_streams_kernel(codes, streams, width):
    n, length = codes.shape
    blocks = streams.shape[2]
    for i in prange(n):
        for c in range(blocks):
            start = c * width
            low, high, valid = _code_words(codes, i, start, min(start + width, length))
            streams[i, 0, c] = low
            streams[i, 1, c] = high
            streams[i, 2, c] = valid


@njit(cache=True, nogil=True, parallel=True)
def _streams_to_planes_kernel(streams, planes, width):
    n = streams.shape[0]
    groups, length = planes.shape[0], planes.shape[1]
    blocks = streams.shape[2]
    for g in prange(groups):
        rows = np.zeros((PLANES, 64), np.uint64)
        first = g * width
        count = min(width, n - first)
        for c in range(blocks):
            for k in range(PLANES):
                for r in range(count):
                    rows[k, r] = streams[first + r, k, c]
            _rows_to_planes(rows, count, width, planes, g, c * width, min(c * width + width, length))


@njit(cache=True, nogil=True, parallel=True)
def _pack_codes_kernel(codes, planes, width):
    n, length = codes.shape
    groups = planes.shape[0]
    blocks = (length + width - 1) // width
    for g in prange(groups):
        rows = np.zeros((PLANES, 64), np.uint64)
        first = g * width
        count = min(width, n - first)
        for c in range(blocks):
            start = c * width
            stop = min(start + width, length)
            for r in range(count):
                low, high, valid = _code_words(codes, first + r, start, stop)
                rows[0, r] = low
                rows[1, r] = high
                rows[2, r] = valid
            _rows_to_planes(rows, count, width, planes, g, start, stop)


def _check_codes(codes) -> np.ndarray:
    codes = np.asarray(codes)
    if codes.ndim != 2:
        raise ValueError(f"codes must be 2-D (reads, positions), got shape {codes.shape}")
    if codes.dtype != np.uint8:
        raise TypeError(f"codes must be uint8, got dtype {codes.dtype}")
    return np.ascontiguousarray(codes)


def codes_to_streams(codes: np.ndarray, word_bits: int) -> np.ndarray:
    """Instance streams (N, 3, ceil(L / W)) of a uint8 code matrix (N, L):
    bit p of stream[i, k, c] is plane k of read i at position c * W + p."""
    dtype = word_dtype(word_bits)
    codes = _check_codes(codes)
    n, length = codes.shape
    streams = np.empty((n, PLANES, -(-length // word_bits)), dtype)
    _codes_to_streams_kernel(codes, streams, word_bits)
    return streams


def streams_to_planes(streams: np.ndarray, length: int, word_bits: int) -> np.ndarray:
    """Bit planes (G, L, 3) of instance streams (N, 3, ceil(L / W)), one
    W x W transpose per (word group, plane, block of W positions)."""
    dtype = word_dtype(word_bits)
    streams = np.ascontiguousarray(streams)
    length = int(length)
    blocks = -(-length // word_bits)
    if streams.dtype != dtype or streams.ndim != 3 or streams.shape[1:] != (PLANES, blocks):
        raise ValueError(
            f"streams must be {np.dtype(dtype).name} of shape (N, {PLANES}, {blocks}) for length {length},"
            f" got {streams.dtype} {streams.shape}"
        )
    planes = np.empty((-(-streams.shape[0] // word_bits), length, PLANES), dtype)
    _streams_to_planes_kernel(streams, planes, word_bits)
    return planes


def pack_codes(codes: np.ndarray, word_bits: int = 64) -> np.ndarray:
    """Bit planes (G, L, 3) of a uint8 code matrix (N, L); the same result as
    ``streams_to_planes(codes_to_streams(codes, W), L, W)`` without the
    intermediate streams. Parallel over word groups."""
    dtype = word_dtype(word_bits)
    codes = _check_codes(codes)
    n, length = codes.shape
    planes = np.empty((-(-n // word_bits), length, PLANES), dtype)
    _pack_codes_kernel(codes, planes, word_bits)
    return planes


@njit(cache=True, nogil=True, inline="always")
def _byte_words(data, start, read_length, table, first, stop):
    """:func:`_code_words` of ``table[data[start + p]]`` for positions p in
    [first, stop) (past ``read_length``: invalid), and whether a byte is
    coded 255 (the table holds 0-4 and 255 only: bit 7 marks it)."""
    low = np.uint64(0)
    high = np.uint64(0)
    valid = np.uint64(0)
    seen = np.uint64(0)  # OR of the codes
    stop = min(stop, read_length)
    p = first
    while p + 8 <= stop:  # eight at a time, as _code_words
        x = np.uint64(0)
        for q in range(8):
            x |= np.uint64(table[data[start + p + q]]) << np.uint64(8 * q)
        seen |= x
        shift = np.uint64(p - first)
        eight_low, eight_high, eight_valid = _eight_codes(x)
        low |= eight_low << shift
        high |= eight_high << shift
        valid |= eight_valid << shift
        p += 8
    while p < stop:
        code = np.uint64(table[data[start + p]])
        seen |= code
        shift = np.uint64(p - first)
        one_low, one_high, one_valid = _one_code(code)
        low |= one_low << shift
        high |= one_high << shift
        valid |= one_valid << shift
        p += 1
    return low, high, valid, (seen & _BYTE_BIT7) != 0


@njit(cache=True, nogil=True, parallel=True)
def _pack_bytes_kernel(data, starts, lengths, table, planes, width):
    n = starts.shape[0]
    groups, length = planes.shape[0], planes.shape[1]
    bad = np.zeros(groups, np.bool_)
    for g in prange(groups):
        rows = np.zeros((PLANES, 64), np.uint64)
        first = g * width
        count = min(width, n - first)
        for start in range(0, length, width):
            stop = min(start + width, length)
            for r in range(count):
                low, high, valid, seen = _byte_words(data, starts[first + r], lengths[first + r], table, start, stop)
                rows[0, r] = low
                rows[1, r] = high
                rows[2, r] = valid
                bad[g] |= seen
            _rows_to_planes(rows, count, width, planes, g, start, stop)
    return bad.any()


def pack_bytes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, length: int, code_table: np.ndarray,
               word_bits: int = 64) -> tuple[np.ndarray, bool]:
    """Bit planes (G, ``length``, 3) of byte sequences, encoded on the way:
    instance i is ``data[starts[i]:starts[i] + lengths[i]]`` (uint8), each
    byte coded by ``code_table`` (256 uint8: 0-3 a base, 4 one that matches
    nothing, 255 not allowed); positions past an instance are invalid. The
    same planes as :func:`pack_codes` of the coded matrix, from
    the bytes in one pass. Returns (planes, bad): bad is True when some byte
    is coded 255 (the planes are then not to be used)."""
    dtype = word_dtype(word_bits)
    starts = np.ascontiguousarray(starts, np.int64)
    lengths = np.ascontiguousarray(lengths, np.int64)
    if starts.shape != lengths.shape or starts.ndim != 1:
        raise ValueError("starts and lengths must be 1-D, one of each per instance")
    code_table = np.ascontiguousarray(code_table, np.uint8)
    if code_table.shape != (256,) or not ((code_table <= 4) | (code_table == 255)).all():
        raise ValueError("the code table must have 256 entries, each 0-4 or 255")
    planes = np.empty((-(-len(starts) // word_bits), int(length), PLANES), dtype)
    bad = _pack_bytes_kernel(np.asarray(data, np.uint8), starts, lengths, code_table, planes, word_bits)
    return planes, bool(bad)


@njit(cache=True, nogil=True, parallel=True)
def _unpack_planes_kernel(planes, values, width):
    n = values.shape[0]
    groups, bits = planes.shape
    for g in prange(groups):
        rows = np.empty((1, 64), np.uint64)
        first = g * width
        count = min(width, n - first)
        for r in range(count):
            values[first + r] = 0
        # Planes beyond W go through further transposes, W bits at a time.
        for chunk in range(0, bits, width):
            for k in range(width):
                if chunk + k < bits:
                    rows[0, k] = planes[g, chunk + k]
                else:
                    rows[0, k] = 0
            _transpose_rows(rows, width)
            for r in range(count):
                values[first + r] |= rows[0, r] << np.uint64(chunk)


def unpack_planes(planes: np.ndarray, n: int) -> np.ndarray:
    """Values int64 (n,) of score planes (G, b): the inverse transpose; bit k
    of value i is bit i % W of planes[i // W, k]. Values are unsigned, b < 64."""
    planes = np.asarray(planes)
    width = _word_bits_of(planes)
    n = int(n)
    if planes.ndim != 2 or planes.shape[0] != -(-n // width):
        raise ValueError(f"planes for {n} instances must have shape ({-(-n // width)}, b), got {planes.shape}")
    if planes.shape[1] >= 64:
        raise ValueError(f"at most 63 planes fit an int64 value, got {planes.shape[1]}")
    values = np.empty(n, np.uint64)
    _unpack_planes_kernel(np.ascontiguousarray(planes), values, width)
    return values.view(np.int64)


@njit(cache=True, nogil=True, parallel=True)
def _pack_values_kernel(values, planes, width):
    n = values.shape[0]
    groups, bits = planes.shape
    for g in prange(groups):
        rows = np.empty((1, 64), np.uint64)
        first = g * width
        count = min(width, n - first)
        for chunk in range(0, bits, width):
            for r in range(count):
                rows[0, r] = np.uint64(values[first + r]) >> np.uint64(chunk)
            for r in range(count, width):
                rows[0, r] = 0
            _transpose_rows(rows, width)
            for k in range(min(width, bits - chunk)):
                planes[g, chunk + k] = rows[0, k]


def pack_values(values: np.ndarray, n_bits: int, word_bits: int) -> np.ndarray:
    """Score planes (G, n_bits) of non-negative integers below 2**n_bits: the
    forward transpose that :func:`unpack_planes` inverts."""
    dtype = word_dtype(word_bits)
    values = np.ascontiguousarray(values, dtype=np.int64)
    n_bits = int(n_bits)
    if values.ndim != 1:
        raise ValueError(f"values must be 1-D, got shape {values.shape}")
    if not 1 <= n_bits <= 63:
        raise ValueError(f"n_bits must be in 1..63, got {n_bits}")
    if values.size and (values.min() < 0 or values.max() >> n_bits):
        raise ValueError(f"values must lie in 0..2**{n_bits} - 1")
    planes = np.empty((-(-values.size // word_bits), n_bits), dtype)
    _pack_values_kernel(values, planes, word_bits)
    return planes


def pack_flags(flags: np.ndarray, word_bits: int) -> np.ndarray:
    """One plane (G,) of booleans: bit i % W of word i // W is flags[i]."""
    dtype = word_dtype(word_bits)
    flags = np.asarray(flags, dtype=bool).ravel()
    groups = -(-flags.size // word_bits)
    packed = np.zeros(groups * word_bits // 8, np.uint8)
    packed[: -(-flags.size // 8)] = np.packbits(flags, bitorder="little")
    # Little-endian bytes of a word: byte q holds bits 8q..8q+7.
    return packed.view(np.dtype(dtype).newbyteorder("<")).astype(dtype)


def unpack_flags(words: np.ndarray, n: int) -> np.ndarray:
    """Booleans (n,) of one plane (G,), the inverse of :func:`pack_flags`."""
    words = np.asarray(words)
    width = _word_bits_of(words)
    n = int(n)
    if words.ndim != 1 or words.size != -(-n // width):
        raise ValueError(f"a plane of {n} flags must have shape ({-(-n // width)},), got {words.shape}")
    little = words.astype(np.dtype(words.dtype).newbyteorder("<"))
    return np.unpackbits(little.view(np.uint8), count=n, bitorder="little").astype(bool)
