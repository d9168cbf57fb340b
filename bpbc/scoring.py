"""The scoring model: Smith-Waterman local alignment with affine gaps.

A match scores ``+match``, a mismatch ``-mismatch`` and a gap of length k
costs ``gap_open + k * gap_extend`` (the BLASTN convention; parasail's
equivalent is open = gap_open + gap_extend, extend = gap_extend).
"""

from __future__ import annotations

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
