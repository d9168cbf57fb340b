"""Time the GPU SW kernel alone (CUDA events, warm-up, median of repeats),
and the engine's hits on the same reads in two passes (a flag-only pass one
plane short, then the flagged lanes alone with scores) and in one.

``python -m bench gpu-kernel [N | I,J,...]``: the first N cases of each table,
or the cases of those indices (all by default); one line per case on stdout.
A rate above the GPU's logic ceiling (bench/logic_ceiling.py) is an error.
"""

from __future__ import annotations

import time

import numpy as np

from . import gpu_seconds, median_seconds_gpu
from .inputs import pattern_panel, random_prepared
from .logic_ceiling import LogicCeiling


def time_sw_kernel(engine, prepared, table, scoring, planes: int, repeats: int = 5, warmup: int = 1,
                   back_to_back: int = 1) -> float:
    """Median seconds of one SW kernel launch over ``prepared`` (``engine.launch``:
    the kernel and the zeroed outputs it writes), by CUDA events on the stream
    it launches on, after ``warmup`` launches (compiling, loading). ``back_to_back`` > 1: each
    repeat times that many launches in a row and divides, so that the host's
    time to enqueue a launch overlaps the previous kernel (the kernel's own
    rate, where a single launch also counts the host's gap before it)."""
    def launches():
        for _ in range(back_to_back):
            engine.launch(prepared, table, scoring, planes)

    return median_seconds_gpu(launches, repeats, warmup, engine.screening_stream()) / back_to_back


def plant(prepared, pattern: str, every: int, at: int = 10) -> None:
    """Write ``pattern`` (ACGT) into all 32 reads of every ``every``-th word
    group of random_prepared's batch, from column ``at`` on: those reads
    score far above any threshold, so the first pass flags them."""
    import cupy

    codes = np.array(["ACGT".index(base) for base in pattern])
    for plane, bit in ((0, codes & 1), (1, codes >> 1)):  # low bit, high bit of each base's code
        words = cupy.asarray(np.where(bit == 1, 0xFFFFFFFF, 0).astype(np.uint32))
        prepared.planes[::every, at:at + len(pattern), plane] = words
    cupy.cuda.get_current_stream().synchronize()  # the engine's stream does not wait for this one (random_prepared)


def time_hits(prepared, pattern_masks: list, scoring, threshold: int, repeats: int = 5) -> dict:
    """Median wall seconds of ``GpuEngine.hits`` (kernels, hit words,
    copy-back, host sort; each call ends in a copy to the host) in two passes
    (``two_pass``: the flag-only kernel at ``flag_planes`` planes over every lane, then
    the flagged lanes gathered and screened with scores) and in one pass
    (``one_pass``), calls alternating; ``pass1_kernel``: the flag-only kernel
    alone (CUDA events). ``flagged``: lanes the first pass flagged; ``hits``:
    instances returned (the two results are checked equal); ``default``:
    the passes the engine takes by itself ("two" or "one")."""
    import cupy

    from bpbc.gpu_engine import GpuEngine, flag_first_pays
    from bpbc.patterns import PatternTable
    from bpbc.scoring import flag_pass_planes, score_planes

    table = PatternTable.of(pattern_masks)
    planes = score_planes(threshold)
    flag_planes = flag_pass_planes(scoring, prepared.width * int(table.lengths.max()), planes)
    thresholds = np.full(len(table), threshold)
    engines = {"two_pass": GpuEngine(flag_first=True), "one_pass": GpuEngine(flag_first=False)}
    results = {name: engine.hits(prepared, table, scoring, planes, thresholds) for name, engine in engines.items()}
    for expected, got in zip(results["one_pass"], results["two_pass"]):
        if not np.array_equal(expected, got):
            raise AssertionError("hits in two passes differ from hits in one pass")
    flag_only = engines["one_pass"]
    _, flag = flag_only.launch(prepared, table, scoring, flag_planes, track_best=False)
    parts: dict[str, list[float]] = {"pass1_kernel": [], "two_pass": [], "one_pass": []}
    for _ in range(repeats):
        parts["pass1_kernel"].append(gpu_seconds(
            lambda: flag_only.launch(prepared, table, scoring, flag_planes, track_best=False),
            flag_only.screening_stream()))
        for name, engine in engines.items():
            cupy.cuda.Device().synchronize()
            began = time.perf_counter()
            engine.hits(prepared, table, scoring, planes, thresholds)
            parts[name].append(time.perf_counter() - began)
    result = {name: float(np.median(times)) for name, times in parts.items()}
    result["flagged"] = int(np.unpackbits(flag.reshape(-1)[cupy.flatnonzero(flag)].get().view(np.uint8)).sum())
    result["hits"] = len(results["two_pass"][0])
    result["default"] = "two" if flag_first_pays(prepared, table, flag_planes, planes) else "one"
    result["flag_planes"] = flag_planes
    return result


def main(argv: list[str] | None = None) -> int:
    import sys

    from bpbc.alphabet import encode_pattern
    from bpbc.gpu_engine import GpuEngine, chain_shape
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring, score_planes

    engine = GpuEngine()
    ceiling = LogicCeiling.of_device(engine.device)
    rng = np.random.default_rng(1)
    cases = [(4_000_000, 150, 128, 40), (32768, 1024, 128, 40), (32768, 4096, 128, 40), (1_000_000, 150, 20, 30),
             (1_000_000, 150, 60, 40), (1_000_000, 150, 300, 40)]

    argv = sys.argv[1:] if argv is None else list(argv)

    def chosen(table: list) -> list:
        if not argv:
            return table
        if "," in argv[0]:
            return [table[int(i)] for i in argv[0].split(",") if int(i) < len(table)]
        return table[: int(argv[0])]

    for n, length, m, threshold in chosen(cases):
        planes = score_planes(threshold)
        prepared = random_prepared(n, length)
        table = PatternTable.of([encode_pattern("".join(rng.choice(list("ACGT"), m)))])
        seconds = time_sw_kernel(engine, prepared, table, Scoring(), planes)
        steady = time_sw_kernel(engine, prepared, table, Scoring(), planes, back_to_back=10)
        figure = f"gpu-kernel: the kernel, {n} reads of {length} bp against {m} bp, {planes} planes"
        rate = ceiling.rate(figure, n * length * m, seconds, planes)
        steady_rate = ceiling.rate(f"{figure}, 10 back to back", n * length * m, steady, planes)
        print(f"reads {n:>9} len {length:>5} pattern {m:>4} T {threshold:>3} shape {chain_shape(m)} "
              f"kernel {seconds * 1e3:9.3f} ms  {rate / 1e12:6.3f} TCUPS  "
              f"10 back to back {steady * 1e3:9.3f} ms  {steady_rate / 1e12:6.3f} TCUPS", flush=True)
    # hits at the screening settings and the paper's, in two passes and in one;
    # TCUPS over every cell of the screen (n x length x sum of pattern lengths)
    hits_cases = [(4_000_000, 150, [128], 40), (4_000_000, 150, [60], 40), (4_000_000, 150, [20], 30),
                  (1_000_000, 150, "panel", 40), (32768, 1024, [128], 40), (32768, 4096, [128], 40)]
    for n, length, lengths, threshold in chosen(hits_cases):
        if lengths == "panel":  # 100 patterns of 20-60 bp, a tenth of their bases degenerate
            patterns, plantings = pattern_panel(np.random.default_rng(3), 100), (0,)
        else:
            patterns, plantings = ["".join(rng.choice(list("ACGT"), m)) for m in lengths], (0, 16)
        for every in plantings:  # no read planted, and all reads of every 16th word group
            prepared = random_prepared(n, length)
            if every:
                plant(prepared, patterns[0], every)
            t = time_hits(prepared, [encode_pattern(p) for p in patterns], Scoring(), threshold)
            planted = f"1/{every}" if every else "none"
            cells = n * length * sum(map(len, patterns))
            shown = f"{len(patterns)} x 20-60" if lengths == "panel" else str(lengths[0])
            planes = score_planes(threshold)
            figure = f"gpu-kernel: hits, {n} reads of {length} bp against {shown} bp, planted {planted}"
            # two passes: no faster than their first, the flag-only kernel over every cell
            flag_planes = t["flag_planes"]
            rates = {"two_pass": ceiling.rate(f"{figure}, two passes", cells, t["two_pass"], flag_planes),
                     "one_pass": ceiling.rate(f"{figure}, one pass", cells, t["one_pass"], planes),
                     "pass1_kernel": ceiling.rate(f"{figure}, the flag-only kernel", cells, t["pass1_kernel"],
                                                  flag_planes)}
            print(f"hits reads {n:>9} len {length:>5} pattern {shown:>9} T {threshold:>3} "
                  f"planes {flag_planes}+{planes} planted {planted:>4} "
                  f"flagged {t['flagged']:>7} hits {t['hits']:>7}  two passes {t['two_pass'] * 1e3:8.3f} ms"
                  f" {rates['two_pass'] / 1e12:6.3f} TCUPS  one pass {t['one_pass'] * 1e3:8.3f} ms"
                  f" {rates['one_pass'] / 1e12:6.3f} TCUPS  default {t['default']}  (flag-only kernel alone"
                  f" {t['pass1_kernel'] * 1e3:8.3f} ms, {rates['pass1_kernel'] / 1e12:6.3f} TCUPS)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
