"""Mapped scratch of the traceback's kernels: counted, given back, within one budget whatever the threads."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit, prange

from bpbc import scratch


@njit(parallel=True, cache=True)
def _fill_all(blocks, size, ledger, budget):
    """Each block: scratch of ``size`` bytes taken, filled with the block's
    number, its last byte kept, given back."""
    out = np.zeros(blocks, np.int64)
    for b in prange(blocks):
        memory = scratch.take(size, ledger, budget)
        memory[:] = b % 251
        out[b] = memory[size - 1]
        scratch.give(memory, ledger)
    return out


def test_mapped_scratch_is_counted_given_back_and_within_the_budget():
    ledger = np.zeros(2, np.int64)
    size = 2 * scratch.MAPPED_FROM
    # more blocks at once (the threads, here more than cores) than the budget holds: they wait their turn
    out = _fill_all(24, size, ledger, 3 * size)
    assert out.tolist() == [b % 251 for b in range(24)]
    assert ledger[0] == 0  # all given back
    assert size <= ledger[1] <= 3 * size


def test_scratch_past_the_budget_goes_on_alone_and_small_scratch_is_not_counted():
    ledger = np.zeros(2, np.int64)
    size = 2 * scratch.MAPPED_FROM
    assert _fill_all(4, size, ledger, size // 2).tolist() == [0, 1, 2, 3]  # each alone: never waits for ever
    assert ledger.tolist() == [0, size]
    ledger[:] = 0
    assert _fill_all(4, 1000, ledger, 1).tolist() == [0, 1, 2, 3]  # numba's arrays, uncounted
    assert ledger.tolist() == [0, 0]


@pytest.mark.parametrize("budget", [1, 1 << 40])
def test_reserve_and_release(budget):
    ledger = np.zeros(2, np.int64)
    scratch.reserve(ledger, 5, budget)  # alone: always
    assert ledger.tolist() == [5, 5]
    scratch.release(ledger, 5)
    assert ledger.tolist() == [0, 5]


def test_the_first_call_under_way_forgets_bytes_left_counted():
    scratch.LEDGER[0] = 12345  # as a kernel stopped between take and give leaves it
    with scratch.counted() as (ledger, budget):
        assert ledger is scratch.LEDGER and ledger[0] == 0 and budget == scratch.BUDGET
        ledger[0] = 7  # held by this call
        with scratch.counted() as (again, _):
            assert again[0] == 7  # a second call at once: the first one's bytes stay counted
    assert scratch.LEDGER[0] == 7
    scratch.LEDGER[0] = 0
