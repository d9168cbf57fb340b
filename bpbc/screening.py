"""The library call: screen reads against patterns, align the instances that pass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .alphabet import as_bytes, encode_pattern, encode_reads, reverse_complement_masks
from .engines import select_engine
from .result import Alignment, ScreenResult
from .scoring import Scoring, check_threshold, score_planes

STRANDS = {"both": ("+", "-"), "forward": ("+",)}


def _record_name(item, index: int, kind: str) -> str:
    """A record's name (first word of its header), or kind + 1-based index."""
    name = getattr(item, "name", None)
    return name.split(maxsplit=1)[0] if name else f"{kind}{index + 1}"


def _names_and_sequences(items, kind: str) -> tuple[list[str], list[bytes]]:
    """Names and sequences of patterns."""
    if isinstance(items, Mapping):
        return [str(name) for name in items], [as_bytes(seq) for seq in items.values()]
    items = list(items)
    return [_record_name(item, i, kind) for i, item in enumerate(items)], [as_bytes(item) for item in items]


def planes_for(threshold: int, exact_scores: bool, pattern_lengths, max_read_length: int,
               scoring: Scoring) -> int:
    """Bit planes the engines keep: the threshold's bit length, or enough for
    every reachable score when exact scores are asked for."""
    if not exact_scores:
        return score_planes(threshold)
    best = max(scoring.max_score(m, max_read_length) for m in pattern_lengths)
    return max(score_planes(threshold), best.bit_length())


@dataclass(frozen=True)
class ReadBatch:
    """Reads encoded and bit-transposed for one engine: the part of a screen
    that depends on the reads only."""

    codes: np.ndarray
    lengths: np.ndarray
    #: the engine's prepared form (None for no reads)
    prepared: object
    engine: object

    @classmethod
    def from_reads(cls, reads, engine) -> ReadBatch:
        """Encode ``reads`` (as for :func:`screen`) and prepare them for ``engine``."""
        reads = reads if isinstance(reads, list) else list(reads)
        # names are looked up only for an error message: most reads never need one
        codes, lengths = encode_reads(reads, lambda index: _record_name(reads[index], index, "read"))
        prepared = engine.prepare(codes, lengths) if len(lengths) else None
        return cls(codes, lengths, prepared, engine)

    def __len__(self) -> int:
        return len(self.lengths)


def screen(
    reads,
    patterns,
    threshold: int = 40,
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
) -> ScreenResult:
    """Screen every read against every pattern (and its reverse complement
    with ``strand='both'``) by Smith-Waterman local alignment with affine
    gaps, and align the (read, pattern, strand) instances scoring at least
    ``threshold``.

    ``reads`` and ``patterns`` are sequences of str, bytes or records with
    ``.sequence`` (and ``.name``, used in messages) such as dnaio's; patterns
    may also be a mapping name -> sequence. ``reads`` may also be a
    :class:`ReadBatch`, encoded and prepared ahead (the CLI prepares the next
    chunk while this one is screened); its engine is then the one used.
    ``device`` is 'auto', 'cpu' or 'gpu'. ``engine`` reuses an engine from
    :func:`bpbc.engines.select_engine` (the CLI does, to compile and allocate
    once).
    """
    scoring = Scoring(match, mismatch, gap_open, gap_extend)
    if strand not in STRANDS:
        raise ValueError(f"strand must be 'both' or 'forward', got {strand!r}")
    strands = STRANDS[strand]
    pattern_names, pattern_seqs = _names_and_sequences(patterns, "pattern")
    if not pattern_seqs:
        raise ValueError("no patterns given")
    pattern_masks = [encode_pattern(seq, name) for name, seq in zip(pattern_names, pattern_seqs)]
    pattern_lengths = [len(masks) for masks in pattern_masks]
    check_threshold(threshold, scoring.max_score(max(pattern_lengths)))
    if isinstance(reads, ReadBatch):
        if engine is not None and engine is not reads.engine:
            raise ValueError("a ReadBatch is screened by the engine it was prepared for")
        batch = reads
    else:
        batch = ReadBatch.from_reads(reads, engine or select_engine(device, threads))
    codes, lengths = batch.codes, batch.lengths

    n_reads = len(lengths)
    shape = (n_reads, len(pattern_masks), len(strands))
    scores = np.zeros(shape, dtype=np.int32)
    capped = np.zeros(shape, dtype=bool)
    max_read = int(lengths.max()) if n_reads else 0
    planes = planes_for(threshold, exact_scores, pattern_lengths, max_read, scoring)
    alignments: list[Alignment] = []
    if n_reads:
        for p, forward in enumerate(pattern_masks):
            for s, sign in enumerate(strands):
                oriented = forward if sign == "+" else reverse_complement_masks(forward)
                values, overflow = _two_pass_scores(batch, oriented, scoring, planes, exact_scores)
                # an overflowed lane's true score is >= 2**planes: report the cap
                values[overflow] = (1 << planes) - 1
                scores[:, p, s] = values
                capped[:, p, s] = overflow
                rows = np.flatnonzero(values >= threshold)
                if rows.size:
                    found = _align(codes, lengths, rows, forward, p, sign, scoring, eqx,
                                   values, overflow)
                    alignments.extend(found)
    strand_rank = {sign: rank for rank, sign in enumerate(strands)}
    alignments.sort(key=lambda a: (a.read_index, a.pattern_index, strand_rank[a.strand]))
    passed = (scores >= threshold).any(axis=(1, 2))
    return ScreenResult(
        indices=np.flatnonzero(passed).astype(np.int64),
        scores=scores,
        capped=capped,
        alignments=alignments,
        threshold=threshold,
        strands=strands,
        pattern_names=pattern_names,
    )


#: the first pass runs one plane short from this many planes on
MIN_TWO_PASS_PLANES = 4


def _two_pass_scores(batch: ReadBatch, oriented, scoring, planes, exact_scores):
    """Scores with ``planes`` planes, computed in two passes: all instances
    with one plane fewer, then only the lanes that overflowed it again with
    ``planes``.

    Cost is linear in the planes, and with a useful threshold few instances
    score above 2**(planes-1) (most reads do not match), so the second pass is
    small: about 15% less work at 6 planes. The result is the one-pass result
    exactly: below 2**(planes-1) the first pass is exact, and every lane it
    flags is computed again in full.
    """
    engine = batch.engine
    if exact_scores or planes < MIN_TWO_PASS_PLANES:
        return engine.scores(batch.prepared, oriented, scoring, planes)
    values, overflow = engine.scores(batch.prepared, oriented, scoring, planes - 1)
    again = np.flatnonzero(overflow)
    if again.size:
        redo = engine.prepare(batch.codes[again], batch.lengths[again])
        values[again], overflow[again] = engine.scores(redo, oriented, scoring, planes)
    return values, overflow


def _align(codes, lengths, rows, forward_masks, pattern_index, sign, scoring, eqx, values, overflow):
    """Tracebacks of the passing rows, cross-checked against the screen."""
    from .traceback import align_instances

    found = align_instances(codes, lengths, rows, forward_masks, pattern_index, sign, scoring, eqx)
    for alignment in found:
        screen_score = int(values[alignment.read_index])
        exact = not overflow[alignment.read_index]
        if (exact and alignment.score != screen_score) or alignment.score < screen_score:
            raise RuntimeError(
                f"internal error: traceback score {alignment.score} disagrees with screen score "
                f"{screen_score} (read {alignment.read_index}, pattern {pattern_index}, strand {sign})"
            )
    return found
