"""Variants of transpose/kernels.cu timed side by side on a GPU.

``python -m bench.transpose_variants [--out DIR]`` compiles kernels.cu with
some of its tuning constants changed (BALLOT_DELIVERY, BALLOT_DIRECT_STORE,
UNPACK_BALLOT_DELIVERY, MIN_BLOCKS_PER_SM, CC_UNROLL, INFLIGHT), checks that every variant's output is bit-identical to the
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
// shuffles: 32 independent butterfly shuffles a round, accumulated by IMAD
extern "C" __global__ void shfl_probe(unsigned* out, int rounds) {
    unsigned x = threadIdx.x * 2654435761u + blockIdx.x, acc = 0;
    for (int i = 0; i < rounds; ++i) {
        unsigned mix = 0;
#pragma unroll
        for (int b = 0; b < 32; ++b) {  // inputs and sums alternate between the FMA and integer pipes
            const unsigned v = __shfl_xor_sync(0xffffffffu, (b & 1) ? x * (2u * b + 1u) : x ^ (0x9e3779b9u * b),
                                               1 + (b & 15));
            if (b & 1) acc = acc * 3u + v; else mix ^= v;
        }
        x = x * 1664525u + 1013904223u + mix;
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


def run(sizes=(1 << 22, 1 << 24), length: int = 150, repeats: int = 9, probes_only: bool = False) -> list[dict]:
    import cupy

    from transpose import planes_ballot, planes_swap, unpack_planes_gpu
    from transpose.gpu import MAX_BLOCKS

    from .transpose_bench import gpu_copy_rate

    base = KERNELS.read_text()
    warps = constant(base, "WARPS_PER_BLOCK")
    copy_rate = gpu_copy_rate(1 << 30)
    rows = []
    forward_variants = [dict(BALLOT_DELIVERY=d, BALLOT_DIRECT_STORE=direct, MIN_BLOCKS_PER_SM=mb, CC_UNROLL=u)
                        for d, direct, mb, u in ((0, 1, 6, 4), (0, 0, 0, 1), (0, 1, 6, 2), (0, 1, 6, 8),
                                                 (0, 1, 0, 4), (0, 1, 7, 2))]
    inverse_variants = [dict(INFLIGHT=k, UNPACK_BALLOT_DELIVERY=d) for k in (4, 8, 16) for d in (3, 0)]
    rng = cupy.random.default_rng(0)
    blocks = -(-length // 32)
    for n in () if probes_only else sizes:
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
                       (variant["BALLOT_DELIVERY"], variant["BALLOT_DIRECT_STORE"]) if method == "ballot" else -1)
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
                                                 or not k.startswith("BALLOT_")),
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
    for name, per_round in (("vote_probe", 32), ("vote_bit_probe", 32), ("shfl_probe", 32), ("lop3_probe", 96)):
        kernel = module.get_function(name)
        seconds = median_seconds_gpu(lambda: kernel((sms * 8,), (256,), (out, np.int32(rounds))), 5)
        warp_instructions = sms * 8 * 256 / 32 * rounds * per_round
        rows.append({"direction": "probe", "method": name, "instances": "", "variant": f"{per_round} per round",
                     "seconds": f"{seconds:.6g}",
                     "per_clock_per_sm": f"{warp_instructions / seconds / clock_hz / sms:.3f}",
                     "clock_mhz": f"{clock_hz / 1e6:.0f}"})
    return rows


def sass_rows(compiler: str = "auto") -> list[dict]:
    """Instructions per output word of the transpose kernels' block loops, v1
    (bench/transpose_v1.cu) and current, read off their SASS (bench/sass_count.py):
    the innermost loop holding the kernel's shuffles or votes transposes one
    32-position block of 3 planes (96 output words) per pass, or two when the
    compiler unrolled it (unpack: 32 or 64 values)."""
    from . import sass_count as sc

    v1 = Path(__file__).with_name("transpose_v1.cu")
    use_nvrtc = compiler == "nvrtc" or (compiler == "auto" and sc.cupy_arch() is not None)
    rows = []
    for version, path in (("v1 (before)", v1), ("current", KERNELS)):
        source = path.read_text()
        for kernel in ("planes_swap_kernel", "planes_ballot_kernel"):
            cubin, mangled, how = (sc.compile_nvrtc(source, kernel) if use_nvrtc else sc.compile_nvcc(source, kernel))
            function = sc.find_function(sc.parse_sass(sc.disassemble(cubin)[0]), kernel)
            spans = [sp for sp in sc.loops(function)
                     if any(i.base in ("SHFL", "VOTE") for i in sc.body(function, sp))]
            innermost = [sp for sp in spans if not any(o != sp and sp[0] <= o[0] and o[1] <= sp[1] for o in spans)]
            span = max(innermost, key=lambda sp: sum(i.base in ("SHFL", "VOTE") for i in sc.body(function, sp)))
            body = sc.body(function, span)
            ops = sc.opcode_counts(body)
            transposes = sum(n for op, n in ops.items() if op.startswith("SHFL")) / 15 if "swap" in kernel else \
                sum(n for op, n in ops.items() if op.startswith("VOTE")) / 96
            words = 96 * transposes  # 15 shuffles or 96 votes per block of 96 words
            counts = sc.class_counts(body)
            row = {"kernel": kernel, "version": version, "compiler": how, "loop": f"0x{span[0]:x}-0x{span[1]:x}",
                   "blocks_per_pass": f"{transposes:g}", "instructions_per_output_word": f"{len(body) / words:.3f}",
                   "votes_per_word": f"{sum(n for op, n in ops.items() if op.startswith('VOTE')) / words:.3f}",
                   "shuffles_per_word": f"{sum(n for op, n in ops.items() if op.startswith('SHFL')) / words:.3f}"}
            row.update({f"{c}_per_word": f"{counts[c] / words:.3f}" for c in sc.CLASSES})
            rows.append(row)
    return rows


def main(argv=None) -> int:
    from .environment import RESULTS_DIR, device_kind, environment, gpu_info, write_csv

    parser = argparse.ArgumentParser(prog="python -m bench.transpose_variants", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--probes-only", action="store_true", help="only the instruction-rate probes")
    parser.add_argument("--sass", action="store_true",
                        help="instead: instructions per output word of the kernels' SASS (v1 and current)")
    args = parser.parse_args(argv)
    gpu = gpu_info()
    if args.sass:
        rows = sass_rows()
        arch = device_kind(gpu) if gpu else "sm90"
        path = write_csv(args.out / f"transpose_sass_{arch}.csv", rows, environment(gpu))
        for r in rows:
            print(r["version"], r["kernel"], r["instructions_per_output_word"], r["votes_per_word"],
                  r["shuffles_per_word"], r["lop3_per_word"], r["other_per_word"])
        print(f"-> {path}")
        return 0
    rows = run(probes_only=args.probes_only)
    name = "instruction_rates" if args.probes_only else "transpose_variants"
    path = write_csv(args.out / f"{name}_{device_kind(gpu)}.csv", rows, environment(gpu))
    for r in rows:
        print(f"{r['direction']:<8} {r['method']:<14} {str(r['instances']):>9} {r['variant']:<40} "
              f"{r.get('registers', '')!s:>4} {r.get('fraction_of_copy', r.get('per_clock_per_sm', ''))} "
              f"{r.get('identical_to_shipped', '')}")
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
