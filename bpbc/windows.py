"""Long reads as many short instances: overlapping windows, and the alignments of their hits.

The engines fill a machine word with instances (64 lanes a word on the CPU,
32 on the GPU), each padded to the longest in its word, and keep state along
the read: a few long reads leave most lanes idle and take memory in their
length. So a read longer than a window is cut into windows that overlap by
enough that every local alignment scoring at least the threshold lies wholly
inside one of them (:func:`read_span`, docs/engine.md#long-reads). A read's
screen score is then the best of its windows' (exact, as the whole read's,
wherever it reaches the threshold), its hits are reported once, in its own
coordinates, and their alignments are those of the whole read:

* the end cell: the hit's windows that reach its score hold every cell where
  it is reached (each such cell's alignment lies in one of them), so the
  first of their first maxima in (read row, pattern column) order (found by
  the vector score pass that screened them, or by a score pass over the
  stretch they cover) is the traceback's end cell;
* the alignment: every alignment of score S ending at read row e and pattern
  column j starts at most :func:`read_span` (of S, j) rows above e, so the
  traceback aligns only those rows (:func:`bpbc.traceback.align_hits` with
  the end known), in segments of rows where they are many: the values there
  are the whole read's on every cell of every such alignment, so each choice
  of the tie rule, and the alignment, is the same.

Window lengths are chosen per batch (:meth:`WindowPlan.window_length`) to fill
the engine's lanes, and on the CPU the vector score pass may screen the
windows instead of the engine, or the engine's flags-only pass at few planes
runs on windows of its own that overlap far less (:meth:`Oriented.flag_overlap`)
and the vector pass scores the windows that meet a flagged one
(:func:`how_to_screen`); the result depends on none of it. ``--ends N``
screens only each read's first and last N bases: two regions, each aligned as
if it were the read, windows cut inside them, coordinates in the read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .alphabet import SequenceError
from .order import first_of_runs
from .scoring import Scoring, flag_pass_planes, random_score_share, score_planes

#: reads (or regions) up to this many bases are never cut
MIN_WINDOW = 2048
#: the least distance between two windows' starts
MIN_STEP = 64
#: lanes to fill where an engine does not say how many it runs at once (the
#: GPU: 32 a word, thousands of words in flight)
DEFAULT_LANES = 1 << 16


class PairTooLarge(SequenceError):
    """A read and a pattern that need more memory than there is, whatever the windows."""


def read_span(pattern_lengths, thresholds, scoring: Scoring) -> np.ndarray:
    """The most read bases a local alignment scoring at least ``thresholds``
    against patterns of ``pattern_lengths`` can span: its M and X columns
    take a pattern base each (at most m of them), and its I columns (read
    bases against a gap) cost at least gap_open + I x gap_extend out of the
    at most match x m its matches give: I <= (match x m - T - gap_open) //
    gap_extend. Elementwise over the arrays."""
    m = np.asarray(pattern_lengths, dtype=np.int64)
    inserted = (scoring.match * m - np.asarray(thresholds, dtype=np.int64) - scoring.gap_open) // scoring.gap_extend
    return m + np.maximum(inserted, 0)


@dataclass(frozen=True)
class Windows:
    """The windows of a batch's reads, read by read, in order along each read."""

    read: np.ndarray  #: int64 read of each window
    start: np.ndarray  #: int64 first base, in the read
    length: np.ndarray  #: int64
    region: np.ndarray  #: int64 first base of the region the window lies in (the read, or one of its ends)
    whole: np.ndarray  #: bool per read: its only window is the whole read

    def __len__(self) -> int:
        return len(self.read)


@dataclass(frozen=True)
class WindowPlan:
    """How a screen cuts reads: windows overlap by ``overlap`` bases, so that
    every alignment spanning at most overlap + 1 read bases lies wholly in
    one; ``ends``: only the first and last ``ends`` bases of each read."""

    overlap: int
    ends: int | None = None

    @classmethod
    def of(cls, pattern_lengths, thresholds, scoring: Scoring, ends: int | None = None) -> WindowPlan:
        """The plan for oriented patterns of ``pattern_lengths`` at their
        ``thresholds`` (1 for every score)."""
        span = int(read_span(pattern_lengths, thresholds, scoring).max(initial=1))
        return cls(max(span - 1, 0), ends)

    def regions(self, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(read, start, length) of each region the screen covers: the whole
        read, or with ``ends`` its first and last ``ends`` bases (one region
        where they meet)."""
        lengths = np.asarray(lengths, dtype=np.int64)
        reads = np.arange(len(lengths), dtype=np.int64)
        if self.ends is None:
            return reads, np.zeros(len(lengths), np.int64), lengths
        two = lengths > 2 * self.ends
        read = np.repeat(reads, np.where(two, 2, 1))
        first = np.ones(len(read), dtype=bool)
        first[1:] = read[1:] != read[:-1]
        start = np.where(first, 0, lengths[read] - self.ends)
        length = np.where(two[read], self.ends, lengths[read])
        return read, start, length

    def window_length(self, lengths: np.ndarray, packing: Packing, least: int | None = None) -> tuple[int | None, float]:
        """(the window length for a batch of reads of ``lengths``, None where
        no read, no region, is cut; its cost): the one of least
        :meth:`Packing.cost`, longer than overlap + MIN_STEP and ``least``
        (default MIN_WINDOW), among lengths about 8 % apart and those that
        just fit the windows into whole blocks of lanes; the longest where
        costs tie."""
        length = np.sort(np.asarray(lengths, dtype=np.int64) if self.ends is None else self.regions(lengths)[2])
        longest = int(length.max(initial=0))
        least = max(MIN_WINDOW if least is None else least, self.overlap + 1 + MIN_STEP)
        if longest <= least:
            window = max(longest, 1)
            return None if self.ends is None else window, self.cost(length, window, packing)
        candidates = {longest}
        window = least
        while window < longest:
            candidates.add(window)
            window = max(window + 1, int(window * 1.08))
        costs = {window: self.cost(length, window, packing) for window in sorted(candidates)}
        # where a block of lanes is left nearly empty, the least window that fills one block fewer
        for window in sorted(costs, key=costs.__getitem__)[:3]:
            blocks = packing.blocks(self.count(length, window))
            low, high = window, longest
            if blocks <= 1 or packing.blocks(self.count(length, high)) >= blocks:
                continue
            while high - low > 1:  # the least window taking fewer blocks
                mid = (low + high) // 2
                if packing.blocks(self.count(length, mid)) < blocks:
                    high = mid
                else:
                    low = mid
            costs[high] = self.cost(length, high, packing)
        best = min(costs, key=lambda window: (costs[window], -window))
        return None if best == longest and self.ends is None else best, costs[best]

    def count(self, length: np.ndarray, window: int) -> int:
        """The windows of ``window`` bases of regions of ``length`` (sorted)."""
        cut = int(np.searchsorted(length, window, side="right"))
        return cut + int(_window_counts(length[cut:], window, self.overlap).sum())

    def cost(self, length: np.ndarray, window: int, packing: Packing) -> float:
        """The cost of cutting regions of ``length`` (sorted) into windows of ``window`` bases (:meth:`Packing.cost`)."""
        cut = int(np.searchsorted(length, window, side="right"))  # the regions after it are cut
        counts = _window_counts(length[cut:], window, self.overlap)
        lasts = np.sort(length[cut:] - (counts - 1) * (window - self.overlap))
        return packing.cost(length[:cut], lasts, int(counts.sum()) - len(lasts), window)

    def cut(self, lengths: np.ndarray, window: int) -> Windows:
        """The windows of ``window`` bases (the last of a region shorter) of every region."""
        read, start, length = self.regions(lengths)
        counts = _window_counts(length, window, self.overlap)
        region_of = np.repeat(np.arange(len(read)), counts)
        rank = np.arange(len(region_of)) - np.repeat(np.cumsum(counts) - counts, counts)
        offset = rank * (window - self.overlap)
        whole = np.zeros(len(lengths), dtype=bool)
        single = (counts == 1) & (length == np.asarray(lengths, np.int64)[read])
        whole[read[single]] = True
        return Windows(read[region_of], start[region_of] + offset,
                       np.minimum(window, length[region_of] - offset), start[region_of], whole)


@dataclass(frozen=True)
class Packing:
    """How an engine packs windows into lanes: blocks of ``lanes`` lanes,
    each window on ``copies`` lanes (one for each oriented pattern, in the
    vector pass; else 1), lanes sorted by length, each block run ``tasks``
    times (once for each oriented pattern, in the engine; else 1) on
    ``threads`` threads."""

    lanes: int
    copies: int
    tasks: int
    threads: int

    def blocks(self, windows: int) -> int:
        return -(-windows * self.copies // self.lanes)

    def cost(self, whole: np.ndarray, lasts: np.ndarray, full: int, window: int) -> float:
        """The time of the windows, in cells of a block per pattern base:
        the blocks' longest lanes over the threads (at least the longest
        block). ``whole``: the regions not cut, sorted; ``lasts``: the last
        window of each region cut, sorted; ``full``: how many others (all
        ``window`` long)."""
        windows = len(whole) + len(lasts) + full
        if windows == 0:
            return 0.0
        blocks = self.blocks(windows)
        # the longest lane of each block: the window at its last lane, in the merged order of the lengths
        at = (np.minimum(np.arange(1, blocks + 1, dtype=np.int64) * self.lanes, windows * self.copies) - 1) \
            // self.copies
        placed = np.searchsorted(whole, lasts, side="right") + np.arange(len(lasts))  # where each last lies
        before = np.searchsorted(placed, at, side="right")  # lasts at or before
        is_last = (before > 0) & (placed[np.maximum(before - 1, 0)] == at) if len(lasts) else np.zeros(blocks, bool)
        in_whole = np.minimum(np.maximum(at - before, 0), max(len(whole) - 1, 0))
        longest = np.where(at >= len(whole) + len(lasts), window,
                           np.where(is_last, lasts[np.maximum(before - 1, 0)] if len(lasts) else 0,
                                    whole[in_whole] if len(whole) else 0))
        return self.makespan(longest)

    def makespan(self, longest: np.ndarray) -> float:
        """The time of blocks whose longest lanes are ``longest``, each run
        ``tasks`` times, on the threads: at least their sum over the threads,
        and for every k at least k + 1 times the (k x threads + 1)-th longest
        task, as k + 1 of the k x threads + 1 longest share a thread (so 18
        equal tasks on 16 threads take two tasks' time, not 18/16 of one)."""
        descending = np.sort(np.asarray(longest, dtype=np.float64))[::-1]
        rounds = -(-len(descending) * self.tasks // self.threads)
        k = np.arange(rounds, dtype=np.int64)
        in_rounds = float(((k + 1) * descending[k * self.threads // self.tasks]).max(initial=0.0))
        return max(float(descending.sum()) * self.tasks / self.threads, in_rounds)


def _window_counts(length: np.ndarray, window: int, overlap: int) -> np.ndarray:
    """Windows of ``window`` bases, each starting window - overlap after the
    one before, that cover regions of ``length``: one where it fits."""
    step = window - overlap
    return np.where(length <= window, 1, 1 + -(-(length - window) // step))


# ---------------------------------------------------------------- batches of windows


class Spans:
    """Sequences where they lie in a buffer, as a chunk of reads offers them
    (``data``, ``seq_start``, ``lengths``, ``subset``, ``encode``): the
    windows of reads, or stretches of them. ``name_of(i)`` names the read
    span i comes from."""

    def __init__(self, data, seq_start: np.ndarray, lengths: np.ndarray, name_of):
        self.data = data
        self.seq_start = seq_start
        self.lengths = lengths
        self.name_of = name_of

    def __len__(self) -> int:
        return len(self.lengths)

    def subset(self, rows: np.ndarray) -> Spans:
        rows = np.asarray(rows)
        return Spans(self.data, self.seq_start[rows], self.lengths[rows], lambda i: self.name_of(int(rows[i])))

    def encode(self) -> tuple[np.ndarray, np.ndarray]:
        from .chunks import _encode_sequences

        return _encode_sequences(self.data, self.seq_start, self.lengths, self.name_of)


class _Coded:
    """Reads that come as codes (a chunk that only encodes: pairs), their
    bytes made again from the codes where windows need them."""

    def __init__(self, codes: np.ndarray, lengths: np.ndarray):
        self.codes = codes
        self.lengths = np.asarray(lengths, dtype=np.int64)

    @property
    def data(self) -> np.ndarray:
        return np.frombuffer(b"ACGTN", np.uint8)[np.minimum(self.codes, 4)].reshape(-1)

    @property
    def seq_start(self) -> np.ndarray:
        return np.arange(len(self.lengths), dtype=np.int64) * self.codes.shape[1]


def _as_buffer(reads):
    """(reads as something with data, seq_start and lengths, a name for read i)."""
    from .chunks import RawFastqChunk, RecordChunk
    from .reads import Reads

    if isinstance(reads, _Coded):
        data, seq_start = reads.data, reads.seq_start
        return Spans(data, seq_start, reads.lengths, lambda i: f"read{i + 1}"), lambda i: f"read{i + 1}"
    if isinstance(reads, RawFastqChunk):
        return reads, lambda i: reads.read_id(i) or f"read{i + 1}"
    if isinstance(reads, RecordChunk):
        reads = reads.records
    reads = Reads.of(reads)
    return reads, reads.name


def _lengths(reads) -> np.ndarray | None:
    """The read lengths of a chunk or of :class:`bpbc.Reads`; None for
    other forms (turned into Reads first)."""
    from .chunks import RecordChunk

    if isinstance(reads, RecordChunk):
        return np.array([len(record.sequence) for record in reads.records], dtype=np.int64)
    lengths = getattr(reads, "lengths", None)
    return None if lengths is None else np.asarray(lengths, dtype=np.int64)


class WindowedBatch:
    """A batch of reads screened as windows: ``lengths`` and ``len()`` are
    the reads', ``windows`` says where each window lies and ``inner`` is the
    :class:`bpbc.screener.ReadBatch` of the windows the engine screens (None:
    the vector score pass screens them, :func:`vector_hits`; dense scores
    :func:`vector_scores`).
    ``prepared`` is None: the engine's form of the reads themselves does not
    exist (trimming's end overlaps read the reads from their bytes)."""

    prepared = None

    def __init__(self, source, name_of, windows: Windows, inner, plan: WindowPlan, engine, flag_planes: int = 0,
                 codes: tuple[np.ndarray, np.ndarray] | None = None, flag_windows: Windows | None = None):
        self.source = source  #: the reads: data, seq_start and lengths
        self.name_of = name_of
        self.lengths = np.asarray(source.lengths, dtype=np.int64)
        self.windows = windows
        #: the windows as the engine's ReadBatch; None where the vector score pass screens them
        self.inner = inner
        self.engine = engine
        #: planes of the engine's flags-only pass whose flagged windows the vector pass
        #: screens (:func:`vector_hits`); 0: the engine screens them as reads
        self.flag_planes = flag_planes
        #: (codes, lengths) of the windows, where the vector pass screens them all
        self.window_codes = codes
        #: the windows of the flags-only pass (``inner``'s reads), where flag_planes
        self.flag_windows = flag_windows
        self.plan = plan
        self._codes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def codes(self) -> np.ndarray:
        """(n, longest) uint8 codes of the reads, as :func:`bpbc.alphabet.encode_reads` gives them."""
        if self._codes is None:
            self._codes = self.spans(np.arange(len(self)), np.zeros(len(self), np.int64), self.lengths).encode()[0]
        return self._codes

    def spans(self, read: np.ndarray, start: np.ndarray, length: np.ndarray) -> Spans:
        """Stretches of reads: read[i] from base start[i], length[i] bases."""
        source = self.source
        return Spans(source.data, np.asarray(source.seq_start, np.int64)[read] + start, np.asarray(length, np.int64),
                     lambda i: self.name_of(int(read[i])))


#: the time of a cell of 32 int16 lanes of the vector score pass
#: (bpbc.traceback.end_cells), in units of the time of a cell of the CPU
#: engine's 512-lane superblock over the square of its planes (with its
#: synthesised LUT3 cell; the 2-input cell, where there is no network for the
#: plane count or the scoring, TWO_INPUT times that). Measured side by side
#: on the 2-core Zen 4 (AVX-512), flags-only passes over 1024 reads of 4 kb
#: against 2 kb on both strands: 6 planes 23-24 GCUPS (43 ns a superblock
#: cell), 8 planes 13-14 (76 ns), 10 planes 6-7 (150 ns); the vector pass
#: 9.4-10 GCUPS on int16 cells (6.5 ns a cell of 32 lanes); 11 planes (no
#: network) about 6x 10 planes' time
VECTOR_CELL, TWO_INPUT = 5.4, 6.0
#: a cell of 16 int32 lanes (blocks of 16 windows): about the time of one of
#: 32 int16 lanes (4.9 GCUPS against 9.0)
VECTOR_CELL32 = VECTOR_CELL
#: the fewest planes of the engine's flags-only pass before the vector pass
MIN_FLAG_PLANES = 3


def _plane_cost(engine, planes: int, scoring: Scoring) -> float:
    """The relative time of one superblock cell of the CPU engine at ``planes`` planes (see VECTOR_CELL)."""
    from .cpu_engine import _circuit, cpu_target

    lut3 = engine.shape.gates == "lut3" and cpu_target().isa == "avx512" and _circuit(planes, scoring) is not None
    return planes * planes * (1.0 if lut3 else TWO_INPUT)


def flag_planes(scoring: Scoring, window: int, longest_pattern: int, planes: int) -> int:
    """The planes of the engine's flags-only pass before the vector pass on
    CPU windows (0: none): few enough to be cheap, enough that random
    sequence seldom reaches 2**p, and below every threshold's bit length
    (``planes``: the least of them; :func:`bpbc.scoring.flag_pass_planes`).
    A flag too many costs a vector pass, never a result."""
    p = flag_pass_planes(scoring, window * longest_pattern, planes)
    return p if p >= MIN_FLAG_PLANES else 0


#: the share of random windows a flags-only pass may flag, where the scoring's
#: random best is known (bpbc.scoring.random_score_share): a flagged window
#: costs a vector pass over the plan's windows it meets, while a plane fewer
#: saves a quarter of every window's flags pass (400 reads of 5-10 kb against
#: 5 kb at T = 2000: 5 planes instead of 6, the screen's stage 0.77x on 2 cores,
#: bench/results/cpu_windows_flag5_cpu.txt)
FLAGGED_SHARE = 0.01


def shared_flag_planes(scoring: Scoring, window: int, longest_pattern: int, planes: int) -> int:
    """``planes`` (of :func:`flag_planes`), or fewer where the scoring's
    random best is known and about FLAGGED_SHARE of random windows reach
    2**p at fewer. Only once the flags pass is chosen: the choice between
    it and the vector pass alone does not count the vector pass over what
    it flags (in windows of 2 kb or more, one 50 kb read against 5 kb at
    T = 1000 would have taken the flags at 5 planes, 0.19 s against the
    vector pass's 0.14)."""
    likely = random_score_share(scoring, window * longest_pattern, FLAGGED_SHARE)
    return planes if likely is None else max(MIN_FLAG_PLANES, min(planes, int(likely).bit_length()))


class Oriented:
    """What choosing how to screen a batch needs of the run's oriented
    patterns: their lengths and thresholds, the fewest and most planes
    those take, and the overlap of the flags-only pass's windows."""

    def __init__(self, lengths, thresholds, scoring: Scoring):
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.thresholds = np.asarray(thresholds, dtype=np.int64)
        self.scoring = scoring
        planes = [score_planes(int(t)) for t in np.unique(self.thresholds)]
        self.planes = (min(planes), max(planes))
        self.longest = int(self.lengths.max())
        self._span: np.ndarray | None = None  #: read_span of each pattern, once

    def __len__(self) -> int:
        return len(self.lengths)

    def flag_overlap(self, planes: int, longest_read: int | None = None) -> int:
        """The overlap of the windows of a flags-only pass at ``planes``
        planes such that every read (or region) holding an alignment that
        reaches its threshold T has a window flagged (score at least 2**p):
        the alignment spans R <= L = read_span(m, T) read bases, and no more
        than the read: R <= the batch's ``longest_read`` where given; cut at
        read bases into c = ceil(R / s) pieces of at most s read bases each
        (a pattern gap goes with the read base before it), the pieces'
        column scores add up to its score S >= T, so one of them scores at
        least S / c; that piece, its leading and trailing gap columns left
        out (they score below 0), is a local alignment of its own and lies
        in one window (windows overlapping by s - 1 hold every stretch of s
        bases). So s = ceil(L / floor(T / 2**p)) gives S / c >= 2**p: the
        overlap is s - 1, the most over the patterns (2**p at most every T).
        A long pattern's L is twice its length or so: 96 kb for 48.5 kb at T
        = 2000, where reads of 20 kb at most make the overlap 645, not 3096."""
        pieces = self.thresholds >> planes
        if not (pieces >= 1).all():
            raise ValueError(f"a flags-only pass at {planes} planes is above a threshold")
        if self._span is None:
            self._span = read_span(self.lengths, self.thresholds, self.scoring)
        span = self._span if longest_read is None else np.minimum(self._span, longest_read)
        return int((-(-span // pieces)).max()) - 1


@dataclass(frozen=True)
class Choice:
    """How a batch of reads is screened (:func:`how_to_screen`)."""

    window: int | None  #: the windows' length; None: no read is cut, the engine screens the reads
    vector: bool = False  #: the vector score pass screens the windows
    flag_planes: int = 0  #: else the engine's flags-only pass at that many planes, the vector pass on what it flags
    flag_overlap: int = 0  #: the overlap of the flags-only pass's windows
    flag_window: int = 0  #: their length


def how_to_screen(lengths: np.ndarray, engine, plan: WindowPlan, oriented: Oriented, threads: int,
                  dense: bool = False) -> Choice:
    """How to screen a batch of reads of ``lengths`` against the oriented
    patterns. On the CPU, a batch of long reads whose windows would leave
    the engine's lanes idle, or need a cell without a network, goes to the
    vector pass (:func:`vector_hits`) where that costs less; else, but for
    dense scores, the engine's flags-only pass at few planes runs over
    windows of its own (:meth:`Oriented.flag_overlap`: they overlap by far
    less than the plan's) and the vector pass scores the plan's windows that
    meet a flagged one."""
    tasks, scoring = len(oriented), oriented.scoring
    engine_packing = Packing(getattr(engine, "lanes", DEFAULT_LANES), 1, tasks, threads)
    longest = int(lengths.max())
    if engine.name != "cpu" or longest <= MIN_WINDOW:
        return Choice(plan.window_length(lengths, engine_packing)[0])

    def flag_cut(planes: int) -> tuple[WindowPlan, int, float]:
        """The flags' windows at ``planes`` planes: their plan, length and cost.
        Shorter than MIN_WINDOW where that gives the threads tasks enough:
        they overlap little (400 reads of 5-10 kb against 5 kb at 5 planes:
        145 bases), and in windows of 2 kb those reads are 6 tasks."""
        cut = WindowPlan(oriented.flag_overlap(planes, longest), plan.ends)
        length, cost = cut.window_length(lengths, engine_packing, least=0)
        return cut, length or longest, cost

    flags = 0 if dense else flag_planes(scoring, min(longest, 4 * MIN_WINDOW), oriented.longest, oriented.planes[0])
    flag_plan, flag_window = None, 0
    if not flags:
        window, cost = plan.window_length(lengths, engine_packing)
    else:
        flag_plan, flag_window, cost = flag_cut(flags)
        fewer = flag_planes(scoring, flag_window, oriented.longest, oriented.planes[0])
        if fewer and fewer != flags:  # the random best over the windows chosen
            flags = fewer
            flag_plan, flag_window, cost = flag_cut(flags)
    cost *= _plane_cost(engine, flags or oriented.planes[1], scoring)
    vector_window, vector_cost = plan.window_length(lengths, Packing(32, tasks, 1, threads))
    vector_window = window32 = vector_window or longest
    int16 = scoring.match * min(vector_window, oriented.longest) < 1 << 15 and \
        max(vector_window, oriented.longest) < (1 << 15) - 1
    if not int16:  # int32 cells, 16 lanes a block
        vector_window, vector_cost = plan.window_length(lengths, Packing(16, tasks, 1, threads))
        vector_window = vector_window or longest
    regions = plan.regions(lengths)[2]
    lanes = 32 if int16 else 16
    if len(regions) * tasks < lanes:  # fewer instances than a block's lanes: each alone (span_cells, end_cells),
        # a lane a stripe of rows, each lane as many columns behind the one before
        skew = (oriented.longest + lanes) / oriented.longest
        vector_cost = min(vector_cost, float((-(-regions // lanes)).sum()) * skew * tasks / threads)
    if vector_cost * (VECTOR_CELL if int16 else VECTOR_CELL32) < cost:
        return Choice(vector_window, vector=True)
    if flag_plan is None:
        return Choice(window)
    fewer = shared_flag_planes(scoring, flag_window, oriented.longest, flags)
    if fewer != flags:
        flags = fewer
        flag_plan, flag_window, _ = flag_cut(flags)
    # the plan's windows: only those that meet a flagged one are screened, by the vector pass; the
    # flags' own where the overlaps are the same (one cut)
    window = flag_window if flag_plan.overlap == plan.overlap else window32
    return Choice(window, flag_planes=flags, flag_overlap=flag_plan.overlap, flag_window=flag_window)


def prepare(reads, engine, plan: WindowPlan, oriented: Oriented, threads: int, check, batches, dense: bool = False):
    """``reads`` (a chunk, :class:`bpbc.Reads`, or str, bytes or records)
    prepared for ``engine``: a ``batches`` (:class:`bpbc.screener.ReadBatch`)
    where no read is cut (as before windows), else a :class:`WindowedBatch`
    (:func:`how_to_screen` says which), the windows the engine screens (the
    plan's, or the flags-only pass's) a ``batches`` of their own.
    ``check(name, length, window)`` raises :class:`PairTooLarge` for a read
    that cannot fit."""
    from .chunks import RawFastqChunk, RecordChunk
    from .reads import Reads

    lengths = _lengths(reads)
    if lengths is None and hasattr(reads, "encode") and not isinstance(reads, (str, bytes, Reads)):
        reads = _Coded(*reads.encode())  # a chunk that only encodes (pairs): its codes, as from_chunk took them
        lengths = reads.lengths
    elif lengths is None:
        reads = Reads.of(reads)
        lengths = reads.lengths
    choice = how_to_screen(lengths, engine, plan, oriented, threads, dense) if len(lengths) else Choice(None)
    window = choice.window
    if len(lengths):
        longest = int(np.argmax(lengths))
        check(lambda: _as_buffer(reads)[1](longest), int(lengths[longest]), window or int(lengths[longest]))
    if window is None:  # as before windows
        if isinstance(reads, _Coded):
            return batches.from_codes(reads.codes, reads.lengths, engine)
        if isinstance(reads, (RawFastqChunk, RecordChunk)):
            return batches.from_chunk(reads, engine)
        return batches.from_reads(reads, engine)
    source, name_of = _as_buffer(reads)
    windows = plan.cut(lengths, window)
    same = not choice.flag_planes or (choice.flag_overlap == plan.overlap and choice.flag_window == window)
    screened = windows if same else WindowPlan(choice.flag_overlap, plan.ends).cut(lengths, choice.flag_window)
    spans = Spans(source.data, np.asarray(source.seq_start, np.int64)[screened.read] + screened.start,
                  screened.length, lambda i: name_of(int(screened.read[i])))
    try:  # the vector pass's windows encoded here too: a byte outside the alphabet is found now
        inner = spans.encode() if choice.vector else batches.from_chunk(spans, engine)
    except SequenceError:
        # named and placed as in the read itself
        from .chunks import _encode_sequences

        _encode_sequences(source.data, np.asarray(source.seq_start, np.int64), lengths, name_of)
        raise
    if choice.vector:
        return WindowedBatch(source, name_of, windows, None, plan, engine, codes=inner)
    return WindowedBatch(source, name_of, windows, inner, plan, engine, choice.flag_planes,
                         flag_windows=screened if choice.flag_planes else None)


# ---------------------------------------------------------------- memory


def available_memory() -> int:
    """Bytes of memory this process may still take: MemAvailable where
    Linux says, else the physical memory."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def bytes_needed(window: int, pattern_length: int, span: int, planes: int, threads: int) -> int:
    """About the most memory a read screened in windows of ``window`` bases
    (or whole, of that length) against a pattern of ``pattern_length`` takes
    at once: the engine's state along the window for each thread (H and F,
    ``planes`` bit planes of a 64-byte vector per base, and the packed read),
    and the traceback's pointers and checkpoints for an alignment of up to
    ``span`` read bases on each thread (in segments of rows, on 16 lanes, or
    on one where 16 would take more than SEGMENTED_BUDGET)."""
    from .traceback import SEGMENTED_BUDGET, segmented_bytes

    screen = window * (2 * planes * 64 * threads + 3 * 64)
    rows = min(window, span)
    traceback = float(segmented_bytes(rows, pattern_length, 16))
    if traceback > SEGMENTED_BUDGET:
        traceback = float(segmented_bytes(rows, pattern_length, 1))
    return screen + int(traceback) * threads


def fit_check(table_lengths: np.ndarray, thresholds: np.ndarray, scoring: Scoring, threads: int, pattern_name):
    """check(name, length, window) for :func:`prepare`: raises
    :class:`PairTooLarge` naming the read where the longest pattern and the
    read need more memory than is available."""
    longest = int(np.argmax(table_lengths))
    m = int(table_lengths[longest])
    planes = max(score_planes(int(t)) for t in thresholds) + 1
    span = int(read_span(table_lengths, thresholds, scoring).max())

    def check(name, length: int, window: int) -> None:
        need = bytes_needed(min(length, window), m, min(length, span), planes, threads)
        have = available_memory()
        if need > have:
            raise PairTooLarge(
                f"read {name()}: {length} bases against pattern {pattern_name(longest)} ({m} bases) need about "
                f"{need / 2**30:.1f} GiB of memory, {have / 2**30:.1f} GiB available")

    return check


# ---------------------------------------------------------------- hits and alignments


def read_hits(batch: WindowedBatch, window_hits, strands: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                                         np.ndarray]:
    """The hits of the reads from those of their windows (``window_hits``:
    a :class:`bpbc.screener.Hits` whose reads are windows): per (read,
    pattern, strand), the best window score, capped where a window's is
    (capped scores are the cap, above every exact one), sorted by read,
    pattern, strand: the columns read, pattern, strand, score, capped."""
    read = batch.windows.read[window_hits.read]
    k = window_hits.pattern * strands + window_hits.strand
    count = int(k.max(initial=0)) + 1
    key = read * count + k
    order = np.argsort(key, kind="stable")
    key = key[order]
    starts = np.flatnonzero(first_of_runs(key))
    score = np.maximum.reduceat(window_hits.score[order], starts) if len(key) else np.zeros(0, np.int32)
    capped = np.logical_or.reduceat(window_hits.capped[order], starts) if len(key) else np.zeros(0, bool)
    first = order[starts]
    return read[first], window_hits.pattern[first], window_hits.strand[first], score.astype(np.int32), \
        capped.astype(bool)


def vector_scores(batch: WindowedBatch, table, scoring: Scoring) -> np.ndarray:
    """(windows, oriented patterns, 3): the exact score, read end (in the
    window) and pattern end of the end cell of every window against every
    oriented pattern of ``table``, by the traceback's vector score pass
    (:func:`bpbc.traceback.end_cells`: 32 int16 lanes, or 16 int32 lanes
    where the values need them)."""
    from .traceback import end_cells

    windows = batch.windows
    count = len(table)
    if batch.window_codes is not None:
        codes, lengths = batch.window_codes
    else:
        codes, lengths = batch.spans(windows.read, windows.start, windows.length).encode()
    rows = np.repeat(np.arange(len(windows), dtype=np.int64), count)
    ks = np.tile(np.arange(count, dtype=np.int64), len(windows))
    return end_cells(codes, lengths, rows, table, ks, scoring).reshape(len(windows), count, 3)


#: runs of windows (span_cells) fewer than this are scored whole, however long: they fill fewer lanes
#: than a block has, so each is scored alone (bpbc.traceback.end_cells), in memory a stripe of its rows
_FEW_SPANS = 16


def span_cells(batch: WindowedBatch, window: np.ndarray, k: np.ndarray, table, scoring: Scoring) -> tuple[
        np.ndarray, np.ndarray, np.ndarray]:
    """The end cells of the pairs (window[i], oriented pattern k[i]), each
    run of consecutive windows of one region against one k scored as one
    span (its windows' overlaps once: a read cut into windows overlapping
    by the plan's L - 1 bases had each base scored 2-5 times); where the
    runs are many (full blocks), a span covers the windows that start
    within the longest window's length of its first, so it is at most twice
    that long: (window, k, (spans, 3) score,
    read end in that window and pattern end), sorted by window then k, the
    window the last of the span's to start before its end cell.

    Where the pairs are every window of the plan that meets a flagged one
    (or every window), the best of a region's spans, where it reaches the
    threshold, is the region's best, at its first cell (as the best of its
    windows' was): an alignment that reaches the threshold spans at most L
    read bases, so it lies in a window of the plan, which meets a flagged
    one: it lies in a span and is found there; and a span's best is an
    alignment of the read's. A span's best below the threshold is dropped,
    as its windows' are."""
    from .traceback import end_cells

    windows = batch.windows
    order = np.lexsort((window, k))
    window, k = window[order], k[order]
    start = windows.start[window]
    run = np.ones(len(window), dtype=bool)
    run[1:] = (k[1:] != k[:-1]) | (window[1:] != window[:-1] + 1) | (windows.read[window[1:]] != windows.read[window[:-1]]) \
        | (windows.region[window[1:]] != windows.region[window[:-1]])
    if run.sum() >= _FEW_SPANS:  # many: cut where a window starts more than the longest window after the run's first
        longest = max(int(windows.length.max(initial=1)), 1)
        run_start = start[np.flatnonzero(run)][np.cumsum(run) - 1]
        piece = (start - run_start) // longest
        run[1:] |= piece[1:] != piece[:-1]
    firsts = np.flatnonzero(run)
    lasts = np.append(firsts[1:], len(window))[:len(firsts)] - 1
    first, last, k = window[firsts], window[lasts], k[firsts]
    start = windows.start[first]
    length = windows.start[last] + windows.length[last] - start
    read = windows.read[first]
    codes, lengths = batch.spans(read, start, length).encode()
    found = end_cells(codes, lengths, np.arange(len(first), dtype=np.int64), table, k, scoring)
    key = np.int64(1) << np.int64(40)
    at = np.searchsorted(windows.read * key + windows.start, read * key + start + found[:, 1], side="left") - 1
    at = np.clip(at, first, last)
    found[:, 1] += start - windows.start[at]
    order = np.lexsort((k, at))
    return at[order], k[order], found[order]


def meeting(windows: Windows, flag_windows: Windows, flagged: np.ndarray, k: np.ndarray) -> tuple[np.ndarray,
                                                                                               np.ndarray]:
    """(window, k) of every window of ``windows`` that shares a base with a
    flagged window of ``flag_windows`` (``flagged[i]`` against oriented
    pattern ``k[i]``), each pair once, sorted by window then k. Both cuts
    run along each read in order: starts and ends rise."""
    key = np.int64(1) << np.int64(40)
    starts = windows.read * key + windows.start
    stops = windows.read * key + windows.start + windows.length
    read = flag_windows.read[flagged]
    first = np.searchsorted(stops, read * key + flag_windows.start[flagged], side="right")
    last = np.searchsorted(starts, read * key + flag_windows.start[flagged] + flag_windows.length[flagged])
    counts = np.maximum(last - first, 0)
    window = np.repeat(first, counts) + np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    count = int(k.max(initial=0)) + 1
    pairs = np.unique(window * count + np.repeat(k, counts))
    return pairs // count, pairs % count


def vector_hits(batch: WindowedBatch, table, thresholds: np.ndarray, caps: np.ndarray, scoring: Scoring,
                flag_planes: int = 0) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The windows' hits from the vector score pass: (the columns window,
    pattern, strand, score, capped, sorted by window then oriented pattern;
    their end cells, (hits, 3) exact score, read end in the window and
    pattern end, for the traceback). Scores above ``caps`` (per oriented
    pattern) are reported as the cap and capped, as the engine's planes
    would hold them. With ``flag_planes``, only the pairs (window, pattern)
    whose window meets a window of the flags-only pass the engine flags at
    that many planes (score >= 2**flag_planes; :meth:`Oriented.flag_overlap`:
    every alignment that reaches the threshold lies in a window that meets
    a flagged one) go through the vector pass; else every pair."""
    if flag_planes:
        flagged, k = batch.engine.flagged(batch.inner.prepared, table, scoring, flag_planes)
        window, k = meeting(batch.windows, batch.windows if batch.flag_windows is None else batch.flag_windows, flagged, k)
    else:
        count = len(table)
        window = np.repeat(np.arange(len(batch.windows), dtype=np.int64), count)
        k = np.tile(np.arange(count, dtype=np.int64), len(batch.windows))
    window, k, found = span_cells(batch, window, k, table, scoring)
    passing = found[:, 0] >= thresholds[k]
    window, k, found = window[passing], k[passing], found[passing]
    score = found[:, 0]
    capped = score > caps[k]
    return (window.astype(np.int64), table.pattern[k], table.strand[k], np.where(capped, caps[k], score).astype(np.int32),
            capped), found


def align(batch: WindowedBatch, hits, table, strands: tuple[str, ...], scoring: Scoring, eqx: bool):
    """One alignment per hit of a windowed batch, that of the whole read
    (or of the end region it lies in): see the module docstring."""
    from .errors import InternalError
    from .traceback import align_hits, end_cells

    windows = batch.windows
    count = len(strands)
    k = hits.pattern * count + hits.strand
    # hits on reads not cut are aligned as before windows, unless the vector pass found their end cells
    known_cells = hits.ends is not None
    whole = np.zeros(len(hits), dtype=bool) if known_cells else windows.whole[hits.read]
    long_hits = np.flatnonzero(~whole)
    if not len(long_hits):
        codes, lengths = batch.spans(hits.read, np.zeros(len(hits), np.int64), batch.lengths[hits.read]).encode()
        return align_hits(codes, lengths, np.arange(len(hits)), k, table, strands, scoring, eqx)
    # the windows where each long hit reaches its score (capped: only capped windows can)
    w = hits.windows
    key_of_hits = hits.read * len(table) + k
    t = np.searchsorted(key_of_hits, windows.read[w.read] * len(table) + w.pattern * count + w.strand)
    at_best = np.where(hits.capped[t], w.capped, w.score == hits.score[t]) & ~whole[t]
    t, window = t[at_best], w.read[at_best]
    if known_cells:  # each window's first maximum; the first of them is the read's
        cell_hit, score = t, hits.ends[at_best, 0]
        end, column = windows.start[window] + hits.ends[at_best, 1], hits.ends[at_best, 2]
        cell_region = windows.region[window]
    else:  # a score pass over the stretch of each region those windows cover
        order = np.lexsort((windows.start[window], windows.region[window], t))
        t, window = t[order], window[order]
        group = np.ones(len(t), dtype=bool)
        group[1:] = (t[1:] != t[:-1]) | (windows.region[window[1:]] != windows.region[window[:-1]])
        starts = np.flatnonzero(group)
        cell_hit = t[starts]
        stretch_start = np.minimum.reduceat(windows.start[window], starts)
        stretch_stop = np.maximum.reduceat(windows.start[window] + windows.length[window], starts)
        cell_region = windows.region[window[starts]]
        codes, lengths = batch.spans(hits.read[cell_hit], stretch_start, stretch_stop - stretch_start).encode()
        found = end_cells(codes, lengths, np.arange(len(cell_hit)), table, k[cell_hit], scoring)
        score, end, column = found[:, 0], stretch_start + found[:, 1], found[:, 2]
    # the end cell of each long hit: the first maximum over its candidates
    pick = np.lexsort((column, end, -score, cell_hit))
    first = np.ones(len(pick), dtype=bool)
    first[1:] = cell_hit[pick[1:]] != cell_hit[pick[:-1]]
    pick = pick[first]
    if not np.array_equal(cell_hit[pick], long_hits):
        raise InternalError("a hit of a long read has no window at its score")
    score, end, column, region = score[pick], end[pick], column[pick], cell_region[pick]
    # the rows its alignment can span, and the whole reads of the other hits
    first_row = np.maximum(region, end - read_span(column, score, scoring))
    start = np.zeros(len(hits), dtype=np.int64)
    length = batch.lengths[hits.read].copy()
    start[long_hits] = first_row
    length[long_hits] = end - first_row
    known = np.full((len(hits), 3), -1, dtype=np.int64)
    known[long_hits] = np.stack([score, end - first_row, column], axis=1)
    codes, lengths = batch.spans(hits.read, start, length).encode()
    aligned = align_hits(codes, lengths, np.arange(len(hits)), k, table, strands, scoring, eqx, known)
    return _shifted(aligned, np.where(aligned.score > 0, start, 0))


def _shifted(table, offset: np.ndarray):
    """``table`` with ``offset`` added to its read coordinates."""
    import dataclasses

    return dataclasses.replace(table, read_start=table.read_start + offset, read_end=table.read_end + offset)
