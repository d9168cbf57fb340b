"""How often a lane's best rises in a thread's rows of the GPU kernel's sweep, for one long hit:
what a second pass that recorded each lane's end cell at every rise of its best (the branch
one-pass-ends, ``sw_screen<..., BEST = 3>``) would record, against the hit's path.

    python -m bench.probes.best_rises [--read 1500] [--pattern 2500] [--piece 1000] [--rows 3] [--floor 1024]

A random read holds a piece of a random pattern with 5 % substitutions; its H matrix
(:func:`bpbc.reference.sw_matrices`, bpbc's default scoring; seconds and a few hundred MB at the
defaults) is swept as the kernel does: each thread holds ``--rows`` pattern rows and
meets them column by column, row by row, keeping its best. Prints the rises at or above
``--floor`` (strict, and with ties), the threads that have any, and one thread's first rises.
"""

from __future__ import annotations

import argparse

import numpy as np

from bpbc.reference import sw_matrices


def _thread_rises(h, first: int, rows: int, floor: int, ties: bool) -> list[tuple[int, int, int]]:
    """(column, row, H) of each rise of the best, at or above ``floor``, in the thread holding pattern
    rows ``first`` to ``first + rows - 1``: it meets them column by column, row by row, from a best of 0."""
    seen, rises = 0, []
    for i, column in enumerate(h[1:, first + 1:first + 1 + rows].tolist()):
        for j, value in enumerate(column, first):
            if value > seen or (ties and value == seen):
                seen = value
                if value >= floor:
                    rises.append((i, j, value))
    return rises


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--read", type=int, default=1500)
    parser.add_argument("--pattern", type=int, default=2500)
    parser.add_argument("--piece", type=int, default=1000)
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
    h = np.array(sw_matrices(read, 1 << pattern)[0], np.int64)  # read codes 0-3, pattern as IUPAC mask bits
    print(f"score {h.max()}, path about {args.piece} cells, {h.size - sum(h.shape) + 1:,} cells")
    for ties in (False, True):
        per_thread = [len(_thread_rises(h, first, args.rows, args.floor, ties)) for first in range(0, args.pattern, args.rows)]
        print(f"rises at or above {args.floor}{' (ties too)' if ties else ''}: {sum(per_thread):,} in "
              f"{sum(n > 0 for n in per_thread):,} threads of {args.rows} rows")
    first = (start + args.piece) // args.rows * args.rows + 3 * args.rows  # a thread just past the piece's end
    shown = _thread_rises(h, first, args.rows, args.floor, False)
    print(f"the thread of rows {first}-{first + args.rows - 1}: {len(shown)} rises, (column, row, H) first "
          f"{shown[:4]}, last {shown[-2:]}")


if __name__ == "__main__":
    main()
