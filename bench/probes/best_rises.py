"""How often a lane's best rises in a thread's rows of the GPU kernel's sweep, for one long hit:
what a second pass that recorded each lane's end cell at every rise of its best (the branch
one-pass-ends, ``sw_screen<..., BEST = 3>``) would record, against the hit's path.

    python -m bench.probes.best_rises [--read 3000] [--pattern 5000] [--piece 2000] [--rows 3] [--floor 1024]

A random read holds a piece of a random pattern with 5 % substitutions; the full Gotoh matrix
(bpbc's default scoring) is swept as the kernel does: each thread holds ``--rows`` pattern rows and
meets them column by column, row by row, keeping its best. Prints the rises at or above
``--floor`` (strict, and with ties), the threads that have any, and one thread's first rises.
"""

from __future__ import annotations

import argparse

import numba
import numpy as np

from bpbc.scoring import Scoring


@numba.njit(cache=False)
def _gotoh(read, pattern, match, mismatch, gap_open, gap_extend):
    """H[i, j]: read i, pattern j (bpbc.reference.sw_matrices's layout, in numba for size)."""
    n, m = len(read), len(pattern)
    h = np.zeros((n + 1, m + 1), np.int32)
    e = np.full((n + 1, m + 1), -(1 << 30), np.int32)
    f = np.full((n + 1, m + 1), -(1 << 30), np.int32)
    opening = gap_open + gap_extend
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            e[i, j] = max(h[i - 1, j] - opening, e[i - 1, j] - gap_extend)
            f[i, j] = max(h[i, j - 1] - opening, f[i, j - 1] - gap_extend)
            diagonal = h[i - 1, j - 1] + (match if read[i - 1] == pattern[j - 1] else -mismatch)
            h[i, j] = max(0, diagonal, e[i, j], f[i, j])
    return h


@numba.njit(cache=False)
def _rises(h, rows, floor, ties):
    """(rises at or above floor, threads with any) over threads of ``rows`` pattern rows."""
    count = threads = 0
    for first in range(0, h.shape[1] - 1, rows):
        seen = mine = 0
        for i in range(h.shape[0] - 1):
            for j in range(first, min(first + rows, h.shape[1] - 1)):
                value = h[i + 1, j + 1]
                if value > seen or (ties and value == seen):
                    seen = value
                    if value >= floor:
                        mine += 1
        count += mine
        threads += mine > 0
    return count, threads


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--read", type=int, default=3000)
    parser.add_argument("--pattern", type=int, default=5000)
    parser.add_argument("--piece", type=int, default=2000)
    parser.add_argument("--rows", type=int, default=3)
    parser.add_argument("--floor", type=int, default=1024)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(1)
    pattern = rng.integers(0, 4, args.pattern)
    read = rng.integers(0, 4, args.read)
    at, start = (args.read - args.piece) // 2, (args.pattern - args.piece) // 2
    piece = pattern[start:start + args.piece].copy()
    substituted = rng.random(args.piece) < 0.05
    piece[substituted] = rng.integers(0, 4, int(substituted.sum()))
    read[at:at + args.piece] = piece
    s = Scoring()
    h = _gotoh(read, pattern, s.match, s.mismatch, s.gap_open, s.gap_extend)
    print(f"score {h.max()}, path about {args.piece} cells, {h.size - sum(h.shape) + 1:,} cells")
    for ties in (False, True):
        count, threads = _rises(h, args.rows, args.floor, ties)
        print(f"rises at or above {args.floor}{' (ties too)' if ties else ''}: {count:,} in {threads:,} threads "
              f"of {args.rows} rows")
    first = (start + args.piece) // args.rows * args.rows + 3 * args.rows  # a thread just past the piece's end
    seen, shown = 0, []
    for i in range(h.shape[0] - 1):
        for j in range(first, min(first + args.rows, h.shape[1] - 1)):
            if h[i + 1, j + 1] > seen:
                seen = int(h[i + 1, j + 1])
                if seen >= args.floor:
                    shown.append((i, j, seen))
    print(f"the thread of rows {first}-{first + args.rows - 1}: {len(shown)} rises, (column, row, H) first "
          f"{shown[:4]}, last {shown[-2:]}")


if __name__ == "__main__":
    main()
