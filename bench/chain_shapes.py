"""The SW kernel's time per chain shape (R rows per lane, P lanes per chain,
stripes), forced in place of ``chain_shape``'s choice, for the paper's
setting (32768 instances) and larger batches: does a shape with more lanes
per chain fill the GPU when the batch is small? (issue 10, item 3)

``python -m bench.chain_shapes`` (a CUDA machine; bench/device_env.sh).
"""
import numpy as np

import bpbc.gpu_engine as ge
from bpbc.alphabet import encode_pattern
from bpbc.gpu_engine import GpuEngine
from bpbc.scoring import Scoring, score_planes

from .gpu_kernel import random_prepared, time_sw_kernel

CASES = ((32768, 1024, 128, 40), (32768, 4096, 128, 40), (65536, 1024, 128, 40), (4_000_000, 150, 128, 40),
         (32768, 1024, 128, 511))
SHAPES = ((8, 16, 1), (4, 32, 1), (8, 8, 2), (4, 16, 2), (2, 32, 2), (4, 8, 4))


def main() -> None:
    rng = np.random.default_rng(1)
    engine = GpuEngine()
    for n, length, m, threshold in CASES:
        prepared = random_prepared(n, length)
        masks = encode_pattern("".join(rng.choice(list("ACGT"), m)))
        for shape in SHAPES:
            # time_sw_kernel builds a fresh table, so its launches take the forced shape
            ge.chain_shape = lambda length, shape=shape: shape  # type: ignore[assignment]
            seconds = time_sw_kernel(engine, prepared, masks, Scoring(), score_planes(threshold))
            print(f"n {n:>8} len {length:>5} m {m} T {threshold} planes {score_planes(threshold)} shape {shape} "
                  f"{seconds * 1e3:8.3f} ms {n * length * m / seconds / 1e12:6.3f} TCUPS", flush=True)


if __name__ == "__main__":
    main()
