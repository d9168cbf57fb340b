"""Reference Smith-Waterman score: the plain, obviously correct oracle.

Pure Python, no numba, no vectorisation: every fast engine is tested against
this module, and this module is tested against parasail.

Gotoh recurrences over a read of length n (rows i = 0..n) and a pattern of
length m (columns j = 0..m), for i, j >= 1::

    E[i][j] = max(E[i-1][j] - extend, H[i-1][j] - (open + extend))   # I: read base vs gap
    F[i][j] = max(F[i][j-1] - extend, H[i][j-1] - (open + extend))   # D: pattern base vs gap
    H[i][j] = max(0, H[i-1][j-1] + s(read[i-1], pattern[j-1]), E[i][j], F[i][j])

with H = 0 and E = F = -infinity on row 0 and column 0. ``s`` is +match when
the read code (0..3) is in the pattern position's IUPAC set and -mismatch
otherwise; a read N (code INVALID) never matches. The score is max H.
"""

from __future__ import annotations

import math

import numpy as np

from bpbc.alphabet import encode_pattern, encode_reads, matches
from bpbc.scoring import Scoring

NEG_INF = -math.inf  #: E and F where no gap can end (row 0, column 0)


def sw_matrices(read_codes, pattern_masks, scoring: Scoring = Scoring()):
    """The three Gotoh matrices ``(H, E, F)`` as lists of rows, each of shape
    ``(len(read_codes) + 1) x (len(pattern_masks) + 1)``, indexed ``[i][j]``
    with i over the read and j over the pattern (see the module docstring)."""
    read = [int(c) for c in read_codes]
    pattern = [int(p) for p in pattern_masks]
    n, m = len(read), len(pattern)
    open_cost = scoring.gap_open + scoring.gap_extend
    extend_cost = scoring.gap_extend

    # float cells: E and F hold NEG_INF where no gap can end
    H: list[list[float]] = [[0] * (m + 1) for _ in range(n + 1)]
    E: list[list[float]] = [[NEG_INF] * (m + 1) for _ in range(n + 1)]
    F: list[list[float]] = [[NEG_INF] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if matches(read[i - 1], pattern[j - 1]):
                s = scoring.match
            else:
                s = -scoring.mismatch
            E[i][j] = max(E[i - 1][j] - extend_cost, H[i - 1][j] - open_cost)
            F[i][j] = max(F[i][j - 1] - extend_cost, H[i][j - 1] - open_cost)
            H[i][j] = max(0, H[i - 1][j - 1] + s, E[i][j], F[i][j])
    return H, E, F


def sw_score_codes(read_codes, pattern_masks, scoring: Scoring = Scoring()) -> int:
    """Best local alignment score of an encoded read (codes 0..3, INVALID)
    against encoded pattern masks (already oriented for the strand).

    Same recurrences as :func:`sw_matrices`, kept to two rows so that long
    inputs stay cheap in memory.
    """
    read = [int(c) for c in read_codes]
    pattern = [int(p) for p in pattern_masks]
    m = len(pattern)
    open_cost = scoring.gap_open + scoring.gap_extend
    extend_cost = scoring.gap_extend

    # substitution score of each read code against each pattern position
    profile = [
        [scoring.match if matches(code, mask) else -scoring.mismatch for mask in pattern]
        for code in range(5)
    ]
    best = 0
    H_up: list[float] = [0] * (m + 1)  # row i-1
    E_up: list[float] = [NEG_INF] * (m + 1)
    for read_code in read:
        scores = profile[read_code]
        H_row: list[float] = [0] * (m + 1)
        E_row: list[float] = [NEG_INF] * (m + 1)
        f = NEG_INF  # F[i][j-1]
        for j in range(1, m + 1):
            s = scores[j - 1]
            e = max(E_up[j] - extend_cost, H_up[j] - open_cost)
            f = max(f - extend_cost, H_row[j - 1] - open_cost)
            h = max(0, H_up[j - 1] + s, e, f)
            E_row[j] = e
            H_row[j] = h
            if h > best:
                best = int(h)
        H_up, E_up = H_row, E_row
    return best


def sw_score(read, pattern, scoring: Scoring = Scoring()) -> int:
    """Best local alignment score of a read against a pattern, both given as
    text (str or bytes, IUPAC, any case). The pattern is used as given
    (forward strand); an empty read or pattern scores 0."""
    read_codes, lengths = encode_reads([read])
    read_codes = read_codes[0, : int(lengths[0])]
    pattern_masks = encode_pattern(pattern) if len(pattern) else np.zeros(0, np.uint8)
    return sw_score_codes(read_codes, pattern_masks, scoring)
