"""Screening over Dask (``distributed``): many GPUs, many hosts, the same output.

Three ways to shard a run, all on top of :func:`bpbc.pipeline.screen_files`'s
pieces:

* **One file in parts** (:func:`screen_distributed` with one reads path,
  where the workers see it): the file is cut into byte ranges, two per
  worker thread, without being decompressed or parsed by the client
  (:mod:`bpbc.file_parts`: an uncompressed file anywhere, a gzip file at
  member starts, so BGZF, a gzip file of one member through rapidgzip's
  index of it, which a worker makes first), and each is one Dask task
  (:func:`screen_file` on a :class:`~bpbc.file_parts.FilePart`): the worker
  reads its part's records, screens them with the local pipeline and writes
  its outputs under hidden names, which are joined in input order when every
  part is done.
* **One file in chunks** (one reads path otherwise: stdin, other
  compressions, PAF to stdout, workers that do not see the file): the client reads
  and parses the file chunk by chunk, as the local pipeline does, and ships
  each chunk's raw bytes to a worker (:func:`screen_chunk`). The worker holds
  one :class:`~bpbc.screener.Screener` per run (built at its first chunk),
  encodes, screens and aligns the chunk and sends back the PAF bytes, which
  reads pass, and the counts. The client writes PAF, matched and unmatched
  reads in input order, with at most ``in_flight`` chunks under way, so
  memory stays bounded.
* **Many files** (a list of reads paths): one Dask task per file
  (:func:`screen_file`), which runs the local pipeline on a worker that reads
  its file and writes its outputs itself, on storage that the workers share.
  Output paths are templates holding ``{stem}``.

With parts and with many files every output is written under a hidden
staging name and put in place only when every task has succeeded, so a
failed run leaves none of them.

A worker that dies has its tasks run again elsewhere (Dask's own
rescheduling); tasks are deterministic, so the outputs are those of a clean
run. ``import bpbc.distributed`` does not import Dask: the functions that
need it import it when called.
"""

from __future__ import annotations

import collections
import functools
import glob
import hashlib
import os
import pickle
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass, replace

import numpy as np

from bpbc.engines import limit_numba_threads, set_up_process
from bpbc.file_parts import FilePart, UnreadablePart, indexable, plan_parts, write_gzip_index
from bpbc.io import STDIN, AtomicOutput, InputError, SequenceSource, display_name, read_patterns
from bpbc.outputs import RunFiles, check_distinct_files
from bpbc.pipeline import (OrderedWorker, ScreenSettings, StageTimes, chunk_paf, chunk_size_for, cyclic_gc_paused,
                           encode_chunk, make_screener, new_summary, passing_units, prefetched, quick_gil_handoff,
                           read_chunks, screen_files)
from bpbc.resources import CorePlan, plan_run, usable_cores
from bpbc.result import Texts
from bpbc.sinks import is_template
from bpbc.summary import HitColumns, Summary, combined_summary, summary_json

#: the options that name each output, for messages
_OPTIONS = {"output": "-o/--output", "matched": "--matched", "unmatched": "--unmatched", "json": "--json"}
#: in output paths: the reads file's name without directory, format and compression suffixes
STEM_FIELD = "{stem}"
_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zstd")
_FORMAT_SUFFIXES = (".fastq", ".fq", ".fasta", ".fa", ".fna", ".fas")
#: chunks under way per worker thread (one file in chunks), unless ``in_flight`` says otherwise
IN_FLIGHT_PER_THREAD = 2
#: parts of one file per worker thread: a worker done early takes over some of a slow one's share
PARTS_PER_THREAD = 2
#: Dask's warning about large task graphs: a chunk's bytes travel in its task
_LARGE_TASK_BYTES = "1GiB"
#: hidden names of outputs until the whole run has succeeded (parts and many files)
_STAGING_PREFIX = ".bpbc-part-"
#: a local cluster's scheduler without a dashboard, its HTTP server on a free port: it starts one
#: whatever the dashboard address (8787 by default), and two runs at once warned of the port taken
NO_DASHBOARD = {"dashboard_address": ":0", "scheduler_kwargs": {"dashboard": False}}


def stem(path) -> str:
    """``{stem}``: the file name without directory, compression and format suffixes
    (``runs/S1_R1.fastq.gz`` -> ``S1_R1``)."""
    name = os.path.basename(os.fspath(path))
    lower = name.lower()
    for suffixes in (_COMPRESSION_SUFFIXES, _FORMAT_SUFFIXES):
        for suffix in suffixes:
            if lower.endswith(suffix) and len(name) > len(suffix):
                name, lower = name[:-len(suffix)], lower[:-len(suffix)]
                break
    return name


def fill_stem(path, reads_path):
    """``path`` with ``{stem}`` replaced by the stem of ``reads_path`` (None stays None)."""
    if path is None:
        return None
    return os.fspath(path).replace(STEM_FIELD, stem(reads_path))


# ---------------------------------------------------------------- worker side

@dataclass(frozen=True)
class Job:
    """What every task of one run needs besides its own data: small, shipped with each task."""

    settings: ScreenSettings
    #: dnaio records, as read by the client
    patterns: tuple
    patterns_file: str
    reads_file: str
    #: identifies settings and patterns: a worker keeps one Screener per key (and thread)
    key: str

    @classmethod
    def of(cls, settings: ScreenSettings, patterns, patterns_file: str, reads_file: str) -> Job:
        digest = hashlib.sha256(pickle.dumps((settings, [(p.name, p.sequence) for p in patterns]))).hexdigest()
        return cls(settings, tuple(patterns), patterns_file, reads_file, digest[:24])


_screeners: dict[tuple[str, int], object] = {}
_screeners_lock = threading.Lock()
#: Screeners kept per worker process (a worker usually serves one run at a time)
_MAX_SCREENERS = 8


def worker_plan(threads: int | None) -> CorePlan:
    """The plan of a task in this Dask worker: ``threads`` where the run
    set them, else this worker's share of the host: the cores it may use
    where it is pinned to fewer than the host has (dask-cuda pins each
    worker to the cores near its GPU), else those cores split evenly
    between the workers of its host. Without this every worker of a host
    took all its cores (rapidgzip's threads, numba's, the compression's):
    four workers on a 64-core host ran slower than one."""
    if threads is not None:
        return plan_run(threads)
    return _worker_share_plan()


def worker_addresses(client) -> list[str]:
    """The addresses of the workers of ``client``'s cluster, asked of its
    scheduler. Not ``client.scheduler_info()["workers"]``: that returns an
    attribute which the client's periodic update (every 2 s, without the
    workers) may overwrite between the call's own update and its return
    (distributed 2026.8): no worker at all, 2 of 300 runs of
    tests/bpbc/test_distributed.py's share test under load, where a worker
    would plan for every core of its host."""
    return list(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


@functools.cache
def _worker_share_plan() -> CorePlan:
    from distributed import get_client, get_worker

    cores = usable_cores()
    if cores < (os.cpu_count() or cores):
        return plan_run(cores, "Dask worker's CPU affinity")
    host = get_worker().address.rsplit(":", 1)[0]
    on_host = sum(1 for address in worker_addresses(get_client()) if address.rsplit(":", 1)[0] == host)
    return plan_run(max(1, cores // max(1, on_host)), f"Dask worker's share ({on_host} on its host)")


def worker_screener(job: Job):
    """The Screener of ``job`` in this worker thread, built at its first use."""
    key = (job.key, threading.get_ident())
    screener = _screeners.get(key)
    if screener is None:
        set_up_process()  # as the command does: a worker process is not started by it
        screener = make_screener(job.settings, list(job.patterns), job.patterns_file)
        with _screeners_lock:
            while len(_screeners) >= _MAX_SCREENERS:
                _screeners.pop(next(iter(_screeners)))
            _screeners[key] = screener
    return screener


@dataclass
class ChunkPayload:
    """A chunk as it travels to a worker: raw FASTQ bytes and spans (offsets
    from the start of ``data``), or dnaio records."""

    data: bytes | None = None
    rec_start: np.ndarray | None = None
    rec_end: np.ndarray | None = None
    seq_start: np.ndarray | None = None
    seq_len: np.ndarray | None = None
    records: list | None = None

    @classmethod
    def of(cls, chunk) -> ChunkPayload:
        from bpbc.chunks import RawFastqChunk

        if isinstance(chunk, RawFastqChunk):
            first, last = int(chunk.rec_start[0]), int(chunk.rec_end[-1])
            return cls(bytes(memoryview(chunk.data)[first:last]), chunk.rec_start - first, chunk.rec_end - first,
                       chunk.seq_start - first, chunk.lengths)
        return cls(records=chunk.records)

    def chunk(self):
        from bpbc.chunks import RawFastqChunk, RecordChunk

        if self.records is not None:
            return RecordChunk(self.records)
        return RawFastqChunk(self.data, self.rec_start, self.rec_end, self.seq_start, self.seq_len)


@dataclass
class ChunkResult:
    """What a worker sends back for one chunk."""

    paf: bytes
    #: per read: passes for some pattern and strand
    passing: np.ndarray
    #: what the run's statistics count (:meth:`bpbc.summary.Statistics.add_batch`): the reads' lengths, the hits
    lengths: np.ndarray
    hits: HitColumns
    #: the engine that computed the scores: 'cpu' or 'gpu'
    device: str
    #: seconds of the worker's stages: encode, device, traceback, write (PAF formatting)
    seconds: dict


def screen_chunk(job: Job, payload: ChunkPayload) -> ChunkResult:
    """A Dask task: screen one chunk with this worker's Screener."""
    stages = StageTimes()
    screener = worker_screener(job)
    limit_numba_threads(worker_plan(job.settings.threads).kernel)
    chunk = payload.chunk()
    with stages.timing("encode"):
        batch = encode_chunk(chunk, screener, job.reads_file)
    with stages.timing("device"):
        hits = screener.hits(batch)
    with stages.timing("traceback"):
        alignments = screener.align(batch, hits)
    passing, _ = passing_units(hits, len(batch), 1, job.settings.pair_filter)
    with stages.timing("write"):
        paf = chunk_paf(chunk, batch.lengths, alignments, Texts.of(screener.pattern_names),
                        screener.pattern_lengths.tolist()) if len(alignments) else b""
    return ChunkResult(paf, passing, batch.lengths, HitColumns.of(alignments), screener.engine.name,
                       {stage: stages.seconds[stage] for stage in ("encode", "device", "traceback", "write")})


def engine_name(job: Job) -> str:
    """A Dask task: the engine this worker screens with ('cpu' or 'gpu')."""
    return worker_screener(job).engine.name


def staging_path(path: str, token: str) -> str:
    """The hidden name an output has until the run has succeeded; its
    suffixes (and so its compression) are the final name's."""
    directory, base = os.path.split(path)
    return os.path.join(directory, f"{_STAGING_PREFIX}{token}.{base}")


def screen_file(job: Job, reads_path: str | FilePart, patterns_path: str, outputs: dict,
                abort_event: str | None = None, plan: CorePlan | None = None) -> Summary:
    """A Dask task: screen one whole file, or a part of one, on this worker
    with the local pipeline; ``outputs`` maps 'output', 'matched',
    'unmatched', 'json' to the staging paths (or None). The summary names the
    files as the user gave them (``job``). When the run was given up
    meanwhile (Dask event ``abort_event`` set), the files just written are
    removed. ``plan``: the run's threads (None: this Dask worker's,
    :func:`worker_plan`; a process of :mod:`bpbc.many_files` gives its own)."""
    set_up_process()
    try:
        summary = screen_files(reads_path, patterns_path, job.settings, output=outputs["output"],
                               matched=outputs["matched"], unmatched=outputs["unmatched"],
                               plan=plan or worker_plan(job.settings.threads))
    except InputError as error:  # the files named as the user gave them, not as the worker opened them
        raise InputError(str(error).replace(os.fspath(reads_path), job.reads_file)
                         .replace(patterns_path, job.patterns_file)) from None
    summary.reads_file = job.reads_file
    summary.patterns_file = job.patterns_file
    if outputs["json"] is not None:
        with AtomicOutput(outputs["json"], "JSON summary") as out:
            out.open_binary().write(summary_json(summary))
            out.commit()
    if abort_event is not None and _event_is_set(abort_event):
        remove_files([path for path in outputs.values() if path is not None])
    return summary


def _event_is_set(name: str) -> bool:
    try:
        from distributed import Event

        return Event(name).is_set()
    except Exception:  # noqa: BLE001 - no scheduler: the client cleans up what it can
        return False


def remove_files(paths: Sequence[str]) -> None:
    """A Dask task: remove staged outputs and what a killed attempt left of them."""
    for path in paths:
        directory, base = os.path.split(path)
        for leftover in [path, *glob.glob(os.path.join(glob.escape(directory), f".{glob.escape(base)}.*.bpbc-tmp"))]:
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass


def commit_files(renames: Sequence[tuple[str, str]]) -> None:
    """A Dask task: move staged outputs to their final names."""
    for staged, final in renames:
        os.replace(staged, final)
    remove_files([staged for staged, _ in renames])  # the temporary files of attempts on killed workers


def join_files(joins: Sequence[tuple[Sequence[str], str]]) -> None:
    """Each list of staged outputs appended, in order, to its first one, which
    then takes the final name. Compressed outputs join as they are: gzip,
    bzip2, xz and zstd files each read as one when concatenated."""
    for staged, final in joins:
        with open(staged[0], "r+b", buffering=0) as out:
            out.seek(0, os.SEEK_END)
            for path in staged[1:]:
                with open(path, "rb", buffering=0) as part:
                    _append(part, out)
        commit_files([(staged[0], final)])
        remove_files(staged[1:])


def _append(source, out) -> None:
    """The rest of ``source`` appended to ``out`` (both unbuffered), within the kernel where it can."""
    try:
        while os.copy_file_range(source.fileno(), out.fileno(), 1 << 30):
            pass
        return
    except OSError:  # not between these files: on from where it got, by reads and writes
        shutil.copyfileobj(source, out, 1 << 22)


def _sees(path: str, size: int, directories: Sequence[str]) -> bool:
    """On a worker: whether it sees the reads file (its size) and can write where the outputs go."""
    try:
        return os.path.getsize(path) == size and all(os.access(d, os.W_OK) for d in directories)
    except OSError:
        return False


# ---------------------------------------------------------------- client side

def _distributed_errors() -> tuple[type[BaseException], ...]:
    """What Dask raises when the cluster, not the input, fails a run."""
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    errors: list[type[BaseException]] = [KilledWorker, CommClosedError]
    try:
        from distributed.client import FutureCancelledError

        errors.append(FutureCancelledError)
    except ImportError:
        pass
    from concurrent.futures import CancelledError

    errors.append(CancelledError)
    return tuple(errors)


def _cluster_failed(error: BaseException) -> InputError:
    return InputError(f"the Dask cluster failed the run: {type(error).__name__}: {error}")


def _worker_threads(client) -> int:
    return max(1, sum(client.nthreads().values()))


def screen_distributed(
    client,
    reads,
    patterns_path,
    settings: ScreenSettings = ScreenSettings(),
    *,
    output=None,
    matched=None,
    unmatched=None,
    json_path=None,
    progress: Callable[[int], None] | None = None,
    in_flight: int | None = None,
    split: bool = True,
):
    """Screen reads over the Dask cluster of ``client`` (a ``distributed.Client``).

    ``reads`` is one path (``-``: stdin): outputs as
    :func:`bpbc.pipeline.screen_files` writes them, byte for byte (compressed
    ones: their contents), and its :class:`~bpbc.pipeline.Summary` (timing
    aside). Where it can be cut (:func:`bpbc.file_parts.plan_parts`), the
    outputs are files (not stdout) and every worker sees the reads and the
    outputs' directories, the workers read its parts on their own; otherwise,
    or without ``split``, the client reads it and the workers screen its
    chunks, ``in_flight`` of them under way at most (default: two per worker
    thread).

    ``reads`` a list of paths: each file is screened by one worker, which reads
    it and writes its outputs itself (storage the workers share; relative
    paths are taken from the client's directory). Output paths must hold
    ``{stem}`` when there are several files (``output`` is required); returns
    a list of summaries, one per file, in order. Outputs appear only when
    every file has been screened.

    Paired reads and demultiplexing are not supported here. Problems raise
    :class:`bpbc.io.InputError`, a worker's included.
    """
    paths = {"output": output, "matched": matched, "unmatched": unmatched, "json": json_path}
    for kind in ("matched", "unmatched"):
        if is_template(paths[kind]):
            raise InputError("demultiplexing ({name} in --matched) is not supported with --dask")
    if isinstance(reads, (str, bytes, os.PathLike)):
        return _screen_one_file(client, reads, patterns_path, settings, paths, progress, in_flight, split)
    return _screen_many_files(client, list(reads), patterns_path, settings, paths, progress)


def _screen_one_file(client, reads_path, patterns_path, settings, paths, progress, in_flight, split) -> Summary:
    if reads_path == STDIN and patterns_path == STDIN:
        raise InputError("only one input can be read from stdin ('-')")
    paths = {kind: fill_stem(path, reads_path) if reads_path != STDIN else path for kind, path in paths.items()}
    if any(STEM_FIELD in os.fspath(path) for path in paths.values() if path is not None):
        raise InputError(f"{STEM_FIELD} needs a reads file, not stdin")
    check_distinct_files({"the reads file": reads_path, "the patterns file": patterns_path},
                         {_OPTIONS[kind]: path for kind, path in paths.items()})
    started, token = time.perf_counter(), secrets.token_hex(4)
    parts, index = _file_parts(client, reads_path, paths, settings.threads, token) if split else (None, None)
    try:
        if parts is not None:
            try:
                return _screen_parts(client, parts, reads_path, patterns_path, settings, paths, progress, token,
                                     started)
            except UnreadablePart:
                pass  # a wrong cut, or damage: the client reads the file whole, and names any damage
        return _screen_chunks(client, reads_path, patterns_path, settings, paths, progress, in_flight)
    finally:
        if index is not None:
            _discard(client, [index], f"bpbc-index-gone-{token}")


def _file_parts(client, reads_path, paths: dict, threads: int | None, token: str
                ) -> tuple[list[FilePart] | None, str | None]:
    """The parts of ``reads_path`` that the workers will read on their own,
    or None: it cannot be cut, the PAF goes to stdout, an output is not a
    regular file, or a worker does not see the file or cannot write where
    the outputs go. A gzip file of one member is cut through rapidgzip's
    index of it, which a worker makes first (decompressing the file once, on
    its threads) beside the PAF under a hidden name: the second item, which
    the run removes at its end."""
    outputs = [os.path.abspath(path) for path in paths.values() if path is not None]
    if reads_path == STDIN or paths["output"] is None or STDIN in paths.values():
        return None, None
    if any(os.path.exists(path) and not os.path.isfile(path) for path in outputs):
        return None, None
    reads_path = os.path.abspath(reads_path)
    count = PARTS_PER_THREAD * _worker_threads(client)
    parts = plan_parts(reads_path, count)
    indexed = parts is None and indexable(reads_path, count)
    if parts is None and not indexed:
        return None, None
    directories = sorted({os.path.dirname(path) for path in outputs})
    seen = client.run(_sees, reads_path, os.path.getsize(reads_path), directories)
    if not seen or not all(seen.values()):
        return None, None
    if not indexed:
        return parts, None
    index = staging_path(os.path.abspath(os.fspath(paths["output"])) + ".gzidx", token)
    try:
        client.submit(_write_index, reads_path, index, threads, key=f"bpbc-index-{token}", pure=False).result()
    except Exception:  # noqa: BLE001 - damage, say: the client reads the file whole, and names it
        _discard(client, [index], f"bpbc-index-gone-{token}")
        return None, None
    return plan_parts(reads_path, count, index=index), index


def _write_index(reads_path: str, index: str, threads: int | None) -> None:
    """A Dask task: rapidgzip's index of ``reads_path``, made on this worker's reading threads."""
    write_gzip_index(reads_path, index, worker_plan(threads).read)


def _screen_parts(client, parts: list[FilePart], reads_path, patterns_path, settings, paths, progress,
                  token: str, started: float) -> Summary:
    """One file screened part by part, each part by a worker; its outputs staged, then joined in order."""
    patterns = read_patterns(patterns_path)
    make_screener(replace(settings, device="cpu"), patterns, display_name(patterns_path))  # checks the settings
    job = Job.of(settings, patterns, display_name(patterns_path), display_name(reads_path))
    finals = {kind: os.path.abspath(path) for kind, path in paths.items() if path is not None and kind != "json"}
    staged = [{kind: staging_path(finals[kind], f"{token}-{part.number}") if kind in finals else None
               for kind in paths} for part in parts]
    with ExitStack() as stack:
        summary_file = None if paths["json"] is None else stack.enter_context(
            AtomicOutput(paths["json"], "JSON summary"))

        def finish() -> None:
            joins = [([files[kind] for files in staged], final) for kind, final in finals.items()]
            client.submit(join_files, joins, key=f"bpbc-join-{token}", pure=False).result()

        tasks = [(job, part, os.path.abspath(patterns_path), files) for part, files in zip(parts, staged)]
        summaries = _run_file_tasks(client, token, tasks, progress, finish)
        summary = combined_summary(summaries, time.perf_counter() - started)
        summary.reads_file = job.reads_file
        summary.plan = {**summaries[0].plan, "dask": f"{len(parts)} parts"}  # a part's threads on its worker
        if summary_file is not None:
            summary_file.open_binary().write(summary_json(summary))
            summary_file.commit()
    return summary


def _screen_chunks(client, reads_path, patterns_path, settings, paths, progress, in_flight) -> Summary:
    import dask.config

    started = time.perf_counter()
    run_id = secrets.token_hex(4)
    with ExitStack() as stack:
        stack.enter_context(cyclic_gc_paused())
        stack.enter_context(quick_gil_handoff())
        stack.enter_context(dask.config.set({"distributed.admin.large-graph-warning-threshold": _LARGE_TASK_BYTES}))
        plan = plan_run(settings.threads)
        source = stack.enter_context(SequenceSource(reads_path, kind="reads", raw_fastq=True, threads=plan.read,
                                                    in_blocks=True))
        patterns = read_patterns(patterns_path)
        # every check of the settings, here, before any work: the engine is the workers' business
        checked = make_screener(replace(settings, device="cpu"), patterns, display_name(patterns_path))
        job = Job.of(settings, patterns, display_name(patterns_path), source.name)
        summary = new_summary(checked, settings, plan, display_name(reads_path), display_name(patterns_path))
        summary.device = ""  # the workers' engine, known from their first result
        summary.plan["dask"] = "chunks"
        statistics = summary.statistics
        assert statistics is not None
        stages = StageTimes()
        files = RunFiles(stack, plan.compress)
        write_paf = files.paf_writer(paths["output"])
        sinks = {kind: files.reads_sink(kind, (paths[kind],), (source,)) for kind in ("matched", "unmatched")}
        files.json_summary(paths["json"])

        def write(chunk, result: ChunkResult) -> None:
            with stages.timing("write"):
                if result.paf and write_paf is not None:
                    write_paf(result.paf)
                for kind, rows in (("matched", result.passing), ("unmatched", ~result.passing)):
                    sink = sinks[kind]
                    if sink is not None:
                        sink.write(chunk, np.flatnonzero(rows), None)

        worker_seconds = dict.fromkeys(("encode", "device", "traceback", "write"), 0.0)

        def take(chunk, future) -> None:
            result: ChunkResult = future.result()
            writer.submit(write, chunk, result)
            statistics.add_batch(result.lengths, result.hits, result.passing)  # as the local run counts a batch
            summary.device = result.device
            for stage, value in result.seconds.items():
                worker_seconds[stage] += value
            if progress is not None:
                progress(statistics.reads)

        overlap = plan.threaded
        window: collections.deque = collections.deque()
        limit = in_flight or IN_FLIGHT_PER_THREAD * _worker_threads(client)
        writer = stack.enter_context(OrderedWorker(inline=not overlap))
        size = chunk_size_for(settings, len(patterns))
        chunks = read_chunks(source, None, False, lambda: size)
        chunks = stages.timed(chunks, "read")
        if overlap:
            chunks = stack.enter_context(closing(prefetched(chunks)))
        try:
            for index, chunk in enumerate(chunks):
                future = client.submit(screen_chunk, job, ChunkPayload.of(chunk), key=f"bpbc-chunk-{run_id}-{index}",
                                       pure=False)
                window.append((chunk, future))
                if len(window) >= limit:
                    take(*window.popleft())
            while window:
                take(*window.popleft())
            if not summary.device:  # no reads: ask a worker which engine it would use
                summary.device = client.submit(engine_name, job, key=f"bpbc-engine-{run_id}", pure=False).result()
        except _distributed_errors() as error:
            raise _cluster_failed(error) from None
        finally:
            if window:
                client.cancel([future for _, future in window])
        writer.finish()
        statistics.fill(summary)
        summary.wall_time_s = time.perf_counter() - started
        # the workers' seconds added up (PAF formatting counts as writing, as in the local run)
        summary.stage_seconds = {"read": stages.seconds["read"], "encode": worker_seconds["encode"],
                                 "device": worker_seconds["device"], "traceback": worker_seconds["traceback"],
                                 "write": stages.seconds["write"] + worker_seconds["write"]}
        files.commit(lambda: summary_json(summary))
    return summary


def many_files_paths(reads: list, paths: dict) -> list[dict]:
    """Per reads file: its output paths (absolute), templates filled."""
    if not reads:
        raise InputError("no reads files given")
    if STDIN in reads:
        raise InputError("with several reads files, '-' (stdin) cannot be one of them")
    if paths["output"] in (None, STDIN):
        raise InputError(f"with several reads files, give -o/--output as a path holding {STEM_FIELD}")
    several = len(reads) > 1
    for kind, path in paths.items():
        if path is not None and several and STEM_FIELD not in os.fspath(path):
            option = "-o/--output" if kind == "output" else f"--{kind}"
            raise InputError(f"with several reads files, {option} must hold {STEM_FIELD} (one file per reads "
                             f"file), got {os.fspath(path)!r}")
        if path is not None and STEM_FIELD in os.path.dirname(os.fspath(path)):
            raise InputError(f"{os.fspath(path)}: {STEM_FIELD} may only be part of the file name, not of a directory")
    seen: dict[str, str] = {}
    for path in reads:
        name = stem(path)
        if name in seen:
            raise InputError(f"{display_name(seen[name])} and {display_name(path)} have the same stem {name!r}: "
                             "their outputs would be the same files")
        seen[name] = path
    per_file = [{kind: None if path is None else os.path.abspath(fill_stem(path, reads_path))
                 for kind, path in paths.items()} for reads_path in reads]
    for reads_path, files in zip(reads, per_file):
        check_distinct_files({"the reads file": reads_path}, {_OPTIONS[kind]: path for kind, path in files.items()})
    return per_file


def _screen_many_files(client, reads: list, patterns_path, settings, paths, progress) -> list[Summary]:
    if patterns_path == STDIN:
        raise InputError("with several reads files, the patterns cannot come from stdin")
    per_file = many_files_paths([os.fspath(path) for path in reads], paths)
    patterns = read_patterns(patterns_path)
    make_screener(replace(settings, device="cpu"), patterns, display_name(patterns_path))  # checks the settings
    token = secrets.token_hex(4)
    staged = [{kind: None if path is None else staging_path(path, token) for kind, path in files.items()}
              for files in per_file]

    def finish() -> None:
        renames = [(staged_path, files[kind]) for staged_files, files in zip(staged, per_file)
                   for kind, staged_path in staged_files.items() if staged_path is not None]
        client.submit(commit_files, renames, key=f"bpbc-commit-{token}", pure=False).result()

    tasks = [(Job.of(settings, patterns, display_name(patterns_path), display_name(reads_path)),
              os.path.abspath(reads_path), os.path.abspath(patterns_path), files)
             for reads_path, files in zip(reads, staged)]
    return _run_file_tasks(client, token, tasks, progress, finish)


def _discard(client, paths: list[str], key: str) -> None:
    """Remove ``paths`` on a worker (storage the workers share), if the cluster still answers."""
    try:
        client.submit(remove_files, paths, key=key, pure=False).result(timeout=60)
    except Exception:  # noqa: BLE001, S110 - best effort: the cluster may be gone
        pass


def _error_of(future) -> BaseException | None:
    """What ``future`` raised once done; None where it succeeded."""
    try:
        future.result()
    except BaseException as error:  # noqa: BLE001 - handed back to be raised
        return error
    return None


def _run_file_tasks(client, token: str, tasks: list[tuple], progress, finish: Callable[[], None]) -> list[Summary]:
    """One :func:`screen_file` task per ``(job, reads, patterns_path,
    staged outputs)`` of ``tasks``; their summaries, in order, once
    ``finish()`` has put the staged outputs in place. When a task
    fails, the first failure in task order is raised (a part whose start was
    wrong fails only after the part before it found that out), and every
    staged output is removed (tasks still under way remove their own, told by
    a Dask event)."""
    from distributed import Event, as_completed

    abort = f"bpbc-abort-{token}"
    all_staged = [path for *_, files in tasks for path in files.values() if path is not None]
    futures = []
    summaries: list[Summary] = []
    try:
        futures = [client.submit(screen_file, job, reads, patterns_path, files, abort,
                                 key=f"bpbc-file-{token}-{index}", pure=False)
                   for index, (job, reads, patterns_path, files) in enumerate(tasks)]
        index_of = {future.key: index for index, future in enumerate(futures)}
        done: dict[int, Summary] = {}
        for future in as_completed(futures, loop=client.loop):
            index = index_of[future.key]
            if future.status == "error":  # the first failure in input order is the one raised
                raise next(error for error in map(_error_of, futures[:index + 1]) if error is not None)
            done[index] = future.result()
            if progress is not None:
                progress(sum(summary.reads for summary in done.values()))
        summaries = [done[index] for index in range(len(tasks))]
        finish()
    except BaseException as error:
        client.cancel(futures)
        try:
            Event(abort, client=client).set()
        except Exception:  # noqa: BLE001, S110 - best effort: the cluster may be gone
            pass
        _discard(client, all_staged, f"bpbc-discard-{token}")
        if isinstance(error, _distributed_errors()):
            raise _cluster_failed(error) from None
        raise
    return summaries


# ---------------------------------------------------------------- connecting

def parse_local(address: str) -> int | None | bool:
    """For ``--dask local[:N]``: N (None for 'local' alone); False for any other address."""
    if address == "local":
        return None
    if address.startswith("local:"):
        value = address[len("local:"):]
        if not value.isdigit() or int(value) < 1:
            raise InputError(f"--dask local:N needs a positive number of workers, got {address!r}")
        return int(value)
    return False


def local_cluster(workers: int | None, device: str, threads_per_worker: int = 1):
    """A cluster on this machine: CPU worker processes, or with ``device`` 'gpu'
    one dask-cuda worker per GPU (the first ``workers`` GPUs)."""
    import logging

    if device == "gpu":
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError as error:
            raise InputError(f"--dask local with --device gpu needs dask-cuda (pip install 'bpbc[dask-cuda]'): "
                             f"{error}") from None
        options = {} if workers is None else {"CUDA_VISIBLE_DEVICES": list(range(workers))}
        try:
            return LocalCUDACluster(**NO_DASHBOARD, silence_logs=logging.ERROR,
                                    threads_per_worker=threads_per_worker, **options)
        except Exception as error:  # noqa: BLE001 - no GPU, fewer GPUs than asked for, no NVML, ...
            raise InputError(f"cannot start a dask-cuda cluster of {workers or 'every'} GPU(s) here: "
                             f"{type(error).__name__}: {error}") from None
    from distributed import LocalCluster

    return LocalCluster(n_workers=workers or usable_cores(), threads_per_worker=threads_per_worker,
                        processes=True, **NO_DASHBOARD, silence_logs=logging.ERROR)


def connect(address: str | None = None, scheduler_file=None, timeout: float | None = None):
    """A ``distributed.Client`` of a running scheduler (``tcp://host:8786`` or a
    scheduler file), with at least one worker; an unreachable scheduler, or
    none of its workers within ``timeout`` seconds (default: Dask's connect
    timeout), raises InputError."""
    import dask.config
    from dask.utils import parse_timedelta
    from distributed import Client

    if timeout is None:
        timeout = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="seconds")
    where = f"scheduler file {scheduler_file}" if scheduler_file is not None else address
    if scheduler_file is not None and not os.path.isfile(scheduler_file):
        raise InputError(f"{scheduler_file}: cannot read the Dask scheduler file: no such file")
    try:
        client = Client(address, scheduler_file=scheduler_file, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as error:
        raise InputError(f"cannot reach the Dask scheduler at {where}: {error}") from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (OSError, TimeoutError) as error:
        client.close()
        raise InputError(f"the Dask scheduler at {where} has no workers (waited {timeout:g} s): {error}") from None
    return client
