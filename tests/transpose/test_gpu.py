"""GPU transposes: kernels.cu compiles with nvcc (no GPU needed); a numpy
emulation of the warp programs, written line for line after kernels.cu,
checks their index logic on the CPU; with a GPU (pytest -m gpu) both kernels
are compared bit for bit with the CPU transposes."""

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.transpose.conftest import CODE_TABLE, random_byte_reads
from transpose import codes_to_streams, pack_bytes, pack_codes, pack_values, unpack_planes
from transpose import gpu
from transpose.reference import reference_pack_codes, reference_unpack_planes

INVALID = 4
WARP = 32
SIZES_N = [1, 31, 32, 33, 1000, 100003]
SIZES_L = [1, 31, 32, 33, 150, 256, 257, 300, 1000]


def random_codes(rng, n, length):
    codes = rng.integers(0, 4, size=(n, length), dtype=np.uint8)
    codes[rng.random((n, length)) < 0.1] = INVALID
    return codes


def kernel_constant(name: str) -> int:
    """Value of ``constexpr int name = ...;`` in kernels.cu (evaluated from
    earlier constants), so the emulation uses the kernel's own numbers."""
    source = gpu.KERNELS_PATH.read_text()
    constants = {}
    for key, expression in re.findall(r"constexpr int (\w+) = ([^;]+);", source):
        constants[key] = eval(expression, {}, dict(constants))
    return constants[name]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_kernels_compile_with_nvcc(tmp_path):
    result = subprocess.run(
        ["nvcc", "-arch=sm_90", "-std=c++17", "-Werror", "all-warnings", "-c", str(gpu.KERNELS_PATH),
         "-o", str(tmp_path / "kernels.o")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr.lower(), result.stderr


def test_launch_configuration_matches_kernels():
    assert kernel_constant("WARPS_PER_BLOCK") == gpu.WARPS_PER_BLOCK
    assert kernel_constant("WARP") == gpu.WORD_BITS == WARP
    assert kernel_constant("PLANES") == gpu.PLANES
    assert kernel_constant("INFLIGHT") == gpu.INFLIGHT


def test_every_kernel_launched_is_defined():
    """The names transpose/gpu.py looks up are kernels of kernels.cu (a
    missing one fails only at launch, on a GPU)."""
    launched = set(re.findall(r'"(\w+_kernel)"', Path(gpu.__file__).read_text()))
    defined = set(re.findall(r'^(\w+_kernel)\(', gpu.KERNELS_PATH.read_text(), re.M))
    assert len(launched) == 5 and launched <= defined


# ---------------------------------------------------------------------------
# numpy emulation of one warp: arrays of 32 values, one per lane.

LANES = np.arange(WARP)
POISON = np.uint32(0xDEADBEEF)  # fills memory the kernels must overwrite before reading


def u32(x):
    """A Python integer as a 32-bit word, dropping higher bits as CUDA does."""
    return np.uint32(int(x) & 0xFFFFFFFF)


def shfl_xor(values, lane_mask):
    return values[LANES ^ lane_mask]


def ballot(predicates):
    """__ballot_sync over all lanes: bit j = predicate of lane j."""
    return u32(sum(1 << int(j) for j in LANES[np.asarray(predicates) != 0]))


def swap_lanes():
    """kernels.cu SwapLanes for every lane: (keep, rotate) per round."""
    rounds = []
    mask, j = 0x0000FFFF, 16
    while j > 0:
        high = (LANES & j) != 0
        keep = np.where(high, ~np.uint32(mask), np.uint32(mask)).astype(np.uint32)
        rotate = np.where(high, 32 - j, j).astype(np.uint32)
        rounds.append((j, keep, rotate))
        j >>= 1
        mask ^= (mask << j) & 0xFFFFFFFF
    return rounds


def rotl(values, amounts):
    """__funnelshift_l(x, x, s): rotate left by s (0 < s < 32) per lane."""
    values = values.astype(np.uint64)
    amounts = amounts.astype(np.uint64)
    return (((values << amounts) | (values >> (np.uint64(32) - amounts))) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def warp_transpose(rows):
    """kernels.cu warp_transpose: lane r holds row r on entry."""
    rows = rows.astype(np.uint32)
    for j, keep, rotate in swap_lanes():
        other = shfl_xor(rows, j)
        moved = rotl(other, rotate)
        rows = ((rows & keep) | (moved & ~keep)).astype(np.uint32)  # lop3 0xE4
    return rows


def store_run(memory, base, image, lead, n):
    """kernels.cu store_run, lane by lane: scalar head, 16-byte body, scalar tail."""
    head = min((4 - lead) & 3, n)
    for lane in range(head):
        memory[base + lane] = image[lead + lane]
    vectors = (n - head) >> 2
    assert (base + head) % 4 == 0 and (lead + head) % 4 == 0  # both sides 16-byte aligned
    for v in range(vectors):
        memory[base + head + 4 * v: base + head + 4 * v + 4] = image[lead + head + 4 * v: lead + head + 4 * v + 4]
    done = head + 4 * vectors
    for lane in range(n - done):
        memory[base + done + lane] = image[lead + done + lane]


def emulate_streams_to_planes(streams, length, swap):
    """kernels.cu streams_to_planes for every warp, on flat memory."""
    chunk = kernel_constant("CHUNK")
    planes_per_base = kernel_constant("PLANES")
    n, _, blocks = streams.shape
    groups = -(-n // WARP)
    source = streams.reshape(-1)
    planes = np.full(groups * length * planes_per_base, POISON, np.uint32)
    stage = np.full(kernel_constant("STAGE_WORDS"), POISON, np.uint32)
    image = np.full(kernel_constant("OUT_WORDS"), POISON, np.uint32)
    for g in range(groups):
        first = g * WARP
        group_streams = first * planes_per_base * blocks
        present = min(WARP, n - first)
        for c0 in range(0, blocks, chunk):
            count = min(chunk, blocks - c0)
            per_instance = planes_per_base * count
            if count == blocks:  # the group's contiguous run: 16-byte loads, then the rest word by word
                vectors = (present * per_instance) >> 2
                assert group_streams % 4 == 0
                stage[: 4 * vectors] = source[group_streams: group_streams + 4 * vectors]
                for q in range(4 * vectors, WARP * per_instance):
                    stage[q] = source[group_streams + q] if q < present * per_instance else 0
            else:
                for q in range(WARP * per_instance):
                    inst, rest = divmod(q, per_instance)
                    k, cc = divmod(rest, count)
                    stage[q] = source[group_streams + (inst * planes_per_base + k) * blocks + c0 + cc] \
                        if inst < present else 0
            base = (g * length + c0 * WARP) * planes_per_base
            lead = base & 3
            for cc in range(count):
                w = [stage[LANES * per_instance + k * count + cc] for k in range(planes_per_base)]
                block_out = lead + cc * WARP * planes_per_base
                for k in range(planes_per_base):
                    if swap:
                        image[block_out + planes_per_base * LANES + k] = warp_transpose(w[k])
                    else:
                        for p in range(WARP):
                            image[block_out + planes_per_base * p + k] = ballot((w[k] >> np.uint32(p)) & 1)
            words = planes_per_base * min(WARP * count, length - c0 * WARP)
            store_run(planes, base, image, lead, words)
    return planes.reshape(groups, length, planes_per_base)


def emulate_unpack(planes, n, swap):
    """kernels.cu planes_to_values for every warp (two groups a warp when bits <= 16)."""
    groups, bits = planes.shape
    source = planes.reshape(-1)
    values = np.full(n, POISON.view(np.int32), np.int32)
    two = bits <= 16
    per_warp = 2 if two else 1
    half = LANES >> 4 if two else np.zeros(WARP, np.int64)
    plane = LANES & 15 if two else LANES
    for h in range(-(-groups // per_warp)):
        g = h * per_warp + half
        row = np.array([source[g[lane] * bits + plane[lane]] if plane[lane] < bits and g[lane] < groups else 0
                        for lane in LANES], np.uint32)
        if swap:
            value = warp_transpose(row)
        else:
            value = np.array([ballot((row >> np.uint32(r)) & 1) for r in range(WARP)], np.uint32)  # lane r keeps it
        first = h * per_warp * WARP
        if two:
            for offset, part in ((0, value & np.uint32(0xFFFF)), (WARP, value >> np.uint32(16))):
                i = first + offset + LANES
                values[i[i < n]] = part[i < n].astype(np.int32)
        else:
            i = first + LANES
            values[i[i < n]] = value[i < n].view(np.int32)
    return values


@pytest.mark.parametrize("seed", range(4))
def test_emulated_warp_transpose_is_a_transpose(seed):
    rows = np.random.default_rng(seed).integers(0, 2**32, size=WARP, dtype=np.uint32)
    result = warp_transpose(rows)
    bits = (rows[:, None] >> LANES.astype(np.uint32)) & 1  # bits[r, c] = bit c of row r
    expected = (bits.T.astype(np.uint32) << LANES.astype(np.uint32)).sum(axis=1, dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("swap", [False, True], ids=["ballot", "swap"])
@pytest.mark.parametrize("n", [1, 31, 32, 33, 70])
def test_emulated_planes_kernels_match_reference(n, swap):
    rng = np.random.default_rng(n)
    # 300 positions span 10 stream words, more than one staging chunk (word by word loads).
    for length in [1, 31, 32, 33, 150, 256, 300]:
        codes = random_codes(rng, n, length)
        streams = codes_to_streams(codes, 32)
        np.testing.assert_array_equal(
            emulate_streams_to_planes(streams, length, swap), reference_pack_codes(codes, 32),
            err_msg=f"N={n} L={length}",
        )


@pytest.mark.parametrize("swap", [False, True], ids=["ballot", "swap"])
@pytest.mark.parametrize("n_bits", [1, 5, 16, 17, 31])
def test_emulated_unpack_kernels_match_reference(n_bits, swap):
    rng = np.random.default_rng(n_bits)
    for n in (1, 31, 32, 33, 64, 65, 100, 130):
        planes = rng.integers(0, 2**32, size=(-(-n // WARP), n_bits), dtype=np.uint32)
        np.testing.assert_array_equal(emulate_unpack(planes, n, swap), reference_unpack_planes(planes, n))


# ---------------------------------------------------------------------------
# On the device.


@pytest.fixture(scope="module")
def cupy():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        pytest.skip(f"no CUDA device: {exc}")
    return cupy


@pytest.mark.gpu
@pytest.mark.parametrize("length", SIZES_L)
@pytest.mark.parametrize("n", SIZES_N)
def test_planes_kernels_match_cpu(cupy, n, length):
    codes = random_codes(np.random.default_rng(n * 1000 + length), n, length)
    expected = pack_codes(codes, 32)
    streams = cupy.asarray(codes_to_streams(codes, 32))
    ballot_planes = gpu.planes_ballot(streams, length)
    swap_planes = gpu.planes_swap(streams, length)
    cupy.cuda.runtime.deviceSynchronize()  # surfaces asynchronous launch errors here
    for planes in (ballot_planes, swap_planes):
        assert planes.dtype == cupy.uint32 and planes.shape == expected.shape
    np.testing.assert_array_equal(ballot_planes.get(), expected)
    np.testing.assert_array_equal(swap_planes.get(), expected)


@pytest.mark.gpu
def test_planes_kernels_empty_inputs(cupy):
    for n, length in [(0, 10), (5, 0), (0, 0)]:
        streams = cupy.asarray(codes_to_streams(np.zeros((n, length), np.uint8), 32))
        for kernel in (gpu.planes_ballot, gpu.planes_swap):
            assert kernel(streams, length).shape == (-(-n // WARP), length, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 1000])
def test_pack_bytes_gpu_matches_cpu(cupy, n):
    rng = np.random.default_rng(n)
    for longest in (0, 1, 32, 33, 150, 300):
        buffer, starts, lengths, codes = random_byte_reads(rng, n, longest)
        width = max(codes.shape[1], 1)
        expected, bad = pack_bytes(buffer, starts, lengths, width, CODE_TABLE, 32)
        planes, gpu_bad = gpu.pack_bytes_gpu(cupy.asarray(buffer), cupy.asarray(starts.astype(np.int64)),
                                             cupy.asarray(lengths.astype(np.int32)), width, cupy.asarray(CODE_TABLE))
        assert (bad, gpu_bad) == (False, False)
        np.testing.assert_array_equal(planes.get(), expected, err_msg=f"longest={longest}")
    if n:
        i = int(np.argmax(lengths))
        buffer[starts[i]] = ord("X")
        assert gpu.pack_bytes_gpu(cupy.asarray(buffer), cupy.asarray(starts.astype(np.int64)),
                                  cupy.asarray(lengths.astype(np.int32)), width, cupy.asarray(CODE_TABLE))[1]
        flag = np.frombuffer(cupy.cuda.alloc_pinned_memory(4), np.int32, 1)  # the flag read into pinned memory
        assert gpu.pack_bytes_gpu(cupy.asarray(buffer), cupy.asarray(starts.astype(np.int64)),
                                  cupy.asarray(lengths.astype(np.int32)), width, cupy.asarray(CODE_TABLE), flag)[1]
        assert flag[0] == 1


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["ballot", "swap"])
@pytest.mark.parametrize("n_bits", [1, 2, 5, 8, 16, 31])
def test_unpack_planes_gpu_matches_cpu(cupy, method, n_bits):
    rng = np.random.default_rng(n_bits)
    for n in SIZES_N:
        values = rng.integers(0, 2**n_bits, size=n)
        planes = pack_values(values, n_bits, 32)
        spare_from = n % WARP
        if spare_from:  # garbage in the lanes past n must not leak into the values
            planes[-1] |= ~np.uint32((1 << spare_from) - 1)
        result = gpu.unpack_planes_gpu(cupy.asarray(planes), n, method=method)
        cupy.cuda.runtime.deviceSynchronize()
        assert result.dtype == cupy.int32 and result.shape == (n,)
        np.testing.assert_array_equal(result.get(), unpack_planes(planes, n))
        np.testing.assert_array_equal(result.get(), values)


@pytest.mark.gpu
def test_compile_errors_name_kernels_cu(cupy, tmp_path, monkeypatch):
    broken = tmp_path / "kernels.cu"
    broken.write_text(gpu.KERNELS_PATH.read_text() + "\nthis is not CUDA;\n")
    monkeypatch.setattr(gpu, "KERNELS_PATH", broken)
    gpu._kernels.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="kernels.cu"):
            gpu.planes_swap(cupy.zeros((1, 3, 1), cupy.uint32), 1)
    finally:
        gpu._kernels.cache_clear()  # the real kernels.cu for the tests after this one
