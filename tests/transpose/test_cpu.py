"""CPU transposes against the plain-loop references, and round trips."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transpose import (
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
from tests.transpose.conftest import CODE_TABLE, random_byte_reads
from transpose.reference import (
    reference_codes_to_streams,
    reference_pack_codes,
    reference_transpose_block,
    reference_unpack_planes,
)

WORD_BITS = [32, 64]
SIZES_N = [0, 1, 31, 32, 33, 63, 64, 65, 1000]
SIZES_L = [0, 1, 31, 32, 33, 63, 64, 65, 150]
INVALID = 4


def random_codes(rng, n, length, invalid_rate=0.1):
    codes = rng.integers(0, 4, size=(n, length), dtype=np.uint8)
    codes[rng.random((n, length)) < invalid_rate] = INVALID
    return codes


@st.composite
def word_blocks(draw):
    word_bits = draw(st.sampled_from(WORD_BITS))
    batch = draw(st.sampled_from([(), (1,), (3,), (2, 3)]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    dtype = word_dtype(word_bits)
    # Mix dense random words with sparse ones so single bits get tested too.
    dense = rng.integers(0, np.iinfo(dtype).max, size=batch + (word_bits,), dtype=dtype, endpoint=True)
    sparse = rng.random(batch + (word_bits, word_bits)) < 0.03
    weights = (np.ones(1, dtype) << np.arange(word_bits, dtype=dtype)).astype(dtype)
    sparse_words = np.bitwise_or.reduce(np.where(sparse, weights, dtype(0)), axis=-1).astype(dtype)
    return dense if draw(st.booleans()) else sparse_words


@settings(max_examples=40, deadline=None)
@given(word_blocks())
def test_transpose_block_matches_reference(block):
    result = transpose_block(block)
    assert result.dtype == block.dtype and result.shape == block.shape
    np.testing.assert_array_equal(result, reference_transpose_block(block))


@settings(max_examples=40, deadline=None)
@given(word_blocks())
def test_transpose_block_twice_is_identity(block):
    np.testing.assert_array_equal(transpose_block(transpose_block(block)), block)


@pytest.mark.parametrize("word_bits", WORD_BITS)
def test_transpose_block_bit_convention(word_bits):
    """Row r bit c (bit 0 = LSB) goes to row c bit r, for every (r, c)."""
    dtype = word_dtype(word_bits)
    rows, cols = np.meshgrid(np.arange(word_bits), np.arange(word_bits), indexing="ij")
    blocks = np.zeros((word_bits, word_bits, word_bits), dtype)
    blocks[rows, cols, rows] = np.ones(1, dtype) << cols.astype(dtype)  # block (r, c): only bit c of row r
    result = transpose_block(blocks)
    expected = np.zeros_like(blocks)
    expected[rows, cols, cols] = np.ones(1, dtype) << rows.astype(dtype)
    np.testing.assert_array_equal(result, expected)


def test_transpose_block_rejects_wrong_shapes():
    with pytest.raises(ValueError):
        transpose_block(np.zeros((2, 64), np.uint32))
    with pytest.raises(TypeError):
        transpose_block(np.zeros(32, np.int32))


@pytest.mark.parametrize("word_bits", WORD_BITS)
@pytest.mark.parametrize("n", SIZES_N)
def test_pack_codes_matches_reference(word_bits, n):
    rng = np.random.default_rng(1000 * n + word_bits)
    for length in SIZES_L:
        codes = random_codes(rng, n, length)
        planes = pack_codes(codes, word_bits)
        expected = reference_pack_codes(codes, word_bits)
        assert planes.dtype == word_dtype(word_bits)
        assert planes.shape == (-(-n // word_bits), length, 3)
        np.testing.assert_array_equal(planes, expected, err_msg=f"N={n} L={length}")


@pytest.mark.parametrize("word_bits", WORD_BITS)
def test_pack_codes_defaults_to_64_bit_words(word_bits):
    codes = random_codes(np.random.default_rng(5), 70, 20)
    assert pack_codes(codes).dtype == np.uint64
    np.testing.assert_array_equal(pack_codes(codes), pack_codes(codes, 64))


@pytest.mark.parametrize("word_bits", WORD_BITS)
def test_invalid_codes_have_no_bits(word_bits):
    rng = np.random.default_rng(7)
    n, length = 3 * word_bits + 5, 97
    codes = random_codes(rng, n, length, invalid_rate=0.5)
    planes = pack_codes(codes, word_bits)
    # Read the bits back per (read, position, plane).
    reads = np.arange(n)
    bits = (planes[reads // word_bits] >> (reads % word_bits).astype(planes.dtype)[:, None, None]) & 1
    invalid = codes == INVALID
    assert invalid.any() and (~invalid).any()
    assert not bits[invalid].any()
    np.testing.assert_array_equal(bits[..., 2], ~invalid)
    np.testing.assert_array_equal(bits[..., 0][~invalid], codes[~invalid] & 1)
    np.testing.assert_array_equal(bits[..., 1][~invalid], codes[~invalid] >> 1)
    # Lanes past N in the last group stay empty.
    spare = word_bits * planes.shape[0] - n
    assert spare > 0
    assert not (planes[-1] >> np.array(word_bits - spare, planes.dtype)).any()


@pytest.mark.parametrize("word_bits", WORD_BITS)
def test_codes_at_or_above_four_are_invalid(word_bits):
    rng = np.random.default_rng(11)
    codes = rng.integers(0, 256, size=(40, 70), dtype=np.uint8)
    sanitized = np.where(codes < 4, codes, INVALID).astype(np.uint8)
    np.testing.assert_array_equal(pack_codes(codes, word_bits), pack_codes(sanitized, word_bits))
    np.testing.assert_array_equal(codes_to_streams(codes, word_bits), reference_codes_to_streams(sanitized, word_bits))


@pytest.mark.parametrize("word_bits", WORD_BITS)
@pytest.mark.parametrize("length", SIZES_L)
def test_streams_then_planes_equals_pack_codes(word_bits, length):
    rng = np.random.default_rng(31 * length + word_bits)
    for n in (0, 1, 33, 65, 1000):
        codes = random_codes(rng, n, length)
        streams = codes_to_streams(codes, word_bits)
        assert streams.shape == (n, 3, -(-length // word_bits))
        np.testing.assert_array_equal(streams, reference_codes_to_streams(codes, word_bits))
        np.testing.assert_array_equal(streams_to_planes(streams, length, word_bits), pack_codes(codes, word_bits))


def test_streams_to_planes_rejects_mismatched_length():
    streams = codes_to_streams(np.zeros((3, 65), np.uint8), 64)
    with pytest.raises(ValueError):
        streams_to_planes(streams, 129, 64)
    with pytest.raises(ValueError):
        streams_to_planes(streams, 65, 32)


@pytest.mark.parametrize("word_bits", WORD_BITS)
@pytest.mark.parametrize("n_bits", range(1, 17))
def test_unpack_planes_round_trip(word_bits, n_bits):
    rng = np.random.default_rng(n_bits * 100 + word_bits)
    for n in (1, word_bits - 1, word_bits, word_bits + 1, 1000):
        values = rng.integers(0, 2**n_bits, size=n)
        values[0] = 2**n_bits - 1  # top bit set somewhere
        planes = pack_values(values, n_bits, word_bits)
        assert planes.shape == (-(-n // word_bits), n_bits) and planes.dtype == word_dtype(word_bits)
        np.testing.assert_array_equal(reference_unpack_planes(planes, n), values)
        unpacked = unpack_planes(planes, n)
        assert unpacked.dtype == np.int64
        np.testing.assert_array_equal(unpacked, values)


@pytest.mark.parametrize("word_bits", WORD_BITS)
@pytest.mark.parametrize("n_bits", [1, 7, 31, 40, 63])
def test_unpack_planes_matches_reference(word_bits, n_bits):
    """Arbitrary plane words, garbage in lanes past n included; more planes
    than W bits take several transposes."""
    dtype = word_dtype(word_bits)
    rng = np.random.default_rng(n_bits)
    n = 5 * word_bits - 3
    planes = rng.integers(0, np.iinfo(dtype).max, size=(5, n_bits), dtype=dtype, endpoint=True)
    np.testing.assert_array_equal(unpack_planes(planes, n), reference_unpack_planes(planes, n))


def test_pack_values_rejects_values_that_do_not_fit():
    with pytest.raises(ValueError):
        pack_values(np.array([0, 8]), 3, 64)
    with pytest.raises(ValueError):
        pack_values(np.array([-1]), 3, 64)


@pytest.mark.parametrize("word_bits", WORD_BITS)
def test_pack_flags(word_bits):
    rng = np.random.default_rng(3)
    for n in (0, 1, word_bits, 2 * word_bits + 7):
        flags = rng.random(n) < 0.5
        words = pack_flags(flags, word_bits)
        assert words.shape == (-(-n // word_bits),) and words.dtype == word_dtype(word_bits)
        for i in range(n):
            assert (int(words[i // word_bits]) >> (i % word_bits)) & 1 == flags[i]
        if n % word_bits:
            assert int(words[-1]) >> (n % word_bits) == 0
        np.testing.assert_array_equal(unpack_flags(words, n), flags)


@pytest.mark.parametrize("word_bits", WORD_BITS)
@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 300])
def test_pack_bytes_is_pack_codes_of_the_coded_bytes(word_bits, n):
    rng = np.random.default_rng(n)
    for longest in (0, 1, 64, 65, 150):
        buffer, starts, lengths, codes = random_byte_reads(rng, n, longest)
        width = codes.shape[1] + (longest % 3)  # planes wider than the longest read are padding
        padded = np.concatenate([codes, np.full((n, width - codes.shape[1]), INVALID, np.uint8)], axis=1)
        planes, bad = pack_bytes(buffer, starts, lengths, width, CODE_TABLE, word_bits)
        assert not bad
        np.testing.assert_array_equal(planes, pack_codes(padded, word_bits), err_msg=f"longest={longest}")


def test_pack_bytes_finds_a_byte_outside_the_table():
    buffer, starts, lengths, codes = random_byte_reads(np.random.default_rng(5), 200, 100)
    assert not pack_bytes(buffer, starts, lengths, codes.shape[1], CODE_TABLE)[1]
    i = int(np.flatnonzero(lengths > 0)[-1])
    buffer[starts[i] + lengths[i] - 1] = ord("X")
    assert pack_bytes(buffer, starts, lengths, codes.shape[1], CODE_TABLE)[1]
    buffer[starts[i] + lengths[i]] = ord("X")  # outside every read: not looked at
    buffer[starts[i] + lengths[i] - 1] = ord("A")
    assert not pack_bytes(buffer, starts, lengths, codes.shape[1], CODE_TABLE)[1]


def test_import_is_cheap():
    """Importing the package neither imports cupy nor compiles anything."""
    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys, transpose, transpose.gpu, transpose.reference\n"
        "assert 'cupy' not in sys.modules\n"
        "from transpose import cpu\n"
        "assert not cpu._pack_codes_kernel.signatures\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
