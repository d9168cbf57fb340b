"""Time the GPU SW kernel alone (CUDA events, warm-up, median of repeats)."""

from __future__ import annotations

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
