"""Time the GPU SW kernel alone (CUDA events, warm-up, median of repeats),
and the two-pass screen (a flag-only pass one plane short, then exact
scores of the flagged instances) on the same reads.

``python bench/gpu_kernel.py [N]``: the first N cases of each table (all by default).
"""

from __future__ import annotations

import time

import numpy as np


def random_prepared(n_reads: int, read_length: int, seed: int = 0):
    """PreparedReads of random full-length ACGT reads, built on the device."""
    import cupy

    from bpbc.gpu_engine import WORD_BITS, PreparedReads

    groups = -(-n_reads // WORD_BITS)
    rng = cupy.random.default_rng(seed)
    planes = rng.integers(0, 1 << 32, size=(groups, read_length, 3), dtype=cupy.uint64).astype(cupy.uint32)
    planes[:, :, 2] = 0xFFFFFFFF  # every base valid
    return PreparedReads(n_reads, np.arange(n_reads), planes, cupy.full(groups, read_length, cupy.int32))


def time_sw_kernel(engine, prepared, pattern_masks, scoring, planes: int, repeats: int = 5) -> float:
    """Median seconds of one SW kernel launch over ``prepared``."""
    import cupy

    from bpbc.patterns import PatternTable

    table = PatternTable.of([pattern_masks])
    engine.launch(prepared, table, scoring, planes)  # compile and warm up
    times = []
    for _ in range(repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        engine.launch(prepared, table, scoring, planes)
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return float(np.median(times))


def plant(prepared, pattern: str, every: int, at: int = 10) -> None:
    """Write ``pattern`` (ACGT) into all 32 reads of every ``every``-th word
    group of random_prepared's batch, from column ``at`` on: those reads
    score far above any threshold, so the first pass flags them."""
    import cupy

    codes = np.array(["ACGT".index(base) for base in pattern])
    for plane, bit in ((0, codes & 1), (1, codes >> 1)):  # low bit, high bit of each base's code
        words = cupy.asarray(np.where(bit == 1, 0xFFFFFFFF, 0).astype(np.uint32))
        prepared.planes[::every, at:at + len(pattern), plane] = words


def codes_of(prepared, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, lengths) of reads ``rows`` of random_prepared's batch (read i
    is lane i: no sorting), read back from its planes: what the Screener
    hands the second pass (there: encoded on the host from the chunk)."""
    import cupy

    from bpbc.gpu_engine import WORD_BITS

    group, lane = np.divmod(rows, WORD_BITS)
    words = prepared.planes[cupy.asarray(group)]  # (N, L, 3): every base valid
    bits = (words >> cupy.asarray(lane.astype(np.uint32))[:, None, None]) & 1
    codes = (bits[:, :, 0] | (bits[:, :, 1] << 1)).astype(cupy.uint8).get()
    return codes, prepared.group_length[cupy.asarray(group)].get().astype(np.int64)


def time_two_pass(engine, prepared, pattern_masks, scoring, threshold: int, repeats: int = 5) -> dict:
    """Median seconds of the two-pass screen's parts, as Screener._hits runs
    them: ``pass1_kernel`` (the flag-only kernel, CUDA events), ``flagged``
    (engine.flagged: that kernel plus copying the flagged words back),
    ``pass2`` (engine.pair_scores of the flagged instances: upload,
    transpose, kernel, gather; the host work of getting their codes not
    counted), ``total`` = flagged + pass2; ``one_pass_hits``: engine.hits
    with the threshold's planes (kernel, hit words, copy-back), the one-pass
    equivalent. Also ``instances``: how many the first pass flagged."""
    import cupy

    from bpbc.patterns import PatternTable
    from bpbc.scoring import score_planes

    table = PatternTable.of([pattern_masks])
    planes = score_planes(threshold)
    thresholds = np.array([threshold])
    reads, ks = engine.flagged(prepared, table, scoring, planes - 1)  # compile and warm up
    rows, local = np.unique(reads, return_inverse=True)
    codes, lengths = codes_of(prepared, rows)
    engine.pair_scores(codes, lengths, local, ks, table, scoring, planes)
    engine.hits(prepared, table, scoring, planes, thresholds)
    parts: dict[str, list[float]] = {"pass1_kernel": [], "flagged": [], "pass2": [], "one_pass_hits": []}
    for _ in range(repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        engine.launch(prepared, table, scoring, planes - 1, track_best=False)
        stop.record()
        stop.synchronize()
        parts["pass1_kernel"].append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
        for name, call in (("flagged", lambda: engine.flagged(prepared, table, scoring, planes - 1)),
                           ("pass2", lambda: engine.pair_scores(codes, lengths, local, ks, table, scoring, planes)),
                           ("one_pass_hits", lambda: engine.hits(prepared, table, scoring, planes, thresholds))):
            cupy.cuda.Device().synchronize()
            began = time.perf_counter()
            call()  # each ends in a copy to the host: synchronous
            parts[name].append(time.perf_counter() - began)
    result = {name: float(np.median(times)) for name, times in parts.items()}
    result["total"] = result["flagged"] + result["pass2"]
    result["instances"] = len(reads)
    return result


if __name__ == "__main__":
    import sys

    from bpbc.alphabet import encode_pattern
    from bpbc.gpu_engine import GpuEngine, chain_shape
    from bpbc.scoring import Scoring, score_planes

    engine = GpuEngine()
    rng = np.random.default_rng(1)
    cases = [(4_000_000, 150, 128, 40), (32768, 1024, 128, 40), (32768, 4096, 128, 40), (1_000_000, 150, 20, 30),
             (1_000_000, 150, 60, 40), (1_000_000, 150, 300, 40)]
    for n, length, m, threshold in cases if len(sys.argv) < 2 else cases[: int(sys.argv[1])]:
        prepared = random_prepared(n, length)
        masks = encode_pattern("".join(rng.choice(list("ACGT"), m)))
        seconds = time_sw_kernel(engine, prepared, masks, Scoring(), score_planes(threshold))
        print(f"reads {n:>9} len {length:>5} pattern {m:>4} T {threshold:>3} shape {chain_shape(m)} "
              f"kernel {seconds * 1e3:9.3f} ms  {n * length * m / seconds / 1e12:6.3f} TCUPS", flush=True)
    # the two-pass screen at issue 10's setting and the paper's; TCUPS over every
    # cell of the screen (n x length x m), as in the rows above
    two_pass_cases = [(4_000_000, 150, 128, 40), (32768, 1024, 128, 40), (32768, 4096, 128, 40)]
    for n, length, m, threshold in two_pass_cases if len(sys.argv) < 2 else two_pass_cases[: int(sys.argv[1])]:
        pattern = "".join(rng.choice(list("ACGT"), m))
        for every in (0, 16):  # no read planted, and all reads of every 16th word group
            prepared = random_prepared(n, length)
            if every:
                plant(prepared, pattern, every)
            t = time_two_pass(engine, prepared, encode_pattern(pattern), Scoring(), threshold)
            planted = f"1/{every}" if every else "none"
            print(f"two-pass reads {n:>9} len {length:>5} pattern {m:>4} T {threshold:>3} "
                  f"planes {score_planes(threshold) - 1}+{score_planes(threshold)} planted {planted:>4} "
                  f"flagged {t['instances']:>7}  pass1 kernel {t['pass1_kernel'] * 1e3:8.3f} ms"
                  f"  flagged {t['flagged'] * 1e3:8.3f} ms  pass2 {t['pass2'] * 1e3:8.3f} ms"
                  f"  total {t['total'] * 1e3:8.3f} ms  {n * length * m / t['total'] / 1e12:6.3f} TCUPS"
                  f"  (pass1 kernel alone {n * length * m / t['pass1_kernel'] / 1e12:6.3f};"
                  f" one-pass hits {t['one_pass_hits'] * 1e3:8.3f} ms,"
                  f" {n * length * m / t['one_pass_hits'] / 1e12:6.3f} TCUPS)", flush=True)
