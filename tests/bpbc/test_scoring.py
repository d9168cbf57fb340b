"""The scoring model's estimates: how few planes a flags-only first pass may take."""

from __future__ import annotations

import numpy as np
import pytest

from bpbc.scoring import (MIN_CPU_FLAG_PLANES, Scoring, cpu_flag_plane_counts, cpu_flag_planes, flag_pass_planes,
                          karlin_lambda, random_best_score, random_score_share)
from tests.bpbc.conftest import parasail_sw, random_read

#: the default, and a match 1 in 4 worth as much as a mismatch costs (lambda ln 3)
SCORINGS = [Scoring(), Scoring(1, 1, 1, 1)]


def test_lambda_solves_its_equation():
    lam = karlin_lambda(Scoring(1, 1, 1, 1))
    assert lam == pytest.approx(np.log(3))  # 1/4 e^l + 3/4 e^-l = 1
    assert karlin_lambda(Scoring(3, 1, 5, 2)) is None


@pytest.mark.parametrize("scoring", SCORINGS, ids=lambda s: f"{s.match}-{s.mismatch}-{s.gap_open}-{s.gap_extend}")
def test_random_bases_stay_below_the_flag_pass(scoring):
    """The best local scores of unrelated random bases stay below 2**p (the
    flags-only pass flags none of them), the estimate within 4 times what
    they reach, at short and long sizes."""
    rng = np.random.default_rng(7)
    for read_length, pattern_length in ((150, 24), (2000, 1000), (5000, 3000)):
        flag = flag_pass_planes(scoring, read_length * pattern_length, 20)
        best = max(parasail_sw(random_read(rng, read_length), random_read(rng, pattern_length), scoring)
                   for _ in range(8))
        bound = random_best_score(scoring, read_length * pattern_length)
        assert best < bound < 1 << flag
        assert bound < 4 * best


def test_no_bound_where_random_bases_score_by_their_length():
    """3, 1: a random column scores 0 on average, and 8 random pairs of 2 kb
    x 1 kb reach 600 and more: the flags-only pass stays one plane short."""
    scoring = Scoring(3, 1, 5, 2)
    rng = np.random.default_rng(7)
    assert max(parasail_sw(random_read(rng, 2000), random_read(rng, 1000), scoring) for _ in range(8)) > 600
    assert random_best_score(scoring, 2000 * 1000) == np.inf
    assert flag_pass_planes(scoring, 2000 * 1000, 12) == 11


def test_flag_pass_is_below_the_screen():
    """Always at least one plane short of the screen's (a lane the pass does
    not flag scores below every threshold of that bit length), fewer on long
    instances: 6 for 20 kb reads against the 48.5 kb lambda genome at 11."""
    for planes in range(2, 16):
        for cells in (1, 100, 150 * 24, 10**6, 10**12):
            assert flag_pass_planes(Scoring(), cells, planes) <= planes - 1
    assert flag_pass_planes(Scoring(), 150 * 24, 6) == 5
    assert flag_pass_planes(Scoring(), 20_000 * 48_502, 11) == 6


@pytest.mark.parametrize("scoring", [*SCORINGS, Scoring(3, 1, 5, 2)], ids=lambda s: f"{s.match}-{s.mismatch}")
def test_the_cpu_flag_pass_takes_a_plane_count_prepare_compiles(scoring):
    """The CPU engine's flags-only pass: one plane short on short instances
    (never below MIN_CPU_FLAG_PLANES where one short is more), fewer on long
    ones, and always one of the counts bpbc.prepare compiles kernels for."""
    for planes in range(4, 17):
        counts = cpu_flag_plane_counts(scoring, planes)
        for cells in (2, 99, 150 * 24, 150 * 128, 2000 * 1000, 10**9, 10**12):
            flags = cpu_flag_planes(scoring, cells, planes)
            assert min(planes - 1, MIN_CPU_FLAG_PLANES) <= flags <= planes - 1
            assert flags >= flag_pass_planes(scoring, cells, planes)
            assert flags in counts
    assert cpu_flag_planes(Scoring(), 150 * 24, 6) == 5  # the default run: as before
    assert cpu_flag_planes(Scoring(), 2000 * 1000, 9) == 6  # 1-2 kb reads against 1 kb, T = 300
    assert cpu_flag_plane_counts(Scoring(), 11) == [5, 6, 7]


def test_random_pairs_reach_the_fitted_share_score_about_that_often():
    """random_score_share, for the default scoring (the one fitted): of 4000
    random pairs of 150 x 24 bp and 300 of 2 kb x 1 kb, at most 3 % reach
    its 1 % score (the tail is lighter than the law's: none of the long
    pairs), at most 0.5 % its 0.1 % one, and most reach half its 1 %
    score; no fit, no figure."""
    rng = np.random.default_rng(11)
    for read_length, pattern_length, pairs in ((150, 24, 4000), (2000, 1000, 300)):
        best = np.array([parasail_sw(random_read(rng, read_length), random_read(rng, pattern_length), Scoring())
                         for _ in range(pairs)])
        cells = read_length * pattern_length
        assert (best >= random_score_share(Scoring(), cells, 0.01)).mean() <= 0.03
        assert (best >= random_score_share(Scoring(), cells, 0.001)).mean() <= 0.005
        assert (best >= random_score_share(Scoring(), cells, 0.01) / 2).mean() > 0.5
    assert random_score_share(Scoring(1, 1, 1, 1), 10**6, 0.01) is None
