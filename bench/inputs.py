"""Random inputs of the benchmarks: reads as base codes, patterns, panels of
patterns, and batches of reads already in bit planes on the device."""

from __future__ import annotations

import numpy as np

DEGENERATE = "RYSWKMBDHVN"


def random_codes(rng, n, length):
    return rng.integers(0, 4, size=(n, length), dtype=np.uint8)


def random_pattern(rng, length, degenerate_fraction=0.0):
    letters = rng.choice(list("ACGT"), length)
    if degenerate_fraction:
        where = rng.random(length) < degenerate_fraction
        letters[where] = rng.choice(list(DEGENERATE), int(where.sum()))
    return "".join(letters)


def pattern_panel(rng, count=100, shortest=20, longest=60, degenerate_fraction=0.1):
    return [random_pattern(rng, int(rng.integers(shortest, longest + 1)), degenerate_fraction)
            for _ in range(count)]


def random_prepared(n_reads: int, read_length: int, seed: int = 0):
    """PreparedReads of random full-length ACGT reads, built on the device
    and complete on return: they are made on the current stream, and the
    engine reads them on a non-blocking stream of its own, which does not
    wait for the default one (without the wait, Table II's 2048 bp row ran
    into an illegal address on an H200, 2026-11-28)."""
    import cupy

    from bpbc.gpu_engine import WORD_BITS, PreparedReads

    groups = -(-n_reads // WORD_BITS)
    rng = cupy.random.default_rng(seed)
    planes = rng.integers(0, 1 << 32, size=(groups, read_length, 3), dtype=cupy.uint64).astype(cupy.uint32)
    planes[:, :, 2] = 0xFFFFFFFF  # every base valid
    prepared = PreparedReads(n_reads, np.arange(n_reads), planes, cupy.full(groups, read_length, cupy.int32))
    cupy.cuda.get_current_stream().synchronize()
    return prepared
