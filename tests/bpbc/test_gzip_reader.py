"""rapidgzip in a process of its own (bpbc.gzip_reader.GzipProcess): the bytes, seeks and errors
of the same reader in this process (tests/bpbc/test_io.py runs every gzip test through both)."""

from __future__ import annotations

import gzip
import io
import os
import re
import signal

import pytest

pytest.importorskip("rapidgzip")

import bpbc.gzip_reader  # noqa: E402
from bpbc.gzip_reader import GzipError, GzipProcess  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="needs memfd_create (Linux)")

DATA = b"".join(b"@r%d\n%s\n+\n%s\n" % (i, b"ACGT"[i % 4:] * 37, b"F" * (148 - 37 * (i % 4))) for i in range(4000))


@pytest.fixture
def small_slots(monkeypatch):
    """Slots of a few kB: a file crosses many of them, and every slot is
    filled again several times."""
    monkeypatch.setattr(bpbc.gzip_reader, "GZIP_PROCESS_SLOT", 4093)
    monkeypatch.setattr(bpbc.gzip_reader, "GZIP_PROCESS_SLOTS", 3)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("buffer_size", [1, 1000, 4093, 50_000, len(DATA) + 10])
def test_the_bytes_whatever_the_reads(tmp_path, small_slots, buffer_size):
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(DATA[:200_000] if buffer_size == 1 else DATA, compresslevel=1))
    expected = DATA[:200_000] if buffer_size == 1 else DATA
    stream = GzipProcess(path, 2)
    try:
        got, buffer = bytearray(), bytearray(buffer_size)
        while size := stream.readinto(buffer):
            assert size == len(buffer) or len(got) + size == len(expected)  # whole buffers until the end
            got += buffer[:size]
        assert bytes(got) == expected and stream.tell() == len(expected) and stream.readinto(buffer) == 0
    finally:
        stream.close()


def test_seeks_back_with_reads_ahead_under_way(tmp_path, small_slots):
    """A seek drops the slots read ahead (test_io.py seeks both readers at and after the end)."""
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(DATA))
    stream = GzipProcess(path, 2)
    try:
        assert stream.read(10_000) == DATA[:10_000]
        assert stream.seek(0) == 0 and stream.read(5) == DATA[:5]  # dnaio's look at the start and back
        assert stream.seek(-2, io.SEEK_CUR) == 3 and stream.read(20_000) == DATA[3:20_003]
        assert stream.read() == DATA[20_003:] and stream.tell() == len(DATA)
    finally:
        stream.close()


def _error(reader, path) -> tuple[str, str]:
    try:
        stream = reader(path, 2)
    except Exception as error:  # noqa: BLE001 - what the constructor raises is compared too
        return type(error).__name__, str(error)
    try:
        stream.read()
    except Exception as error:  # noqa: BLE001
        return type(error).__name__, str(error)
    finally:
        stream.close()
    return "", ""


@pytest.mark.parametrize("damage", ["footer cut off", "cut in half", "CRC flipped", "not gzip"])
def test_an_error_comes_from_the_child_as_in_this_process(tmp_path, small_slots, damage):
    packed = gzip.compress(DATA)
    packed = {"footer cut off": packed[:-8], "cut in half": packed[:len(packed) // 2],
              "CRC flipped": packed[:-8] + bytes([packed[-8] ^ 0xFF]) + packed[-7:],
              "not gzip": b"\x1f\x8b not gzip at all" * 100}[damage]
    path = tmp_path / "r.fq.gz"
    path.write_bytes(packed)
    here = _error(bpbc.gzip_reader.ParallelGzip, path)
    assert here[0] and here == _error(GzipProcess, path)


def test_a_child_that_dies_is_an_error_and_close_ends_it(tmp_path, small_slots):
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(DATA))
    stream = GzipProcess(path, 2)
    child = stream._child
    assert child is not None and _alive(child.pid)
    stream.read(100)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    with pytest.raises(GzipError, match=r"the decompressing process ended unexpectedly \(exit status -9\)"):
        stream.read()
    stream.close()
    second = GzipProcess(path, 2)
    pid = second._child.pid  # type: ignore[union-attr]
    second.read(10)
    second.close()
    assert not _alive(pid) and second.closed


def test_rapidgzips_messages_name_no_thread():
    """The fuzz's case 976 of seed 81 (--parallel-gzip): the same input gave
    two messages, each naming another of rapidgzip's threads."""
    message = ("[IsalInflateWrapper][Thread 139796615674752] Decoding failed with error code -3: Invalid lookback "
               "distance found! Already decoded 2941 B.")
    assert bpbc.gzip_reader._without_thread(message) == ("[IsalInflateWrapper] Decoding failed with error code -3: "
                                                         "Invalid lookback distance found! Already decoded 2941 B.")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_no_descriptor_is_left_after_an_error(tmp_path, small_slots):
    """The fuzz's cases 2572, 19071, 26999 and 125532 of seed 83 (--parallel-gzip, 16-core
    H200 host): a file cut short left one descriptor open, the shared memory's, which
    close() could not unmap while the error's traceback held a view of it (planted
    back: this test fails)."""
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(DATA)[:-6])
    before = len(os.listdir("/proc/self/fd"))
    stream = GzipProcess(path, 2)
    with pytest.raises(EOFError) as caught:
        stream.read()
    stream.close()  # the error (and its traceback) still held, as by the caller that reports it
    assert caught.value is not None and len(os.listdir("/proc/self/fd")) == before


def _packed_with(damage: str) -> bytes:
    packed = gzip.compress(DATA)
    return {"footer cut off": packed[:-8], "cut in half": packed[:len(packed) // 2],
            "CRC flipped": packed[:-8] + bytes([packed[-8] ^ 0xFF]) + packed[-7:],
            "size flipped": packed[:-4] + bytes([packed[-4] ^ 0xFF]) + packed[-3:]}[damage]


@pytest.mark.parametrize(("damage", "kind", "message"), [
    # rapidgzip's RuntimeError 'End of file reached!': a truncation (EOFError, which io names as one)
    ("footer cut off", EOFError, r"End of file reached!"),
    # its other RuntimeErrors and its ValueErrors: damage (GzipError), with rapidgzip's own message
    ("size flipped", GzipError, r"Mismatching size \(\d+ <-> footer: \d+\) for gzip stream!"),
    ("CRC flipped", GzipError, r"Mismatching CRC32 \(0x[0-9a-f]+ <-> stored: 0x[0-9a-f]+\)!"),
])
def test_rapidgzips_errors_keep_their_kind_and_message(tmp_path, damage, kind, message):
    """ParallelGzip.readinto: which of rapidgzip's errors is a truncation
    and which is damage, each with rapidgzip's message (scripts/mutation.py's
    survivors readinto 15-22, 24, 25 and 27 of the first run on gzip_reader: each
    turned one into the other, or its message into 'None')."""
    path = tmp_path / "r.fq.gz"
    path.write_bytes(_packed_with(damage))
    stream = bpbc.gzip_reader.ParallelGzip(path, 2)
    try:
        with pytest.raises(Exception) as caught:  # noqa: PT011 - its exact type is checked below
            stream.read()
    finally:
        stream.close()
    assert type(caught.value) is kind and re.fullmatch(message, str(caught.value))


@pytest.mark.parametrize("members", [1, 8])
def test_data_that_ends_early_without_an_error_of_rapidgzips_is_a_truncation(tmp_path, monkeypatch, members):
    """A file cut in the middle of its (last member's) deflate data: rapidgzip
    returns the data before the cut without an error; readinto's own check
    (the compressed file not read to its end) makes it an EOFError, with the
    end check (_check_end) off as for a file above END_CHECK_MAX_BYTES.
    rapidgzip's compressed position is then 0 for one member and inside the
    file for several (mutants readinto 8, 10-12: the check true only at 0,
    or its message changed)."""
    monkeypatch.setattr(bpbc.gzip_reader, "END_CHECK_MAX_BYTES", 0)
    step = len(DATA) // members + 1
    packed = [gzip.compress(DATA[start:start + step]) for start in range(0, len(DATA), step)]
    path = tmp_path / "r.fq.gz"
    path.write_bytes(b"".join(packed[:-1]) + packed[-1][:len(packed[-1]) // 2])
    stream = bpbc.gzip_reader.ParallelGzip(path, 2)
    try:
        with pytest.raises(EOFError) as caught:
            stream.read()
    finally:
        stream.close()
    assert str(caught.value) == "compressed data ended before the end-of-stream marker was reached"


def test_a_file_gone_before_it_is_opened_again_is_a_gzip_error(tmp_path):
    """ParallelGzip._open's error: rapidgzip's ValueError when it cannot open
    the file (here at the seek back to the start after the end, as dnaio
    seeks after looking at a small file's first bytes: the file removed in
    between) is a GzipError with its message (mutants _open 8-10: 'None')."""
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(DATA[:1000]))
    stream = bpbc.gzip_reader.ParallelGzip(path, 2)
    try:
        assert stream.read() == DATA[:1000]
        path.unlink()
        with pytest.raises(GzipError) as caught:
            stream.seek(0)
    finally:
        stream.close()
    assert str(caught.value) == f"Opening file '{path}' with mode 'rb' failed!"


@pytest.fixture
def every_gzip_in_a_process(monkeypatch):
    """Every gzip file, however small, decompressed in a process of its own from 2 threads on."""
    monkeypatch.setattr(bpbc.gzip_reader, "PARALLEL_GZIP_MIN_THREADS", 2)
    monkeypatch.setattr(bpbc.gzip_reader, "PARALLEL_GZIP_MIN_BYTES", 0)
    monkeypatch.setattr(bpbc.gzip_reader, "GZIP_PROCESS_MIN_BYTES", 0)
    yield
    bpbc.gzip_reader.close_unused()


def test_a_process_started_early_is_the_one_the_reading_takes(tmp_path, monkeypatch, small_slots,
                                                              every_gzip_in_a_process):
    """start_early starts the process parallel_gzip would, for that path and
    threads only (the same path, spelt relative, too); parallel_gzip takes
    it, once, and it reads the file."""
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(DATA))
    plain = tmp_path / "r.fq"
    plain.write_bytes(DATA)
    bpbc.gzip_reader.start_early(path, 3)
    bpbc.gzip_reader.start_early(plain, 3)  # not gzip: nothing started
    bpbc.gzip_reader.start_early(path, 1)  # too few threads: nothing
    bpbc.gzip_reader.start_early(tmp_path / "absent.fq.gz", 3)  # the run names that problem
    started = bpbc.gzip_reader._STARTED
    assert list(started) == [(str(path), 3)]
    early = started[(str(path), 3)].result()
    monkeypatch.chdir(tmp_path)
    stream = bpbc.gzip_reader.parallel_gzip("r.fq.gz", 3)
    try:
        assert stream is early and not started
        assert stream.read() == DATA
    finally:
        stream.close()
    again = bpbc.gzip_reader.parallel_gzip(path, 3)  # a second opening starts its own
    assert isinstance(again, GzipProcess) and again is not early
    again.close()


def test_a_process_started_early_raises_its_error_where_the_file_is_read(tmp_path, small_slots,
                                                                          every_gzip_in_a_process):
    """A file that rapidgzip refuses: the early start keeps the error, and
    parallel_gzip raises it, as it raises the error of a process it starts."""
    path = tmp_path / "r.fq.gz"
    path.write_bytes(b"\x1f\x8b not gzip at all" * 100)
    with pytest.raises(GzipError) as late:
        bpbc.gzip_reader.parallel_gzip(path, 2).read()
    bpbc.gzip_reader.start_early(path, 2)
    with pytest.raises(GzipError) as early:
        bpbc.gzip_reader.parallel_gzip(path, 2).read()
    assert str(early.value) == str(late.value)


def test_close_unused_ends_the_processes_no_reading_took(tmp_path, small_slots, every_gzip_in_a_process):
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(DATA))
    bpbc.gzip_reader.start_early(path, 2)
    child = bpbc.gzip_reader._STARTED[(str(path), 2)].result()._child
    assert child is not None and _alive(child.pid)
    bpbc.gzip_reader.close_unused()
    assert not bpbc.gzip_reader._STARTED and not _alive(child.pid)
