"""The order an engine lays a batch of reads out in, and back.

Both engines sort a batch by read length before bit-transposing it and
return scores in input order; these helpers are theirs, kept apart from
:mod:`bpbc.engines` (which chooses between the engines) so that neither
engine imports the module that imports it.
"""

from __future__ import annotations

import numpy as np


def length_order(lengths: np.ndarray) -> np.ndarray:
    """The order engines lay a batch out in: by read length, stable, so that
    the reads sharing a word are of similar length."""
    return np.argsort(lengths, kind="stable")


def in_input_order(order: np.ndarray, values: np.ndarray, flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, K) int32 scores and bool flags in input order from (K, n) arrays in
    ``order`` (lane i holds read order[i])."""
    scores = np.empty(values.shape[::-1], dtype=np.int32)
    overflow = np.empty(flags.shape[::-1], dtype=bool)
    scores[order] = values.T
    overflow[order] = flags.T
    return scores, overflow


def first_of_runs(values: np.ndarray) -> np.ndarray:
    """bool: where each run of equal values in ``values`` begins (sorted
    values: where each distinct value first occurs)."""
    first = np.empty(len(values), dtype=bool)
    first[:1] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return first
