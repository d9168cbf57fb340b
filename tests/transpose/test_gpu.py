"""GPU transposes: kernels.cu compiles with nvcc (no GPU needed); a numpy
emulation of the warp programs, written line for line after kernels.cu,
checks their index logic on the CPU; with a GPU (pytest -m gpu) both kernels
are compared bit for bit with the CPU transposes."""

import re
import shutil
import subprocess

import numpy as np
import pytest

from transpose import codes_to_streams, pack_codes, pack_values, unpack_planes
from transpose import gpu
from transpose.reference import reference_pack_codes, reference_unpack_planes

INVALID = 4
WARP = 32
SIZES_N = [1, 31, 32, 33, 1000, 100003]
SIZES_L = [1, 31, 32, 33, 150, 300]


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


def warp_transpose(rows):
    """kernels.cu warp_transpose: lane r holds row r on entry."""
    rows = rows.astype(np.uint32)
    mask = np.uint32(0x0000FFFF)
    j = 16
    while j > 0:
        other = shfl_xor(rows, j)
        shift = np.uint32(j)
        rows = np.where(
            (LANES & j) != 0,
            (rows & ~mask) | ((other >> shift) & mask),
            (rows & mask) | ((other & mask) << shift),
        ).astype(np.uint32)
        j >>= 1
        mask ^= u32(int(mask) << j)
    return rows


def emulate_streams_to_planes(streams, length, swap):
    """kernels.cu streams_to_planes for every warp, on flat memory."""
    chunk = kernel_constant("CHUNK")
    stage_row = kernel_constant("STAGE_ROW")
    planes_per_base = kernel_constant("PLANES")
    n, _, blocks = streams.shape
    groups = -(-n // WARP)
    source = streams.reshape(-1)
    planes = np.full(groups * length * planes_per_base, POISON, np.uint32)
    for g in range(groups):
        first = g * WARP
        group_planes = g * length * planes_per_base
        for c0 in range(0, blocks, chunk):
            count = min(chunk, blocks - c0)
            stage = np.full(WARP * stage_row, POISON, np.uint32)
            per_instance = planes_per_base * count
            for lane in LANES:
                for q in range(lane, WARP * per_instance, WARP):
                    inst = q // per_instance
                    rest = q - inst * per_instance
                    k = rest // count
                    cc = rest - k * count
                    i = first + inst
                    stage[inst * stage_row + k * chunk + cc] = (
                        source[(i * planes_per_base + k) * blocks + c0 + cc] if i < n else 0
                    )
            for cc in range(count):
                c = c0 + cc
                w = [stage[LANES * stage_row + k * chunk + cc] for k in range(planes_per_base)]
                if swap:
                    out_stage = np.full(planes_per_base * WARP, POISON, np.uint32)
                    for k in range(planes_per_base):
                        out_stage[planes_per_base * LANES + k] = warp_transpose(w[k])
                    out = [out_stage[LANES + s * WARP] for s in range(planes_per_base)]
                else:
                    out = [np.zeros(WARP, np.uint32) for _ in range(planes_per_base)]
                    for p in range(WARP):
                        for k in range(planes_per_base):
                            word = ballot((w[k] >> np.uint32(p)) & 1)
                            q = planes_per_base * p + k
                            out[q // WARP][q % WARP] = word  # only lane q % 32 keeps it
                words = planes_per_base * min(WARP, length - c * WARP)
                block_planes = group_planes + c * WARP * planes_per_base
                for s in range(planes_per_base):
                    q = LANES + s * WARP
                    written = q < words
                    planes[block_planes + q[written]] = out[s][written]
    return planes.reshape(groups, length, planes_per_base)


def emulate_unpack(planes, n, swap):
    """kernels.cu planes_to_values for every warp."""
    groups, bits = planes.shape
    source = planes.reshape(-1)
    values = np.full(n, POISON.view(np.int32), np.int32)
    for g in range(groups):
        row = np.array([source[g * bits + lane] if lane < bits else 0 for lane in LANES], np.uint32)
        if swap:
            value = warp_transpose(row)
        else:
            value = np.zeros(WARP, np.uint32)
            for r in range(WARP):
                value[r] = ballot((row >> np.uint32(r)) & 1)  # lane r keeps it
        i = g * WARP + LANES
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
    # 300 positions span 10 stream words, more than one staging chunk.
    for length in [1, 31, 32, 33, 150, 300]:
        codes = random_codes(rng, n, length)
        streams = codes_to_streams(codes, 32)
        np.testing.assert_array_equal(
            emulate_streams_to_planes(streams, length, swap), reference_pack_codes(codes, 32),
            err_msg=f"N={n} L={length}",
        )


@pytest.mark.parametrize("swap", [False, True], ids=["ballot", "swap"])
@pytest.mark.parametrize("n_bits", [1, 5, 16, 31])
def test_emulated_unpack_kernels_match_reference(n_bits, swap):
    rng = np.random.default_rng(n_bits)
    for n in (1, 31, 32, 33, 100):
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
    monkeypatch.setattr(gpu, "_module", None)
    with pytest.raises(RuntimeError, match="kernels.cu"):
        gpu.planes_swap(cupy.zeros((1, 3, 1), cupy.uint32), 1)
