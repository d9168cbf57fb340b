"""The Screener: a screen's fixed part, set up once per run, then applied to chunk after chunk of reads.

It validates the settings, encodes and orients every pattern once (a
:class:`~bpbc.patterns.PatternTable`), picks each pattern's plane count, owns
the two-pass screen and the cap, and hands the oriented patterns to the
traceback. Per chunk, one engine call covers every pattern and strand, and
only the instances that pass come back (:class:`Hits`) unless the caller asks
for the dense score table.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar, cast

import numpy as np
from numba import njit

from .alphabet import as_bytes, encode_patterns, record_name
from .engines import EndCellEngine, TwoPassEngine, select_engine, set_up_process
from .errors import InternalError
from .order import first_of_runs
from .patterns import PatternTable
from .settings import strands_of
from .reads import Reads
from .result import AlignmentTable
from .scoring import Scoring, check_threshold, cpu_flag_planes, score_planes
from .windows import Oriented, WindowedBatch, WindowPlan, fit_check, read_hits, vector_hits, vector_scores
from .windows import align as align_windows
from .windows import prepare as prepare_windows

#: the first pass runs one plane short from this many planes on
MIN_TWO_PASS_PLANES = 4

T = TypeVar("T")


def _names_and_sequences(items, kind: str) -> tuple[list[str], list[bytes]]:
    """Names and sequences of patterns given as records, strings or a mapping."""
    if isinstance(items, Mapping):
        return [str(name) for name in items], [as_bytes(seq) for seq in items.values()]
    items = list(items)
    return [record_name(item, i, kind) for i, item in enumerate(items)], [as_bytes(item) for item in items]


def _rows_and_local(reads: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(reads, return_inverse=True) for read indices below ``n``,
    without sorting: the reads that occur, in order, and each entry's index
    among them. Reads in order already (the hits, the flagged instances)
    take time in their number, not in ``n`` (a serial pass over 400k reads
    for a few thousand hits)."""
    if len(reads) == 0 or (reads[1:] >= reads[:-1]).all():
        first = first_of_runs(reads)
        return reads[first], np.cumsum(first, dtype=np.int64) - 1
    present = np.zeros(n, dtype=bool)
    present[reads] = True
    rank = np.cumsum(present, dtype=np.int64) - 1
    return np.flatnonzero(present), rank[reads]


@njit(cache=True, nogil=True)
def _sorted_pairs(read, k) -> bool:
    """Whether (read, k) pairs are in strictly increasing order."""
    for i in range(1, len(read)):
        if read[i] < read[i - 1] or (read[i] == read[i - 1] and k[i] <= k[i - 1]):
            return False
    return True


@njit(cache=True, nogil=True)
def _passing(reads, local, values, overflow, thresholds, ks, planes):
    """The instances of one plane group that pass, in the engine's order:
    (read, oriented pattern ks[local], score, capped, exact) where the score
    reaches thresholds[local] or overflowed. ``planes``: the screen's planes
    for the thresholds; a score of 2**planes or more is reported as the cap,
    capped, as a screen at those planes would (its true score is >= 2**planes),
    whatever the planes the engine ran with. ``exact``: the engine's score
    where it did not overflow, else -1. One call with the GIL released, in
    the thread that drives the engine, where a dozen numpy calls each waited
    to take it back."""
    count = 0
    for i in range(len(reads)):
        if overflow[i] or values[i] >= thresholds[local[i]]:
            count += 1
    read = np.empty(count, np.int64)
    k = np.empty(count, np.int64)
    score = np.empty(count, np.int32)
    capped = np.empty(count, np.bool_)
    exact = np.empty(count, np.int32)
    cap = (1 << planes) - 1
    h = 0
    for i in range(len(reads)):
        if overflow[i] or values[i] >= thresholds[local[i]]:
            read[h] = reads[i]
            k[h] = ks[local[i]]
            capped[h] = overflow[i] or values[i] > cap
            score[h] = cap if capped[h] else values[i]
            exact[h] = -1 if overflow[i] else values[i]
            h += 1
    return read, k, score, capped, exact


class ReadBatch:
    """Reads encoded and bit-transposed for one engine: the part of a screen
    that depends on the reads only.

    Made from codes (:meth:`from_codes`), or from a chunk of raw FASTQ
    (:meth:`from_chunk`): an engine that encodes on its own (the GPU's
    ``prepare_bytes``) then gets the sequence bytes as they were read, and the
    host encodes only the reads it needs later (the hits, for the traceback).
    """

    def __init__(self, codes: np.ndarray | None, lengths: np.ndarray, prepared, engine, chunk=None):
        self._codes = codes
        self.lengths = lengths
        #: the engine's prepared form (None for no reads, or when it ran out of memory)
        self.prepared = prepared
        self.engine = engine
        self._chunk = chunk  # where codes come from when not given
        #: (sorted rows, their codes and lengths) last encoded from the chunk: the
        #: traceback's reads (the hits) are among the second pass's (the flagged)
        self._coded: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @classmethod
    def from_reads(cls, reads, engine) -> ReadBatch:
        """Encode ``reads`` (a :class:`~bpbc.reads.Reads`, or str, bytes or
        records with ``.sequence``) and prepare them for ``engine``."""
        reads = Reads.of(reads)
        if getattr(engine, "prepare_bytes", None) is not None and len(reads):
            # the engine encodes the buffer as it packs it
            return cls.from_chunk(reads, engine)
        codes, lengths = reads.encode()
        return cls.from_codes(codes, lengths, engine)

    @classmethod
    def from_codes(cls, codes: np.ndarray, lengths: np.ndarray, engine) -> ReadBatch:
        """The batch prepared for ``engine``; when that runs out of memory,
        unprepared (the Screener then screens it in parts)."""
        try:
            prepared = engine.prepare(codes, lengths) if len(lengths) else None
        except engine.out_of_memory:
            engine.release_memory()
            prepared = None
        return cls(codes, lengths, prepared, engine)

    @classmethod
    def from_chunk(cls, chunk, engine) -> ReadBatch:
        """The reads of a chunk (:mod:`bpbc.chunks`) prepared for ``engine``;
        a read outside the alphabet raises SequenceError."""
        prepare_bytes = getattr(engine, "prepare_bytes", None)
        if prepare_bytes is None or not hasattr(chunk, "seq_start") or not len(chunk):
            codes, lengths = chunk.encode()
            return cls.from_codes(codes, lengths, engine)
        lengths = np.asarray(chunk.lengths, np.int64)
        try:
            prepared = prepare_bytes(chunk.data, chunk.seq_start, lengths)
        except engine.out_of_memory:
            engine.release_memory()
            return cls(None, lengths, None, engine, chunk)  # screened in parts
        if prepared is None:  # a byte outside the alphabet: the host finds it and names the read
            chunk.encode()
            raise InternalError("the engine found a byte outside the alphabet that the host encoder accepts")
        return cls(None, lengths, prepared, engine, chunk)

    @property
    def codes(self) -> np.ndarray:
        """(n, longest) uint8 codes, as :func:`bpbc.alphabet.encode_reads` gives them."""
        if self._codes is None:
            self._codes, _ = self._chunk.encode()
        return self._codes

    def codes_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(codes, lengths) of the reads ``rows`` only, as
        :func:`bpbc.alphabet.encode_reads` gives them."""
        if self._codes is not None:
            return self._codes[rows], self.lengths[rows]
        if self._coded is not None:
            known, known_codes, known_lengths = self._coded
            at = np.searchsorted(known, rows)
            if len(known) and (at < len(known)).all() and np.array_equal(known[at], rows):
                lengths = known_lengths[at]
                return known_codes[at, :int(lengths.max(initial=0))], lengths
        codes, lengths = self._chunk.subset(rows).encode()
        if len(rows) and (rows[1:] > rows[:-1]).all():
            self._coded = (rows, codes, lengths)
        return codes, lengths

    @property
    def coded_from_chunk(self) -> bool:
        """Whether the reads' codes are made from the chunk when asked (none are held)."""
        return self._codes is None

    def for_traceback(self, chunk) -> ReadBatch:
        """This batch, screened, with its reads taken from ``chunk`` (the
        same rows: a copy of the hits' records,
        :meth:`bpbc.chunks.RawFastqChunk.keeping`) and without the engine's
        prepared reads. Only where :attr:`coded_from_chunk`."""
        assert self.coded_from_chunk
        return ReadBatch(None, self.lengths, None, self.engine, chunk)

    def part(self, start: int, stop: int) -> ReadBatch:
        """Reads start to stop, prepared anew."""
        if self._codes is None:
            return ReadBatch.from_chunk(self._chunk.subset(np.arange(start, stop)), self.engine)
        return ReadBatch.from_codes(self._codes[start:stop], self.lengths[start:stop], self.engine)

    def __len__(self) -> int:
        return len(self.lengths)


@dataclass(frozen=True)
class Hits:
    """The instances that pass, sorted by read, then pattern, then strand."""

    read: np.ndarray  #: int64 read index in the batch
    pattern: np.ndarray  #: int64 pattern index
    strand: np.ndarray  #: int64 index into the screen's strands
    score: np.ndarray  #: int32 screen score: exact, or a lower bound where capped
    capped: np.ndarray  #: bool
    #: (hits, 3) score, read end and pattern end of each hit's end cell by the traceback's tie
    #: rule where the engine found it (score -1 where not), or None: the traceback starts there
    end_cells: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.read)


@dataclass(frozen=True)
class WindowHits(Hits):
    """The hits of reads screened as windows (:mod:`bpbc.windows`), and
    those of their windows, which the traceback starts from."""

    windows: Hits | None = None  #: read = window index in the batch's windows
    #: (window hits, 3) score, read end in the window and pattern end of each
    #: window hit's end cell, where the vector score pass screened them (else None)
    ends: np.ndarray | None = None


@dataclass(frozen=True)
class ChunkResult:
    """What one batch of reads gives."""

    hits: Hits
    alignments: AlignmentTable
    #: (n_reads, n_patterns, n_strands) int32, only when asked for (else None)
    scores: np.ndarray | None = None
    capped: np.ndarray | None = None

    @property
    def passing_reads(self) -> np.ndarray:
        """Sorted indices of the reads that pass for some pattern and strand."""
        return np.unique(self.hits.read)


class Screener:
    """Screen reads against ``patterns`` (records, strings, or a mapping name
    -> sequence) by Smith-Waterman local alignment with affine gaps.

    ``threshold`` is one score for every pattern or a sequence of one score per
    pattern. ``engine`` reuses an engine from :func:`bpbc.engines.select_engine`;
    else ``device`` ('auto', 'cpu', 'gpu') and ``threads`` choose one.
    Problems with the settings raise ValueError (or SequenceError, a
    ValueError, for a pattern outside the IUPAC alphabet).

    Its calls take reads in any form :func:`bpbc.screen` takes: a
    :class:`ReadBatch` (see :meth:`prepare`), a :class:`bpbc.Reads`, or
    str, bytes or records, converted to a :class:`bpbc.Reads` first.

    Reads longer than a window are screened as overlapping windows
    (:mod:`bpbc.windows`), with the whole read's results. ``ends``: screen
    only each read's first and last ``ends`` bases (coordinates stay the
    read's).
    """

    def __init__(self, patterns, threshold=40, scoring: Scoring | None = None, strand: str = "both",
                 exact_scores: bool = False, eqx: bool = False, engine=None, device: str = "auto",
                 threads: int | None = None, ends: int | None = None):
        # as the command does, before numba first loads its OpenMP runtime: its idle
        # workers spin on the cores the engine's own threads need (40k reads, 2 threads:
        # 1.2x one thread's rate -> 1.5x), and on this 2-core VM each short parallel
        # region then took 6-16 ms instead of 0.1 (2-core Zen 5 VM)
        set_up_process()
        self.scoring = scoring or Scoring()
        self.strands = strands_of(strand)
        self.exact_scores = exact_scores
        self.eqx = eqx
        self.pattern_names, sequences = _names_and_sequences(patterns, "pattern")
        if not sequences:
            raise ValueError("no patterns given")
        forward = encode_patterns(sequences, self.pattern_names)
        self.pattern_lengths = np.array([len(masks) for masks in forward], dtype=np.int64)
        self.thresholds = self._checked_thresholds(threshold)
        self.table = PatternTable.build(forward, self.strands)
        #: per oriented pattern k of the table
        self.table_thresholds = self.thresholds[self.table.pattern]
        if ends is not None and (isinstance(ends, bool) or not isinstance(ends, int) or ends < 1):
            raise ValueError(f"ends must be a positive integer, got {ends!r}")
        #: how reads are cut: for the hits, and for every score (the dense table)
        self.windows = WindowPlan.of(self.table.lengths, self.table_thresholds, self.scoring, ends)
        self.dense_windows = WindowPlan.of(self.table.lengths, 1, self.scoring, ends)
        self.engine = engine or select_engine(device, threads)
        #: CPU threads the caller allows (None: all cores)
        self.threads = threads
        self._subtables: dict[tuple[int, ...], PatternTable] = {}
        self._preparing: tuple | None = None  # (threads, plane range, fit check), made on first use

    def on_engine(self, engine) -> Screener:
        """This screener (patterns, thresholds, settings) on another engine:
        a run on several GPUs screens with one per device."""
        twin = copy.copy(self)
        twin.engine = engine
        return twin

    def _checked_thresholds(self, threshold) -> np.ndarray:
        if np.ndim(threshold) == 0:
            # one threshold: reachable by the longest pattern (shorter ones may never pass)
            check_threshold(threshold, self.scoring.max_score(int(self.pattern_lengths.max())))
            return np.full(len(self.pattern_lengths), threshold, dtype=np.int64)
        thresholds = list(threshold)
        if len(thresholds) != len(self.pattern_lengths):
            raise ValueError(f"{len(thresholds)} thresholds given for {len(self.pattern_lengths)} patterns")
        for name, value, length in zip(self.pattern_names, thresholds, self.pattern_lengths):
            try:
                check_threshold(value, self.scoring.max_score(int(length)))
            except ValueError as error:
                raise ValueError(f"pattern {name}: {error}") from None
        return np.array(thresholds, dtype=np.int64)

    def prepare(self, reads, dense: bool = False) -> ReadBatch | WindowedBatch:
        """Encode and transpose reads (or a chunk of them, :mod:`bpbc.chunks`)
        for this screener's engine, reads longer than a window as windows
        (exact for every score with ``dense``, else for those that reach
        the threshold). A read that cannot fit raises
        :class:`bpbc.windows.PairTooLarge` (a SequenceError) naming it."""
        from .engines import usable_cores

        threads = self.threads or usable_cores()
        if self._preparing is None or self._preparing[0] != threads:  # what every batch's preparation needs
            names, pattern = self.pattern_names, self.table.pattern
            check = fit_check(self.table.lengths, self.table_thresholds, self.scoring, threads,
                              lambda k: names[int(pattern[k])])
            self._preparing = (threads, Oriented(self.table.lengths, self.table_thresholds, self.scoring), check)
        _, oriented, check = self._preparing
        return prepare_windows(reads, self.engine, self.dense_windows if dense else self.windows, oriented, threads,
                               check, ReadBatch, dense)

    def _batch(self, reads, dense: bool = False) -> ReadBatch | WindowedBatch:
        if isinstance(reads, (ReadBatch, WindowedBatch)):
            if reads.engine is not self.engine:
                raise ValueError("a ReadBatch is screened by the engine it was prepared for")
            if dense and isinstance(reads, WindowedBatch) and (reads.plan != self.dense_windows
                                                               or reads.flag_windows is not None):
                return self.prepare(reads.source, dense)  # cut again for every score, the engine on the windows
            return reads
        return self.prepare(reads, dense)

    # ------------------------------------------------------------ planes

    def _plane_groups(self, batch: ReadBatch) -> list[tuple[int, np.ndarray, PatternTable]]:
        """(planes, oriented pattern indices, their table) per plane count."""
        planes = np.array([score_planes(t) for t in self.table_thresholds], dtype=np.int64)
        if self.exact_scores:
            longest_read = int(batch.lengths.max())
            reachable = np.minimum(self.table.lengths, longest_read) * self.scoring.match
            planes = np.maximum(planes, [int(r).bit_length() for r in reachable])
        groups = []
        for b in np.unique(planes):
            ks = np.flatnonzero(planes == b)
            key = tuple(ks.tolist())
            if key not in self._subtables:
                self._subtables[key] = self.table if len(ks) == len(self.table) else self.table.subset(ks)
            groups.append((int(b), ks, self._subtables[key]))
        return groups

    def _two_pass(self, planes: int) -> bool:
        """Whether a pass one plane short comes first: the flagged lanes of it
        are recomputed in full, so the result is the one-pass result, lane for
        lane (README, "Two passes"). Only for engines that say so
        (``two_pass``: the CPU engine; the GPU engine when asked), and not for
        exact scores."""
        return self.engine.two_pass and not self.exact_scores and planes >= MIN_TWO_PASS_PLANES

    # ------------------------------------------------------------ scores

    def _in_parts(self, batch: ReadBatch, compute: Callable[[ReadBatch], T], start: int = 0) -> list[tuple[int, T]]:
        """[(0, compute(batch))], or, when the engine runs out of memory on the
        batch (or could not prepare it), the results of its two halves, each
        handled the same way, with the index of each part's first read."""
        if batch.prepared is not None or not len(batch):
            try:
                return [(start, compute(batch))]
            except self.engine.out_of_memory:
                self.engine.release_memory()
        if len(batch) == 1:
            raise MemoryError(f"the {self.engine.name} engine ran out of memory screening a single read")
        half = len(batch) // 2
        return (self._in_parts(batch.part(0, half), compute, start)
                + self._in_parts(batch.part(half, len(batch)), compute, start + half))

    def hits(self, reads, end_cells: bool = True) -> Hits:
        """The passing instances of a batch (or of reads, encoded here);
        ``end_cells``: with the end cells of those the engine finds them for."""
        batch = self._batch(reads)
        if isinstance(batch, WindowedBatch):
            if batch.inner is None or (batch.flag_planes and batch.inner.prepared is not None):
                columns, ends = vector_hits(batch, self.table, self.table_thresholds, self._caps(), self.scoring,
                                            0 if batch.inner is None else batch.flag_planes)
                return self._read_hits(batch, Hits(*columns), ends)
            # (the windows' alignment finds the end cells of every window at a read's best itself)
            return self._read_hits(batch, self.hits(batch.inner, end_cells=False))
        parts = self._in_parts(batch, functools.partial(self._hits, end_cells=end_cells))
        if len(parts) == 1:
            return parts[0][1]
        return Hits(*(np.concatenate(column) for column in zip(*(
            (hits.read + start, hits.pattern, hits.strand, hits.score, hits.capped) for start, hits in parts))))

    def _hits(self, batch: ReadBatch, end_cells: bool = True) -> Hits:
        engine, scoring = self.engine, self.scoring
        # where the engine finds end cells, its second pass scores the hits uncapped: the end cells
        # need every score, and a capped one would cost another pass to find
        exact_planes = self._end_cell_planes(batch) if end_cells else 0
        parts = []
        if len(batch):
            for planes, ks, table in self._plane_groups(batch):
                thresholds = self.table_thresholds[ks]
                if self._two_pass(planes):
                    two_pass = cast(TwoPassEngine, engine)
                    cells = int(batch.lengths.max()) * int(table.lengths.max())
                    reads_, local = two_pass.flagged(batch.prepared, table, scoring,
                                                     cpu_flag_planes(scoring, cells, planes))
                    values, overflow = self._pair_scores(batch, reads_, local, table, planes)
                else:
                    reads_, local, values, overflow = engine.hits(batch.prepared, table, scoring, planes, thresholds,
                                                                  exact_planes)
                parts.append(_passing(reads_, local, values, overflow, thresholds, ks, planes))
        if len(parts) == 1:
            read, k, score, capped, exact = parts[0]
        elif parts:
            read, k, score, capped, exact = (np.concatenate(column) for column in zip(*parts))
        else:
            read, k = np.zeros(0, np.int64), np.zeros(0, np.int64)
            score, capped, exact = np.zeros(0, np.int32), np.zeros(0, bool), np.zeros(0, np.int32)
        if not _sorted_pairs(read, k):  # one plane group's hits come sorted
            order = np.lexsort((k, read))  # k runs over (pattern, strand) in order
            read, k, score, capped, exact = read[order], k[order], score[order], capped[order], exact[order]
        return Hits(read, self.table.pattern[k], self.table.strand[k], score, capped,
                    self._end_cells(batch, read, k, exact) if exact_planes else None)

    def _end_cell_planes(self, batch: ReadBatch) -> int:
        """The planes that hold any score of the batch where the engine finds
        the end cells of its hits (the GPU's) and some of its reads against
        the longest pattern would be aligned from their end cell
        (:func:`bpbc.traceback.banded`: none of its hits is else); else 0."""
        from .traceback import banded

        if (getattr(self.engine, "end_cells", None) is None or batch.prepared is None or not len(batch)
                or not banded(batch.lengths, self.table.lengths.max()).any()):
            return 0
        return score_planes(self.scoring.max_score(int(self.table.lengths.max()), int(batch.lengths.max())))

    def _end_cells(self, batch: ReadBatch, read, k, exact) -> np.ndarray:
        """The end cells of the hits the traceback aligns from their end cell
        (:func:`bpbc.traceback.banded`), so that it need not search for
        them, from the engine; ``exact``: each hit's score (-1 where the
        screen overflowed: found first, in planes enough for any score)."""
        from .traceback import banded

        found = np.full((len(read), 3), -1, np.int64)
        chosen = np.flatnonzero(banded(batch.lengths[read], self.table.lengths[k]))
        if not len(chosen):
            return found
        longest = min(int(batch.lengths[read[chosen]].max()), int(self.table.lengths[k[chosen]].max()))
        planes = score_planes(self.scoring.max_score(longest))
        found[chosen] = cast(EndCellEngine, self.engine).end_cells(batch.prepared, self.table, self.scoring, planes,
                                                                   read[chosen], k[chosen], exact[chosen])
        return found

    def _pair_scores(self, batch: ReadBatch, reads: np.ndarray, ks: np.ndarray, table: PatternTable,
                     planes: int) -> tuple[np.ndarray, np.ndarray]:
        """The second pass: scores and overflow flags of the instances (reads[i], ks[i]) only."""
        rows, local = _rows_and_local(reads, len(batch))
        codes, lengths = batch.codes_of(rows)
        return cast(TwoPassEngine, self.engine).pair_scores(codes, lengths, local, ks, table, self.scoring, planes)

    def scores(self, reads) -> tuple[np.ndarray, np.ndarray]:
        """Dense (n_reads, n_patterns, n_strands) int32 scores and capped flags
        of every instance: exact where not capped, else a lower bound that is
        at least the threshold."""
        batch = self._batch(reads, dense=True)
        if isinstance(batch, WindowedBatch):
            return self._window_scores(batch)[2:]
        parts = [part for _, part in self._in_parts(batch, self._scores)]
        return np.concatenate([s for s, _ in parts]), np.concatenate([c for _, c in parts])

    def _scores(self, batch: ReadBatch) -> tuple[np.ndarray, np.ndarray]:
        n, count = len(batch), len(self.table)
        scores = np.zeros((n, count), dtype=np.int32)
        capped = np.zeros((n, count), dtype=bool)
        if n:
            engine, scoring = self.engine, self.scoring
            for planes, ks, table in self._plane_groups(batch):
                if self._two_pass(planes):
                    values, overflow = engine.scores(batch.prepared, table, scoring, planes - 1)
                    again, local = np.nonzero(overflow)
                    values[again, local], overflow[again, local] = self._pair_scores(batch, again, local, table,
                                                                                     planes)
                else:
                    values, overflow = engine.scores(batch.prepared, table, scoring, planes)
                values[overflow] = (1 << planes) - 1
                scores[:, ks] = values
                capped[:, ks] = overflow
        shape = (n, len(self.pattern_names), len(self.strands))
        return scores.reshape(shape), capped.reshape(shape)

    # ------------------------------------------------------------ alignments

    def align(self, batch: ReadBatch | WindowedBatch, hits: Hits) -> AlignmentTable:
        """One optimal alignment per hit, cross-checked against its screen score."""
        from .traceback import align_hits

        if isinstance(batch, WindowedBatch):
            found = align_windows(batch, hits, self.table, self.strands, self.scoring, self.eqx)
        else:
            k = hits.pattern * len(self.strands) + hits.strand
            # only the reads that hit are encoded here (a batch from raw bytes has no codes)
            rows, local = _rows_and_local(hits.read, len(batch))
            codes, lengths = batch.codes_of(rows)
            found = align_hits(codes, lengths, local, k, self.table, self.strands, self.scoring, self.eqx,
                               known_ends=hits.end_cells)
        found = dataclasses.replace(found, read_index=hits.read)
        wrong = (~hits.capped & (found.score != hits.score)) | (found.score < hits.score)
        if wrong.any():
            t = int(np.flatnonzero(wrong)[0])
            raise InternalError(
                f"traceback score {found.score[t]} disagrees with screen score "
                f"{hits.score[t]} (read {hits.read[t]}, pattern {hits.pattern[t]}, "
                f"strand {self.strands[hits.strand[t]]})"
            )
        return found

    def _read_hits(self, batch: WindowedBatch, window_hits: Hits, ends: np.ndarray | None = None) -> WindowHits:
        """The hits of a windowed batch's reads from those of its windows (:func:`bpbc.windows.read_hits`)."""
        read, pattern, strand, score, capped = read_hits(batch, window_hits, len(self.strands))
        return WindowHits(read, pattern, strand, score, capped, windows=window_hits, ends=ends)

    def _window_scores(self, batch: WindowedBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Dense scores and capped flags of a windowed batch's windows, and
        of its reads (the best of their windows; a capped score is the cap,
        above every exact one)."""
        if batch.inner is not None:
            scores, capped = self.scores(batch.inner)
        else:
            found = vector_scores(batch, self.table, self.scoring)[:, :, 0]
            shape = (len(found), len(self.pattern_names), len(self.strands))
            capped = (found > self._caps()).reshape(shape)
            scores = np.minimum(found, self._caps()).astype(np.int32).reshape(shape)
        first = np.flatnonzero(first_of_runs(batch.windows.read))
        return scores, capped, np.maximum.reduceat(scores, first), np.logical_or.reduceat(capped, first)

    def _caps(self) -> np.ndarray:
        """Per oriented pattern, the highest score the engine holds exactly
        (2**planes - 1; a score above is reported as it, capped), where its
        planes are those of its threshold; unbounded with exact scores."""
        if self.exact_scores:
            return np.full(len(self.table), np.iinfo(np.int64).max, dtype=np.int64)
        return (np.int64(1) << np.array([score_planes(int(t)) for t in self.table_thresholds], np.int64)) - 1

    def _dense_hits(self, scores: np.ndarray, capped: np.ndarray) -> Hits:
        """The instances of a dense score table that pass."""
        flat_scores = scores.reshape(len(scores), len(self.table))
        read, k = np.nonzero(flat_scores >= self.table_thresholds)
        return Hits(read.astype(np.int64), self.table.pattern[k], self.table.strand[k], flat_scores[read, k],
                    capped.reshape(len(scores), len(self.table))[read, k])

    def run(self, reads, dense: bool = False) -> ChunkResult:
        """Screen a batch (or reads): the hits and their alignments, and with
        ``dense`` the score table of every instance."""
        batch = self._batch(reads, dense)
        scores = capped = None
        hits: Hits
        if dense:
            if isinstance(batch, WindowedBatch):
                window_scores, window_capped, scores, capped = self._window_scores(batch)
                hits = self._read_hits(batch, self._dense_hits(window_scores, window_capped))
            else:
                scores, capped = self.scores(batch)
                hits = self._dense_hits(scores, capped)
        else:
            hits = self.hits(batch)
        return ChunkResult(hits, self.align(batch, hits), scores, capped)
