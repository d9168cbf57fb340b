"""What a screen returns: per-instance scores and the alignments that pass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np


@dataclass(frozen=True, slots=True)
class Alignment:
    """One passing (read, pattern, strand) instance, aligned by Gotoh traceback.

    Coordinates are 0-based, end-exclusive, on the original (forward) strands
    of the read and of the pattern. ``cigar`` uses M/I/D (or =/X/I/D when
    asked for) with I = bases only in the read, D = bases only in the pattern;
    it reads along the pattern's forward strand, as in PAF and SAM, so for
    strand '-' it runs from the read's end to its start.
    """

    read_index: int
    pattern_index: int
    strand: str
    score: int
    read_start: int
    read_end: int
    pattern_start: int
    pattern_end: int
    cigar: str
    nm: int
    matches: int
    length: int


class ScreenResult:
    """Result of :func:`bpbc.screen`.

    ``indices``: the reads that pass (sorted); ``alignments``: one per
    (read, pattern, strand) instance whose score reaches the threshold, with
    its exact score. ``scores[r, p, s]`` is the screen score of read r against
    pattern p on strand ``strands[s]``. Where ``capped[r, p, s]`` is False it
    is the exact Smith-Waterman score; where it is True the exact score is at
    least the value given (and at least the threshold).

    The screen itself computes only what the passing instances need; the
    dense ``scores`` and ``capped`` are computed on first access (one more
    pass over the reads), the ``alignments`` list is built on first access.
    """

    __slots__ = ("indices", "threshold", "strands", "pattern_names", "_table", "_alignments", "_dense", "_scores",
                 "_capped")

    def __init__(self, indices: np.ndarray, alignments: AlignmentTable, threshold: int | list[int],
                 strands: tuple[str, ...], pattern_names: list[str],
                 dense: Callable[[], tuple[np.ndarray, np.ndarray]]):
        self.indices = indices
        self.threshold = threshold
        self.strands = strands
        self.pattern_names = pattern_names
        self._table = alignments
        self._alignments: list[Alignment] | None = None
        self._dense: Callable[[], tuple[np.ndarray, np.ndarray]] | None = dense
        self._scores: np.ndarray | None = None
        self._capped: np.ndarray | None = None

    @property
    def alignments(self) -> list[Alignment]:
        if self._alignments is None:
            self._alignments = self._table.to_list()
        return self._alignments

    def _compute_dense(self) -> None:
        if self._dense is not None:
            self._scores, self._capped = self._dense()
            self._dense = None  # the reads it holds are no longer needed

    @property
    def scores(self) -> np.ndarray:
        """(n_reads, n_patterns, n_strands) int32."""
        self._compute_dense()
        assert self._scores is not None
        return self._scores

    @property
    def capped(self) -> np.ndarray:
        """(n_reads, n_patterns, n_strands) bool: where the score is a lower bound."""
        self._compute_dense()
        assert self._capped is not None
        return self._capped

    def __repr__(self) -> str:
        return (f"ScreenResult({len(self.indices)} passing reads, {len(self._table)} alignments, "
                f"threshold={self.threshold!r}, strands={self.strands!r})")


@dataclass(frozen=True)
class Texts:
    """Many ASCII strings in one buffer: string i is buffer[offsets[i]:offsets[i + 1]]."""

    buffer: np.ndarray  #: uint8
    offsets: np.ndarray  #: int64, one more than strings

    @classmethod
    def of(cls, strings) -> Texts:
        encoded = [text.encode("ascii") for text in strings]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(item) for item in encoded], out=offsets[1:])
        return cls(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def strings(self) -> list[str]:
        text = self.buffer.tobytes().decode("ascii")
        bounds = self.offsets.tolist()
        return [text[start:stop] for start, stop in zip(bounds, bounds[1:])]


@dataclass(frozen=True)
class AlignmentTable:
    """Alignments of many instances as columns (one entry per instance, the
    fields of :class:`Alignment`); ``strand`` indexes ``strands``. The
    pipeline formats PAF straight from the columns."""

    read_index: np.ndarray
    pattern_index: np.ndarray
    strand: np.ndarray
    score: np.ndarray
    read_start: np.ndarray
    read_end: np.ndarray
    pattern_start: np.ndarray
    pattern_end: np.ndarray
    nm: np.ndarray
    matches: np.ndarray
    length: np.ndarray
    cigars: Texts
    strands: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.cigars)

    def to_list(self) -> list[Alignment]:
        """One :class:`Alignment` per instance."""
        columns = {name: getattr(self, name).tolist() for name in _NUMBER_COLUMNS}
        columns["strand"] = [self.strands[s] for s in columns["strand"]]
        columns["cigar"] = self.cigars.strings()
        return [Alignment(*values) for values in zip(*(columns[f.name] for f in fields(Alignment)))]


_NUMBER_COLUMNS = ("read_index", "pattern_index", "strand", "score", "read_start", "read_end", "pattern_start",
                   "pattern_end", "nm", "matches", "length")
