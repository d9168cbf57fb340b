"""The reference SW score against parasail."""

from __future__ import annotations

import numpy as np
import parasail
import pytest
from hypothesis import given, settings

from bpbc.alphabet import encode_pattern, encode_reads
from bpbc.reference import sw_matrices, sw_score, sw_score_codes
from bpbc.scoring import Scoring
from tests.bpbc.conftest import (
    EDGE_LENGTHS,
    SCORINGS,
    parasail_sw,
    parasail_sw_codes,
    pattern_texts,
    random_pattern,
    random_read,
    read_texts,
    related_pair,
    reverse_complement_masks,
    scoring_id,
    scorings,
)


def _length(rng, high):
    """A length from the edge list half the time, else uniform in [0, high]."""
    if rng.random() < 0.5:
        return int(rng.choice([x for x in EDGE_LENGTHS if x <= high]))
    return int(rng.integers(0, high + 1))


def _report(failures):
    return f"{len(failures)} disagreements, first: {failures[:5]}"


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_plain_acgt_matches_parasail_acgt_matrix(scoring):
    """ACGT only (any case): parasail with its own ACGT matrix, both its
    scalar and striped functions."""
    rng = np.random.default_rng(1000 + scoring.match * 7 + scoring.gap_open)
    matrix = parasail.matrix_create("ACGT", scoring.match, -scoring.mismatch)
    open_, extend = scoring.gap_open + scoring.gap_extend, scoring.gap_extend
    failures = []
    for k in range(300):
        if k % 3 == 0:
            read, pattern = related_pair(rng, _length(rng, 90), max(1, _length(rng, 70)), rate=0.15)
        else:
            read = random_read(rng, _length(rng, 70), lower_rate=0.2)
            pattern = random_pattern(rng, max(1, _length(rng, 70)), lower_rate=0.2)
        ours = sw_score(read, pattern, scoring)
        if read and pattern:
            scalar = parasail.sw(pattern, read, open_, extend, matrix).score
            striped = parasail.sw_striped_16(pattern, read, open_, extend, matrix).score
        else:
            scalar = striped = 0
        if not ours == scalar == striped:
            failures.append((read, pattern, ours, scalar, striped))
    assert not failures, _report(failures)


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_n_and_iupac_match_parasail(scoring):
    """Reads with N and lowercase, IUPAC patterns: parasail with a matrix that
    encodes the asymmetric bpbc rule."""
    rng = np.random.default_rng(2000 + scoring.mismatch * 11 + scoring.gap_extend)
    failures = []
    for k in range(350):
        if k % 3 == 0:
            read, pattern = related_pair(rng, _length(rng, 90), max(1, _length(rng, 70)), rate=0.15,
                                         iupac_rate=0.2, n_rate=0.05)
        else:
            read = random_read(rng, _length(rng, 70), n_rate=0.15, lower_rate=0.2)
            pattern = random_pattern(rng, max(1, _length(rng, 70)), iupac_rate=0.3, lower_rate=0.2)
        ours = sw_score(read, pattern, scoring)
        theirs = parasail_sw(read, pattern, scoring)
        if ours != theirs:
            failures.append((read, pattern, ours, theirs))
    assert not failures, _report(failures)


def test_long_pairs_match_parasail():
    """Lengths up to 300, patterns longer than reads, both strands of the
    pattern."""
    rng = np.random.default_rng(3)
    failures = []
    for k in range(60):
        scoring = SCORINGS[k % len(SCORINGS)]
        read_length = int(rng.integers(150, 301)) if k % 2 else int(rng.integers(1, 120))
        pattern_length = int(rng.integers(read_length, 301)) if k % 4 == 1 else int(rng.integers(20, 200))
        read, pattern = related_pair(rng, read_length, pattern_length, rate=0.12, iupac_rate=0.05, n_rate=0.01)
        codes, lengths = encode_reads([read])
        masks = encode_pattern(pattern)
        for oriented in (masks, reverse_complement_masks(masks)):
            ours = sw_score_codes(codes[0, : lengths[0]], oriented, scoring)
            theirs = parasail_sw_codes(codes[0, : lengths[0]], oriented, scoring)
            if ours != theirs:
                failures.append((read, pattern, ours, theirs))
    assert not failures, _report(failures)


def test_all_n_and_empty_score_zero():
    for scoring in SCORINGS:
        assert sw_score("N" * 40, "ACGTNRY", scoring) == 0
        assert sw_score("nnnn", "NNNN", scoring) == 0  # a read N matches nothing, even pattern N
        assert parasail_sw("N" * 40, "ACGTNRY", scoring) == 0
        assert sw_score("", "ACGT", scoring) == 0
        assert sw_score("ACGT", "", scoring) == 0
        assert sw_score("ACGT", "N", scoring) == scoring.match  # pattern N matches any base
        assert sw_score("ACGT", "acgt", scoring) == 4 * scoring.match


def test_hand_computed_scores():
    s = Scoring()  # match 2, mismatch 3, gap 5 + 2k
    assert sw_score("ACGT", "ACGT", s) == 8
    assert sw_score("GATTACACCGATTACA", "GATTACAGATTACA", s) == 28 - (5 + 2 * 2)  # 2-base insertion
    assert sw_score("GATTACAGATTACA", "GATTACACCGATTACA", s) == 28 - 9  # 2-base deletion
    assert sw_score("ACGAACGT", "ACGTACGT", s) == 14 - 3  # one mismatch
    assert sw_score("ACGT", "RYSW", s) == 2 * 4  # A in R, C in Y, G in S, T in W
    assert sw_score("AAAA", "BBBB", s) == 0  # B is "not A"
    assert sw_score("ACGT", "YRWS", s) == 6  # CGT against YRW
    assert sw_score("AAUU", "AATT", s) == 8  # U is T


@pytest.mark.parametrize("scoring", [SCORINGS[0], SCORINGS[3]], ids=scoring_id)
def test_matrices_agree_with_two_row_score(scoring):
    rng = np.random.default_rng(4)
    for _ in range(60):
        read, pattern = related_pair(rng, int(rng.integers(0, 60)), int(rng.integers(1, 50)),
                                     iupac_rate=0.1, n_rate=0.05)
        codes, lengths = encode_reads([read])
        masks = encode_pattern(pattern)
        H, E, F = sw_matrices(codes[0, : lengths[0]], masks, scoring)
        assert len(H) == len(read) + 1 and len(H[0]) == len(pattern) + 1
        assert max(map(max, H)) == sw_score(read, pattern, scoring)


@settings(max_examples=300, deadline=None)
@given(read=read_texts(max_size=70), pattern=pattern_texts(max_size=50), scoring=scorings())
def test_hypothesis_matches_parasail(read, pattern, scoring):
    assert sw_score(read, pattern, scoring) == parasail_sw(read, pattern, scoring)
