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

from .alphabet import reverse_complement_masks

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
        """The table of every pattern on every strand in ``strands`` ('+', '-')."""
        oriented, pattern, strand = [], [], []
        for p, forward in enumerate(forward_masks):
            forward = np.asarray(forward, dtype=np.uint8)
            for s, sign in enumerate(strands):
                oriented.append(forward if sign == "+" else reverse_complement_masks(forward))
                pattern.append(p)
                strand.append(s)
        return cls.of(oriented, np.array(pattern, np.int64), np.array(strand, np.int64))

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
