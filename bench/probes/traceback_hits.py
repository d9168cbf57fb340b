"""CPU seconds per traced hit of the trimming workload: ``align_hits`` on the hits of
bench trimming's planted reads (150 bp, the TruSeq adapter of 33 bp, forward strand, the
screen's threshold at ``--min-score-fraction 0.8``: 53), on one numba thread, in process.

    python -m bench.probes.traceback_hits [--reads 200000] [--repeats 7] [--threads 1]

Prints the hits, then per repeat the CPU seconds (``time.process_time``) of ``align_hits``
over all of them as one batch, and the median and minimum per hit in microseconds; with
``--check FILE`` writes the alignments (score, coordinates, nm, matches, CIGAR) as a digest
line to FILE, for comparing trees.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time

import numpy as np


def hits(reads: int, length: int, seed: int):
    from bench.trimming import ADAPTER, planted_reads
    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.patterns import PatternTable

    data, overlap, _ = planted_reads(reads, length, 20, seed=seed)
    lines = data.split(b"\n")
    seqs = lines[1::4][:reads]
    codes, lengths = encode_reads(seqs)
    table = PatternTable.build([encode_pattern(ADAPTER)], ("+",))
    return codes, lengths, table, overlap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=200000)
    parser.add_argument("--length", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--check", default=None)
    args = parser.parse_args(argv)

    import numba

    from bpbc.scoring import Scoring
    from bpbc.traceback import align_hits

    numba.set_num_threads(args.threads)
    codes, lengths, table, overlap = hits(args.reads, args.length, args.seed)
    scoring = Scoring()
    every = np.arange(len(lengths), dtype=np.int64)
    ks = np.zeros(len(every), np.int64)
    found = align_hits(codes, lengths, every, ks, table, ("+",), scoring)  # compile, and the scores
    chosen = np.flatnonzero(found.score >= 53)
    print(f"{len(chosen)} hits of {len(every)} reads (score >= 53)")
    seconds = []
    for _ in range(args.repeats):
        started = time.process_time()
        result = align_hits(codes, lengths, chosen, ks[chosen], table, ("+",), scoring)
        seconds.append(time.process_time() - started)
    per_hit = [s / len(chosen) * 1e6 for s in seconds]
    print("cpu s per repeat: " + " ".join(f"{s:.3f}" for s in seconds))
    print(f"per hit: median {statistics.median(per_hit):.3f} us, min {min(per_hit):.3f} us")
    if args.check:
        digest = hashlib.sha256()
        for column in (result.score, result.read_start, result.read_end, result.pattern_start, result.pattern_end,
                       result.nm, result.matches, result.length):
            digest.update(np.ascontiguousarray(column, np.int64).tobytes())
        digest.update(result.cigars.buffer.tobytes())
        digest.update(result.cigars.offsets.tobytes())
        with open(args.check, "w") as out:
            out.write(f"{len(chosen)} {digest.hexdigest()}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
