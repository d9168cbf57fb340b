"""An honest DPX peer of bpbc's GPU kernel: launcher, check, timing.

``bench/dpx_peer.cu`` is a word-wise Smith-Waterman kernel for Hopper that
keeps two instances per 32-bit register (s16x2) and uses the DPX
instructions (``__viaddmax_s16x2``, ``__vimax_s16x2_relu``, ...). It screens
what bpbc screens (many reads against one pattern, IUPAC pattern masks, affine
gaps, local) and returns every instance's exact maximum score.

``python -m bench dpx [--check DATA.npz] [--out DIR]`` (GPU):

1. checks every candidate shape (pattern rows per thread R, threads per chain
   P, score from a shared-memory table or from registers, column loop unrolled
   1 or 2 times) against the CPU engine's exact scores stored in DATA.npz
   (``python -m bench.dpx_peer --make-check DATA.npz`` writes it on any
   machine: a few thousand reads with N's and planted, mutated pattern copies
   against IUPAC patterns of 24, 60 and 128 bp, read lengths 150 and 1024);
2. picks the fastest checked candidate per setting on a short run;
3. times it (CUDA events, median) beside bpbc's kernel (``GpuEngine.launch``,
   bench/gpu_kernel.py) in the same run: 4M x 150 bp against 128 bp (bpbc T =
   40: 6 planes; and exact: 9 planes), the paper's Table II setting (32768
   instances, reads of 1024 and 4096, pattern 128, exact: 9 planes), and 4M x
   150 bp against 24 and 60 bp patterns (T = 40: 6 planes).

Only the kernels are timed: bpbc's reads are already bit-transposed
(random_prepared), the peer's are already packed two to a byte per column
(``to_pairs``); neither layout step is in the time. TCUPS = read length x
pattern length x instances / seconds / 1e12.
"""

from __future__ import annotations

import argparse
import sys
from functools import cache
from pathlib import Path

import numpy as np

PEER_PATH = Path(__file__).with_name("dpx_peer.cu")
THREADS = 256  #: PEER_THREADS in dpx_peer.cu
CODES = 25
INVALID = 4
WARPS_REGISTER_GRANULE = 8


def candidate_shapes(m: int) -> list[tuple[int, int]]:
    """(R, P): P threads of R rows each cover the pattern (P divides 32)."""
    shapes = []
    for lanes in (1, 2, 4, 8, 16, 32):
        rows = -(-m // lanes)
        if 4 <= rows <= 32:
            shapes.append((rows, lanes))
            rounded = -(-rows // 4) * 4
            if rounded != rows and rounded <= 32 and (rounded - rows) * lanes < m // 8:
                shapes.append((rounded, lanes))
    return shapes


def expression(rows: int, lanes: int, scoring, score_mode: int, unroll: int) -> str:
    return (f"dpx_sw<{rows},{lanes},{scoring.match},{scoring.mismatch},{scoring.first_gap},"
            f"{scoring.gap_extend},{score_mode},{unroll}>")


def shared_bytes(rows: int, lanes: int, score_mode: int) -> int:
    lane_stride = -(-rows // 4) * 4 + 4
    return CODES * (lanes * lane_stride + 4) * 4 if score_mode == 0 else CODES * 4


@cache
def _function(name: str):
    import cupy

    module = cupy.RawModule(code=PEER_PATH.read_text(), options=("-std=c++17",),
                            name_expressions=(name,) if "<" in name else None)
    return module.get_function(name)


def to_pairs(codes_gpu):
    """Codes (N, L) uint8 on the device -> pair codes (ceil(N / 2), L)."""
    import cupy

    n, length = codes_gpu.shape
    pair_count = -(-n // 2)
    pairs = cupy.empty((pair_count, length), cupy.uint8)
    total = pair_count * length
    if total:
        _function("to_pairs")((max(1, min(-(-total // 256), 1 << 16)),), (256,),
                              (cupy.ascontiguousarray(codes_gpu), pairs, np.int64(n), np.int32(length),
                               np.int64(pair_count)))
    return pairs


class Peer:
    """One compiled variant of the peer kernel."""

    def __init__(self, rows: int, lanes: int, scoring, score_mode: int = 0, unroll: int = 2):
        import cupy

        self.rows, self.lanes, self.score_mode, self.unroll = rows, lanes, score_mode, unroll
        self.name = expression(rows, lanes, scoring, score_mode, unroll)
        self.kernel = _function(self.name)
        self.shared = shared_bytes(rows, lanes, score_mode)
        device = cupy.cuda.Device()
        self.multiprocessors = device.attributes["MultiProcessorCount"]
        registers = -(-self.kernel.num_regs // WARPS_REGISTER_GRANULE) * WARPS_REGISTER_GRANULE
        by_registers = 65536 // (registers * THREADS)
        by_shared = (device.attributes["MaxSharedMemoryPerMultiprocessor"] // (self.shared + 1024)
                     if self.shared else 32)
        self.blocks_per_sm = max(1, min(by_registers, by_shared, 2048 // THREADS, 32))

    @property
    def label(self) -> str:
        return (f"R={self.rows} P={self.lanes} score={'shared' if self.score_mode == 0 else 'registers'} "
                f"unroll={self.unroll}")

    def launch(self, pairs, n: int, masks_gpu, out):
        """Scores of the n instances of ``pairs`` into ``out`` (int32, n)."""
        pair_count, length = pairs.shape
        m = int(masks_gpu.shape[0])
        if m > self.rows * self.lanes:
            raise ValueError(f"{self.label} covers {self.rows * self.lanes} rows, pattern has {m}")
        resident_chains = self.blocks_per_sm * self.multiprocessors * THREADS // self.lanes
        # a whole number of rounds, spread evenly: every chain takes the same count of pairs (+-1)
        rounds = max(1, -(-pair_count // resident_chains))
        chains = max(1, -(-pair_count // rounds))
        blocks = -(-chains * self.lanes // THREADS)
        self.kernel((blocks,), (THREADS,), (pairs, masks_gpu, np.int32(m), np.int64(pair_count), np.int32(length),
                                            np.int64(n), np.int32(chains), out), shared_mem=self.shared)
        return out

    def scores(self, pairs, n: int, masks_gpu):
        import cupy

        out = cupy.full(n, -12345, cupy.int32)  # poison: every score must be written
        return self.launch(pairs, n, masks_gpu, out)


# ---------------------------------------------------------------- check data (CPU side)

CHECK_CASES = [  # (pattern length, read length, reads)
    (128, 150, 3001), (24, 150, 3001), (60, 150, 3001), (128, 1024, 601),
]


def _mutated_copy(rng, pattern_codes: np.ndarray) -> np.ndarray:
    piece = pattern_codes[int(rng.integers(0, len(pattern_codes) // 3)):].copy()
    piece = piece[: int(rng.integers(len(piece) // 2, len(piece) + 1))]
    subs = rng.random(len(piece)) < 0.05
    piece[subs] = rng.integers(0, 4, int(subs.sum()))
    if len(piece) > 10 and rng.random() < 0.5:  # one indel
        at = int(rng.integers(1, len(piece) - 1))
        piece = np.delete(piece, at) if rng.random() < 0.5 else np.insert(piece, at, rng.integers(0, 4))
    return piece


def make_check(path: Path, seed: int = 11) -> None:
    """Reads, patterns and the CPU engine's exact scores for the device check."""
    from bpbc.alphabet import IUPAC_SETS, encode_pattern
    from bpbc.cpu_engine import CpuEngine
    from bpbc.patterns import PatternTable
    from bpbc.reference import sw_score_codes
    from bpbc.scoring import Scoring, score_planes

    rng = np.random.default_rng(seed)
    scoring = Scoring()
    engine = CpuEngine()
    arrays = {}
    for k, (m, length, n) in enumerate(CHECK_CASES):
        letters = rng.choice(list("ACGT"), m)
        degenerate = rng.random(m) < 0.1
        letters[degenerate] = rng.choice(list("RYSWKMBDHVN"), int(degenerate.sum()))
        pattern = "".join(letters)
        masks = encode_pattern(pattern)
        concrete = np.array(["ACGT".index(IUPAC_SETS[c][int(rng.integers(0, len(IUPAC_SETS[c])))]) for c in pattern],
                            np.uint8)
        codes = rng.integers(0, 4, size=(n, length), dtype=np.uint8)
        codes[rng.random((n, length)) < 0.02] = INVALID
        for i in range(0, n, 3):
            piece = _mutated_copy(rng, concrete)[:length]
            at = int(rng.integers(0, length - len(piece) + 1))
            codes[i, at:at + len(piece)] = piece
        planes = score_planes(scoring.max_score(m, length))
        scores, overflow = engine.scores(engine.prepare(codes, np.full(n, length)), PatternTable.of([masks]),
                                         scoring, planes)
        assert not overflow.any()
        expected = scores[:, 0].astype(np.int32)
        for i in range(0, n, max(1, n // 5)):  # the engine itself against the plain reference, a few reads
            assert sw_score_codes(codes[i], masks, scoring) == expected[i]
        arrays[f"codes{k}"] = codes
        arrays[f"masks{k}"] = masks
        arrays[f"scores{k}"] = expected
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, cases=np.array(CHECK_CASES), **arrays)


def check_variant(peer: Peer, data) -> str:
    """'' when the peer's scores equal the CPU engine's on every check case of
    its pattern length, else what differs."""
    import cupy

    checked = 0
    for k, (m, length, n) in enumerate(data["cases"].tolist()):
        if m > peer.rows * peer.lanes:
            continue  # the pattern does not fit this shape (shorter ones do: padding rows)
        codes = cupy.asarray(data[f"codes{k}"])
        got = peer.scores(to_pairs(codes), n, cupy.asarray(data[f"masks{k}"])).get()
        expected = data[f"scores{k}"]
        checked += 1
        if not np.array_equal(got, expected):
            bad = np.flatnonzero(got != expected)
            return (f"m={m} L={length}: {len(bad)} of {n} differ, first read {bad[0]}: "
                    f"{got[bad[0]]} != {expected[bad[0]]}")
    return "" if checked else "no check case"


# ---------------------------------------------------------------- timing (device)

SETTINGS = [  # (case, reads, read length, pattern length, bpbc planes list)
    ("screen_4M_150x128", 4_000_000, 150, 128, (6, 9)),
    ("table2_32768_1024x128", 32768, 1024, 128, (9,)),
    ("table2_32768_4096x128", 32768, 4096, 128, (9,)),
    ("screen_4M_150x24", 4_000_000, 150, 24, (6,)),
    ("screen_4M_150x60", 4_000_000, 150, 60, (6,)),
]


def _median_kernel_seconds(call, repeats: int) -> float:
    from . import median_seconds_gpu

    return median_seconds_gpu(call, repeats, warmup=1)


def run(check_path: Path, repeats: int = 7, tune_repeats: int = 3, settings=None, log=print) -> list[dict]:
    import cupy

    from bpbc.alphabet import encode_pattern
    from bpbc.gpu_engine import GpuEngine, chain_shape
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring

    from .gpu_kernel import time_sw_kernel
    from .inputs import random_prepared
    from .logic_ceiling import LogicCeiling
    from .sass_count import analyse, compile_nvrtc, disassemble, find_function, parse_sass

    scoring = Scoring()
    data = np.load(check_path)
    rng = np.random.default_rng(5)
    engine = GpuEngine()
    ceiling = LogicCeiling.of_device(engine.device)
    rows_out = []
    checked: dict[str, str] = {}
    for case, n, length, m, bpbc_planes in settings or SETTINGS:
        pattern = "".join(rng.choice(list("ACGT"), m))
        masks = encode_pattern(pattern)
        masks_gpu = cupy.asarray(masks)
        codes = cupy.random.default_rng(int(rng.integers(1 << 30))).integers(0, 4, size=(n, length),
                                                                            dtype=cupy.uint8)
        pairs = to_pairs(codes)
        del codes
        out = cupy.empty(n, cupy.int32)
        cells = n * length * m
        # -- tune: every candidate that passes the check, on this setting
        best = None
        for rows, lanes in candidate_shapes(m):
            for score_mode in (0, 1):
                for unroll in (1, 2):
                    try:
                        peer = Peer(rows, lanes, scoring, score_mode, unroll)
                    except Exception as error:  # compile failure: record, go on
                        rows_out.append({"case": case, "method": "dpx_peer", "role": "tuning",
                                         "variant": expression(rows, lanes, scoring, score_mode, unroll),
                                         "error": str(error)[:200]})
                        continue
                    if peer.name not in checked:
                        checked[peer.name] = check_variant(peer, data)
                    problem = checked[peer.name]
                    seconds = None
                    if not problem or problem == "no check case":
                        seconds = _median_kernel_seconds(lambda: peer.launch(pairs, n, masks_gpu, out), tune_repeats)
                    rows_out.append({"case": case, "method": "dpx_peer", "role": "tuning", "variant": peer.label,
                                     "kernel": peer.name, "registers": peer.kernel.num_regs,
                                     "blocks_per_sm": peer.blocks_per_sm, "check": problem or "equal to CPU engine",
                                     "seconds": f"{seconds:.6g}" if seconds else "",
                                     "tcups": f"{cells / seconds / 1e12:.4g}" if seconds else ""})
                    log(f"{case} tune {peer.label}: regs {peer.kernel.num_regs} check "
                        f"{problem or 'ok'} {'' if seconds is None else f'{cells / seconds / 1e12:.3f} TCUPS'}")
                    if seconds is not None and not problem and (best is None or seconds < best[0]):
                        best = (seconds, peer)
        if best is None:
            rows_out.append({"case": case, "method": "dpx_peer", "role": "final", "error": "no checked variant"})
            continue
        peer = best[1]
        peer_seconds = _median_kernel_seconds(lambda: peer.launch(pairs, n, masks_gpu, out), repeats)
        # instructions per 32 cells of the chosen variant, from its SASS
        try:
            cubin, mangled, _ = compile_nvrtc(PEER_PATH.read_text(), peer.name)
            function = find_function(parse_sass(disassemble(cubin)[0]), mangled)
            report = analyse(function, key="dpx")
            per_cells = 16 / (peer.rows * peer.unroll)  # one loop pass: unroll columns x R rows x 2 cells
            sass_note = " ".join(f"{k}={v * per_cells:.1f}" for k, v in report.loop.items() if v)
            sass_total = f"{sum(report.loop.values()) * per_cells:.1f}"
        except Exception as error:
            sass_note, sass_total = f"error: {error}"[:120], ""
        pairs = None  # free the device memory before bpbc's reads
        cupy.get_default_memory_pool().free_all_blocks()
        prepared = random_prepared(n, length, seed=int(rng.integers(1 << 30)))
        rows_, lanes_, stripes_ = chain_shape(m)
        base = {"case": case, "instances": n, "read_length": length, "pattern_length": m}
        peer_row = dict(base, method="dpx_peer", role="final", variant=peer.label, kernel=peer.name,
                        registers=peer.kernel.num_regs, check=checked[peer.name] or "equal to CPU engine",
                        seconds=f"{peer_seconds:.6g}", tcups=f"{cells / peer_seconds / 1e12:.4g}",
                        scores="exact", sass_instructions_per_32_cells=sass_total, sass_classes_per_32_cells=sass_note)
        rows_out.append(peer_row)
        log(f"{case} peer {peer.label}: {peer_seconds * 1e3:.3f} ms {cells / peer_seconds / 1e12:.3f} TCUPS "
            f"({sass_total} instructions per 32 cells)")
        for planes in bpbc_planes:
            seconds = time_sw_kernel(engine, prepared, PatternTable.of([masks]), scoring, planes, repeats)
            tcups = ceiling.rate(f"dpx: bpbc's kernel, {case}, {planes} planes", cells, seconds, planes) / 1e12
            exact = planes >= scoring.max_score(m, length).bit_length()
            rows_out.append(dict(base, method="bpbc_gpu", role="final", planes=planes,
                                 variant=f"R={rows_} P={lanes_} stripes={stripes_}", seconds=f"{seconds:.6g}",
                                 tcups=f"{tcups:.4g}",
                                 scores="exact" if exact else f"exact below {1 << planes}, flagged above",
                                 bpbc_tcups_over_peer=f"{tcups / (cells / peer_seconds / 1e12):.4f}"))
            log(f"{case} bpbc {planes} planes: {seconds * 1e3:.3f} ms {tcups:.3f} TCUPS "
                f"(bpbc/peer {tcups / (cells / peer_seconds / 1e12):.3f})")
        del prepared
        cupy.get_default_memory_pool().free_all_blocks()
    return rows_out


def _compile_one(name: str) -> str:
    """Worker of precompile: compile one variant into CuPy's on-disk cache."""
    try:
        _function(name)
        return ""
    except Exception as error:
        return f"{name}: {str(error)[:300]}"


def precompile(workers: int = 8, settings=None) -> list[str]:
    """Compile every candidate of the settings in parallel processes (NVRTC is
    single-threaded; CuPy caches the cubins on disk, so the timing run then
    only loads them). Returns the errors."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from bpbc.scoring import Scoring

    scoring = Scoring()
    names = sorted({expression(r, p, scoring, mode, u) for _, _, _, m, _ in settings or SETTINGS
                    for r, p in candidate_shapes(m) for mode in (0, 1) for u in (1, 2)})
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return [e for e in pool.map(_compile_one, names) if e]


def main(argv: list[str] | None = None) -> int:
    from .environment import RESULTS_DIR, device_kind, environment, gpu_info, write_csv

    parser = argparse.ArgumentParser(prog="python -m bench dpx", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", type=Path, default=Path(".devdata/dpx_check.npz"),
                        help="check data written by --make-check")
    parser.add_argument("--make-check", type=Path, default=None, help="write check data here (CPU) and exit")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", nargs="+", default=None, help="setting names (default: all)")
    parser.add_argument("--workers", type=int, default=8, help="processes compiling the variants first")
    args = parser.parse_args(argv)
    if args.make_check:
        make_check(args.make_check)
        print(f"check data -> {args.make_check}")
        return 0
    gpu = gpu_info()
    if gpu is None:
        print("bench dpx: needs a CUDA GPU (cupy)", file=sys.stderr)
        return 1
    settings = [s for s in SETTINGS if args.only is None or s[0] in args.only]
    if not args.check.exists():
        print(f"bench dpx: writing the check data to {args.check} (CPU engine, once)", flush=True)
        make_check(args.check)
    if args.workers > 1:
        try:
            errors = precompile(args.workers, settings)
            print(f"precompiled ({len(errors)} errors){''.join(chr(10) + e for e in errors)}", flush=True)
        except Exception as error:  # compile one by one in the run instead
            print(f"precompile failed ({type(error).__name__}: {error}); compiling in the run", flush=True)
    rows = run(args.check, args.repeats, settings=settings, log=lambda s: print(s, flush=True))
    path = write_csv(args.out / f"dpx_peer_{device_kind(gpu)}.csv", rows, environment(gpu))
    print(f"-> {path}")
    finals = [r for r in rows if r.get("role") == "final" and "tcups" in r]
    for r in finals:
        print(f"{r['case']:<24} {r['method']:<9} {str(r.get('planes', '')):>3} {r['tcups']:>7} TCUPS  "
              f"{r.get('bpbc_tcups_over_peer', '')}  {r.get('variant', '')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
