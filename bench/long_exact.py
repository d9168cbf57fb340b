"""Long reads against parasail, at random: ``python -m bench long-exact [--trials N] [--seed S]`` (issue 41).

Each trial draws one scoring of four, one pattern of 100 bp-20 kb
(log-uniform; IUPAC codes at 2 %) and 2-5 reads of 1-100 kb (log-uniform;
N at 0.5 %), three in five of them carrying a piece of the pattern with 2, 6
or 12 % errors on either strand, and a threshold of 2-40 % of a perfect copy's
score; it runs ``bpbc.Screener(device="cpu")`` on them (the windows, the
flags pass, the vector pass and instances alone, as the lengths choose) and
counts the (read, strand) pairs whose reported score differs from parasail's
32-bit striped SW (``tests.oracle.parasail_score``: the same scoring,
bpbc's rule for IUPAC and N), a pair passing on one side only included.
Writes ``long_exact_cpu.csv`` under ``--out``: one row a trial and the
environment header; exit status 1 where any pair differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file: the repository root on the path
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.environment import RESULTS_DIR, environment, write_csv  # noqa: E402
from bench.long_reads import nanopore_copy  # noqa: E402

COMPLEMENT = str.maketrans("ACGTRYKMSWBDHVN", "TGCAYRMKSWVHDBN")
IUPAC_BASES = {"R": "AG", "Y": "CT", "K": "GT", "M": "AC", "S": "CG", "W": "AT", "B": "CGT", "D": "AGT",
               "H": "ACT", "V": "ACG", "N": "ACGT"}


def scorings():
    from bpbc.scoring import Scoring

    return [Scoring(), Scoring(1, 1, 1, 1), Scoring(3, 2, 4, 1), Scoring(5, 4, 10, 1)]


def log_uniform(rng, low: int, high: int) -> int:
    return int(np.exp(rng.uniform(np.log(low), np.log(high))))


def random_text(rng, length: int, letters: str, other: str = "", other_rate: float = 0.0) -> str:
    """``length`` letters of ``letters``, each one of ``other`` instead at ``other_rate``."""
    text = np.array(list(letters))[rng.integers(0, len(letters), length)]
    if other:
        swapped = rng.random(length) < other_rate
        text[swapped] = np.array(list(other))[rng.integers(0, len(other), int(swapped.sum()))]
    return "".join(text)


def trial_inputs(rng, scoring, longest_read: int) -> tuple[str, list[str], int]:
    """(pattern, reads, threshold) of one trial."""
    m = log_uniform(rng, 100, 20_000)
    pattern = random_text(rng, m, "ACGT", "RYKMSWBDHVN", 0.02)
    reads = []
    for _ in range(int(rng.integers(2, 6))):
        read = random_text(rng, log_uniform(rng, min(1000, longest_read), longest_read), "ACGT", "N", 0.005)
        if rng.random() < 0.6:
            start = int(rng.integers(0, m))
            end = int(rng.integers(start + 1, m + 1))
            piece = "".join(str(rng.choice(list(IUPAC_BASES.get(c, c)))) for c in pattern[start:end])
            piece = nanopore_copy(rng, np.frombuffer(piece.encode(), np.uint8),
                                  float(rng.choice([0.02, 0.06, 0.12]))).tobytes().decode()
            if rng.random() < 0.5:
                piece = piece.translate(COMPLEMENT)[::-1]
            at = int(rng.integers(0, len(read) + 1))
            read = read[:at] + piece + read[at:]
        reads.append(read)
    threshold = max(1, int(scoring.match * m * float(rng.choice([0.02, 0.05, 0.1, 0.2, 0.4]))))
    return pattern, reads, threshold


def parasail_passing(pattern: str, reads: list[str], threshold: int, scoring) -> dict[tuple[int, str], int]:
    """(read, strand) -> parasail's 32-bit score (tests.oracle.parasail_score), where it reaches the threshold."""
    from tests.oracle import parasail_score, pattern_sets, read_codes, reverse_complement_sets

    sets = pattern_sets(pattern)
    found = {}
    for i, read in enumerate(reads):
        codes = read_codes(read)
        for strand, oriented in (("+", sets), ("-", reverse_complement_sets(sets))):
            score = parasail_score(codes, oriented, scoring)
            if score >= threshold:
                found[(i, strand)] = score
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench long-exact", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=150)
    parser.add_argument("--seed", type=int, default=4042)
    parser.add_argument("--longest-read", type=int, default=100_000, help="reads of 1 kb up to this (default 100 kb)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    import bpbc

    rng = np.random.default_rng(args.seed)
    rows, wrong = [], 0
    for trial in range(args.trials):
        scoring = scorings()[trial % 4]
        pattern, reads, threshold = trial_inputs(rng, scoring, args.longest_read)
        started = time.perf_counter()
        result = bpbc.Screener([pattern], threshold, scoring, device="cpu", threads=args.threads).run(reads)
        seconds = time.perf_counter() - started
        got = {(int(read), alignment.strand): int(alignment.score)
               for read, alignment in zip(result.hits.read.tolist(), result.alignments.to_list())}
        expected = parasail_passing(pattern, reads, threshold, scoring)
        differ = len({key for key, _ in set(got.items()) ^ set(expected.items())})
        wrong += differ
        rows.append({"trial": trial, "scoring": "/".join(map(str, (scoring.match, scoring.mismatch, scoring.gap_open,
                                                                   scoring.gap_extend))),
                     "pattern_length": len(pattern), "read_lengths": " ".join(str(len(r)) for r in reads),
                     "threshold": threshold, "hits": len(expected), "wrong": differ, "bpbc_s": round(seconds, 3)})
        print(f"trial {trial}: pattern {len(pattern)}, reads {[len(r) for r in reads]}, T {threshold}: "
              f"{len(expected)} hits, {differ} wrong", file=sys.stderr, flush=True)
    path = write_csv(args.out / "long_exact_cpu.csv", rows, environment(None))
    print(f"{args.trials} trials, {sum(row['hits'] for row in rows)} hits, {wrong} (read, strand) pairs wrong; "
          f"wrote {path}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
