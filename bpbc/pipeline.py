"""Screen sequence files chunk by chunk: read -> encode -> screen + traceback -> PAF, matched/unmatched reads, summary.

Four stages overlap, each in its own thread: reading and parsing (plain FASTQ
as raw bytes, see :mod:`bpbc.chunks`), encoding and transposing for the
engine, the screen and traceback (the calling thread, through one
:class:`bpbc.screener.Screener`), and formatting and writing. At most two
chunks wait between stages, so memory stays bounded whatever the input size.
Output follows input order. ``--json`` reports the seconds of each stage.
"""

from __future__ import annotations

import gc
import json
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np

from bpbc.engines import limit_numba_threads
from bpbc.errors import InternalError
from bpbc.io import STDIN, AtomicOutput, InputError, ReadsOutput, SequenceSource, display_name, read_patterns
from bpbc.paf import paf_lines
from bpbc.patterns import STRANDS, strands_of
from bpbc.result import Texts
from bpbc.scoring import Scoring

DEFAULT_THRESHOLD = 40
DEFAULT_CHUNK_SIZE = 100_000
#: the automatic chunk size keeps reads x patterns x strands under this, so a
#: chunk's score table (int32 + bool per instance) stays under about 80 MB
MAX_CHUNK_INSTANCES = 1 << 24
MIN_AUTO_CHUNK_SIZE = 1_000
#: the first chunk is this many times smaller (then doubling): the engine starts sooner
CHUNK_RAMP = 8


@dataclass(frozen=True)
class ScreenSettings:
    """Everything that decides which instances pass and how they are reported."""

    threshold: int = DEFAULT_THRESHOLD
    scoring: Scoring = Scoring()
    strand: str = "both"
    device: str = "auto"
    exact_scores: bool = False
    eqx: bool = False
    threads: int | None = None
    chunk_size: int | None = None  # None: automatic, see chunk_size_for

    @property
    def strands(self) -> tuple[str, ...]:
        return strands_of(self.strand)


def chunk_size_for(settings: ScreenSettings, n_patterns: int) -> int:
    """Reads per chunk: the user's choice, else DEFAULT_CHUNK_SIZE reduced so
    a chunk holds at most MAX_CHUNK_INSTANCES (read, pattern, strand) instances."""
    if settings.chunk_size is not None:
        return settings.chunk_size
    per_read = max(1, n_patterns * len(settings.strands))
    return max(MIN_AUTO_CHUNK_SIZE, min(DEFAULT_CHUNK_SIZE, MAX_CHUNK_INSTANCES // per_read))


@dataclass
class PatternSummary:
    name: str
    length: int
    #: strand ('+' or '-') -> number of reads that pass for this pattern on it
    reads_passing: dict[str, int]


@dataclass
class Summary:
    """The figures reported on stderr at the end and written by ``--json``."""

    reads_file: str
    patterns_file: str
    threshold: int
    scoring: dict[str, int]
    strands: list[str]
    #: where the scores were computed: 'cpu' or 'gpu'
    device: str
    reads: int = 0
    #: reads passing for at least one (pattern, strand)
    reads_passing: int = 0
    #: passing (read, pattern, strand) instances = PAF lines
    alignments: int = 0
    patterns: list[PatternSummary] = field(default_factory=list)
    wall_time_s: float = 0.0
    #: seconds per stage (see StageTimes)
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def reads_per_s(self) -> float:
        return self.reads / self.wall_time_s if self.wall_time_s > 0 else 0.0

    def as_dict(self) -> dict:
        figures = asdict(self)
        figures["reads_not_passing"] = self.reads - self.reads_passing
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
        lines = [
            f"bpbc-screen: {self.reads} reads screened in {self.wall_time_s:.2f} s "
            f"({self.reads_per_s:,.0f} reads/s); {self.reads_passing} passed "
            f"(threshold {self.threshold}, {strands})"
        ]
        width = max([len("pattern")] + [len(p.name) for p in self.patterns])
        lines.append(f"  {'pattern':<{width}}  length  strand  reads passing")
        for pattern in self.patterns:
            for strand, count in pattern.reads_passing.items():
                lines.append(f"  {pattern.name:<{width}}  {pattern.length:>6}  {strand:>6}  {count:>13}")
        return "\n".join(lines)


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (restored on exit).

    dnaio records are GC-tracked, so with two chunks of them alive every
    collection walks hundreds of thousands of objects: measured, about a
    third of the run time. The screening loop creates no reference cycles;
    reference counting frees everything it allocates.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


#: how often a thread holding the GIL hands it over while the pipeline runs
SWITCH_INTERVAL_S = 0.0005


@contextmanager
def quick_gil_handoff() -> Iterator[None]:
    """Shorten Python's thread switch interval (restored on exit).

    The stages run in threads that each need the GIL now and then (the
    decompressor between blocks, the writer between records): with the
    default 5 ms a thread waits up to that long for every handover, which
    measured 2.3 s instead of 0.85 s for reading 1M reads beside one busy
    thread."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


class _Raised:
    """Carries an exception from the reader thread to the main thread."""

    def __init__(self, error: BaseException):
        self.error = error


_END = object()


def prefetched(items: Iterator, stop_timeout_s: float = 1.0) -> Iterator:
    """Iterate ``items`` in a background thread, one item ahead.

    The thread produces item k+1 while the caller works on item k, then waits
    until the caller takes it before producing k+2, so at most two items
    exist at once. Exceptions in the thread re-raise in the caller.
    """
    handoff: queue.Queue = queue.Queue(maxsize=1)
    taken = threading.Semaphore(0)  # released each time the caller takes an item
    stop = threading.Event()

    def hand_over(item) -> bool:
        """Give one item to the caller and wait until it is taken; False when stopped."""
        handoff.put(item)  # never blocks: the previous item was taken
        while not stop.is_set():
            if taken.acquire(timeout=0.1):
                return True
        return False

    def produce() -> None:
        try:
            for item in items:
                if not hand_over(item):
                    return
            hand_over(_END)
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller
            hand_over(_Raised(error))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()  # an inner prefetched() stops its own thread

    worker = threading.Thread(target=produce, name="bpbc-reader", daemon=True)
    worker.start()
    try:
        while True:
            item = handoff.get()
            taken.release()
            if item is _END:
                return
            if isinstance(item, _Raised):
                raise item.error
            yield item
    finally:
        stop.set()
        worker.join(stop_timeout_s)


class StageTimes:
    """Seconds spent per stage of the run: read (decompress and parse),
    encode (encode and transpose) and write (PAF formatting and all output)
    each run in a thread of their own, device (the screen) and traceback in
    the calling thread; they overlap, so the shares of wall time may add up to
    more than 1."""

    STAGES = ("read", "encode", "device", "traceback", "write")

    def __init__(self):
        self.seconds = dict.fromkeys(self.STAGES, 0.0)

    @contextmanager
    def timing(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - start

    def timed(self, iterator: Iterator, stage: str) -> Iterator:
        """``iterator``, the time spent producing each item counted for ``stage``."""
        while True:
            with self.timing(stage):
                item = next(iterator, _END)
            if item is _END:
                return
            yield item


def _prepared_chunks(source: SequenceSource, size: int, screener, stages: StageTimes) -> Iterator:
    """(chunk, ReadBatch) per chunk of ``source``, in two background threads:
    one reads and parses chunk k+2 while the other encodes and transposes
    chunk k+1 and the caller screens chunk k."""
    from bpbc.alphabet import SequenceError
    from bpbc.screener import ReadBatch

    def encoded(chunks: Iterator) -> Iterator:
        limit_numba_threads(screener.threads)
        with closing(chunks):
            for chunk in chunks:
                try:
                    with stages.timing("encode"):
                        batch = ReadBatch.from_codes(*chunk.encode(), screener.engine)
                except SequenceError as error:
                    raise InputError(f"{source.name}: {error}") from None
                yield chunk, batch

    return prefetched(encoded(prefetched(stages.timed(source.chunks(size, ramp=CHUNK_RAMP), "read"))))


class OrderedWorker:
    """Runs submitted calls one after another in a background thread, at most
    ``depth`` waiting (so memory stays bounded). An exception in a call is
    raised in the submitting thread at its next :meth:`submit` or at
    :meth:`finish`; leaving a ``with`` block stops the thread."""

    def __init__(self, depth: int = 2):
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="bpbc-writer", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if self._error is None and not self._stop.is_set():
                call, args = item
                try:
                    call(*args)
                except BaseException as error:  # noqa: BLE001 - re-raised in the submitter
                    self._error = error

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def submit(self, call: Callable, *args) -> None:
        self._raise()
        self._queue.put((call, args))

    def finish(self) -> None:
        """Wait for every submitted call; re-raise the first error."""
        self._queue.put(_END)
        self._thread.join()
        self._raise()

    def __enter__(self) -> OrderedWorker:
        return self

    def __exit__(self, *exc_info) -> None:
        if self._thread.is_alive():
            self._stop.set()  # the calls still queued are skipped
            self._queue.put(_END)
            self._thread.join()


def make_screener(settings: ScreenSettings, patterns):
    """The Screener every chunk goes through (patterns encoded, engine
    compiled and allocated once); bad settings raise InputError."""
    from bpbc.screener import Screener

    if settings.strand not in STRANDS:
        raise InputError(f"strand must be one of {', '.join(STRANDS)}, got {settings.strand!r}")
    try:
        # the Screener checks the settings before it selects the engine
        return Screener(patterns, settings.threshold, settings.scoring, settings.strand, settings.exact_scores,
                        settings.eqx, device=settings.device, threads=settings.threads)
    except InternalError:
        raise  # not the user's doing
    except (ValueError, RuntimeError) as error:  # bad threshold, unknown device, bad threads, no usable GPU
        raise InputError(str(error)) from None


def screen_files(
    reads_path,
    patterns_path,
    settings: ScreenSettings = ScreenSettings(),
    *,
    output=None,
    matched=None,
    unmatched=None,
    json_path=None,
    progress: Callable[[int], None] | None = None,
) -> Summary:
    """Screen every read of ``reads_path`` against every pattern of ``patterns_path``.

    Writes PAF to ``output`` (a path; None or '-' for stdout), passing reads
    to ``matched`` and the others to ``unmatched`` (paths or None), the
    summary as JSON to ``json_path``. ``progress(reads_done)`` is called after
    each chunk. Files appear only when the whole run succeeds. Expected
    problems raise :class:`bpbc.errors.InputError`; failed internal cross-checks
    :class:`bpbc.errors.InternalError`.
    """
    started = time.perf_counter()
    if reads_path == STDIN and patterns_path == STDIN:
        raise InputError("reads and patterns cannot both be read from stdin ('-')")
    with ExitStack() as stack:
        stack.enter_context(cyclic_gc_paused())
        stack.enter_context(quick_gil_handoff())
        # the reads file first: a missing or unreadable file is the most basic problem
        source = stack.enter_context(SequenceSource(reads_path, kind="reads", raw_fastq=True))
        patterns = read_patterns(patterns_path)
        screener = make_screener(settings, patterns)
        limit_numba_threads(settings.threads)  # the traceback's kernels, in this thread
        pattern_ids = screener.pattern_names
        pattern_lengths = screener.pattern_lengths.tolist()
        strands = screener.strands
        summary = Summary(
            reads_file=display_name(reads_path),
            patterns_file=display_name(patterns_path),
            threshold=settings.threshold,
            scoring=asdict(settings.scoring),
            strands=list(strands),
            device=screener.engine.name,
        )
        counts = np.zeros((len(pattern_ids), len(strands)), dtype=np.int64)
        stages = StageTimes()

        outputs: list[AtomicOutput] = []

        def create(path, what) -> AtomicOutput:
            out = stack.enter_context(AtomicOutput(path, what))
            outputs.append(out)
            return out

        paf_file = None if output in (None, STDIN) else create(output, "PAF")
        reads_outputs = [None if path is None else ReadsOutput(create(path, what), source)
                         for path, what in ((matched, "matched reads"), (unmatched, "unmatched reads"))]
        json_file = None if json_path is None else create(json_path, "JSON summary")
        if paf_file is not None:
            paf_handle = paf_file.open_binary()

            write_paf = paf_handle.write
        else:
            stdout = sys.stdout

            def write_paf(text: bytes) -> None:
                stdout.write(text.decode("ascii"))

        pattern_texts = Texts.of(pattern_ids)

        def write(chunk, batch_lengths, alignments, passing) -> None:
            with stages.timing("write"):
                if len(alignments):
                    rows = alignments.read_index
                    write_paf(paf_lines(alignments, chunk.read_names(rows), batch_lengths[rows], pattern_texts,
                                        pattern_lengths))
                for reads_output, selected in zip(reads_outputs, (passing, ~passing)):
                    if reads_output is not None:
                        chunk.write(reads_output, selected)

        # closed (its threads stopped) before the outputs and the source are closed
        writer = stack.enter_context(OrderedWorker())
        chunks = stack.enter_context(closing(
            _prepared_chunks(source, chunk_size_for(settings, len(patterns)), screener, stages)))
        for chunk, batch in chunks:
            with stages.timing("device"):
                hits = screener.hits(batch)
            with stages.timing("traceback"):
                alignments = screener.align(batch, hits)
            passing = np.zeros(len(chunk), dtype=bool)
            passing[hits.read] = True
            writer.submit(write, chunk, batch.lengths, alignments, passing)
            np.add.at(counts, (hits.pattern, hits.strand), 1)
            summary.reads += len(chunk)
            summary.reads_passing += int(passing.sum())
            summary.alignments += len(alignments)
            if progress is not None:
                progress(summary.reads)
        writer.finish()
        if paf_file is None:
            sys.stdout.flush()

        summary.patterns = [
            PatternSummary(pid, length, {strand: int(counts[p, k]) for k, strand in enumerate(strands)})
            for p, (pid, length) in enumerate(zip(pattern_ids, pattern_lengths))
        ]
        summary.wall_time_s = time.perf_counter() - started
        summary.stage_seconds = dict(stages.seconds)
        if json_file is not None:
            json_file.open_binary().write((json.dumps(summary.as_dict(), indent=2) + "\n").encode())
        for out in outputs:
            out.commit()
    return summary
