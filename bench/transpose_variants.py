"""Variants of transpose/kernels.cu timed side by side on a GPU (issue 10, item 5).

``python -m bench.transpose_variants [--out DIR]`` compiles kernels.cu with
some of its tuning constants changed (BALLOT_DELIVERY, UNPACK_BALLOT_DELIVERY,
MIN_BLOCKS_PER_SM, CC_UNROLL, INFLIGHT), checks that every variant's output is bit-identical to the
shipped kernels', and times them (CUDA events, median) at 4M and 16M
instances of 150 bp; plus a vote-rate probe: warp votes per clock per SM on
this GPU (a kernel of nothing but independent __ballot_sync, whose bit tests
the compiler turns into R2P). The numbers go to
``DIR/transpose_variants_<device>.csv``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np

from . import median_seconds_gpu

KERNELS = Path(__file__).resolve().parents[1] / "transpose" / "kernels.cu"
PLANES = 3

VOTE_PROBE = r"""
__device__ __forceinline__ unsigned ballot_bit(unsigned x, int bit) {  // as in transpose/kernels.cu
    unsigned word;
    asm volatile("{\n\t.reg .pred p;\n\t.reg .b32 t;\n\tand.b32 t, %1, %2;\n\tsetp.ne.b32 p, t, 0;\n\t"
                 "vote.sync.ballot.b32 %0, p, 0xffffffff;\n\t}" : "=r"(word) : "r"(x), "r"(1u << bit));
    return word;
}
// votes as the ballot transposes issue them: 32 bit tests of one word (R2P) and
// 32 votes, accumulated by IMAD (FMA pipe)
extern "C" __global__ void vote_probe(unsigned* out, int rounds) {
    unsigned x = threadIdx.x * 2654435761u + blockIdx.x, acc = 0;
    for (int i = 0; i < rounds; ++i) {
#pragma unroll
        for (int b = 0; b < 32; ++b)
            acc = acc * 3u + ballot_bit(x, b);
        x = x * 1664525u + 1013904223u;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
// votes with a shift and compare before each (what the compiler makes of __ballot_sync((x >> b) & 1))
extern "C" __global__ void vote_bit_probe(unsigned* out, int rounds) {
    unsigned x = threadIdx.x * 2654435761u + blockIdx.x, acc = 0;
    for (int i = 0; i < rounds; ++i) {
#pragma unroll
        for (int b = 0; b < 32; ++b)
            acc = acc * 3u + __ballot_sync(0xffffffffu, (x >> b) & 1u);
        x = x * 1664525u + 1013904223u;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
__device__ __forceinline__ unsigned lop3(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm volatile("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
extern "C" __global__ void lop3_probe(unsigned* out, int rounds) {
    unsigned x = threadIdx.x * 2654435761u + blockIdx.x, a = x ^ 0x1234u, b = x ^ 0x9876u, c = x;
    for (int i = 0; i < rounds; ++i) {
#pragma unroll
        for (int k = 0; k < 32; ++k) {
            a = lop3(a, b, c);
            b = lop3(b, c, a);
            c = lop3(c, a, b);
        }
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a ^ b ^ c;
}
"""


def patched(source: str, **constants) -> str:
    for name, value in constants.items():
        source, count = re.subn(rf"constexpr int {name} = [^;]+;", f"constexpr int {name} = {value};", source)
        if count != 1:
            raise ValueError(f"{name} not found once in kernels.cu")
    return source


def constant(source: str, name: str) -> int:
    return int(re.search(rf"constexpr int {name} = (\d+);", source).group(1))


def run(sizes=(1 << 22, 1 << 24), length: int = 150, repeats: int = 9) -> list[dict]:
    import cupy

    from transpose import planes_ballot, planes_swap, unpack_planes_gpu
    from transpose.gpu import MAX_BLOCKS

    from .transpose_bench import _gpu_copy_rate

    base = KERNELS.read_text()
    warps = constant(base, "WARPS_PER_BLOCK")
    copy_rate = _gpu_copy_rate(1 << 30)
    rows = []
    forward_variants = [dict(BALLOT_DELIVERY=d, MIN_BLOCKS_PER_SM=mb, CC_UNROLL=u) for d in (0, 3)
                        for mb in (0, 6) for u in (1, 2)]
    inverse_variants = [dict(INFLIGHT=k, UNPACK_BALLOT_DELIVERY=d) for k in (4, 8, 16) for d in (3, 0)]
    rng = cupy.random.default_rng(0)
    blocks = -(-length // 32)
    for n in sizes:
        groups = -(-n // 32)
        streams = rng.integers(0, 1 << 32, size=(n, PLANES, blocks), dtype=cupy.uint64).astype(cupy.uint32)
        streams[:, :, -1] &= cupy.uint32((1 << (length % 32)) - 1) if length % 32 else cupy.uint32(0xFFFFFFFF)
        expected = planes_swap(streams, length)
        assert bool((expected == planes_ballot(streams, length)).all())
        moved = streams.nbytes + groups * length * PLANES * 4
        grid = (max(1, min(-(-groups // warps), MAX_BLOCKS)),)
        seen = set()
        for variant in forward_variants:
            for method in ("ballot", "swap"):
                key = (method, variant["MIN_BLOCKS_PER_SM"], variant["CC_UNROLL"],
                       variant["BALLOT_DELIVERY"] if method == "ballot" else -1)
                if key in seen:
                    continue
                seen.add(key)
                module = cupy.RawModule(code=patched(base, **variant), options=("-std=c++17",))
                kernel = module.get_function(f"planes_{method}_kernel")
                out = cupy.empty_like(expected)

                def call():
                    kernel(grid, (warps * 32,), (streams, out, np.int64(n), np.int32(length), np.int32(blocks),
                                                 np.int64(groups)))

                call()
                same = bool((out == expected).all())
                seconds = median_seconds_gpu(call, repeats)
                rows.append({"direction": "forward", "method": f"gpu_{method}", "instances": n, "read_length": length,
                             "variant": " ".join(f"{k}={v}" for k, v in variant.items() if method == "ballot"
                                                 or k != "BALLOT_DELIVERY"),
                             "registers": kernel.num_regs, "local_bytes": kernel.local_size_bytes,
                             "identical_to_shipped": same, "seconds": f"{seconds:.6g}",
                             "bytes_per_s": f"{moved / seconds:.4g}", "copy_bytes_per_s": f"{copy_rate:.4g}",
                             "fraction_of_copy": f"{moved / seconds / copy_rate:.4f}"})
        streams = expected = None
        bits = 16
        planes = rng.integers(0, 1 << 32, size=(groups, bits), dtype=cupy.uint64).astype(cupy.uint32)
        expected = unpack_planes_gpu(planes, n, "swap")
        moved = planes.nbytes + 4 * n
        for variant in inverse_variants:
            module = cupy.RawModule(code=patched(base, **variant), options=("-std=c++17",))
            for method in ("ballot", "swap") if variant["UNPACK_BALLOT_DELIVERY"] == 3 else ("ballot",):
                kernel = module.get_function(f"unpack_{method}_kernel")
                out = cupy.empty(n, cupy.int32)
                units = -(-groups // 2)  # bits = 16: two groups a warp unit
                warps_needed = -(-units // variant["INFLIGHT"])
                grid_u = (max(1, min(-(-warps_needed // warps), MAX_BLOCKS)),)

                def call():
                    kernel(grid_u, (warps * 32,), (planes, out, np.int64(n), np.int32(bits), np.int64(groups)))

                call()
                same = bool((out == expected).all())
                seconds = median_seconds_gpu(call, repeats)
                rows.append({"direction": "inverse", "method": f"gpu_{method}", "instances": n, "read_length": "",
                             "variant": f"INFLIGHT={variant['INFLIGHT']}" + (
                                 f" UNPACK_BALLOT_DELIVERY={variant['UNPACK_BALLOT_DELIVERY']}" if method == "ballot" else ""),
                             "registers": kernel.num_regs,
                             "local_bytes": kernel.local_size_bytes, "identical_to_shipped": same,
                             "seconds": f"{seconds:.6g}", "bytes_per_s": f"{moved / seconds:.4g}",
                             "copy_bytes_per_s": f"{copy_rate:.4g}",
                             "fraction_of_copy": f"{moved / seconds / copy_rate:.4f}"})
        planes = expected = None
        cupy.get_default_memory_pool().free_all_blocks()
    # vote and LOP3 rates: instructions per clock per SM (clock: the device's maximum)
    module = cupy.RawModule(code=VOTE_PROBE)
    device = cupy.cuda.Device()
    sms = device.attributes["MultiProcessorCount"]
    clock_hz = device.attributes["ClockRate"] * 1e3
    out = cupy.empty(sms * 8 * 256, cupy.uint32)
    rounds = 2000
    for name, per_round in (("vote_probe", 32), ("vote_bit_probe", 32), ("lop3_probe", 96)):
        kernel = module.get_function(name)
        seconds = median_seconds_gpu(lambda: kernel((sms * 8,), (256,), (out, np.int32(rounds))), 5)
        warp_instructions = sms * 8 * 256 / 32 * rounds * per_round
        rows.append({"direction": "probe", "method": name, "instances": "", "variant": f"{per_round} per round",
                     "seconds": f"{seconds:.6g}",
                     "per_clock_per_sm": f"{warp_instructions / seconds / clock_hz / sms:.3f}",
                     "clock_mhz": f"{clock_hz / 1e6:.0f}"})
    return rows


def main(argv=None) -> int:
    from .environment import RESULTS_DIR, device_kind, environment, gpu_info, write_csv

    parser = argparse.ArgumentParser(prog="python -m bench.transpose_variants", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    gpu = gpu_info()
    rows = run()
    path = write_csv(args.out / f"transpose_variants_{device_kind(gpu)}.csv", rows, environment(gpu))
    for r in rows:
        print(f"{r['direction']:<8} {r['method']:<13} {str(r['instances']):>9} {r['variant']:<40} "
              f"{r.get('registers', '')!s:>4} {r.get('fraction_of_copy', r.get('per_clock_per_sm', ''))} "
              f"{r.get('identical_to_shipped', '')}")
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
