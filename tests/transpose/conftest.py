"""Shared test data for the transposes."""

from __future__ import annotations

import numpy as np

INVALID = 4

#: a code table as bpbc's: ACGT (either case) are bases, N is a base that matches nothing, the rest is not allowed
CODE_TABLE = np.full(256, 255, np.uint8)
for _code, _bases in enumerate(("Aa", "Cc", "Gg", "Tt", "Nn")):
    for _base in _bases:
        CODE_TABLE[ord(_base)] = _code


def random_byte_reads(rng, n, longest):
    """(buffer, starts, lengths, codes): n reads of 0..longest bases from
    'ACGTNacgtn', at scattered places in a buffer of other bytes."""
    lengths = rng.integers(0, longest + 1, size=n)
    gaps = rng.integers(0, 9, size=n)
    starts = np.cumsum(gaps + np.concatenate([[0], lengths[:-1]]))
    buffer = np.frombuffer(rng.bytes(int(starts[-1] + lengths[-1]) + 5 if n else 5), np.uint8).copy()
    codes = np.full((n, int(lengths.max()) if n else 0), INVALID, np.uint8)
    letters = np.frombuffer(b"ACGTNacgtn", np.uint8)
    for i in range(n):
        read = letters[rng.integers(0, len(letters), size=lengths[i])]
        buffer[starts[i]:starts[i] + lengths[i]] = read
        codes[i, :lengths[i]] = CODE_TABLE[read]
    return buffer, starts, lengths, codes
