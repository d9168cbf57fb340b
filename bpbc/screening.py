"""The library call: screen reads against patterns, align the instances that pass."""

from __future__ import annotations

import functools

import numpy as np

from .engines import numba_threads
from .reads import Reads
from .result import ScreenResult
from .scoring import Scoring
from .screener import ReadBatch, Screener, first_of_runs
from .windows import WindowedBatch

__all__ = ["screen", "ReadBatch", "Reads"]


def screen(
    reads,
    patterns,
    threshold=40,
    match: int = 2,
    mismatch: int = 3,
    gap_open: int = 5,
    gap_extend: int = 2,
    strand: str = "both",
    device: str = "auto",
    exact_scores: bool = False,
    eqx: bool = False,
    threads: int | None = None,
    engine=None,
    ends: int | None = None,
) -> ScreenResult:
    """Screen every read against every pattern (and its reverse complement
    with ``strand='both'``) by Smith-Waterman local alignment with affine
    gaps, and align the (read, pattern, strand) instances scoring at least
    ``threshold`` (one score, or one per pattern).

    ``reads`` is one of:

    * a sequence (or iterable) of str, bytes or records with ``.sequence``
      (and ``.name``, used in messages) such as dnaio's, any mix; a list of
      str (ASCII) or bytes is copied into one buffer on every core, other
      forms on one;
    * a :class:`bpbc.Reads`: sequences already back to back in one buffer,
      ``bpbc.Reads.from_buffer(data, offsets)`` with read i
      ``data[offsets[i]:offsets[i + 1]]`` (bytes or a uint8 array, not
      copied): no Python object per read at all;
    * a :class:`ReadBatch`, encoded and prepared ahead; its engine is then
      the one used.

    Every form gives the same result. Sequences are IUPAC letters in either
    case (N and the other ambiguity codes match nothing), empty reads
    allowed; a byte outside the alphabet raises :class:`bpbc.SequenceError`
    naming the read (its record's name, its name in the :class:`Reads`, else
    ``read<i + 1>``). ``patterns`` are str, bytes, records or a mapping name
    -> sequence. ``device`` is 'auto', 'cpu' or 'gpu'. ``threads`` caps the
    CPU threads of the call: the CPU engine's and those of the numba kernels
    that copy, encode and align (None: all usable cores). ``engine`` reuses
    an engine from :func:`bpbc.engines.select_engine`. ``ends``: screen only
    each read's first and last ``ends`` bases (coordinates stay the read's).
    Long reads are screened as overlapping windows, with the whole reads'
    results (docs/engine.md). To screen many batches against the same
    patterns, build a :class:`bpbc.Screener` once instead.
    """
    scoring = Scoring(match, mismatch, gap_open, gap_extend)
    prepared = isinstance(reads, (ReadBatch, WindowedBatch))
    if engine is None and prepared:
        engine = reads.engine
    screener = Screener(patterns, threshold, scoring, strand, exact_scores, eqx, engine=engine, device=device,
                        threads=threads, ends=ends)
    with numba_threads(threads):  # the kernels that copy, encode and align too
        if not prepared:
            reads = Reads.of(reads)  # once: the dense pass, if asked for, screens the same buffer
        chunk = screener.run(reads)
    return ScreenResult(
        indices=_distinct(chunk.hits.read),
        alignments=chunk.alignments,
        threshold=threshold,
        strands=screener.strands,
        pattern_names=screener.pattern_names,
        # the dense table, when asked for: the reads screened again, every score kept
        dense=functools.partial(_dense_scores, screener, reads, threads),
    )


def _distinct(read: np.ndarray) -> np.ndarray:
    """The distinct values of ``read``, sorted as the hits' reads are, as
    int64: np.unique by hashing and sorting took 0.4 ms for the 8000 hits of
    400k reads, on the calling thread whatever the threads."""
    return read[first_of_runs(read)].astype(np.int64, copy=False)


def _dense_scores(screener: Screener, reads, threads: int | None):
    with numba_threads(threads):
        return screener.scores(reads)
