"""A gzip output compressed in a process of its own (bpbc.gzip_writer.GzipWriterProcess)."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

pytest.importorskip("isal")

import bpbc.io  # noqa: E402
from bpbc.gzip_writer import GzipWriterProcess  # noqa: E402
from bpbc.io import AtomicOutput  # noqa: E402

DATA = b"".join(b"@r%d\n%s\n+\n%s\n" % (i, b"ACGT"[i % 4:] * 37, b"F" * (148 - 37 * (i % 4))) for i in range(20000))


def _written(path, pieces: list, threads: int = 2, block_size: int = 65536, mode: str = "wb") -> bytes:
    writer = GzipWriterProcess(path, mode, threads, block_size)
    for piece in pieces:
        assert writer.write(piece) == len(memoryview(piece).cast("B") if memoryview(piece).contiguous
                                          else bytes(piece))
    writer.close()
    return path.read_bytes()


def test_the_file_is_the_same_however_it_was_written(tmp_path):
    whole = _written(tmp_path / "a.gz", [DATA])
    assert gzip.decompress(whole) == DATA
    pieces = [DATA[i:i + 7777] for i in range(0, len(DATA), 7777)]
    assert _written(tmp_path / "b.gz", pieces) == whole
    array = np.frombuffer(DATA, np.uint8)
    assert _written(tmp_path / "c.gz", [array[:1000], memoryview(DATA)[1000:], b""]) == whole
    strided = np.frombuffer(DATA + DATA, np.uint8).reshape(2, -1)[:, ::1]  # contiguous rows of a 2-d array
    assert gzip.decompress(_written(tmp_path / "d.gz", [strided[0], np.frombuffer(DATA, np.uint8)[::-1][::-1]])) \
        == DATA + DATA


def test_append_adds_a_member(tmp_path):
    path = tmp_path / "a.gz"
    _written(path, [DATA[:1000]])
    _written(path, [DATA[1000:2000]], mode="ab")
    assert gzip.decompress(path.read_bytes()) == DATA[:2000]


def test_the_childs_error_is_raised_here(tmp_path):
    with pytest.raises(OSError) as caught:
        _written(tmp_path / "missing" / "a.gz", [DATA] * 20)
    assert caught.value.errno == 2 and caught.value.filename == str(tmp_path / "missing" / "a.gz")
    if os.path.exists("/dev/full"):
        with pytest.raises(OSError) as full:
            _written(tmp_path / "unused", [], block_size=4096)  # an empty file opens and closes fine
            writer = GzipWriterProcess("/dev/full", "wb", 2, 4096)
            try:
                for _ in range(200):
                    writer.write(DATA)
            finally:
                writer.close()
        assert full.value.errno == 28  # ENOSPC


def test_an_output_compressed_on_several_threads_goes_to_a_process(tmp_path, monkeypatch):
    monkeypatch.setattr(bpbc.io, "GZIP_WRITER_PROCESS_MIN_THREADS", 3)
    for threads, apart, kind in ((3, True, "GzipWriterProcess"), (2, True, "_ThreadedGzipWriter"),
                                 (3, False, "_ThreadedGzipWriter")):
        output = AtomicOutput(tmp_path / f"{threads}{apart}.fq.gz", compression_threads=threads,
                              compress_apart=apart)
        handle = output.open_binary()
        assert type(getattr(handle, "raw", handle)).__name__ == kind
        handle.write(DATA)
        output.close_handles()
        output.commit()
        assert gzip.decompress((tmp_path / f"{threads}{apart}.fq.gz").read_bytes()) == DATA


def test_a_runs_gzip_outputs_are_the_same_through_the_process(tmp_path, monkeypatch):
    """A run of an input of GZIP_PROCESS_MIN_BYTES or more (here: any)
    compresses its gzip outputs in processes where it has the threads."""
    import bpbc.gzip_writer
    from bpbc.pipeline import ScreenSettings, screen_files
    from bpbc.resources import plan_run
    from tests.bpbc.test_cli import PATTERNS, READS

    monkeypatch.setattr(bpbc.io, "GZIP_PROCESS_MIN_BYTES", 0)
    started = []
    monkeypatch.setattr(bpbc.gzip_writer.GzipWriterProcess, "__init__", _counted(
        bpbc.gzip_writer.GzipWriterProcess.__init__, started))
    plans = {"apart": plan_run(8), "here": plan_run(1)}
    assert plans["apart"].compress >= bpbc.io.GZIP_WRITER_PROCESS_MIN_THREADS > plans["here"].compress
    outputs = {}
    for name, plan in plans.items():
        files = {kind: tmp_path / f"{name}.{kind}.fq.gz" for kind in ("matched", "unmatched")}
        screen_files(READS, PATTERNS, ScreenSettings(threshold=20, device="cpu"), output=tmp_path / f"{name}.paf",
                     plan=plan, **files)
        outputs[name] = [gzip.decompress(path.read_bytes()) for path in files.values()]
    assert outputs["apart"] == outputs["here"] and all(outputs["here"])
    assert len(started) == 2  # the matched and unmatched reads of the first run


def _counted(function, calls: list):
    def counted(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)
    return counted
