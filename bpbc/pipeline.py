"""Screen sequence files chunk by chunk: read -> encode -> screen + traceback -> PAF, matched/unmatched reads, summary.

Six stages overlap, each in its own thread: decompressing (a few blocks
ahead, see :class:`bpbc.io.SequenceSource`), parsing (plain FASTQ as raw
bytes, see :mod:`bpbc.chunks`; it starts while the engine is set up),
encoding and transposing for the engine, the screen (the calling thread,
through one :class:`bpbc.screener.Screener`), the traceback of the hits, and
formatting and writing. At most two chunks wait between stages, so memory
stays bounded whatever the input size. Output follows input order. ``--json`` reports the seconds of each stage. With
one thread (``--threads 1``) the engine, the numba kernels and de/compression
use one thread and the traceback and writing are done by the calling thread.
"""

from __future__ import annotations

import functools
import gc
import queue
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextlib import ExitStack, closing, contextmanager
from dataclasses import asdict

import numpy as np

from bpbc.compile_watch import watching_compiles
from bpbc.engines import limit_numba_threads
from bpbc.errors import InternalError
from bpbc.io import STDIN, InputError, SequenceSource, display_name, read_patterns
from bpbc.pairs import interleaved_pairs, two_file_pairs
from bpbc.outputs import RunFiles, check_distinct_files
from bpbc.paf import paf_lines
from bpbc.resources import CorePlan, plan_run
from bpbc.result import Texts
from bpbc.scoring import score_planes
from bpbc.settings import DEFAULT_CHUNK_SIZE, PAIR_FILTERS, STRANDS, ScreenSettings
from bpbc.sinks import NAME_FIELD, DemuxSink, best_patterns, is_template
from bpbc.summary import Statistics, Summary, summary_json
from bpbc.thresholds import pattern_thresholds

#: the automatic chunk size keeps reads x patterns x strands under this. A
#: screen for hits keeps a bit or two per instance (the flag words, on the GPU
#: their ranks too: about 0.6 GB at 2^30), so big panels still get chunks of
#: DEFAULT_CHUNK_SIZE reads (10^4 oriented patterns: 100k reads; with 2^24,
#: 1677, and per-chunk costs that made 5000 patterns run at a fifth of the
#: kernel's rate)
MAX_CHUNK_INSTANCES = 1 << 30
#: where every instance keeps its score (int32 + bool): exact scores, and
#: thresholds so low that the CPU engine screens in one pass with scores
MAX_CHUNK_SCORED_INSTANCES = 1 << 24
MIN_AUTO_CHUNK_SIZE = 1_000
#: with several devices a chunk holds at most this many reads x pattern bases
#: x strands (with 150 bp reads, 1.3e12 cells: about 0.2 s of an H100), so
#: that the devices end together: a run ends with its last chunk, and 100k
#: reads against 5000 patterns were 0.55 s of one device. Each chunk costs
#: its device about 10-15 ms more than its kernels; 2^33 was the best of
#: 2^32, 2^33 and 2^34 in two runs on 2 x H200 (docs/gpu.md)
SEVERAL_DEVICES_CHUNK_WORK = 1 << 33
#: ... and at least this many reads (a chunk's per-launch costs)
SEVERAL_DEVICES_MIN_CHUNK = 4_096
#: a chunk of single reads ends once it holds this many bases (long reads:
#: 100k reads of 10 kb would be 1 Gb, about 2 GB of FASTQ a chunk in flight)
CHUNK_BASES = 1 << 26
#: the first chunk is this many times smaller (then doubling): the engine starts sooner
CHUNK_RAMP = 8
#: with several devices, the chunks each has under way: one screened, the
#: next encoded beside it (:func:`_screened`)
CHUNKS_PER_DEVICE = 2


def chunk_size_for(settings: ScreenSettings, n_patterns: int, mates: int = 1) -> int:
    """Reads (pairs, with ``mates`` = 2) per chunk: the user's choice, else
    DEFAULT_CHUNK_SIZE reduced so a chunk holds at most MAX_CHUNK_INSTANCES
    (read, pattern, strand) instances (MAX_CHUNK_SCORED_INSTANCES where each
    keeps its score)."""
    from bpbc.screener import MIN_TWO_PASS_PLANES

    if settings.chunk_size is not None:
        return settings.chunk_size
    per_read = max(1, n_patterns * len(settings.strands))
    scored = settings.exact_scores or (settings.min_score_fraction is None
                                       and score_planes(settings.threshold) < MIN_TWO_PASS_PLANES)
    limit = MAX_CHUNK_SCORED_INSTANCES if scored else MAX_CHUNK_INSTANCES
    return max(MIN_AUTO_CHUNK_SIZE, min(DEFAULT_CHUNK_SIZE, limit // per_read)) // mates


def several_devices_chunk_size(size: int, screener, mates: int = 1) -> int:
    """Reads (pairs) per chunk for a run on several devices: ``size``, or
    fewer where a chunk would hold more than SEVERAL_DEVICES_CHUNK_WORK."""
    bases = max(1, int(screener.pattern_lengths.sum()) * len(screener.strands) * mates)
    return min(size, max(SEVERAL_DEVICES_MIN_CHUNK // mates, SEVERAL_DEVICES_CHUNK_WORK // bases))


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


class _Handoff:
    """What a :class:`prefetched` and its thread share (the thread holds this,
    not the iterator, so that an iterator dropped unclosed can stop it)."""

    def __init__(self) -> None:
        self.items: queue.Queue = queue.Queue(maxsize=1)
        self.taken = threading.Semaphore(0)  # released each time the caller takes an item
        self.stop = threading.Event()

    def halt(self) -> None:
        """Stop the thread; wake it where it waits for an item to be taken
        (without this it noticed the stop only at its next 0.1 s poll, and
        every run that ended in an error waited that long, once per nested
        prefetched)."""
        if not self.stop.is_set():
            self.stop.set()
            self.taken.release()

    def give(self, item) -> bool:
        """Give one item to the caller and wait until it is taken; False when stopped."""
        while True:  # the previous item was taken, or the caller stopped: then nobody takes this one
            if self.stop.is_set():
                return False
            try:
                # (a put without a timeout waited for ever where the caller had stopped: under 300 interrupted
                # runs in one process, an encoder thread was left behind by some of them)
                self.items.put(item, timeout=0.1)
                break
            except queue.Full:
                continue
        while not self.stop.is_set():
            if self.taken.acquire(timeout=0.1):
                # the caller stopping releases ``taken`` too (see halt)
                return not self.stop.is_set()
        return False

    def produce(self, items: Iterator) -> None:
        try:
            for item in items:
                if not self.give(item):
                    return
            self.give(_END)
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller
            self.give(_Raised(error))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()  # an inner prefetched() stops its own thread


class prefetched:
    """Iterate ``items`` in a background thread, one item ahead.

    The thread produces item k+1 while the caller works on item k, then waits
    until the caller takes it before producing k+2, so at most two items
    exist at once. Exceptions in the thread re-raise in the caller.
    :meth:`close` stops the thread; any thread may call it, also while
    another one waits in ``next`` (which then ends the iteration). An
    iterator dropped unclosed stops it too, when it is freed (an interrupt
    that came between its making and the block that closes it: the thread
    polled for ever, holding its items, in a server that outlives the run).
    """

    def __init__(self, items: Iterator, stop_timeout_s: float = 1.0, name: str = "bpbc-reader"):
        self._handoff = _Handoff()
        self._stop_timeout_s = stop_timeout_s
        self._worker = threading.Thread(target=self._handoff.produce, args=(items,), name=name, daemon=True)
        weakref.finalize(self, self._handoff.halt)
        self._worker.start()

    def __iter__(self) -> prefetched:
        return self

    def __next__(self):
        # waiting in short steps: a signal that the kernel hands to another
        # thread (one blocked reading a pipe, say) is acted on only when the
        # main thread runs Python code again, which a wait without timeout
        # would put off for good
        handoff = self._handoff
        while True:
            if handoff.stop.is_set():
                raise StopIteration
            try:
                item = handoff.items.get(timeout=0.1)
                break
            except queue.Empty:
                continue
        handoff.taken.release()
        if item is _END:
            self.close()
            raise StopIteration
        if isinstance(item, _Raised):
            self.close()
            raise item.error
        return item

    def close(self) -> None:
        if self._handoff.stop.is_set():
            return
        self._handoff.halt()
        if self._worker is not threading.current_thread():
            self._worker.join(self._stop_timeout_s)


class StageTimes:
    """Seconds spent per stage of the run: setup (from the start of the run
    until the engine is ready: inputs opened, patterns read, device and
    kernels set up), read (decompress and parse), encode (encode and
    transpose), traceback and write (PAF formatting and all output: the
    seconds of the writer and of each reads file's thread added up) each
    run in threads of their own, device (the screen) in the calling thread;
    they overlap (reading starts during the setup), so the shares of wall
    time may add up to more than 1."""

    STAGES = ("setup", "read", "encode", "device", "traceback", "write")

    def __init__(self):
        self.seconds = dict.fromkeys(self.STAGES, 0.0)
        self._lock = threading.Lock()  # several GPUs: their threads time encode and device

    @contextmanager
    def timing(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.seconds[stage] += time.perf_counter() - start

    def timed(self, iterator: Iterator, stage: str) -> Generator:
        """``iterator``, the time spent producing each item counted for ``stage``."""
        while True:
            with self.timing(stage):
                item = next(iterator, _END)
            if item is _END:
                return
            yield item


def encode_chunk(chunk, screener, source_name: str):
    """The chunk's reads encoded and prepared for ``screener``'s engine (long
    reads as windows, :meth:`bpbc.Screener.prepare`); a read outside the
    alphabet, or one that cannot fit, raises InputError naming ``source_name``."""
    from bpbc.alphabet import SequenceError

    try:
        return screener.prepare(chunk)
    except SequenceError as error:
        raise InputError(f"{source_name}: {error}") from None


def passing_units(hits, reads: int, mates: int, pair_filter: str) -> tuple[np.ndarray, np.ndarray]:
    """(reads passing for some pattern and strand, units passing): a unit is
    a read, or a pair of ``mates`` = 2 rows judged by ``pair_filter``."""
    passing_reads = np.zeros(reads, dtype=bool)
    passing_reads[hits.read] = True
    by_unit = passing_reads.reshape(reads // mates, mates)
    passing = np.asarray(by_unit.all(axis=1) if pair_filter == "both" else by_unit.any(axis=1))
    return passing_reads, passing


#: where screened chunks keep only their hits' records, blocks of long reads (64 MB or more)
#: are read only while fewer than this many are held: the one screened, the one encoded for the
#: next screen, the one being encoded and the one read (seven were held before: two read ahead,
#: and the reader's and the encoder's two each). With reads written, the chunks queued for the
#: traceback and the writers hold theirs, and reading does not wait for them
LARGE_BLOCKS_HELD = 4
#: a screened chunk of at least this many bytes of records (long reads: 128 MB a chunk;
#: 100k reads of 150 bp take 34 MB and are left as they are) is cut down to its hits'
#: records (:func:`hits_only`) where they take at most HITS_ONLY_FRACTION of them
HITS_ONLY_FROM = 64 << 20
HITS_ONLY_FRACTION = 0.25


def hits_only(chunk, batch, hits):
    """(chunk, batch) as the traceback and the PAF need them once ``batch``
    is screened, where nothing else needs its reads (no reads written, no
    trimming: the caller knows): the hits' records only, copied out of the
    chunk's buffer (:meth:`bpbc.chunks.RawFastqChunk.keeping`), and the
    batch without the engine's prepared reads. The chunk's buffer (two
    bytes a base, 128 MB for a chunk of long reads) then goes as soon as
    the screen has passed it, not after the traceback and the PAF: the
    chunks queued for those took as much again as the ones read ahead.
    Unchanged unless the batch is a raw chunk's whole reads (not windows,
    not codes) of at least HITS_ONLY_FROM bytes, and the hits' records are
    at most HITS_ONLY_FRACTION of them (where most reads pass the copy would
    cost more than it frees)."""
    from bpbc.chunks import RawFastqChunk
    from bpbc.screener import ReadBatch

    if type(batch) is not ReadBatch or not isinstance(chunk, RawFastqChunk) or not batch.coded_from_chunk:
        return chunk, batch
    sizes = chunk.rec_end - chunk.rec_start
    total = int(sizes.sum())
    if total < HITS_ONLY_FROM:
        return chunk, batch
    rows = np.flatnonzero(np.bincount(hits.read, minlength=len(chunk)))
    if int(sizes[rows].sum()) > HITS_ONLY_FRACTION * total:
        return chunk, batch
    kept_chunk = chunk.keeping(rows)
    return kept_chunk, batch.for_traceback(kept_chunk)


def chunk_paf(chunk, lengths: np.ndarray, alignments, pattern_texts, pattern_lengths) -> bytes:
    """The PAF lines of a chunk's alignments (reads of ``lengths``)."""
    rows = alignments.read_index
    return paf_lines(alignments, chunk.read_names(rows), lengths[rows], pattern_texts, pattern_lengths)


def _encoded(read_chunks: prefetched, source_name: str, screener, stages: StageTimes, plan: CorePlan) -> Generator:
    """(chunk, ReadBatch) per chunk of ``read_chunks`` (read and parsed in a
    thread of :func:`prefetched`), for a second one (:func:`_screened`): one
    thread reads and parses chunk k+2 while the other encodes and transposes
    chunk k+1 and the caller screens chunk k."""
    limit_numba_threads(plan.encode)
    with closing(read_chunks):
        for chunk in read_chunks:
            with stages.timing("encode"):
                batch = encode_chunk(chunk, screener, source_name)
            yield chunk, batch


def twin_makers(screener) -> list[Callable]:
    """For a GPU run on a host with more GPUs (those ``CUDA_VISIBLE_DEVICES``
    shows), a call per other device that makes a twin of ``screener`` there:
    the same patterns and settings, an engine of its own. :func:`_screened`
    makes them beside the first device's screen. None for a CPU run. With
    other devices, the engines pack batches on the host
    (``GpuEngine.pack_on_host``)."""
    if screener.engine.name != "gpu":
        return []
    import cupy

    others = [d for d in range(cupy.cuda.runtime.getDeviceCount()) if d != screener.engine.device]
    screener.engine.pack_on_host = bool(others)  # and so its twins'
    return [functools.partial(_twin_on, screener, d) for d in others]


def _twin_on(screener, device: int):
    return screener.on_engine(screener.engine.on_device(device))


def _screened(read_chunks: prefetched, source_name: str, screener, makers: list[Callable],
              stages: StageTimes, begin: Callable | None = None, plan: CorePlan | None = None) -> Generator:
    """(chunk, batch, hits) per chunk of ``read_chunks``, in input order.

    One device: chunks encoded in a thread of their own
    (:func:`_encoded`), screened by ``screener`` in this one.
    Several (``makers`` of the other GPUs' twins, see :func:`twin_makers`):
    each chunk is encoded and screened by whichever device is free first, in
    one of CHUNKS_PER_DEVICE x n threads, with up to as many chunks and one
    more per device under way: while a device screens one chunk, the next
    is encoded for it on the host (``GpuEngine.pack_on_host``), uploaded
    beside the screen and its kernels queued to run right after the
    screen's (``GpuEngine._in_device_order``), so the device goes from one
    screen to the next without waiting for the host. A batch is prepared
    on the device that screens it.
    ``plan``: the run's threads (None: :func:`bpbc.resources.plan_run` of the screener's).
    Taking the free device rather than device k mod n for chunk k keeps a
    device that started later, or drew larger chunks, from holding up the
    others (the output waits for chunks in order). Stage seconds add up
    over the devices."""
    plan = plan or plan_run(screener.threads)
    if not makers:
        with closing(prefetched(_encoded(read_chunks, source_name, screener, stages, plan), name="bpbc-encoder")) as prepared:
            for chunk, batch in prepared:
                if begin is not None:  # what needs no screen begins now (Trimmer.begin: the end overlaps)
                    begin(chunk, batch)
                with stages.timing("device"):
                    hits = screener.hits(batch)
                yield chunk, batch, hits
        return

    free: queue.SimpleQueue = queue.SimpleQueue()  # a device's screener per slot, or an error

    def add_device(device_screener) -> None:
        for _ in range(CHUNKS_PER_DEVICE):
            free.put(device_screener)

    def join(make) -> None:
        """Make a twin (its device's context, about 0.3 s) while the first
        device screens, and let it take chunks from then on."""
        try:
            add_device(make())
        except BaseException as error:  # noqa: BLE001 - raised where a chunk would have used it
            free.put(_Raised(error))

    def screen(chunk):
        slot = free.get()  # a device's slot free, or the next to be
        if isinstance(slot, _Raised):
            free.put(slot)  # for the chunks waiting behind
            raise slot.error
        try:
            with stages.timing("encode"):
                batch = encode_chunk(chunk, slot, source_name)
            with stages.timing("device"):
                return batch, slot.hits(batch)
        finally:
            free.put(slot)

    add_device(screener)
    n = 1 + len(makers)
    setting_up = [threading.Thread(target=join, args=(make,), name="bpbc-gpu-set-up", daemon=True)
                  for make in makers]
    for thread in setting_up:
        thread.start()
    pool = ThreadPoolExecutor(CHUNKS_PER_DEVICE * n, "bpbc-gpu", limit_numba_threads, (plan.encode,))
    pending: deque = deque()
    try:
        for chunk in read_chunks:
            pending.append((chunk, pool.submit(screen, chunk)))
            if len(pending) == (CHUNKS_PER_DEVICE + 1) * n:  # and one more per device waiting for a slot
                chunk, done = pending.popleft()
                yield (chunk, *done.result())
        while pending:
            chunk, done = pending.popleft()
            yield (chunk, *done.result())
    finally:
        pool.shutdown(cancel_futures=True)
        for thread in setting_up:
            thread.join()  # a device's set-up is not left running past the run


class _InlineExecutor:
    """An executor for a run on one core: each call made as it is submitted (its error raised there)."""

    def submit(self, call, *args) -> Future:
        future: Future = Future()
        future.set_result(call(*args))
        return future


class OrderedWorker:
    """Runs submitted calls one after another in a background thread, at most
    ``depth`` waiting (so memory stays bounded). An exception in a call is
    raised in the submitting thread at its next :meth:`submit` or at
    :meth:`finish`; leaving a ``with`` block stops the thread. With
    ``inline`` there is no thread: :meth:`submit` makes the call."""

    def __init__(self, depth: int = 2, inline: bool = False, name: str = "bpbc-writer"):
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._inline = inline
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        if not inline:
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
            # nothing runs after a failure: the calls still queued are skipped (before, the error was let go first,
            # and the thread could start the next queued call before the ``with`` block set _stop: a stage was called
            # once more after Ctrl-C, which tests/bpbc/test_cli.py caught under load)
            self._stop.set()
            error, self._error = self._error, None
            raise error

    def submit(self, call: Callable, *args) -> None:
        if self._inline:
            call(*args)
            return
        self._raise()
        self._queue.put((call, args))

    def finish(self) -> None:
        """Wait for every submitted call; re-raise the first error."""
        if self._inline:
            return
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


def make_screener(settings: ScreenSettings, patterns, patterns_file: str = "patterns"):
    """The Screener every chunk goes through (patterns encoded, engine
    compiled and allocated once, each pattern's threshold resolved, see
    :mod:`bpbc.thresholds`); bad settings raise InputError."""
    from bpbc.screener import Screener

    if settings.strand not in STRANDS:
        raise InputError(f"strand must be one of {', '.join(STRANDS)}, got {settings.strand!r}")
    if settings.pair_filter not in PAIR_FILTERS:
        raise InputError(f"pair filter must be one of {', '.join(PAIR_FILTERS)}, got {settings.pair_filter!r}")
    threshold = pattern_thresholds(patterns, patterns_file, settings.scoring, settings.threshold,
                                   settings.min_score_fraction)
    try:
        # the Screener checks the settings before it selects the engine
        return Screener(patterns, threshold, settings.scoring, settings.strand, settings.exact_scores,
                        settings.eqx, device=settings.device, threads=settings.threads, ends=settings.ends)
    except InternalError:
        raise  # not the user's doing
    except (ValueError, RuntimeError) as error:  # bad threshold, unknown device, bad threads, no usable GPU
        raise InputError(str(error)) from None


def _check_inputs(reads_path, reads2, patterns_path, interleaved: bool, paths: dict, output=None,
                  json_path=None) -> None:
    """Reject combinations of inputs and outputs that do not make sense (InputError)."""
    if STDIN in (reads_path, reads2) and patterns_path == STDIN or reads_path == reads2 == STDIN:
        raise InputError("only one input can be read from stdin ('-')")
    check_distinct_files({"the reads file": reads_path, "--reads2": reads2, "the patterns file": patterns_path},
                         {"-o/--output": output, **{f"--{kind}": path for kind, path in paths.items()},
                          "--json": json_path})
    paired = reads2 is not None or interleaved
    if reads2 is not None and interleaved:
        raise InputError("give --reads2 or --interleaved, not both")
    for kind in ("matched", "unmatched", "trimmed"):
        first, second = paths[kind], paths[kind + "2"]
        if second is not None and not paired:
            raise InputError(f"--{kind}2 needs paired reads (--reads2 or --interleaved)")
        if reads2 is not None and (first is None) != (second is None):
            raise InputError(f"with --reads2, give --{kind} and --{kind}2 together (mate 1 and mate 2 files)")
        if second is not None and first is None:
            raise InputError(f"--{kind}2 needs --{kind} (mate 1 file)")
        if kind != "matched" and (is_template(first) or is_template(second)):
            raise InputError(f"{NAME_FIELD} can only be used in --matched and --matched2")
        if second is not None and is_template(first) != is_template(second):
            raise InputError(f"use {NAME_FIELD} in both --matched and --matched2, or in neither")


_TRIM_OPTIONS = ("action", "adapter_kind", "min_overlap", "trim_strand", "min_length")


def _trimming_module(settings: ScreenSettings, trimmed_output: bool):
    """:mod:`bpbc.trimming` with the settings checked, imported only where a
    trimming option is given (its kernels' dispatchers cost start-up time)."""
    defaults = ScreenSettings()
    if not trimmed_output and all(getattr(settings, key) == getattr(defaults, key) for key in _TRIM_OPTIONS):
        return None
    from bpbc import trimming

    trimming.check_settings(settings, trimmed_output)
    return trimming


def read_chunks(source, source2, interleaved: bool, size: Callable[[], int], hits_only: bool = False) -> Iterator:
    """Chunks of ``size()`` reads, or pairs (mate 2 in ``source2`` or ``interleaved``); the first ones smaller.
    ``hits_only``: screened chunks keep only their hits' records (:func:`hits_only`), so large
    blocks of single reads are read only while fewer than LARGE_BLOCKS_HELD are held."""
    if source2 is not None:
        return two_file_pairs(source, source2, size, CHUNK_RAMP)
    if interleaved:
        return interleaved_pairs(source, size, CHUNK_RAMP)
    return source.chunks(size, ramp=CHUNK_RAMP, max_bases=CHUNK_BASES,
                         large_live=LARGE_BLOCKS_HELD if hits_only else None)


def new_summary(screener, settings: ScreenSettings, plan: CorePlan, reads_file: str, patterns_file: str,
                reads2_file: str | None = None) -> Summary:
    """The summary of a run of ``screener``, its counts (``summary.statistics``)
    still to come; ``reads2_file``: paired reads, mate 2's file."""
    thresholds = screener.thresholds.tolist()
    paired = reads2_file is not None
    statistics = Statistics(screener.pattern_names, screener.pattern_lengths.tolist(), thresholds,
                            list(screener.strands), 2 if paired else 1, settings.scoring.match, settings.action)
    return Summary.of_run(statistics, reads_file=reads_file, patterns_file=patterns_file,
                          threshold=thresholds[0] if len(set(thresholds)) == 1 else None,
                          scoring=asdict(settings.scoring), device=screener.engine.name,
                          min_score_fraction=settings.min_score_fraction, reads2_file=reads2_file,
                          pair_filter=settings.pair_filter if paired else None, plan=plan.as_dict())


class _Run:
    """What follows each chunk's screen, stage by stage, in input order:
    :meth:`screen` hands it on, :meth:`trace`, :meth:`edit` (tracebacks taken
    in order, the trimmer's edits begun), :meth:`write` (PAF, counts) and
    :meth:`write_reads` (per reads file). Serial or threaded is chosen once,
    here: with ``plan.threaded`` each stage has threads of its own (the
    traceback of chunk k beside the screen of chunk k + 1, ``plan.tracebacks``
    at once; the reads files side by side: 4M mostly passing reads on an
    H200, 1.2-1.4 s instead of 1.8-2.2), else each call runs as submitted."""

    def __init__(self, stack: ExitStack, screener, trimmer, plan: CorePlan, stages: StageTimes,
                 statistics: Statistics, write_paf: Callable | None, sinks: dict, pair_filter: str,
                 hits_only: bool):
        self.screener, self.trimmer, self.plan, self.stages, self.statistics = screener, trimmer, plan, stages, statistics
        self.write_paf, self.sinks, self.pair_filter, self.mates = write_paf, sinks, pair_filter, statistics.mates
        self.pattern_texts, self.pattern_lengths = Texts.of(screener.pattern_names), screener.pattern_lengths.tolist()
        self.demultiplexing = isinstance(sinks.get("matched"), DemuxSink)
        #: whether only the hits' records are needed once a chunk is screened (hits_only): the
        #: reading's decision (read_chunks), so that the two agree
        self.hits_only = hits_only
        self.traceback_failed = threading.Event()
        # entered after the outputs, so stopped before they are closed; the tracebacks first
        inline = not plan.threaded
        self.sink_writers = {kind: stack.enter_context(OrderedWorker(inline=inline, name=f"bpbc-writer-{kind}"))
                             for kind in sinks}
        self.writer = stack.enter_context(OrderedWorker(inline=inline))
        self.aligner = stack.enter_context(OrderedWorker(depth=1, inline=inline, name="bpbc-aligner"))
        self.tracer: ThreadPoolExecutor | _InlineExecutor = _InlineExecutor()
        if plan.threaded:
            self.tracer = ThreadPoolExecutor(plan.tracebacks, "bpbc-traceback")
            stack.callback(self.tracer.shutdown, cancel_futures=True)  # after a failure, the batches not begun are dropped

    def screen(self, screened: Iterator, progress: Callable[[int], None] | None) -> None:
        """Hand on each (chunk, batch, hits) of ``screened`` (in the calling
        thread, between screens); return once all are written."""
        reads_done = 0
        for chunk, batch, hits in screened:
            if self.hits_only:
                chunk, batch = hits_only(chunk, batch, hits)
            passing_reads, passing = passing_units(hits, len(batch), self.mates, self.pair_filter)
            # a GPU batch's end-overlap decision starts here, on the device, beside the traceback (whose
            # thread limits a GPU run where most reads pass)
            trim_inputs = None if self.trimmer is None else self.trimmer.inputs(chunk, batch)
            # to the tracer before the aligner, which takes the tracebacks in order
            traced = self.tracer.submit(self.trace, batch, hits)
            self.aligner.submit(self.edit, chunk, batch, traced, passing, passing_reads, trim_inputs)
            reads_done += len(batch)
            if progress is not None:
                progress(reads_done)
        for worker in (self.aligner, self.writer, *self.sink_writers.values()):
            worker.finish()  # re-raises the first error

    def trace(self, batch, hits):
        # no traceback starts once one has failed (Ctrl-C, an error): the
        # batches queued behind it are dropped, as OrderedWorker drops its calls
        if self.traceback_failed.is_set():
            raise CancelledError
        limit_numba_threads(self.plan.traceback)  # the traceback's kernels, in this thread
        try:
            with self.stages.timing("traceback"):
                return self.screener.align(batch, hits)
        except BaseException:
            self.traceback_failed.set()
            raise

    def edit(self, chunk, batch, traced: Future, passing, passing_reads, trim_inputs) -> None:
        alignments = traced.result()
        best = best_patterns(alignments, len(chunk), self.mates) if self.demultiplexing else None
        # the edits in the trimmer's thread, beside the writing of the batch before and the next traceback
        edited = None if self.trimmer is None else self.trimmer.submit_edit(
            chunk, batch.lengths, trim_inputs, alignments, self.mates, passing_reads, self.pair_filter, best)
        self.writer.submit(self.write, chunk, batch.lengths, alignments, passing, best, edited)

    def write(self, chunk, lengths, alignments, passing, best, edited: Future | None) -> None:
        with self.stages.timing("write"):
            if len(alignments) and self.write_paf is not None:
                self.write_paf(chunk_paf(chunk, lengths, alignments, self.pattern_texts, self.pattern_lengths))
            written, kept, edit, screened = chunk, np.ones(len(passing), bool), None, passing
            if edited is not None:
                # a read with only a partial adapter passes too; passing units are written edited, the
                # others unchanged; --min-length drops units
                edit, written, passing, best = edited.result()
                kept = edit.kept
            for kind, units in (("matched", passing & kept), ("unmatched", ~passing & kept), ("trimmed", kept)):
                if kind in self.sinks:
                    reads = chunk if kind == "unmatched" else written
                    self.sink_writers[kind].submit(self.write_reads, self.sinks[kind], reads, np.flatnonzero(units), best)
            self.statistics.add_batch(lengths, alignments, screened, edit)  # the run's one place of counting

    def write_reads(self, sink, chunk, units, best) -> None:
        limit_numba_threads(self.plan.encode)  # the gathering of edited records: short kernels, as encoding's
        with self.stages.timing("write"):
            sink.write(chunk, units, best)


def screen_files(
    reads_path,
    patterns_path,
    settings: ScreenSettings = ScreenSettings(),
    *,
    reads2=None,
    interleaved: bool = False,
    output=None,
    matched=None,
    unmatched=None,
    matched2=None,
    unmatched2=None,
    trimmed=None,
    trimmed2=None,
    json_path=None,
    progress: Callable[[int], None] | None = None,
    plan: CorePlan | None = None,
) -> Summary:
    """Screen every read of ``reads_path`` against every pattern of ``patterns_path``.

    Paired reads: mate 2 of each pair in ``reads2``, or ``interleaved``
    (mates alternate in ``reads_path``); a pair passes as
    ``settings.pair_filter`` says. Writes PAF to ``output`` (a path; None or
    '-' for stdout), passing reads (pairs) to ``matched`` (mate 2:
    ``matched2``) and the others to ``unmatched`` (``unmatched2``), with
    ``{name}`` in ``matched`` one file per pattern, the summary as JSON to
    ``json_path``. With ``settings.action`` trim or mask (docs/trimming.md)
    the matched reads are written trimmed or masked, and ``trimmed``
    (``trimmed2``) receives every read so, in input order. ``progress(reads_done)`` is called after each chunk.
    ``plan``: the threads of each stage (None: :func:`bpbc.resources.plan_run` of ``settings.threads``).
    Files appear only when the whole run succeeds. Expected problems raise
    :class:`bpbc.errors.InputError`; failed internal cross-checks
    :class:`bpbc.errors.InternalError`.
    """
    started = time.perf_counter()
    paths = {"matched": matched, "unmatched": unmatched, "matched2": matched2, "unmatched2": unmatched2,
             "trimmed": trimmed, "trimmed2": trimmed2}
    _check_inputs(reads_path, reads2, patterns_path, interleaved, paths, output, json_path)
    trimming = _trimming_module(settings, trimmed is not None or trimmed2 is not None)
    mates = 2 if reads2 is not None or interleaved else 1
    with ExitStack() as stack:
        stack.enter_context(cyclic_gc_paused())
        compiles = stack.enter_context(watching_compiles())
        stack.enter_context(quick_gil_handoff())
        # the reads files first: a missing or unreadable file is the most basic problem
        plan = plan or plan_run(settings.threads)
        # single reads are parsed in blocks on several threads; mates pair up chunk by chunk
        source = stack.enter_context(SequenceSource(reads_path, kind="reads", raw_fastq=True, threads=plan.read,
                                                    in_blocks=mates == 1))
        source2 = None if reads2 is None else stack.enter_context(
            SequenceSource(reads2, kind="reads", raw_fastq=True, threads=plan.read))
        patterns = read_patterns(patterns_path)
        stages = StageTimes()
        size = chunk_size_for(settings, len(patterns), mates)  # lowered below once the run knows its devices
        # reading starts now, beside the engine's set-up (device, kernels)
        # no reads written, no trimming: a screened chunk keeps only its hits' records
        hits_only = trimming is None and not any(paths.values())
        chunks = read_chunks(source, source2, interleaved, lambda: size, hits_only)
        prefetched_chunks = stack.enter_context(closing(prefetched(stages.timed(chunks, "read"))))
        screener = make_screener(settings, patterns, display_name(patterns_path))
        trimmer = None if trimming is None else trimming.trimmer_for(settings, screener, patterns,
                                                                     display_name(patterns_path))
        stages.seconds["setup"] = time.perf_counter() - started
        limit_numba_threads(plan.kernel)  # numba kernels of this thread (the CPU kernel, encoding the second pass's reads)
        summary = new_summary(screener, settings, plan, display_name(reads_path), display_name(patterns_path),
                              None if mates == 1 else display_name(reads_path if interleaved else reads2))
        # committed or discarded after the threads that write them have stopped (entered after it)
        files = RunFiles(stack.enter_context(ExitStack()), plan.compress)
        write_paf = files.paf_writer(output)
        sources = (source, source if source2 is None else source2)
        sinks = {kind: sink for kind in ("matched", "unmatched", "trimmed")
                 if (sink := files.reads_sink(kind, (paths[kind], paths[kind + "2"]), sources, screener.pattern_names,
                                              interleaved)) is not None}
        files.json_summary(json_path)
        assert summary.statistics is not None
        run = _Run(stack, screener, trimmer, plan, stages, summary.statistics, write_paf, sinks, settings.pair_filter,
                   hits_only)
        makers = twin_makers(screener)
        summary.devices = 1 + len(makers)
        if makers and settings.chunk_size is None:
            size = several_devices_chunk_size(size, screener, mates)
        screened = stack.enter_context(closing(_screened(prefetched_chunks, source.name, screener, makers, stages,
                                                         None if trimmer is None else trimmer.begin, plan)))
        run.screen(screened, progress)
        summary.statistics.fill(summary)
        summary.wall_time_s = time.perf_counter() - started
        summary.stage_seconds = dict(stages.seconds, compile=compiles.seconds)
        files.commit(lambda: summary_json(summary))
    return summary
