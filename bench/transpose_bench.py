"""Table I of the paper: bit transposes, ballot vs swap (GPU) and the CPU transposes.

Forward: instance streams (N, 3, ceil(L/W)) -> bit planes (G, L, 3).
Inverse: score planes (G, b) -> values (N,), b = SCORE_BITS.
Bytes moved = bytes read + bytes written by the kernel; the device-to-device
copy rate of the same run (read + write of a large buffer) is the yardstick.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from . import error_text, gpu_unavailable, median_seconds_cpu, median_seconds_gpu, progress_bar, say

PLANES = 3
SCORE_BITS = 16  #: score planes of the inverse transpose
PAPER_SWAP_OVER_BALLOT = "1.11-2.11 (V100)"
DEFAULT_SIZES = [1024 << k for k in range(7)] + [1 << k for k in range(17, 25)]  # 1K..64K, 128K..16M
CPU_MAX_DEFAULT = 1 << 20  #: CPU transposes only up to this many instances (time)
QUICK_SIZES = [1024, 2048, 4096, 8192]


def _cpu_copy_rate(nbytes: int) -> float:
    """Bytes moved per second (read + write) of a numpy copy."""
    source = np.ones(nbytes, np.uint8)
    target = np.empty_like(source)
    seconds = median_seconds_cpu(lambda: np.copyto(target, source), repeats=5)
    return 2 * nbytes / seconds


def gpu_copy_rate(nbytes: int) -> float:
    import cupy

    source = cupy.ones(nbytes, cupy.uint8)
    target = cupy.empty_like(source)
    seconds = median_seconds_gpu(lambda: target.__setitem__(Ellipsis, source), repeats=10)
    source = target = None  # free the device memory now
    return 2 * nbytes / seconds


def _row(direction, method, device, n, length, word_bits, seconds, bytes_moved, copy_rate, **extra):
    row = {
        "direction": direction, "method": method, "engine_device": device, "instances": n,
        "read_length": length, "word_bits": word_bits,
        "seconds": f"{seconds:.6g}" if seconds is not None else "",
        "bases_per_s": f"{n * length / seconds:.4g}" if seconds else "",
        "bytes_moved": bytes_moved,
        "bytes_per_s": f"{bytes_moved / seconds:.4g}" if seconds else "",
        "copy_bytes_per_s": f"{copy_rate:.4g}",
        "fraction_of_copy": f"{bytes_moved / seconds / copy_rate:.4f}" if seconds else "",
    }
    row.update(extra)
    return row


def _stream_bytes(n, length, word_bits):
    return n * PLANES * -(-length // word_bits) * word_bits // 8


def _plane_bytes(n, length, word_bits):
    return -(-n // word_bits) * length * PLANES * word_bits // 8


def cpu_rows(sizes, length, repeats, advance) -> list[dict]:
    from transpose import codes_to_streams, pack_codes, pack_values, streams_to_planes, unpack_planes

    rows = []
    rng = np.random.default_rng(0)
    copy_rate = _cpu_copy_rate(64 << 20)
    for n in sizes:
        advance.start(f"cpu N={n}")
        codes = rng.integers(0, 4, size=(n, length), dtype=np.uint8)
        cases = []
        try:
            seconds = median_seconds_cpu(lambda: pack_codes(codes, 64), repeats)
            cases.append(("forward", "cpu_pack_codes", 64, seconds, n * length + _plane_bytes(n, length, 64)))
            streams = codes_to_streams(codes, 64)
            seconds = median_seconds_cpu(lambda: streams_to_planes(streams, length, 64), repeats)
            cases.append(("forward", "cpu_streams_to_planes", 64, seconds,
                          _stream_bytes(n, length, 64) + _plane_bytes(n, length, 64)))
            planes = pack_values(rng.integers(0, 1 << SCORE_BITS, n), SCORE_BITS, 64)
            seconds = median_seconds_cpu(lambda: unpack_planes(planes, n), repeats)
            cases.append(("inverse", "cpu_unpack_planes", 64, seconds, planes.nbytes + 8 * n))
        except Exception as error:  # record, go on with the next size
            rows.append(_row("forward", "cpu", "cpu", n, length, 64, None, 0, copy_rate, error=error_text(error)))
        reference = {d: s for d, m, _, s, _ in cases if m in ("cpu_streams_to_planes", "cpu_unpack_planes")}
        for direction, method, bits, seconds, moved in cases:
            rows.append(_row(direction, method, "cpu", n, length, bits, seconds, moved, copy_rate,
                             reference_method="cpu_streams_to_planes" if direction == "forward" else "cpu_unpack_planes",
                             ratio_to_reference=f"{seconds / reference[direction]:.4f}", paper_ratio=""))
        advance(f"cpu N={n}")
    return rows


V1_PATH = Path(__file__).with_name("transpose_v1.cu")
V1_WARPS_PER_BLOCK = 8  #: the block shape the v1 kernels were written for


@cache
def _v1_module():
    import cupy

    return cupy.RawModule(code=V1_PATH.read_text(), options=("-std=c++17",))


def _v1(name):
    """A kernel of the first transposes, written after the paper's description (v1: word loads,
    5-instruction swap rounds), timed beside the current ones."""
    return _v1_module().get_function(name)


def _v1_planes(kernel_name, streams, length):
    import cupy

    n, _, blocks = streams.shape
    groups = -(-n // 32)
    planes = cupy.empty((groups, length, PLANES), cupy.uint32)
    grid = (max(1, min(-(-groups // V1_WARPS_PER_BLOCK), 1 << 16)),)
    _v1(kernel_name)(grid, (V1_WARPS_PER_BLOCK * 32,), (streams, planes, np.int64(n), np.int32(length),
                                                                 np.int32(blocks), np.int64(groups)))
    return planes


def _v1_unpack(kernel_name, planes, n):
    import cupy

    groups, bits = planes.shape
    values = cupy.empty(n, cupy.int32)
    grid = (max(1, min(-(-groups // V1_WARPS_PER_BLOCK), 1 << 16)),)
    _v1(kernel_name)(grid, (V1_WARPS_PER_BLOCK * 32,), (planes, values, np.int64(n), np.int32(bits),
                                                                 np.int64(groups)))
    return values


def gpu_rows(sizes, length, repeats, advance, v1: bool = False) -> list[dict]:
    import cupy

    from transpose import planes_ballot, planes_swap, unpack_planes_gpu

    rows = []
    copy_rate = gpu_copy_rate(1 << 30)
    rng = cupy.random.default_rng(0)
    blocks = -(-length // 32)
    tail = length % 32
    for n in sizes:
        advance.start(f"gpu N={n}")
        times = {}
        try:
            streams = rng.integers(0, 1 << 32, size=(n, PLANES, blocks), dtype=cupy.uint64).astype(cupy.uint32)
            if tail:  # positions past L are 0 in a real stream
                streams[:, :, -1] &= cupy.uint32((1 << tail) - 1)
            reference = planes_ballot(streams, length)
            agree = bool((reference == planes_swap(streams, length)).all())
            moved = _stream_bytes(n, length, 32) + _plane_bytes(n, length, 32)
            calls = [("gpu_ballot", planes_ballot), ("gpu_swap", planes_swap)]
            if v1:
                calls += [("gpu_ballot_v1", lambda s, L: _v1_planes("planes_ballot_kernel", s, L)),
                          ("gpu_swap_v1", lambda s, L: _v1_planes("planes_swap_kernel", s, L))]
            for method, call in calls:
                same = agree if not method.endswith("_v1") else bool((call(streams, length) == reference).all())
                seconds = median_seconds_gpu(lambda: call(streams, length), repeats)
                times[("forward", method)] = (seconds, moved, same)
            reference = None
            streams = None  # free the device memory before the next size
            groups = -(-n // 32)
            planes = rng.integers(0, 1 << 32, size=(groups, SCORE_BITS), dtype=cupy.uint64).astype(cupy.uint32)
            reference = unpack_planes_gpu(planes, n, "ballot")
            agree = bool((reference == unpack_planes_gpu(planes, n, "swap")).all())
            moved = planes.nbytes + 4 * n
            calls = [(f"gpu_{m}", lambda m=m: unpack_planes_gpu(planes, n, m)) for m in ("ballot", "swap")]
            if v1:
                calls += [(f"gpu_{m}_v1", lambda m=m: _v1_unpack(f"unpack_{m}_kernel", planes, n))
                          for m in ("ballot", "swap")]
            for method, call in calls:
                same = agree if not method.endswith("_v1") else bool((call() == reference).all())
                seconds = median_seconds_gpu(call, repeats)
                times[("inverse", method)] = (seconds, moved, same)
            reference = None
            planes = None
        except Exception as error:
            rows.append(_row("forward", "gpu", "gpu", n, length, 32, None, 0, copy_rate, error=error_text(error)))
        for (direction, method), (seconds, moved, agree) in times.items():
            ballot = times.get((direction, "gpu_ballot"))
            rows.append(_row(direction, method, "gpu", n, length, 32, seconds, moved, copy_rate,
                             reference_method="gpu_ballot",
                             ratio_to_reference=f"{seconds / ballot[0]:.4f}" if ballot else "",
                             paper_ratio=PAPER_SWAP_OVER_BALLOT if method == "gpu_swap" else "",
                             ballot_equals_swap=agree, kernels="v1 (before)" if method.endswith("_v1") else "current"))
        cupy.get_default_memory_pool().free_all_blocks()
        advance(f"gpu N={n}")
    return rows


def run(sizes=None, length: int = 150, repeats: int = 5, quick: bool = False, cpu_max: int = CPU_MAX_DEFAULT,
        v1: bool = False):
    """Rows of the transpose table; GPU rows when a GPU is usable and not quick."""
    sizes = sorted(sizes or (QUICK_SIZES if quick else DEFAULT_SIZES))
    cpu_sizes = [n for n in sizes if n <= cpu_max]
    reason = "--quick: CPU only" if quick else gpu_unavailable()
    gpu_sizes = [] if reason else sizes
    if reason:
        say(f"bench transpose: GPU part skipped ({reason})")
    rows = []
    with progress_bar(len(cpu_sizes) + len(gpu_sizes), "transpose") as advance:
        rows += cpu_rows(cpu_sizes, length, repeats, advance)
        if gpu_sizes:
            try:
                rows += gpu_rows(gpu_sizes, length, repeats, advance, v1)
            except Exception as error:  # e.g. NVRTC failure: keep the CPU table
                rows.append({"direction": "forward", "method": "gpu", "error": error_text(error)})
    return rows, (not reason)
