"""A run's figures, counted in one place: the summary (stderr, ``--json``) and the report's histograms.

:class:`Statistics` is built up batch by batch (:meth:`Statistics.add_batch`,
the pipeline's one hook per batch) and merged with ``+=``: the chunks of a
Dask run, and the files of a run over several. :class:`Summary` takes its
counts from it (:meth:`Statistics.fill`). Its memory is fixed by the patterns
and :data:`HISTOGRAM_BINS`, not by the reads.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field, fields

import numpy as np
from numba import njit

#: bins of a position or length histogram; each bin is ``width`` wide, a power
#: of two doubled when a larger value comes: exact (width 1) up to 255
HISTOGRAM_BINS = 256


@njit(cache=True, nogil=True)
def _largest(first, second):
    """The largest values of two non-empty arrays, in one call (the GIL released)."""
    a, b = first[0], second[0]
    for i in range(len(first)):
        a = max(a, first[i])
    for i in range(len(second)):
        b = max(b, second[i])
    return int(a), int(b)


@njit(cache=True, nogil=True)
def _count_hits(read, pattern, strand, score, start, end, mates, passing, sole_pattern, scores, start_counts,
                start_shift, end_counts, end_shift):
    """Count a batch's hits (sorted by read, then pattern, then strand) in
    one pass with the GIL released: per (pattern, strand, mate) the hits,
    the scores, where they start and end on the read (histogram rows pattern
    x mates + mate, bins ``start_shift`` and ``end_shift`` bits wide), and
    per run of hits of one read its patterns: a read with one passes for that
    pattern alone. Returns (reads, reads passing for several patterns). The
    pipeline's writer counts every batch: as numpy operations, each one
    handing the GIL back and waiting for it again, it took most of the
    writer's time beside a dozen busy threads."""
    readers = several = 0
    n = len(read)
    i = 0
    while i < n:
        r = read[i]
        mate = r % mates
        patterns = 0
        last = -1
        while i < n and read[i] == r:
            p = pattern[i]
            if p != last:
                patterns += 1
                last = p
            if score[i] < 0 or score[i] >= scores.shape[1]:
                raise IndexError("a hit's score lies outside the score histogram")
            passing[p, strand[i], mate] += 1
            scores[p, score[i]] += 1
            start_counts[p * mates + mate, start[i] >> start_shift] += 1
            end_counts[p * mates + mate, end[i] >> end_shift] += 1
            i += 1
        readers += 1
        if patterns == 1:
            sole_pattern[last] += 1
        else:
            several += 1
    return readers, several


def used_bins(counts: np.ndarray) -> int:
    """The columns of ``counts`` up to the last that any row uses."""
    used = np.flatnonzero(counts.any(axis=0))
    return int(used[-1]) + 1 if len(used) else 0


class Histogram:
    """Counts of non-negative integers, one histogram per row, in
    :data:`HISTOGRAM_BINS` bins of ``width`` (bin i holds i x width ...
    (i + 1) x width - 1). A wider width merges pairs of bins, so histograms
    of one data set are the same however it was split and merged."""

    def __init__(self, rows: int, bins: int = HISTOGRAM_BINS):
        self.counts = np.zeros((rows, bins), np.int64)
        self.width = 1

    def _widen(self, width: int) -> None:
        rows, bins = self.counts.shape
        while self.width < width:
            halved = self.counts.reshape(rows, bins // 2, 2).sum(axis=2)
            self.counts = np.concatenate([halved, np.zeros_like(halved)], axis=1)
            self.width *= 2

    def _fit(self, top: int) -> None:
        """Widen the bins until ``top`` falls in one."""
        width = self.width
        while top // width >= self.counts.shape[1]:
            width *= 2
        self._widen(width)

    def add(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Count ``values[i]`` in row ``rows[i]``."""
        if len(values):
            self._fit(int(values.max()))
            np.add.at(self.counts, (rows, values >> (self.width.bit_length() - 1)), 1)

    def add_all(self, row: int, values: np.ndarray) -> None:
        """Count every value of ``values`` in ``row`` (reads of one length: one addition)."""
        if not len(values):
            return
        low, high = int(values.min()), int(values.max())
        self._fit(high)
        shift = self.width.bit_length() - 1
        if low == high:
            self.counts[row, low >> shift] += len(values)
        else:
            self.counts[row] += np.bincount(values >> shift, minlength=self.counts.shape[1])

    def __iadd__(self, other: Histogram) -> Histogram:
        other = copy.deepcopy(other) if other.width < self.width else other
        other._widen(self.width)
        self._widen(other.width)
        self.counts += other.counts
        return self

    def as_dict(self, labels: list[str] | None = None) -> dict:
        """``width`` and per row (``labels``, else the row's index) the counts
        up to the last bin that holds any (the JSON of the report)."""
        end = used_bins(self.counts)
        names = labels if labels is not None else [str(row) for row in range(len(self.counts))]
        return {"width": self.width, "counts": {name: row[:end].tolist() for name, row in zip(names, self.counts)}}


@dataclass(frozen=True)
class HitColumns:
    """What :meth:`Statistics.add_batch` counts of a batch's alignments (an
    :class:`~bpbc.result.AlignmentTable` has these columns too): what a Dask
    worker sends back for them."""

    read_index: np.ndarray
    pattern_index: np.ndarray
    strand: np.ndarray
    score: np.ndarray
    read_start: np.ndarray
    read_end: np.ndarray

    @classmethod
    def of(cls, alignments) -> HitColumns:
        return cls(*(getattr(alignments, f.name) for f in fields(cls)))


@dataclass
class PatternSummary:
    name: str
    length: int
    threshold: int
    #: strand ('+' or '-') -> number of reads that pass for this pattern on it
    reads_passing: dict[str, int]
    #: paired reads only: mate ('1' or '2') -> strand -> reads passing
    mates: dict[str, dict[str, int]] | None = None
    #: --action trim or mask: reads this pattern trimmed (masked), and their bases
    trimmed_reads: int | None = None
    trimmed_bases: int | None = None


class Statistics:
    """Every count of a run, and the report's histograms, for ``mates``
    reads per unit (1, or 2 for pairs) screened against patterns
    (``names``, ``lengths``, ``thresholds``) on ``strands``.

    Histograms: where the hits start and end on the read (0-based, end
    exclusive, as PAF's query start and end) per pattern and mate; the hits'
    exact scores per pattern (up to ``match`` x the pattern's length); read
    lengths per mate, and with ``action`` trim their lengths after trimming
    (the reads kept)."""

    def __init__(self, names: list[str], lengths: list[int], thresholds: list[int], strands: list[str], mates: int,
                 match: int, action: str = "none"):
        patterns = len(names)
        self.names, self.lengths, self.thresholds = list(names), list(lengths), list(thresholds)
        self.strands, self.mates, self.action = list(strands), mates, action
        self.reads = self.reads_passing = self.pairs = self.pairs_passing = self.alignments = 0
        #: reads passing per (pattern, strand, mate)
        self.passing = np.zeros((patterns, len(strands), mates), np.int64)
        #: reads passing for this pattern and no other, and reads passing for several
        self.sole_pattern = np.zeros(patterns, np.int64)
        self.several_patterns = 0
        self.reads_trimmed = self.bases_trimmed = self.too_short = 0
        self.pattern_trimmed_reads = np.zeros(patterns, np.int64)
        self.pattern_trimmed_bases = np.zeros(patterns, np.int64)
        self.hit_starts = Histogram(patterns * mates)  # row: pattern x mates + mate
        self.hit_ends = Histogram(patterns * mates)
        self.scores = np.zeros((patterns, match * max(lengths, default=0) + 1), np.int64)
        self.read_lengths = Histogram(mates)
        self.trimmed_lengths = Histogram(mates)

    def add_batch(self, lengths: np.ndarray, hits, passing: np.ndarray, edit=None) -> None:
        """Count a batch: its reads' ``lengths`` (mates alternate in pairs),
        its ``hits`` (one per passing instance, sorted by read, then pattern,
        then strand, as the screen gives them: the ``read_index``,
        ``pattern_index``, ``strand``, ``score``, ``read_start`` and
        ``read_end`` columns of an :class:`~bpbc.result.AlignmentTable`),
        ``passing`` per unit (reads, or pairs under the pair filter) as the
        screen found them, and the trimming's ``edit``
        (:class:`bpbc.trimming.ChunkEdit`) or None. Its time goes with the
        hits, not the reads, but for the lengths (measured: about 1 ms for
        100k reads with 10k hits)."""
        mates = self.mates
        read = hits.read_index
        self.reads += len(lengths)
        if mates == 2:
            self.pairs += len(lengths) // 2
            self.pairs_passing += int(np.count_nonzero(passing))
        self.alignments += len(read)
        if len(read):
            # contiguous columns: numba compiles a kernel for each mix of layouts a table's columns come in
            read, pattern, strand, score, start, end = (np.ascontiguousarray(column) for column in (
                read, hits.pattern_index, hits.strand, hits.score, hits.read_start, hits.read_end))
            starts, ends = self.hit_starts, self.hit_ends
            top_start, top_end = _largest(start, end)
            starts._fit(top_start)
            ends._fit(top_end)
            readers, several = _count_hits(read, pattern, strand, score, start, end, mates, self.passing,
                                           self.sole_pattern, self.scores,
                                           starts.counts, starts.width.bit_length() - 1, ends.counts,
                                           ends.width.bit_length() - 1)
            self.reads_passing += readers
            self.several_patterns += several
        for m in range(mates):
            self.read_lengths.add_all(m, lengths[m::mates])
        if edit is not None:
            self.pattern_trimmed_reads += edit.pattern_reads
            self.pattern_trimmed_bases += edit.pattern_bases
            self.reads_trimmed += int(np.count_nonzero(edit.edited))
            self.bases_trimmed += int(edit.bases)
            self.too_short += len(edit.kept) - int(np.count_nonzero(edit.kept))
            if self.action == "trim":
                trimmed = edit.keep_end - edit.keep_start
                for m in range(mates):
                    self.trimmed_lengths.add_all(m, trimmed[m::mates][edit.kept])

    def __iadd__(self, other: Statistics) -> Statistics:
        if (self.names, self.strands, self.mates) != (other.names, other.strands, other.mates):
            raise ValueError("statistics of different patterns, strands or mates cannot be added")
        for name in ("reads", "reads_passing", "pairs", "pairs_passing", "alignments", "reads_trimmed",
                     "bases_trimmed", "too_short", "passing", "sole_pattern", "several_patterns",
                     "pattern_trimmed_reads", "pattern_trimmed_bases", "scores", "hit_starts", "hit_ends",
                     "read_lengths", "trimmed_lengths"):
            mine = getattr(self, name)
            mine += getattr(other, name)
            setattr(self, name, mine)
        return self

    def pattern_summaries(self) -> list[PatternSummary]:
        counts, mates = self.passing, self.mates
        trimming = self.action != "none"
        return [
            PatternSummary(
                name, length, threshold,
                {strand: int(counts[p, k].sum()) for k, strand in enumerate(self.strands)},
                None if mates == 1 else {str(m + 1): {strand: int(counts[p, k, m]) for k, strand
                                                      in enumerate(self.strands)} for m in range(mates)},
                int(self.pattern_trimmed_reads[p]) if trimming else None,
                int(self.pattern_trimmed_bases[p]) if trimming else None)
            for p, (name, length, threshold) in enumerate(zip(self.names, self.lengths, self.thresholds))
        ]

    def fill(self, summary: Summary) -> None:
        """Put the counts into ``summary``."""
        for name in ("reads", "reads_passing", "pairs", "pairs_passing", "alignments", "reads_trimmed",
                     "bases_trimmed", "too_short"):
            setattr(summary, name, getattr(self, name))
        summary.patterns = self.pattern_summaries()

    def mate_labels(self) -> list[str]:
        return ["reads"] if self.mates == 1 else ["mate 1", "mate 2"]

    def as_dict(self) -> dict:
        """The histograms (the report's JSON, docs/json.md)."""
        mates = self.mate_labels()
        rows = [name if self.mates == 1 else f"{name} ({mate})" for name in self.names for mate in mates]
        end = used_bins(self.scores)
        figures = {
            "hit_starts": self.hit_starts.as_dict(rows),
            "hit_ends": self.hit_ends.as_dict(rows),
            "scores": {name: row[:end].tolist() for name, row in zip(self.names, self.scores)},
            "read_lengths": self.read_lengths.as_dict(mates),
        }
        if self.action == "trim":
            figures["trimmed_lengths"] = self.trimmed_lengths.as_dict(mates)
        return figures


@dataclass
class Summary:
    """The figures reported on stderr at the end and written by ``--json``;
    the counts come from ``statistics`` (:meth:`Statistics.fill`)."""

    reads_file: str
    patterns_file: str
    #: the threshold of every pattern, or None when they differ (see patterns)
    threshold: int | None
    scoring: dict[str, int]
    strands: list[str]
    #: where the scores were computed: 'cpu' or 'gpu'
    device: str
    #: GPUs the chunks were spread over (1 on the CPU)
    devices: int = 1
    min_score_fraction: float | None = None
    #: paired reads: the mate 2 file (the reads file itself when interleaved)
    reads2_file: str | None = None
    paired: bool = False
    pair_filter: str | None = None
    reads: int = 0
    #: reads passing for at least one (pattern, strand)
    reads_passing: int = 0
    pairs: int = 0
    #: pairs passing under the pair filter
    pairs_passing: int = 0
    #: passing (read, pattern, strand) instances = PAF lines
    alignments: int = 0
    patterns: list[PatternSummary] = field(default_factory=list)
    wall_time_s: float = 0.0
    #: seconds per stage (see bpbc.pipeline.StageTimes)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    #: the threads of each stage (bpbc.resources.CorePlan)
    plan: dict = field(default_factory=dict)
    #: --action trim or mask: reads trimmed (masked) and bases, units dropped by --min-length
    action: str = "none"
    reads_trimmed: int = 0
    bases_trimmed: int = 0
    too_short: int = 0
    #: the counts and histograms (not in the JSON summary: the report has them)
    statistics: Statistics | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of_run(cls, statistics: Statistics, **figures) -> Summary:
        """The summary of a run whose counts will build up in ``statistics``."""
        summary = cls(strands=list(statistics.strands), paired=statistics.mates == 2, action=statistics.action,
                      statistics=statistics, **figures)
        statistics.fill(summary)
        return summary

    def __iadd__(self, other: Summary) -> Summary:
        """Add the counts and stage seconds of ``other`` (a run on other reads)."""
        assert self.statistics is not None and other.statistics is not None
        self.statistics += other.statistics
        self.statistics.fill(self)
        for stage, value in other.stage_seconds.items():
            self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + value
        return self

    @property
    def compile_time_s(self) -> float:
        """Seconds numba spent compiling CPU kernels (a cold cache, see
        :mod:`bpbc.compile_watch`): part of the wall time, not of the rate."""
        return self.stage_seconds.get("compile", 0.0)

    @property
    def reads_per_s(self) -> float:
        seconds = self.wall_time_s - self.compile_time_s
        return self.reads / seconds if seconds > 0 else 0.0

    def as_dict(self) -> dict:
        figures = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "statistics"}
        figures["patterns"] = [asdict(pattern) for pattern in self.patterns]
        figures["reads_not_passing"] = self.reads - self.reads_passing
        if self.paired:
            figures["pairs_not_passing"] = self.pairs - self.pairs_passing
        else:
            for key in ("reads2_file", "pair_filter", "pairs", "pairs_passing"):
                del figures[key]
            for pattern in figures["patterns"]:
                del pattern["mates"]
        if self.action == "none":
            for key in ("action", "reads_trimmed", "bases_trimmed", "too_short"):
                del figures[key]
            for pattern in figures["patterns"]:
                del pattern["trimmed_reads"], pattern["trimmed_bases"]
        figures["wall_time_s"] = round(self.wall_time_s, 6)
        figures["reads_per_s"] = round(self.reads_per_s, 3)
        figures["stage_seconds"] = {stage: round(value, 6) for stage, value in self.stage_seconds.items()}
        figures["stage_shares"] = {
            stage: round(value / self.wall_time_s, 4) if self.wall_time_s > 0 else 0.0
            for stage, value in self.stage_seconds.items()
        }
        return figures

    def format(self) -> str:
        """Human-readable summary (several lines, no trailing newline)."""
        strands = "both strands" if len(self.strands) == 2 else "forward strand only"
        threshold = "per-pattern thresholds" if self.threshold is None else f"threshold {self.threshold}"
        done = f"{self.reads} reads"
        passed = f"{self.reads_passing} passed ({threshold}, {strands})"
        if self.paired:
            done = f"{self.pairs} pairs ({self.reads} reads)"
            passed = (f"{self.pairs_passing} pairs passed, pair filter {self.pair_filter} "
                      f"({self.reads_passing} reads passed; {threshold}, {strands})")
        rate = f"{self.reads_per_s:,.0f} reads/s"
        if self.compile_time_s > 0:
            rate += f", not counting {self.compile_time_s:.2f} s compiling CPU kernels"
        lines = [f"bpbc-screen: {done} screened in {self.wall_time_s:.2f} s ({rate}); {passed}"]
        if self.action != "none":
            dropped = f"; {self.too_short} {'pairs' if self.paired else 'reads'} dropped by --min-length"
            lines.append(f"  {self.action}: {self.reads_trimmed} reads, {self.bases_trimmed} bases"
                         f"{dropped if self.too_short else ''}")
        width = max([len("pattern")] + [len(p.name) for p in self.patterns])
        counts = "  mate 1  mate 2" if self.paired else "  reads passing"
        lines.append(f"  {'pattern':<{width}}  length  threshold  strand{counts}")
        for pattern in self.patterns:
            for strand, count in pattern.reads_passing.items():
                line = f"  {pattern.name:<{width}}  {pattern.length:>6}  {pattern.threshold:>9}  {strand:>6}"
                if self.paired:
                    mates = pattern.mates or {}
                    line += "".join(f"  {mates[mate][strand]:>6}" for mate in ("1", "2"))
                else:
                    line += f"  {count:>13}"
                lines.append(line)
        return "\n".join(lines)


def summary_json(summary: Summary) -> bytes:
    """What ``--json`` writes."""
    return (json.dumps(summary.as_dict(), indent=2) + "\n").encode()


def combined_summary(summaries: list[Summary], wall_time_s: float) -> Summary:
    """One summary for a run over several files: their counts added up
    (``+=``), the first file's settings, ``wall_time_s``."""
    first = summaries[0]
    assert first.statistics is not None
    total = Summary.of_run(copy.deepcopy(first.statistics), **{
        f.name: copy.deepcopy(getattr(first, f.name)) for f in fields(first)
        if f.name in ("patterns_file", "threshold", "scoring", "device", "devices", "min_score_fraction",
                      "reads2_file", "pair_filter")},
        reads_file=f"{len(summaries)} files", stage_seconds=dict(first.stage_seconds), wall_time_s=wall_time_s)
    for summary in summaries[1:]:
        total += summary
    return total
