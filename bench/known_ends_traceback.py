"""The host traceback of long hits whose end cells are known, as a GPU run
gives them: ``python -m bench known-ends-traceback [options]`` (issue 41).

``--reads`` reads of the lambda case (``bench/long_reads.py: lambda_inputs``,
5-20 kb, every one carrying a 1-20 kb piece of the 48,502-base stand-in
with about 5 % errors, either strand) against the stand-in, both strands,
T = ``--threshold``: the end cell of every (read, strand) by
``bpbc.traceback.end_cells`` (untimed; kept in ``--work`` and used again,
so runs of two trees time the same hits), then ``align_hits(...,
known_ends=...)`` on those at T or above, ``--repeats`` times after one
untimed run that loads the kernels. Each run prints its wall seconds and
its thread-seconds (the process's CPU time over the call: every numba
thread's), and the part in ``start_boxes`` and ``_banded`` where the tree
has them, and a digest of the alignments (scores, coordinates, NM,
CIGARs): two trees' runs are compared by running this file with
``PYTHONPATH`` set to a folder holding only the other tree's ``bpbc``
(the file adds its own tree to the path after it, so ``bench`` is this
tree's), e.g.::

    git archive main bpbc | tar -x -C /tmp/main-bpbc
    PYTHONPATH=/tmp/main-bpbc python bench/known_ends_traceback.py --reads 400
    python bench/known_ends_traceback.py --reads 400

Numba's threads: ``NUMBA_NUM_THREADS`` (default: the cores).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file: the repository root on the path, after PYTHONPATH's
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.long_reads import lambda_sequences  # noqa: E402
from bench.long_traceback import timed_parts  # noqa: E402

PARTS = ("start_boxes", "_banded")


def digest(found) -> str:
    """A short hash of every alignment's score, coordinates, NM and CIGAR."""
    columns = (found.score, found.read_start, found.read_end, found.pattern_start, found.pattern_end, found.nm)
    text = "\n".join(" ".join(map(str, row)) + " " + cigar
                     for row, cigar in zip(zip(*(c.tolist() for c in columns)), found.cigars.strings()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench known-ends-traceback", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=100, help="planted reads of 5-20 kb (default 100)")
    parser.add_argument("--threshold", type=int, default=2000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bpbc-known-ends"), help="inputs and end cells")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from numba import get_num_threads

    import bpbc.traceback as tb
    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring

    args.work.mkdir(parents=True, exist_ok=True)
    reads, genome = lambda_sequences(args.work, args.reads, 1.0)
    strands, scoring = ("+", "-"), Scoring()
    table = PatternTable.build([encode_pattern(genome)], strands)
    codes, lengths = encode_reads(reads)
    ends_path = args.work / f"ends_{args.reads}_{args.threshold}.npz"
    if ends_path.exists():
        kept = np.load(ends_path)
        rows, ks, ends = kept["rows"], kept["ks"], kept["ends"]
    else:
        rows, ks = np.repeat(np.arange(len(reads)), 2), np.tile(np.arange(2), len(reads))
        started = time.perf_counter()
        ends = tb.end_cells(codes, lengths, rows, table, ks, scoring)
        print(f"end cells of {len(rows)} (read, strand) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        hit = ends[:, 0] >= args.threshold
        rows, ks, ends = rows[hit], ks[hit], ends[hit]
        np.savez(ends_path, rows=rows, ks=ks, ends=ends)
    print(f"{len(rows)} hits of {len(reads)} reads, {int((ends[:, 1]).sum())} read bases to their ends, "
          f"{get_num_threads()} numba threads", file=sys.stderr)
    with timed_parts(tb, PARTS) as seconds:
        found = tb.align_hits(codes, lengths, rows, ks, table, strands, scoring, known_ends=ends)  # kernels loaded
        for _ in range(args.repeats):
            seconds.clear()
            wall, cpu = time.perf_counter(), time.process_time()
            found = tb.align_hits(codes, lengths, rows, ks, table, strands, scoring, known_ends=ends)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            parts = "  ".join(f"{name} {w:.3f} s wall {c:.3f} thread-s" for name, (w, c) in seconds.items())
            print(f"align_hits {wall:.3f} s wall {cpu:.3f} thread-s  {parts}  digest {digest(found)}", flush=True)
    wrong = int((found.score != ends[:, 0]).sum())
    print(f"scores unlike the end cells': {wrong}", flush=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
