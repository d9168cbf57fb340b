"""The streaming pipeline's use of threads: ``--threads N`` bounds every parallel part."""

from __future__ import annotations

import dataclasses
import gzip
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import bpbc
from bpbc.pipeline import OrderedWorker, ScreenSettings, screen_files
from tests.bpbc.conftest import random_read

DATA = Path(__file__).resolve().parents[1] / "data"
PACKAGE_ROOT = str(Path(bpbc.__file__).resolve().parents[1])


def test_inline_worker_calls_at_once_in_the_caller():
    seen = []
    with OrderedWorker(inline=True) as worker:
        worker.submit(lambda: seen.append(threading.current_thread()))
        assert seen == [threading.current_thread()]
        worker.finish()


def test_nothing_queued_runs_after_a_worker_call_failed(monkeypatch):
    """A failed call's error reaches the submitter at its next submit; the
    calls still queued then are skipped. Before, the error was let go before
    anything stopped the thread, and a queued call could still start (a stage
    was called once more after Ctrl-C: test_cli.py's
    test_ctrl_c_in_any_stage_exits_130_and_leaves_no_files saw it about 1 run
    in 180 under load). Forced here: the thread is held between taking the
    queued call and looking at it until the submitter has had the error, and
    the block ends only once it has looked (planted once, the old ``_raise``
    that let the error go first: 100 of 100 runs failed)."""
    import queue

    taken, look, back = threading.Event(), threading.Event(), threading.Event()
    ran: list = []

    class Held(queue.Queue):  # the worker's queue: holds it after it takes the queued call
        def get(self, *args, **kwargs):
            if taken.is_set():
                back.set()  # the thread is done with the queued call (run or skipped)
            item = super().get(*args, **kwargs)
            if isinstance(item, tuple) and item[1] == ("queued",):
                taken.set()
                assert look.wait(30)
            return item

    go = threading.Event()

    def fail(_):
        assert go.wait(30)
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(queue, "Queue", Held)  # the worker's queue, made as it starts
        worker = OrderedWorker(depth=2)
    with worker:
        worker.submit(fail, "first")
        worker.submit(ran.append, "queued")
        go.set()
        assert taken.wait(30)  # the failed call's error is kept, the queued call taken, not yet looked at
        with pytest.raises(KeyboardInterrupt):
            worker.submit(ran.append, "later")
        look.set()
        assert back.wait(30)  # before the with block stops the thread
    assert ran == []


def test_a_stopped_handoff_gives_nothing_more_and_does_not_wait():
    """Once the caller has stopped (halt), a producer's next give returns
    False at once, even with an item left untaken in the queue (before, its
    put waited for ever: an encoder thread left behind by some interrupted
    runs, 22 of them after 300 in one process)."""
    from bpbc.pipeline import _Handoff

    handoff = _Handoff()
    handoff.items.put("untaken")
    handoff.halt()
    answers: list = []
    producer = threading.Thread(target=lambda: answers.append(handoff.give("next")), daemon=True)
    producer.start()
    producer.join(30)
    assert not producer.is_alive() and answers == [False]
    assert handoff.items.get_nowait() == "untaken" and handoff.items.empty()


def test_one_thread_starts_no_writer_and_no_compression_threads(tmp_path, monkeypatch):
    """With --threads 1 only the reading and the encoding threads start: the
    caller writes, and de/compression runs in the threads that read and write."""
    started = []
    real_start = threading.Thread.start

    def recording_start(thread):
        started.append(thread.name)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", recording_start)
    summary = screen_files(DATA / "reads.fq", DATA / "patterns.fa", ScreenSettings(threshold=20, threads=1,
                                                                                  device="cpu", chunk_size=3),
                           output=tmp_path / "o.paf", matched=tmp_path / "m.fq.gz")
    assert started == ["bpbc-reader", "bpbc-encoder"] and summary.reads == 20
    assert (tmp_path / "o.paf").read_text() == (DATA / "expected.paf").read_text()


def test_one_thread_uses_one_core(tmp_path):
    """A run of its own (a subprocess) with --threads 1, compressed input and
    outputs: user + system time of the process within 1.2 x its wall time."""
    rng = np.random.default_rng(2)
    reads = "".join(f"@r{k}\n{random_read(rng, 150)}\n+\n{'I' * 150}\n" for k in range(30000))
    with gzip.open(tmp_path / "r.fq.gz", "wt", compresslevel=1) as fh:
        fh.write(reads)
    (tmp_path / "p.fa").write_text(f">p\n{random_read(rng, 64)}\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    command = [sys.executable, "-c", "import sys, time; from bpbc.cli import main;"
               "start, cpu = time.perf_counter(), time.process_time(); status = main(sys.argv[1:]);"
               "print(time.process_time() - cpu, time.perf_counter() - start); sys.exit(status)",
               "r.fq.gz", "p.fa", "-t", "30", "--device", "cpu", "--threads", "1", "-q",
               "-o", "o.paf.gz", "--matched", "m.fq.gz", "--unmatched", "u.fq.gz"]
    subprocess.run(command, cwd=tmp_path, env=env, check=True, capture_output=True, timeout=600)  # compile first
    done = subprocess.run(command, cwd=tmp_path, env=env, check=True, capture_output=True, timeout=600)
    cpu, wall = map(float, done.stdout.split())
    assert cpu <= 1.2 * wall, (cpu, wall)


def test_chunks_spread_over_several_devices_come_back_in_input_order(monkeypatch):
    """With a screener per device, each chunk is encoded and screened by an
    idle one, n at once, and the results come back in input order, however
    long each takes. A device still being set up takes no chunk meanwhile:
    the others screen them (with chunk k on device k mod n the output would
    wait for the late device)."""
    import time

    from bpbc import pipeline

    screened = threading.Semaphore(0)  # a chunk screened by device 0 or 1

    class Screener:
        def __init__(self, name):
            self.name, self.engine, self.threads, self.taken = name, f"engine{name}", None, 0
            self.busy = threading.Lock()

        def hits(self, batch):
            with self.busy:
                self.taken += 1
            time.sleep(0.001 * (batch[1] % 3))  # later chunks often finish first
            if self.name != 2:
                screened.release()
            return (self.name, batch[1])

    devices = [Screener(0), Screener(1), Screener(2)]
    screened_before_2: list[int] = []

    def set_up_late():  # device 2 is ready once the others have screened 20 chunks
        for _ in range(20):
            if not screened.acquire(timeout=30):
                break
        screened_before_2.append(devices[0].taken + devices[1].taken)
        return devices[2]

    monkeypatch.setattr(pipeline, "encode_chunk", lambda chunk, screener, source: (screener.engine, int(chunk[5:])))
    results = list(pipeline._screened(iter([f"chunk{k}" for k in range(60)]), "reads", devices[0],
                                      [lambda: devices[1], set_up_late], pipeline.StageTimes()))
    assert [chunk for chunk, _, _ in results] == [f"chunk{k}" for k in range(60)]
    assert [batch[1] for _, batch, _ in results] == list(range(60))
    assert all(batch == (f"engine{device}", k) for _, batch, (device, k) in results)  # encoded for its device
    assert screened_before_2[0] >= 20
    assert sum(device.taken for device in devices) == 60


def test_a_device_gets_its_next_chunk_queued_while_it_screens(monkeypatch):
    """With several devices, while a device screens one chunk the next is
    encoded for it and its screen called, to be queued behind the first on
    the device (GpuEngine._in_device_order), so that it goes from one
    screen to the next without waiting for the host: the first chunk's
    screen on device 0 sees the second chunk's screen on device 0 begin
    (one screen at a time per device never did)."""
    from bpbc import pipeline

    second_called = threading.Event()
    seen_while_screening = []
    calls = {0: 0, 1: 0}
    counting = threading.Lock()

    class Screener:
        def __init__(self, name):
            self.name, self.engine, self.threads = name, name, None

        def hits(self, batch):
            with counting:
                calls[self.name] += 1
                if self.name == 0 and calls[0] == 2:
                    second_called.set()
            if batch == 0:
                seen_while_screening.append(second_called.wait(timeout=10))
            return batch

    monkeypatch.setattr(pipeline, "encode_chunk", lambda chunk, screener, source: chunk)
    results = list(pipeline._screened(iter(range(20)), "reads", Screener(0), [lambda: Screener(1)],
                                      pipeline.StageTimes()))
    assert [chunk for chunk, _, _ in results] == list(range(20))
    assert seen_while_screening == [True]


def test_each_reads_file_is_written_by_a_thread_of_its_own(tmp_path, monkeypatch):
    """The matched and the unmatched reads go to their files from threads of
    their own, each in input order: while the unmatched file's first write
    is held up, the matched file gets the next chunks (with one writer
    thread, it waited). The files are those of --threads 1."""
    from bpbc import sinks

    names: dict[str, set] = {"m.fq": set(), "u.fq": set()}
    matched_chunks = 0
    two_matched, seen_while_held = threading.Event(), []
    real_write = sinks.FileSink.write

    def recording_write(sink, chunk, units, best):
        nonlocal matched_chunks
        path = Path(sink.outputs[0]._output.path).name
        names[path].add(threading.current_thread().name)
        if path == "u.fq" and not seen_while_held:
            seen_while_held.append(two_matched.wait(timeout=10))
        real_write(sink, chunk, units, best)
        if path == "m.fq":
            matched_chunks += 1
            if matched_chunks == 2:
                two_matched.set()

    settings = dict(threshold=20, device="cpu", chunk_size=3)
    screen_files(DATA / "reads.fq", DATA / "patterns.fa", ScreenSettings(threads=1, **settings),
                 output=tmp_path / "one.paf", matched=tmp_path / "one_m.fq", unmatched=tmp_path / "one_u.fq")
    monkeypatch.setattr(sinks.FileSink, "write", recording_write)
    screen_files(DATA / "reads.fq", DATA / "patterns.fa", ScreenSettings(threads=2, **settings),
                 output=tmp_path / "o.paf", matched=tmp_path / "m.fq", unmatched=tmp_path / "u.fq")
    assert names == {"m.fq": {"bpbc-writer-matched"}, "u.fq": {"bpbc-writer-unmatched"}}
    assert seen_while_held == [True]
    for mine, one in (("o.paf", "one.paf"), ("m.fq", "one_m.fq"), ("u.fq", "one_u.fq")):
        assert (tmp_path / mine).read_bytes() == (tmp_path / one).read_bytes()


def test_batches_are_traced_two_at_once_and_written_in_order(tmp_path, monkeypatch):
    """With ``tracebacks`` 2 in the plan, the next batch's traceback starts
    while the first one's is held up (one at a time, it waited for it: the
    held call then sees no second one begin), and every output is that of
    --threads 1, in input order."""
    import dataclasses

    from bpbc.resources import plan_run
    from bpbc.screener import Screener

    settings = dict(threshold=20, device="cpu", chunk_size=3)
    outputs = ("o.paf", "m.fq", "u.fq")
    screen_files(DATA / "reads.fq", DATA / "patterns.fa", ScreenSettings(threads=1, **settings),
                 **dict(zip(("output", "matched", "unmatched"), (tmp_path / f"one_{name}" for name in outputs))))
    real_align = Screener.align
    calls, second_began, seen_while_held = [], threading.Event(), []

    def held_align(screener, batch, hits):
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            seen_while_held.append(second_began.wait(timeout=10))
        elif len(calls) == 2:
            second_began.set()
        return real_align(screener, batch, hits)

    monkeypatch.setattr(Screener, "align", held_align)
    plan = dataclasses.replace(plan_run(2), tracebacks=2)
    screen_files(DATA / "reads.fq", DATA / "patterns.fa", ScreenSettings(threads=2, **settings),
                 plan=plan, **dict(zip(("output", "matched", "unmatched"), (tmp_path / name for name in outputs))))
    assert seen_while_held == [True] and len(calls) > 2
    assert {name.rsplit("_", 1)[0] for name in calls} == {"bpbc-traceback"}
    for name in outputs:
        assert (tmp_path / name).read_bytes() == (tmp_path / f"one_{name}").read_bytes()


def test_a_device_that_cannot_be_set_up_fails_the_run(monkeypatch):
    from bpbc import pipeline

    class Screener:
        engine, threads = "engine0", None

        def hits(self, batch):
            return batch

    def broken():
        raise RuntimeError("cudaErrorDevicesUnavailable")

    monkeypatch.setattr(pipeline, "encode_chunk", lambda chunk, screener, source: chunk)
    with pytest.raises(RuntimeError, match="DevicesUnavailable"):
        list(pipeline._screened(iter(range(50)), "reads", Screener(), [broken], pipeline.StageTimes()))


def test_a_cpu_screen_runs_on_one_engine():
    from bpbc.pipeline import twin_makers
    from bpbc.screener import Screener

    assert twin_makers(Screener(["ACGTACGTAC"], threshold=10, device="cpu")) == []


def test_a_screened_chunk_keeps_only_its_hits_records_where_nothing_else_needs_them(tmp_path, monkeypatch):
    """hits_only: a raw chunk's batch without codes is cut down to its hits'
    records after the screen, and its alignments and PAF lines are those of
    the whole chunk; where most reads hit, the chunk is small (short reads)
    or the batch holds codes, nothing changes."""
    from bpbc import pipeline
    from bpbc.io import SequenceSource
    from bpbc.pipeline import chunk_paf, hits_only
    from bpbc.result import Texts
    from bpbc.screener import ReadBatch, Screener

    rng = np.random.default_rng(41)
    pattern = random_read(rng, 60)
    reads = [random_read(rng, 150) for _ in range(200)]
    for i in range(0, 200, 20):
        reads[i] = reads[i][:40] + pattern + reads[i][100:]
    path = tmp_path / "r.fq"
    path.write_text("".join(f"@r{i} x\n{r}\n+\n{'I' * len(r)}\n" for i, r in enumerate(reads)))
    screener = Screener({"p": pattern}, 60, device="cpu")
    with SequenceSource(path, raw_fastq=True) as source:
        (chunk,) = list(source.chunks(1000))
    with_codes = screener.prepare(chunk)
    hits = screener.hits(with_codes)
    assert len(hits) == 10
    raw = ReadBatch(None, with_codes.lengths, None, screener.engine, chunk)
    assert hits_only(chunk, raw, hits) == (chunk, raw)  # a small chunk: kept as it is
    monkeypatch.setattr(pipeline, "HITS_ONLY_FROM", 0)
    kept_chunk, kept_batch = hits_only(chunk, raw, hits)
    assert kept_chunk is not chunk and len(kept_chunk.data) < len(chunk.data) // 10
    assert kept_batch.prepared is None and kept_batch.lengths is with_codes.lengths
    names, lengths = Texts.of(["p"]), [60]
    expected = screener.align(with_codes, hits)
    found = screener.align(kept_batch, hits)
    assert found.to_list() == expected.to_list()
    assert chunk_paf(kept_chunk, kept_batch.lengths, found, names, lengths) == \
        chunk_paf(chunk, with_codes.lengths, expected, names, lengths)
    coded = ReadBatch(*chunk.encode(), None, screener.engine)
    assert hits_only(chunk, coded, hits) == (chunk, coded)  # codes: kept as they are
    everything = dataclasses.replace(hits, read=np.arange(200), pattern=np.zeros(200, np.int64),
                                     strand=np.zeros(200, np.int64), score=np.zeros(200, np.int32),
                                     capped=np.zeros(200, bool))
    assert hits_only(chunk, raw, everything) == (chunk, raw)  # most reads hit: no copy
