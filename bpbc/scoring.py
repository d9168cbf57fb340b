"""The scoring model: Smith-Waterman local alignment with affine gaps.

A match scores ``+match``, a mismatch ``-mismatch`` and a gap of length k
costs ``gap_open + k * gap_extend`` (the BLASTN convention; parasail's
equivalent is open = gap_open + gap_extend, extend = gap_extend).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass


MAX_SCORE_PARAMETER = 1000  #: keeps every DP value of the traceback's int32 cells in range


@dataclass(frozen=True)
class Scoring:
    match: int = 2
    mismatch: int = 3
    gap_open: int = 5
    gap_extend: int = 2

    def __post_init__(self):
        for field in ("match", "mismatch", "gap_open", "gap_extend"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{field} must be a positive integer, got {value!r}")
            if value > MAX_SCORE_PARAMETER:
                raise ValueError(f"{field} must be at most {MAX_SCORE_PARAMETER}, got {value}")

    @property
    def first_gap(self) -> int:
        """Cost of a gap of length 1 (open plus one extension)."""
        return self.gap_open + self.gap_extend

    def max_score(self, pattern_length: int, read_length: int | None = None) -> int:
        """Best score any alignment of this pattern can reach (a read of any
        length when ``read_length`` is None)."""
        if read_length is None:
            return pattern_length * self.match
        return min(pattern_length, read_length) * self.match


def score_planes(threshold: int) -> int:
    """Number of bit planes the screen keeps for a threshold: its bit length.

    With b planes every score below 2**b is held exactly; a lane whose score
    would reach 2**b raises its overflow flag instead (true score >= 2**b >=
    threshold), see docs/exactness.md.
    """
    return max(1, int(threshold).bit_length())


def check_threshold(threshold: int, reachable: int) -> None:
    """Reject thresholds no instance can meet, or that everything meets."""
    if isinstance(threshold, bool) or not isinstance(threshold, int):
        raise ValueError(f"threshold must be an integer, got {threshold!r}")
    if threshold <= 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    if threshold > reachable:
        raise ValueError(
            f"threshold {threshold} is above the best score any read can reach "
            f"with these patterns and scoring ({reachable})"
        )


@functools.lru_cache(maxsize=64)
def karlin_lambda(scoring: Scoring) -> float | None:
    """Karlin-Altschul's lambda of ungapped alignments of random bases (a
    match 1 in 4): the root of 1/4 e^(l match) + 3/4 e^(-l mismatch) = 1;
    None where a random column scores 0 or more on average."""
    if scoring.match - 3 * scoring.mismatch >= 0:
        return None
    low, high = 1e-9, 50.0 / scoring.match
    for _ in range(200):
        mid = (low + high) / 2
        if 0.25 * math.exp(mid * scoring.match) + 0.75 * math.exp(-mid * scoring.mismatch) < 1:
            low = mid
        else:
            high = mid
    return low


def random_best_score(scoring: Scoring, cells: int) -> float:
    """A score that the best local alignment of unrelated random bases over
    ``cells`` cells seldom reaches: 1.5 (ln(cells) + 4) / lambda
    (:func:`karlin_lambda`, ungapped). The best score of random bases grows
    by ln(cells) / lambda (Karlin-Altschul's extreme-value law), gaps lower
    lambda (the factor 1.5), and its tail falls as exp(-lambda x). Fitted to
    the best of random pairs scored by parasail, 2026-11-30: with the
    default scoring, at most 26 of 4000 150 x 24 bp pairs (the bound 28.8),
    35 of 60 5 x 5 kb (49.7), 36 of 40 20 x 48.5 kb (58.3); with 1, 1, 1, 1
    (cheap gaps: the slope says lambda 0.65, not 1.1), 13 of 4000 150 x 24
    (16.6), 25 of 200 2 x 1 kb (25.3), 31 of 60 5 x 5 kb (28.7), 32 of 20 20
    x 48.5 kb (33.7). A flags-only pass flags at the next power of two, so
    very few random lanes. Where lambda is none, random bases score in
    proportion to their length: no bound (inf). Only a cost depends on it
    (how many lanes a flags-only pass flags), never a result."""
    lam = karlin_lambda(scoring)
    return math.inf if lam is None else 1.5 * (math.log(max(cells, 2)) + 4) / lam


#: Karlin-Altschul's parameters of gapped local alignments of random bases,
#: fitted per scoring (random_best_score must allow for cheap gaps, whose
#: lambda is well below the ungapped one; a fit need not): (lambda, ln K), the
#: mean best score over c cells being (ln(c) + ln K + 0.577) / lambda.
#: The default scoring, from parasail's best of random pairs (2026-11-30):
#: means 11.4, 14.5, 16.7, 21.0, 26.5 and 31.8 over 150 x 24 bp to 20 x
#: 48.5 kb (3600 to 9.7e8 cells), a slope of 1.6 a unit of ln(cells), as the
#: ungapped lambda (0.635) gives: its gaps cost too much to help random bases.
GAPPED_RANDOM = {Scoring(): (0.62, -1.55)}


def random_score_share(scoring: Scoring, cells: int, share: float) -> float | None:
    """The score that about ``share`` of unrelated random instances of
    ``cells`` cells reach (their best follows an extreme-value law: the tail
    beyond the mode falls as exp(-lambda x)), where :data:`GAPPED_RANDOM`
    has the scoring's fit; else None. For the default scoring and 1 %:
    18.1 over 150 x 24 bp (4000 random pairs: 5 reached 20 or more), 31.3
    over windows of 2.5 x 5 kb, 38.3 over 20 x 48.5 kb."""
    fit = GAPPED_RANDOM.get(scoring)
    if fit is None:
        return None
    lam, ln_k = fit
    return (math.log(max(cells, 2)) + ln_k + math.log(1 / share)) / lam


def flag_pass_planes(scoring: Scoring, cells: int, planes: int) -> int:
    """The planes of a flags-only first pass before a screen at ``planes``
    planes, over instances of ``cells`` cells: one short, or fewer where
    random bases seldom reach 2**p (:func:`random_best_score`). It flags
    every lane scoring 2**p or more, so every lane that reaches a threshold
    of ``planes``' bit length: the lanes it does not flag cannot pass."""
    bound = random_best_score(scoring, cells)
    return planes - 1 if math.isinf(bound) else min(planes - 1, int(bound).bit_length())


#: the fewest planes of the CPU engine's flags-only first pass: below, short
#: instances would flag more lanes than the cheaper pass saves
MIN_CPU_FLAG_PLANES = 5
#: more cells than any instance the CPU engine screens whole (windows cut longer reads)
_MOST_CELLS = 1 << 40


def cpu_flag_planes(scoring: Scoring, cells: int, planes: int) -> int:
    """The planes of the CPU engine's flags-only first pass before a screen
    at ``planes`` planes, over instances of up to ``cells`` cells:
    :func:`flag_pass_planes`, but not below :data:`MIN_CPU_FLAG_PLANES`
    (nor above one short). 1-2 kb reads against a 1 kb pattern at T = 300
    (9 planes) flag at 6 planes instead of 8: the screen's stage 1.5x faster
    on 2 cores, 1.25x on a 16-core Xeon (bench/results/cpu_flag_planes_ab_cpu.txt,
    cpu_flag_planes_16core_h200.txt)."""
    return max(min(planes - 1, MIN_CPU_FLAG_PLANES), flag_pass_planes(scoring, cells, planes))


def cpu_flag_plane_counts(scoring: Scoring, planes: int) -> list[int]:
    """Every plane count :func:`cpu_flag_planes` gives at ``planes`` planes, whatever the instances."""
    return list(range(cpu_flag_planes(scoring, 2, planes), cpu_flag_planes(scoring, _MOST_CELLS, planes) + 1))
