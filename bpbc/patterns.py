"""Patterns encoded once per run, in the flat table every engine reads.

An *oriented pattern* is one (pattern, strand): the pattern's IUPAC masks as
given for strand '+', their reverse complement for strand '-'. The table holds
all of them back to back, oriented pattern k in ``masks[starts[k]:starts[k+1]]``,
in (pattern, strand) order, so one engine call covers every pattern and strand
of a chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .alphabet import COMPLEMENT_MASK

@dataclass(eq=False)
class PatternTable:
    """Oriented patterns back to back (see the module docstring)."""

    #: uint8 IUPAC masks of every oriented pattern, concatenated
    masks: np.ndarray
    #: int64 (K + 1,): oriented pattern k spans masks[starts[k]:starts[k + 1]]
    starts: np.ndarray
    #: int64 (K,): the pattern each oriented pattern comes from
    pattern: np.ndarray
    #: int64 (K,): its strand, as an index into the run's strands
    strand: np.ndarray
    #: engines keep their own forms of the table here (a device copy)
    engine_cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, forward_masks, strands: tuple[str, ...] = ("+",)) -> PatternTable:
        """The table of every pattern on every strand in ``strands`` ('+', '-').
        Every reverse complement comes from one lookup over all the patterns
        back to back (reversed, they are each pattern's reverse complement in
        the reverse order), not from a numpy call per pattern."""
        forward = [np.asarray(masks, dtype=np.uint8) for masks in forward_masks]
        count = len(forward)
        if "-" in strands and count:
            every = np.concatenate(forward)
            ends = np.cumsum([len(masks) for masks in forward])
            reverse = COMPLEMENT_MASK[every[::-1]]  # pattern p at [total - ends[p], total - ends[p] + len_p)
            at = len(every) - ends
            complements = [reverse[start:start + len(masks)] for start, masks in zip(at.tolist(), forward)]
        oriented = [forward[p] if sign == "+" else complements[p] for p in range(count) for sign in strands]
        pattern = np.repeat(np.arange(count, dtype=np.int64), len(strands))
        strand = np.tile(np.arange(len(strands), dtype=np.int64), count)
        return cls.of(oriented, pattern, strand)

    @classmethod
    def of(cls, oriented, pattern=None, strand=None) -> PatternTable:
        """A table of already oriented masks (by default pattern k = k, strand 0)."""
        lengths = np.array([len(m) for m in oriented], dtype=np.int64)
        starts = np.zeros(len(oriented) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        masks = np.concatenate([np.asarray(m, np.uint8) for m in oriented]) if oriented else np.zeros(0, np.uint8)
        k = np.arange(len(oriented), dtype=np.int64)
        return cls(masks, starts, k if pattern is None else pattern, np.zeros_like(k) if strand is None else strand)

    def __len__(self) -> int:
        return len(self.starts) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    def oriented(self, k: int) -> np.ndarray:
        return self.masks[self.starts[k]:self.starts[k + 1]]

    def subset(self, ks) -> PatternTable:
        """The oriented patterns ``ks`` (indices into this table), in that order."""
        ks = np.asarray(ks, dtype=np.int64)
        return PatternTable.of([self.oriented(k) for k in ks], self.pattern[ks], self.strand[ks])
