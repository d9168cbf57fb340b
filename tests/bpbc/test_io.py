"""bpbc.io: chunked reading with dnaio, error messages, pattern validation,
atomic output files; and the read-ahead thread of bpbc.pipeline."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import zlib

import dnaio
import pytest

import bpbc.gzip_reader
import bpbc.io
import bpbc.pipeline
from bpbc.io import AtomicOutput, InputError, SequenceSource, compression_for, read_patterns
from bpbc.pipeline import ScreenSettings, chunk_size_for, prefetched
from tests.bpbc.conftest import run_without_root_file_access, zstd_compress

FASTQ = b"".join(b"@r%d comment %d\nACGTACGTNN\n+\nIIIII#####\n" % (i, i) for i in range(10))


def write(path, data: bytes):
    path.write_bytes(data)
    return path


COMPRESSORS = {
    "": lambda d: d,
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".zst": zstd_compress,
}


# --- reading ----------------------------------------------------------------

def test_chunks_keep_file_order_and_size(tmp_path):
    source = SequenceSource(write(tmp_path / "r.fq", FASTQ))
    with source:
        chunks = list(source.chunks(3))
    assert [len(c) for c in chunks] == [3, 3, 3, 1]
    assert [r.id for c in chunks for r in c.records] == [f"r{i}" for i in range(10)]
    assert chunks[0].records[0].name == "r0 comment 0" and chunks[0].records[0].qualities == "IIIII#####"
    assert source.fileformat == "fastq" and source.records_read == 10


def test_chunks_ramp_up_from_a_small_first_chunk(tmp_path):
    path = tmp_path / "r.fa"
    write(path, b"".join(b">r%d\nACGT\n" % i for i in range(100)))
    with SequenceSource(path) as source:
        sizes = [len(chunk) for chunk in source.chunks(40, ramp=8)]
    assert sizes == [5, 10, 20, 40, 25]


@pytest.mark.parametrize("suffix, body", [(".fa", b">r%d\nACGT\n"), (".fq", b"@r%d\nACGT\n+\nIIII\n")])
def test_chunk_size_given_as_a_call_is_asked_before_each_chunk(tmp_path, suffix, body):
    """A run lowers the size once it knows it has several devices: the
    chunks read after that are no larger (dnaio's records and the raw route)."""
    path = write(tmp_path / f"r{suffix}", b"".join(body % i for i in range(100)))
    limit = [40]
    sizes = []
    with SequenceSource(path, raw_fastq=True) as source:
        for chunk in source.chunks(lambda: limit[0], ramp=4):
            sizes.append(len(chunk))
            limit[0] = 15 if len(sizes) == 2 else limit[0]
    assert sizes == [10, 20, 15, 15, 15, 15, 10]
    assert sum(sizes) == 100


@pytest.mark.parametrize("suffix, body", [(".fa", b">r%d\n%s\n"), (".fq", b"@r%d\n%s\n+\n%s\n")])
@pytest.mark.parametrize("multiple", [1, 2])
def test_chunks_end_once_they_hold_max_bases(tmp_path, suffix, body, multiple):
    """Long reads: a chunk ends at the record that takes it to max_bases
    (whole groups of ``multiple``), whatever the count allows; every record
    once, in order (dnaio's records and the raw route)."""
    lengths = [(7 * i) % 50 + 1 for i in range(60)]
    records = []
    for i, n in enumerate(lengths):
        sequence = b"ACGT" * (n // 4) + b"A" * (n % 4)
        records.append(body % ((i, sequence) if suffix == ".fa" else (i, sequence, b"I" * n)))
    path = write(tmp_path / f"r{suffix}", b"".join(records))
    with SequenceSource(path, raw_fastq=True) as source:
        chunks = list(source.chunks(1000, multiple=multiple, max_bases=100))
    got = [[len(chunk.records[i].sequence) if hasattr(chunk, "records") else int(chunk.lengths[i])
            for i in range(len(chunk))] for chunk in chunks]
    assert [n for chunk in got for n in chunk] == lengths
    for chunk in got[:-1]:
        assert len(chunk) % multiple == 0
        assert sum(chunk) >= 100 and sum(chunk[:-multiple]) < 100  # it ended at the group reaching 100
    assert len(chunks) > 5


def test_thread_switch_interval_is_shortened_and_restored():
    import sys

    from bpbc.pipeline import SWITCH_INTERVAL_S, quick_gil_handoff

    before = sys.getswitchinterval()
    with quick_gil_handoff():
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
    assert sys.getswitchinterval() == before


def test_cyclic_gc_is_paused_and_restored():
    import gc

    from bpbc.pipeline import cyclic_gc_paused

    assert gc.isenabled()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()

@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_reads_every_compression(tmp_path, suffix):
    data = COMPRESSORS[suffix](FASTQ)
    if data is None:
        pytest.skip("xopen cannot handle zstd here: install backports.zstd (Python < 3.14) or the zstd program")
    with SequenceSource(write(tmp_path / f"r.fq{suffix}", data)) as source:
        assert [r.sequence for r in source.records()] == ["ACGTACGTNN"] * 10


def test_format_detected_from_content_without_extension(tmp_path):
    with SequenceSource(write(tmp_path / "reads", b">a x\nACGT\nAC\n>b\nGG\n")) as source:
        records = list(source.records())
    assert source.fileformat == "fasta"
    assert [(r.id, r.sequence, r.qualities) for r in records] == [("a", "ACGTAC", None), ("b", "GG", None)]


def test_crlf_and_lowercase_are_accepted(tmp_path):
    path = write(tmp_path / "r.fq", b"@r1 x\r\nacgtN\r\n+\r\nIIIII\r\n")
    with SequenceSource(path) as source:
        (record,) = source.records()
    assert (record.id, record.sequence, record.qualities) == ("r1", "acgtN", "IIIII")


def test_two_headers_are_detected(tmp_path):
    with SequenceSource(write(tmp_path / "r.fq", b"@r1\nACGT\n+r1\nIIII\n")) as source:
        list(source.records())
        assert source.two_headers


def test_empty_reads_file_has_no_records(tmp_path):
    with SequenceSource(write(tmp_path / "r.fq", b"")) as source:
        assert list(source.chunks(5)) == []


def test_stdin_is_read_and_decompressed(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(FASTQ))))
    with SequenceSource("-") as source:
        assert source.name == "<stdin>"
        assert len(list(source.records())) == 10


# each bad input: (file name, content, text the one-line message must contain)
BAD_INPUTS = {
    "truncated record": ("r.fq", FASTQ + b"@r10\nACGT\n", "line 43: Premature end of file"),
    "missing plus line": ("r.fq", b"@r1\nACGT\n+\nIIII\n@r2\nACGT\nIIII\n@r3\nA\n+\nI\n", "line 7"),
    "length mismatch": ("r.fq", b"@r1\nACGT\n+\nIIII\n@r2\nACGT\n+\nIII\n", "line 8"),
    "non-ASCII FASTQ": ("r.fq", b"@r1\nACGT\n+\nIIII\n@r2\nAC\xc3\xa9T\n+\nIIII\n", "line 6: non-ASCII byte 0xc3"),
    "non-ASCII FASTA": ("r.fa", b">r1\nACGT\n>r2\nAC\xffT\n", "line 4: non-ASCII byte 0xff"),
    "truncated gzip": ("r.fq.gz", gzip.compress(FASTQ * 50)[:-20], "truncated"),
    "truncated bz2": ("r.fq.bz2", bz2.compress(FASTQ * 50)[:-20], "truncated"),
    "not gzip": ("r.fq.gz", FASTQ, "corrupt compressed data"),
    "neither FASTA nor FASTQ": ("r.txt", b"hello\n", "not a FASTA or FASTQ file"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_raises_one_line_error_naming_file_and_place(tmp_path, case):
    name, data, place = BAD_INPUTS[case]
    path = write(tmp_path / name, data)
    with pytest.raises(InputError) as caught:
        with SequenceSource(path) as source:
            list(source.chunks(4))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert place in message


def test_error_after_some_records_names_the_last_good_record(tmp_path):
    # a truncated stream far enough in that some records come out first
    records = b"".join(b"@read%d\n%s\n+\n%s\n" % (i, b"ACGT" * 30, b"I" * 120) for i in range(20000))
    path = write(tmp_path / "r.fq.gz", gzip.compress(records)[:-50])
    for raw_fastq in (False, True):  # dnaio's records, or the raw route's chunks
        with pytest.raises(InputError, match=r"truncated.*after record \d+, 'read\d+'\)$") as error:
            with SequenceSource(path, raw_fastq=raw_fastq) as source:
                for _ in source.chunks(1000):
                    pass
        # the record named is the last one read: record N is read{N - 1}
        found = re.search(r"after record (\d+), 'read(\d+)'", str(error.value))
        assert found is not None and int(found[2]) == int(found[1]) - 1 and int(found[1]) >= 1000
    # damage before any record came out
    path = write(tmp_path / "s.fq.gz", gzip.compress(records[:2000])[:-50])
    with pytest.raises(InputError) as error:
        with SequenceSource(path) as source:
            for _ in source.chunks(1000):
                pass
    assert str(error.value).endswith(" (in the first records)"), str(error.value)


def test_os_errors_are_described_by_their_text():
    from bpbc.io import _describe_os_error

    assert _describe_os_error(FileNotFoundError(2, "No such file or directory", "x")) == "No such file or directory"
    assert _describe_os_error(OSError("the disk went away")) == "the disk went away"
    assert _describe_os_error(OSError()) == "OSError"


def test_missing_and_directory_paths(tmp_path):
    with pytest.raises(InputError, match="missing.fq: cannot open reads file: No such file"):
        SequenceSource(tmp_path / "missing.fq")
    with pytest.raises(InputError, match="is a directory"):
        SequenceSource(tmp_path)


@pytest.mark.skipif(os.name != "posix", reason="file modes")
def test_unreadable_file(tmp_path):
    """In a process that file modes bind, as root too (tests/bpbc/conftest.py)."""
    path = write(tmp_path / "r.fq", FASTQ)
    path.chmod(0)
    done = run_without_root_file_access(["-c", "import sys\nfrom bpbc.io import InputError, SequenceSource\n"
                                         "try:\n    SequenceSource(sys.argv[1])\n"
                                         "except InputError as error:\n    print(error)\n", path], tmp_path)
    assert done.stdout == f"{path}: cannot open reads file: Permission denied\n", done.stderr


def test_read_patterns_accepts_iupac_lowercase_u_and_crlf(tmp_path):
    path = write(tmp_path / "p.fa", b">a first\r\nACGTN\r\nryu\r\n>b\r\nGG\r\n")
    patterns = read_patterns(path)
    assert [(p.id, p.sequence) for p in patterns] == [("a", "ACGTNryu"), ("b", "GG")]


BAD_PATTERNS = {
    "empty file": (b"", "holds no sequences"),
    "empty pattern": (b">a\n>b\nACGT\n", "pattern 'a' (record 1) has an empty sequence"),
    "duplicate names": (b">a x\nACGT\n>b\nAC\n>a y\nGG\n", "duplicate pattern name 'a' (records 1 and 3)"),
    "no name": (b">\nACGT\n", "record 1 has no name"),
    "bad character": (b">a\nACGT\n>b\nAC-GT\n", "record 2: pattern b: character '-' at position 3"),
    # the first problem in record order, whichever kind comes later
    "bad character, then a duplicate name": (b">a\nAXGT\n>a\nACGT\n", "record 1: pattern a: character 'X'"),
    "duplicate name, then a bad character": (b">a\nACGT\n>a\nAXGT\n", "duplicate pattern name 'a' (records 1 and 2)"),
    "empty pattern, then a bad character": (b">a\n>b\nAXGT\n", "pattern 'a' (record 1) has an empty sequence"),
}


@pytest.mark.parametrize("case", sorted(BAD_PATTERNS))
def test_read_patterns_rejects(tmp_path, case):
    data, expected = BAD_PATTERNS[case]
    path = write(tmp_path / "p.fa", data)
    with pytest.raises(InputError) as caught:
        read_patterns(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert expected in str(caught.value)


# --- atomic output ----------------------------------------------------------

def test_atomic_output_appears_only_on_commit(tmp_path):
    target = tmp_path / "out.txt"
    out = AtomicOutput(target)
    out.open_binary().write(b"hello\n")
    assert not target.exists()
    assert len(list(tmp_path.iterdir())) == 1  # the temporary file, hidden
    out.commit()
    assert target.read_bytes() == b"hello\n"
    assert list(tmp_path.iterdir()) == [target]


def test_atomic_output_failure_leaves_old_file_and_no_temporary(tmp_path):
    target = write(tmp_path / "out.txt", b"old\n")
    with pytest.raises(RuntimeError):
        with AtomicOutput(target) as out:
            out.open_binary().write(b"half")
            raise RuntimeError("interrupted")
    assert target.read_bytes() == b"old\n"
    assert list(tmp_path.iterdir()) == [target]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_of_reads_is_opened_once(tmp_path, monkeypatch):
    """Reads from a named pipe on the raw FASTQ route: the pipe is opened
    once (by xopen), never by the route's check for a plain file, which
    closed it and left it without a reader for a moment (a writer writing
    then got EPIPE: a test's FIFO did, once in 4 CI runs); its records read."""
    from bpbc import io as bpbc_io

    fifo = tmp_path / "reads.fq"
    os.mkfifo(fifo)
    opened: list = []
    monkeypatch.setattr(bpbc_io, "open", lambda *args, **kwargs: opened.append(args[0]) or open(*args, **kwargs),
                        raising=False)
    counts: list[int] = []

    def read() -> None:
        with SequenceSource(fifo, raw_fastq=True) as source:
            counts.append(sum(len(chunk) for chunk in source.chunks(10)))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    fifo.write_bytes(b"@r0\nACGT\n+\nIIII\n@r1\nGGCA\n+\nIIII\n")  # once the reader has opened it
    reader.join(timeout=30)
    if reader.is_alive():  # it opened the pipe again after the writer had gone: waiting for another for good
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
        pytest.fail("the pipe was opened again once its writer had closed it")
    assert opened == [] and counts == [2]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_with_a_non_ascii_byte_is_one_error(tmp_path):
    """A non-ASCII byte in reads from a named pipe: one error, without the
    line (a file is read again to find it; a pipe would be opened again and
    wait for a writer for good)."""
    fifo = tmp_path / "reads.fq"
    os.mkfifo(fifo)
    errors: list[str] = []

    def read() -> None:
        try:
            with SequenceSource(fifo) as source:
                list(source.chunks(10))
        except InputError as error:
            errors.append(str(error))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    fifo.write_bytes(b"@r0\nACGT\n+\nIIII\n@r1\nGG\xe9A\n+\nIIII\n")
    reader.join(timeout=30)
    if reader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
        pytest.fail("the pipe was opened again to find the byte")
    assert len(errors) == 1 and "non-ASCII" in errors[0] and "reads.fq" in errors[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_atomic_output_writes_a_pipe_in_place(tmp_path):
    """A destination that is not a regular file (a named pipe here; /dev/null
    and /dev/stdout alike) is written in place: a temporary file renamed
    over it would replace the pipe, or the device, with a regular file."""
    import stat

    target = tmp_path / "out.fifo"
    os.mkfifo(target)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(target.read_bytes()))
    reader.start()
    with AtomicOutput(target) as out:
        out.open_binary().write(b"hello\n")
        out.commit()
    reader.join(timeout=30)
    assert received == [b"hello\n"]
    assert stat.S_ISFIFO(os.stat(target).st_mode)
    assert list(tmp_path.iterdir()) == [target]  # no temporary file


@pytest.mark.parametrize("suffix,magic", [(".gz", b"\x1f\x8b"), (".bz2", b"BZh"), (".xz", b"\xfd7zXZ"), ("", b"@r0")])
def test_atomic_output_compresses_by_final_name(tmp_path, suffix, magic):
    target = tmp_path / f"out.fq{suffix}"
    with AtomicOutput(target) as out:
        writer = out.open_records("fastq")
        writer.write(dnaio.SequenceRecord("r0 x", "ACGT", "IIII"))
        out.commit()
    assert target.read_bytes().startswith(magic)
    with dnaio.open(target) as reader:
        assert [(r.name, r.sequence, r.qualities) for r in reader] == [("r0 x", "ACGT", "IIII")]


def test_compression_for():
    assert [compression_for(n) for n in ("a.fq.GZ", "a.bz2", "a.xz", "a.zst", "a.fq", "gz")] == [
        "gz", "bz2", "xz", "zst", None, None]


def test_atomic_output_unwritable_destinations(tmp_path):
    with pytest.raises(InputError, match="cannot write the PAF file: No such file"):
        AtomicOutput(tmp_path / "missing-dir" / "x.paf", "PAF")
    with pytest.raises(InputError, match="is a directory"):
        AtomicOutput(tmp_path)


# --- read-ahead -------------------------------------------------------------

class WatchedHandoff(bpbc.pipeline._Handoff):
    """The hand-off of a :class:`prefetched`, counting the items given and
    noting at which one the reader thread last waited to have it taken."""

    def __init__(self) -> None:
        super().__init__()
        self.gives = self.waited_at = 0
        self.changed = threading.Condition()
        taken = self.taken
        handoff = self

        class Taken:
            def acquire(self, timeout=None):
                with handoff.changed:
                    handoff.waited_at = handoff.gives
                    handoff.changed.notify_all()
                return taken.acquire(timeout=timeout)

            def release(self):
                taken.release()

        self.taken = Taken()  # type: ignore[assignment]

    def give(self, item) -> bool:
        self.gives += 1
        return super().give(item)


def test_prefetched_keeps_order_and_holds_at_most_two_items(monkeypatch):
    """Forced: before it takes each item the caller waits until the reader
    thread waits for the next item to be taken (or has ended), so the reader
    has run as far ahead as it can each time. Planted once (give() not
    waiting for its item to be taken, the queue unbounded): fails every
    run (100 of 100); the test before (a sleep between items) passed on it
    wherever the reader thread did not get to run ahead."""
    monkeypatch.setattr(bpbc.pipeline, "_Handoff", WatchedHandoff)
    produced = []
    consumed = []
    most_alive = 0

    def items():
        for k in range(30):
            produced.append(k)
            yield k

    iterator = prefetched(items())
    handoff, worker = iterator._handoff, iterator._worker
    for item in iterator:
        deadline = time.monotonic() + 30
        with handoff.changed:  # item + 1 made and given, its taking waited for: the reader can go no further
            while handoff.waited_at < min(item + 2, 31) and worker.is_alive():
                assert time.monotonic() < deadline, "the reader neither waited nor ended"
                handoff.changed.wait(0.01)
        most_alive = max(most_alive, len(produced) - len(consumed))
        consumed.append(item)
    assert consumed == list(range(30))
    assert most_alive == 2  # the item in hand and the next one


def test_prefetched_reraises_in_the_caller():
    def items():
        yield 1
        raise InputError("r.fq: line 9: broken")

    seen = []
    with pytest.raises(InputError, match="line 9"):
        for item in prefetched(items()):
            seen.append(item)
    assert seen == [1]


def test_prefetched_stops_its_thread_when_closed():
    def endless():
        k = 0
        while True:
            yield k
            k += 1

    before = threading.active_count()
    iterator = prefetched(endless())
    assert next(iterator) == 0
    iterator.close()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before


def test_prefetched_dropped_unclosed_stops_its_thread():
    """An iterator lost before the block that closes it (an interrupt in
    between) stops its thread once it is freed, and the thread closes its
    items: in a resident server it polled for ever, holding them."""
    import gc

    closed = []

    def endless():
        try:
            k = 0
            while True:
                yield k
                k += 1
        finally:
            closed.append(True)

    iterator = prefetched(endless())
    assert next(iterator) == 0
    worker = iterator._worker
    del iterator
    gc.collect()
    worker.join(5)
    assert not worker.is_alive() and closed == [True]


def test_chunk_size_for_bounds_instances():
    assert chunk_size_for(ScreenSettings(chunk_size=7), 1000) == 7
    assert chunk_size_for(ScreenSettings(), 1) == 100_000
    # a screen for hits: big panels keep whole chunks (a bit or two per instance)
    assert chunk_size_for(ScreenSettings(), 5000) == 100_000
    assert chunk_size_for(ScreenSettings(), 10**5) == (1 << 30) // (2 * 10**5)
    assert chunk_size_for(ScreenSettings(strand="forward"), 10**5) == (1 << 30) // 10**5
    assert chunk_size_for(ScreenSettings(), 10**7) == 1000  # never below the minimum
    # each instance's score kept: exact scores, or thresholds the CPU engine screens in one pass
    assert chunk_size_for(ScreenSettings(exact_scores=True), 500) == (1 << 24) // 1000
    assert chunk_size_for(ScreenSettings(threshold=7), 500) == (1 << 24) // 1000
    assert chunk_size_for(ScreenSettings(threshold=8), 500) == 100_000


def test_several_devices_take_chunks_of_bounded_work():
    from types import SimpleNamespace

    import numpy as np

    from bpbc.pipeline import SEVERAL_DEVICES_CHUNK_WORK, SEVERAL_DEVICES_MIN_CHUNK, several_devices_chunk_size

    def screener(lengths, strands=("+", "-")):
        return SimpleNamespace(pattern_lengths=np.array(lengths), strands=strands)

    assert several_devices_chunk_size(100_000, screener([24] * 96)) == 100_000  # light panels: unchanged
    assert several_devices_chunk_size(100_000, screener([24] * 5000)) == SEVERAL_DEVICES_CHUNK_WORK // 240_000
    assert several_devices_chunk_size(50_000, screener([24] * 5000), mates=2) == SEVERAL_DEVICES_CHUNK_WORK // 480_000
    assert several_devices_chunk_size(100_000, screener([10_000] * 2000)) == SEVERAL_DEVICES_MIN_CHUNK


@pytest.mark.parametrize("threads", [0, 1, 3])
@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_compressed_output_bytes_follow_the_data_not_the_writes(tmp_path, monkeypatch, threads, suffix):
    """An output's compressed bytes are the same however the data was cut
    into writes, and for a gzip file whatever the number of compression
    threads (0: compressed in the writing thread, as demultiplexed files are;
    the one-thread stream differs from the blocks). ISA-L's threaded writer
    compresses each block it is handed on its own, its one-thread stream
    differs too, so the same run's --unmatched .gz differed from run to run
    on a GPU host (chunks of other sizes). Fails with the writes handed to
    ISA-L's writers as they come."""
    import numpy as np
    from xopen import xopen

    monkeypatch.setattr(bpbc.io, "COMPRESSION_BLOCK", 64 << 10)
    monkeypatch.setattr(bpbc.io, "STREAM_BLOCK", 16 << 10)
    rng = np.random.default_rng(5)
    # (the one-thread stream gave other bytes from about 300 kB on)
    data = rng.choice(np.frombuffer(b"ACGT\n", np.uint8), 4 * (64 << 10) + 77_777).tobytes()

    def written(cuts, threads):
        output = AtomicOutput(tmp_path / f"{len(cuts)}-{threads}{suffix}", "reads")
        handle = output.open_binary(threads=threads)
        for start, end in zip([0, *cuts], [*cuts, len(data)]):
            assert handle.write(memoryview(data)[start:end]) == end - start
        output.commit()
        with xopen(output.path, "rb") as compressed:
            assert compressed.read() == data
        with open(output.path, "rb") as compressed:
            return compressed.read()

    one_write = written([], threads)
    if suffix == ".gz" and threads:
        assert one_write == written([], 1)
    assert written(sorted(rng.choice(len(data), 40, replace=False).tolist()), threads) == one_write
    assert written(list(range(1000, len(data), 1000)), threads) == one_write
    assert written([16 << 10, 64 << 10, 128 << 10, (128 << 10) + 1, 200_000, 256 << 10], threads) == one_write


def test_gzip_reads_output_written_from_a_thread_that_ends_first(tmp_path, monkeypatch):
    """The pipeline's writer thread ends before the main thread closes the
    outputs, and the multi-threaded gzip writer must still finish. ISA-L's
    writer stops its threads once the thread that opened it has ended, so
    blocks still queued then were never written and closing hung; the
    outputs are now opened by the main thread. Forced: the writer thread has
    ended (joined) when the thread each gzip writer watches is looked at,
    before the close. Planted once (ReadsOutput opening its file at the
    first write, in the writer thread): fails every run (100 of 100), here
    and not by the compressors' timing."""
    import isal.igzip_threaded

    import bpbc.io

    writers = []
    real_init = isal.igzip_threaded._ThreadedGzipWriter.__init__

    def recorded(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        writers.append(self)

    monkeypatch.setattr(isal.igzip_threaded._ThreadedGzipWriter, "__init__", recorded)
    monkeypatch.setattr(bpbc.io.os, "cpu_count", lambda: 8)  # several compression threads
    path = tmp_path / "u.fq.gz"
    with SequenceSource(write(tmp_path / "r.fq", FASTQ)) as source:
        output = AtomicOutput(path, "unmatched reads")
        reads = bpbc.io.ReadsOutput(output, source)
        payload = FASTQ * 20000
        writer = threading.Thread(target=lambda: [reads.write_bytes(payload) for _ in range(3)])
        writer.start()
        writer.join()
        assert writers and all(w._calling_thread.is_alive() for w in writers), "opened by the ended thread"
        done = threading.Thread(target=output.commit, daemon=True)
        done.start()
        done.join(30)
        assert not done.is_alive(), "closing the gzip output hung"
    assert gzip.decompress(path.read_bytes()) == payload * 3


@pytest.mark.parametrize("record_route", [False, True])
def test_closing_a_source_does_not_wait_for_a_read_blocked_in_another_thread(monkeypatch, record_route):
    """An interrupted run closes its reads source while the reader thread is
    still blocked reading a pipe whose writer is idle (``producer |
    bpbc-screen -``): closing the stream would wait for that read (forever,
    if the producer never writes again), so close() returns at once and the
    stream is closed when the read returns."""
    import bpbc.io

    monkeypatch.setattr(bpbc.io, "READ_BLOCK", 16)  # the constructor reads only this much
    read_end, write_end = os.pipe()
    reader = os.fdopen(read_end, "rb")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(reader))
    first = b">r0\nACGTACGTACGTACGTACGT\n" if record_route else FASTQ[:40]
    os.write(write_end, first)
    got, errors = [], []

    def consume():
        try:
            got.extend(source.chunks(1000))
        except ValueError as error:  # reading on after the source was closed
            errors.append(error)

    source = SequenceSource("-", raw_fastq=True)
    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not source._reading:  # until the thread waits for the pipe
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.1)
    assert thread.is_alive() and not got  # blocked reading the pipe
    closing = threading.Thread(target=source.close, daemon=True)
    closing.start()
    closing.join(5)
    assert not closing.is_alive(), "close() waited for the blocked read"
    assert not reader.closed
    os.write(write_end, b">r1\nAC\n" if record_route else FASTQ[40:])
    os.close(write_end)
    thread.join(5)
    assert not thread.is_alive()
    assert reader.closed  # by the read, once it returned
    # the thread read on into the closed stream (the pipeline's reader stops instead)
    assert [str(error) for error in errors] == ["read of closed file"] and not got


def test_closing_a_source_when_no_read_is_under_way_closes_at_once(tmp_path):
    with SequenceSource(write(tmp_path / "r.fq", FASTQ), raw_fastq=True) as source:
        stream = source._stream
        assert sum(map(len, source.chunks(4))) == 10
        assert not stream.closed
    assert stream.closed


@pytest.mark.parametrize("suffix", [".xz", ".zst", ".bz2", ".gz"])
@pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
def test_damaged_compressed_reads_fail_every_time(tmp_path, monkeypatch, suffix, damage):
    """Found by fuzzing: xopen decompressed xz and zstd in an external program
    (xz, zstd) that reports a corrupt or truncated stream only by its exit
    status when the file is closed; so, depending on timing, the run read
    the part before the damage, succeeded and wrote its outputs. Reads are
    now decompressed in this process (gzip by ISA-L's reader, which raises
    too): every try fails."""
    data = b"".join(b"@r%d\n%s\n+\n%s\n" % (i, b"ACGT" * 40, b"I" * 160) for i in range(400))
    packed = COMPRESSORS[suffix](data)
    if packed is None:
        pytest.skip("no zstd compressor here")
    middle = len(packed) // 2
    if damage == "flipped byte":
        packed = packed[:middle] + bytes([packed[middle] ^ 0x55]) + packed[middle + 1:]
    else:
        packed = packed[:middle]
    path = write(tmp_path / f"r.fq{suffix}", packed)
    for attempt in range(8):
        stdin = attempt % 2 == 1  # the stream's content decides there
        if stdin:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(packed)))
        with pytest.raises(InputError, match=r"(r\.fq\.(xz|zst|bz2|gz)|<stdin>): (corrupt compressed data|the "
                                             r"compressed file is truncated|line \d+)"):
            with SequenceSource("-" if stdin else path, raw_fastq=True) as source:
                for _chunk in source.chunks(50):
                    pass


@pytest.mark.parametrize("raw_fastq", [True, False])
@pytest.mark.parametrize("suffix", [".xz", ".bz2", ".gz"])
def test_data_after_the_last_stream_that_is_no_stream_is_an_error(tmp_path, monkeypatch, suffix, raw_fastq):
    """Found by the fuzz's oracle: Python's xz and bzip2 readers take data
    after a stream that is not another stream for trailing garbage and stop
    there silently, so the reads of a damaged second stream were lost and
    the run succeeded (fails on the code before for .xz and .bz2). Streams
    one after another are read, every one."""
    second = COMPRESSORS[suffix](b"@extra\nACGT\n+\nIIII\n")
    whole = COMPRESSORS[suffix](FASTQ) + second
    with SequenceSource(write(tmp_path / f"two.fq{suffix}", whole), raw_fastq=raw_fastq) as source:
        assert sum(len(chunk) for chunk in source.chunks(50)) == 11
    damaged = COMPRESSORS[suffix](FASTQ) + b"X" + second[1:]
    for stdin in (False, True):
        if stdin:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(damaged)))
        with pytest.raises(InputError, match=r"(r\.fq\.(xz|bz2|gz)|<stdin>): (corrupt compressed data|the "
                                             r"compressed file is truncated)"):
            with SequenceSource("-" if stdin else write(tmp_path / f"r.fq{suffix}", damaged),
                                raw_fastq=raw_fastq) as source:
                for _chunk in source.chunks(50):
                    pass


@pytest.mark.parametrize("block_size", [1, 7, 1 << 20])
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_the_first_non_ascii_byte_is_found_by_line(tmp_path, block_size, suffix):
    """What a non-ASCII error names: the 1-based line and the byte, however
    the file is read in blocks (the line count carried over blocks)."""
    find = bpbc.io._find_non_ascii
    text = b"@r1\nACGT\n+\nIIII\n@r2 \xc3\xa9\nACGT\n+\nIIII\n\xff\n"
    path = write(tmp_path / f"r.fq{suffix}", COMPRESSORS[suffix](text))
    assert find(path, block_size) == (5, 0xC3)
    path = write(tmp_path / f"s.fq{suffix}", COMPRESSORS[suffix](b"\xfe" + text))
    assert find(path, block_size) == (1, 0xFE)
    path = write(tmp_path / f"t.fq{suffix}", COMPRESSORS[suffix](text.replace(b"\xc3\xa9", b"e")))
    assert find(path, block_size) == (9, 0xFF)
    path = write(tmp_path / f"a.fq{suffix}", COMPRESSORS[suffix](text[:20]))
    assert find(path, block_size) is None
    assert find(tmp_path / "missing.fq", block_size) is None  # best effort: no error of its own


#: bytes after an xz stream: (name, tail, reads or None where the file is rejected). The verdicts are those
#: of ``xz -dc`` (5.4): stream padding is null bytes in a multiple of four, then another stream or the end.
XZ_TAILS = [
    ("padding of 4", b"\0" * 4, 10),
    ("padding of 128 KiB, beyond a read's block", b"\0" * (1 << 17), 10),
    ("padding of 8, another stream", b"\0" * 8 + lzma.compress(b"@extra\nACGT\n+\nIIII\n"), 11),
    ("another stream", lzma.compress(b"@extra\nACGT\n+\nIIII\n"), 11),
    ("padding of 2", b"\0" * 2, None),
    ("padding of 846 (the fuzz's case 10486 of seed 47)", b"\0" * 846, None),
    ("padding of 128 KiB + 2", b"\0" * ((1 << 17) + 2), None),
    ("padding of 3, another stream", b"\0" * 3 + lzma.compress(b"@extra\nACGT\n+\nIIII\n"), None),
    ("padding of 4, then no stream", b"\0" * 4 + b"garbage", None),
    ("a legacy .lzma stream", lzma.compress(b"@extra\nACGT\n+\nIIII\n", format=lzma.FORMAT_ALONE), None),
]


def _read_as_xz_would(tmp_path, monkeypatch, data: bytes, reads: int | None, raw_fastq: bool, stdin_too: bool):
    """Read ``data`` as the reads file r.fq.xz (and, with ``stdin_too``, on
    standard input): ``reads`` records, or where ``reads`` is None one error
    naming corrupt or truncated compressed data."""
    for stdin in (False, True) if stdin_too else (False,):
        if stdin:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        path = "-" if stdin else write(tmp_path / "r.fq.xz", data)

        def count() -> int:
            with SequenceSource(path, raw_fastq=raw_fastq) as source:
                return sum(len(chunk) for chunk in source.chunks(50))

        if reads is not None:
            assert count() == reads
            continue
        with pytest.raises(InputError, match=r"^(.*r\.fq\.xz|<stdin>): (corrupt compressed data|the compressed file "
                                             r"is truncated): "):
            count()


@pytest.mark.parametrize("raw_fastq", [True, False])
@pytest.mark.parametrize("name, tail, reads", XZ_TAILS, ids=[case[0] for case in XZ_TAILS])
def test_what_follows_an_xz_stream_is_held_to_what_xz_accepts(tmp_path, monkeypatch, name, tail, reads, raw_fastq):
    """Found by the fuzz's oracle: Python's xz reader detects the format of
    what follows a stream afresh and took null bytes for legacy .lzma
    headers (empty streams), so a file that ``xz -d`` calls corrupt was read
    without an error. Now what xz accepts is read, every stream, and the
    rest is one error (fails before the fix for the zero runs and .lzma)."""
    _read_as_xz_would(tmp_path, monkeypatch, lzma.compress(FASTQ) + tail, reads, raw_fastq, stdin_too=True)


def test_an_xz_file_with_a_bad_tail_is_one_line_exit_1_and_no_output(tmp_path, capsys):
    """The fuzz's case: the command says so in one line, exits 1 and leaves no file, as for a corrupt gzip."""
    from tests.bpbc.test_cli import PATTERNS, every_output, run_cli

    reads = write(tmp_path / "r.fq.xz", lzma.compress(FASTQ) + b"\0" * 846)
    out = tmp_path / "out"
    out.mkdir()
    status, stdout, err = run_cli(capsys, reads, PATTERNS, "-t", "10", "--device", "cpu", *every_output(out))
    assert (status, stdout) == (1, "")
    assert re.fullmatch(r"bpbc-screen: error: \S*r\.fq\.xz: the compressed file is truncated: .*\n", err), err
    assert list(out.iterdir()) == []


_EXTRA = b"@extra\nACGT\n+\nIIII\n"
_LZMA = lzma.compress(FASTQ, format=lzma.FORMAT_ALONE)
#: whole files named .xz: (name, bytes, reads or None where the file is rejected). The verdicts are those of
#: ``xz -dc`` 5.4.1 on each file (checked by hand; test_xz_file_verdicts_are_xzs_own checks them where xz is installed).
XZ_FILES = [
    ("an .xz stream", lzma.compress(FASTQ), 10),
    ("a legacy .lzma stream (of unknown size: an end marker)", _LZMA, 10),
    ("18 null bytes (an empty .lzma stream to Python, dictionary size 0)", b"\0" * 18, None),
    ("938 null bytes, then an .xz stream (the fuzz's case 2301 of seed 71)", b"\0" * 938 + lzma.compress(_EXTRA), None),
    ("null padding of 4, then an .xz stream", b"\0" * 4 + lzma.compress(_EXTRA), None),
    ("a legacy .lzma stream of dictionary size 0", _LZMA[:1] + b"\0" * 4 + _LZMA[5:], None),
    ("a legacy .lzma stream, then an .xz stream", _LZMA + lzma.compress(_EXTRA), None),
    ("a legacy .lzma stream, then null padding of 4", _LZMA + b"\0" * 4, None),
    ("a legacy .lzma stream twice", _LZMA + _LZMA, None),
    ("an .xz stream, then a legacy .lzma stream", lzma.compress(FASTQ) + _LZMA, None),
    ("the first 5 bytes of the xz magic", b"\xfd7zXZ", None),
    ("nothing", b"", None),
]


@pytest.mark.parametrize("raw_fastq", [True, False])
@pytest.mark.parametrize("name, data, reads", XZ_FILES, ids=[case[0] for case in XZ_FILES])
def test_an_xz_file_is_held_to_what_xz_accepts_from_its_first_byte(tmp_path, monkeypatch, name, data, reads,
                                                                   raw_fastq):
    """Found by the fuzz's oracle (seed 71, case 2301): Python's xz reader
    detects the format of a file's first stream, and takes null bytes for
    a legacy .lzma header (an empty stream of dictionary size 0, which
    ``xz -d`` does not recognise); what came after it was read as the
    streams after an .xz stream, so 938 null bytes and an .xz stream ran as
    the reads of that stream. Now the first stream is an .xz one or a
    legacy .lzma one that xz recognises, and nothing follows a legacy
    .lzma stream (fails before the fix for the null bytes, the dictionary
    size 0 and what follows a legacy stream)."""
    # xopen takes standard input for xz by the magic bytes only (else for plain text: no format, not ASCII)
    _read_as_xz_would(tmp_path, monkeypatch, data, reads, raw_fastq, stdin_too=data.startswith(b"\xfd7zXZ\0"))


@pytest.mark.skipif(shutil.which("xz") is None, reason="the xz command is not installed")
@pytest.mark.parametrize("name, data, reads", XZ_FILES, ids=[case[0] for case in XZ_FILES])
def test_xz_file_verdicts_are_xzs_own(tmp_path, name, data, reads):
    """The oracle of XZ_FILES: ``xz -dc`` itself reads the file whole (the
    records expected) or exits with an error."""
    done = subprocess.run(["xz", "-dc", write(tmp_path / "r.fq.xz", data)], capture_output=True)
    if reads is None:
        assert done.returncode != 0, done
    else:
        assert (done.returncode, done.stdout) == (0, FASTQ), done


#: 13-byte legacy .lzma headers and whether ``xz -d`` (5.4.1) recognises them: properties byte, dictionary size,
#: uncompressed size (all ones: unknown); checked by hand, and against xz itself where it is installed
LZMA_HEADERS = [
    (0x5D, 1 << 23, 100, True),  # xz --format=lzma -6
    (0x5D, 1 << 23, (1 << 64) - 1, True),
    (0x00, 0, 0, False),  # null bytes
    (0x00, 1, 0, True),
    (0x00, 2, 0, True),
    (0x00, 3, 0, True),  # 2 + 1
    (0x00, 5, 0, False),
    (0x00, 6, 0, True),  # 4 + 2
    (0x00, 7, 0, False),
    (0x00, 3 << 30, 0, True),
    (0x00, (1 << 16) + 1, 0, False),
    (0x00, 0xFFFF_FFFF, 0, True),
    (0x00, 0xFFFF_FFFE, 0, False),
    (0x5D, 11, 0, False),  # 8 + 3: xz's rounding with shifts 2, 3, 4 (one of 4 instead of 3 took it)
    (0x5D, 3 << 15, 0, True),  # little-endian (read big-endian: 0x00800100, not recognised)
    (0x5D, 1 << 16, 1 << 38, True),
    (0x5D, 1 << 16, (1 << 38) + 1, False),
    (0x5D, 1 << 16, (1 << 64) - 2, False),
    (224, 1 << 16, 0, False),  # lc 8, lp 4, pb 4: lc + lp above 4
    (4 * 9 + 0 + 45 * 4, 1 << 16, 0, True),  # lc 0, lp 4, pb 4
    (3 * 9 + 2, 1 << 16, 0, False),  # lc 2, lp 3
    (4, 1 << 16, 0, True),  # lc 4, lp 0, pb 0
    (1 * 9 + 3, 1 << 16, 0, True),  # lc 3, lp 1
    (225, 1 << 16, 0, False),
    (255, 1 << 16, 0, False),
]


def _lzma_header(properties: int, dictionary: int, size: int) -> bytes:
    return bytes([properties]) + dictionary.to_bytes(4, "little") + size.to_bytes(8, "little")


@pytest.mark.parametrize("properties, dictionary, size, recognised", LZMA_HEADERS)
def test_legacy_lzma_headers_are_recognised_as_xz_does(tmp_path, properties, dictionary, size, recognised):
    """bpbc.io._lzma_header_recognised against the table, and the table
    against ``xz -dc`` where it is installed (a header it does not recognise
    is 'File format not recognized'; one it does fails later, on the data)."""
    header = _lzma_header(properties, dictionary, size)
    assert bpbc.io._lzma_header_recognised(header) is recognised
    assert bpbc.io._lzma_header_recognised(header + b"\x01\xff") is recognised  # 13 bytes are the header; data follows
    if shutil.which("xz") is not None:
        done = subprocess.run(["xz", "-dc", "--format=auto", write(tmp_path / "h.xz", header + b"\0" * 32)],
                              capture_output=True)
        assert (b"not recognized" not in done.stderr) is recognised, done


def test_the_decompressor_of_an_xz_files_first_stream_behaves_as_lzmas_own():
    """bpbc.io._FirstXzStream, fed directly: it starts in the state of a
    fresh ``lzma.LZMADecompressor``; the first bytes may come in pieces
    (the magic or the .lzma header split); ``max_length`` bounds each
    output as lzma's does; ``memlimit`` reaches the stream's decompressor,
    .xz or legacy; 13 bytes that are neither are an error at once, fewer
    wait for more."""
    from bpbc.io import _FirstXzStream

    fresh, plain = _FirstXzStream(), lzma.LZMADecompressor()
    assert (fresh.eof, fresh.unused_data, fresh.needs_input) == (plain.eof, plain.unused_data, plain.needs_input)
    assert type(fresh.eof) is bool and type(fresh.needs_input) is bool and fresh.legacy is False
    for fmt, legacy in ((lzma.FORMAT_XZ, False), (lzma.FORMAT_ALONE, True)):
        stream = lzma.compress(FASTQ, format=fmt)
        for cut in (1, 3, 5, 6, 12, 13, 20):
            decompressor = _FirstXzStream()
            out = decompressor.decompress(stream[:cut])
            out += decompressor.decompress(stream[cut:] + b"tail")
            assert out == FASTQ and decompressor.eof and decompressor.unused_data == b"tail"
            assert decompressor.legacy is legacy
        decompressor = _FirstXzStream()
        first = decompressor.decompress(stream, max_length=10)
        assert first == FASTQ[:10] and not decompressor.eof
        assert first + decompressor.decompress(b"") == FASTQ
        big = lzma.compress(b"A" * 100, format=fmt, preset=9)  # a 64 MiB dictionary: more than the limit
        with pytest.raises(lzma.LZMAError, match="Memory usage limit"):
            _FirstXzStream(memlimit=1 << 20).decompress(big)
        assert _FirstXzStream(memlimit=128 << 20).decompress(big) == b"A" * 100
    decompressor = _FirstXzStream()
    assert decompressor.decompress(b"\0" * 12) == b"" and decompressor.needs_input and not decompressor.eof
    with pytest.raises(lzma.LZMAError, match="^Input format not supported by decoder: neither an .xz stream nor a "
                                             "legacy .lzma one that xz -d recognises$"):
        decompressor.decompress(b"\0")


@pytest.mark.parametrize("data, message", [
    (b"\0" * 13, "corrupt compressed data: Input format not supported by decoder: neither an .xz stream nor a legacy "
                 ".lzma one that xz -d recognises"),
    (_LZMA + b"garbage", "corrupt compressed data: Corrupt input data: bytes after a legacy .lzma stream (an .lzma "
                         "file holds one stream)"),
])
def test_what_xz_does_not_read_is_named(tmp_path, data, message):
    path = write(tmp_path / "r.fq.xz", data)
    with pytest.raises(InputError) as error:
        with SequenceSource(path, raw_fastq=True) as source:
            list(source.chunks(50))
    assert str(error.value) == f"{path}: {message} (in the first records)"


def test_an_xz_file_of_null_bytes_and_a_stream_is_one_line_exit_1_and_no_output(tmp_path, capsys):
    """The fuzz's case 2301 of seed 71 (938 null bytes and an .xz stream),
    through the command: one line naming the file, exit 1, no file left."""
    from tests.bpbc.test_cli import PATTERNS, every_output, run_cli

    reads = write(tmp_path / "r.fq.xz", b"\0" * 938 + lzma.compress(FASTQ))
    out = tmp_path / "out"
    out.mkdir()
    status, stdout, err = run_cli(capsys, reads, PATTERNS, "-t", "10", "--device", "cpu", *every_output(out))
    assert (status, stdout) == (1, "")
    assert re.fullmatch(r"bpbc-screen: error: \S*r\.fq\.xz: corrupt compressed data: Input format not supported by "
                        r"decoder: neither an \.xz stream nor a legacy \.lzma one that xz -d recognises \(in the "
                        r"first records\)\n", err), err
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_parallel_scan_gives_the_records_of_the_serial_one(tmp_path, monkeypatch, suffix):
    """Batches of more than bpbc.fastq_scan.MIN_SPAN bytes are scanned in
    parallel where there are PARALLEL_SCAN_MIN_THREADS threads."""
    tail = b"".join(b"@t%d\r\nACGT\r\n+\r\nIIII\r\n" % i for i in range(100))  # dnaio takes over there
    data = GZIP_RECORDS * 8 + tail
    path = write(tmp_path / f"r.fq{suffix}", COMPRESSORS[suffix](data))

    def batches() -> list:
        with SequenceSource(path, raw_fastq=True, threads=2) as source:
            return [(type(chunk).__name__, [chunk.read_id(i) for i in range(len(chunk))])
                    for chunk in source.chunks(20000)]

    serial = batches()
    monkeypatch.setattr(bpbc.io, "PARALLEL_SCAN_MIN_THREADS", 1)
    assert batches() == serial
    assert serial[0][0] == "RawFastqChunk" and len(serial[0][1]) == 20000


def test_a_batch_after_enormous_records_is_not_sized_by_them(tmp_path):
    """Found by fuzzing: the raw route sized a batch's buffer by the bytes
    per record so far, and after a few enormous records 100k records' worth
    was 77 GiB (MemoryError, an internal error). The estimate is capped; the
    buffer grows where records need it."""
    path = write(tmp_path / "r.fq", FASTQ)
    with SequenceSource(path, raw_fastq=True) as source:
        source._bytes_per_record = 2e6  # as after two 2 MB records
        chunk = source._raw_chunk(100_000, 1)
    assert len(chunk) == 10


@pytest.fixture(params=["isal", "rapidgzip", "process"])
def gzip_reader(request, monkeypatch) -> str:
    """Each gzip test three times: decompressed by ISA-L on one thread, and
    by rapidgzip (in use for large files where there are cores to spare) in
    this process and in one of its own (for the largest files), here for
    every gzip file."""
    if request.param != "isal":
        pytest.importorskip("rapidgzip")
        monkeypatch.setattr(bpbc.gzip_reader, "PARALLEL_GZIP_MIN_THREADS", 1)
        monkeypatch.setattr(bpbc.gzip_reader, "PARALLEL_GZIP_MIN_BYTES", 0)
        monkeypatch.setattr(bpbc.gzip_reader, "GZIP_PROCESS_MIN_BYTES", 0 if request.param == "process" else 1 << 62)
    return request.param


#: the class that reads a gzip file for each reader of the fixture above
GZIP_CLASSES = {"rapidgzip": "ParallelGzip", "process": "GzipProcess"}


GZIP_RECORDS = b"".join(b"@r%d x\n%s\n+\n%s\n" % (i, b"ACGTN"[i % 5:] * 30, b"F:,#"[i % 4:i % 4 + 1] * (150 - 30 * (i % 5)))
                       for i in range(3000))


def _gzip_members(data: bytes, members: int) -> bytes:
    """``data`` as ``members`` gzip members back to back (BGZF is such a file)."""
    step = -(-len(data) // members)
    return b"".join(gzip.compress(data[i:i + step], compresslevel=1) for i in range(0, len(data), step))


@pytest.mark.parametrize("members", [1, 7])
@pytest.mark.parametrize("raw_fastq", [False, True])
def test_gzip_readers_give_every_record(tmp_path, gzip_reader, members, raw_fastq):
    path = write(tmp_path / "r.fq.gz", _gzip_members(GZIP_RECORDS, members))
    with SequenceSource(path, raw_fastq=raw_fastq) as source:
        stream = source._stream
        if raw_fastq:  # read by a thread ahead of the parsing
            assert type(stream).__name__ == "_ReadAhead"
            stream = stream._stream
        assert (type(stream).__name__ in ("ParallelGzip", "GzipProcess")) == (gzip_reader != "isal")
        if gzip_reader != "isal":
            assert type(stream).__name__ == GZIP_CLASSES[gzip_reader]
        ids = [chunk.read_id(i) for chunk in source.chunks(500) for i in range(len(chunk))]
    with dnaio.open(io.BytesIO(GZIP_RECORDS)) as expected:
        assert ids == [record.id for record in expected]


@pytest.mark.parametrize("content", [b"", b">p\nACGTACGTAC\n"])
def test_gzip_readers_read_small_and_empty_files(tmp_path, gzip_reader, content):
    """dnaio reads the first bytes of a stream and seeks back; rapidgzip's
    file is let go once its end has been read, which was all of a small file
    (an empty one: a seek on a closed file, an internal error)."""
    path = write(tmp_path / "p.fa.gz", gzip.compress(content))
    if content:
        assert [(p.id, p.sequence) for p in read_patterns(path)] == [("p", "ACGTACGTAC")]
    else:
        with pytest.raises(InputError, match="holds no sequences"):
            read_patterns(path)


@pytest.mark.parametrize("reader", ["ParallelGzip", "GzipProcess"])
def test_parallel_gzip_seeks_back_after_its_end(tmp_path, reader):
    pytest.importorskip("rapidgzip")
    if reader == "GzipProcess" and not hasattr(os, "memfd_create"):
        pytest.skip("needs memfd_create (Linux)")
    path = write(tmp_path / "r.fq.gz", gzip.compress(GZIP_RECORDS))
    stream = getattr(bpbc.gzip_reader, reader)(path, 2)
    try:
        whole = stream.read()
        assert whole == GZIP_RECORDS and stream.read() == b"" and stream.tell() == len(GZIP_RECORDS)
        assert stream.seek(0, io.SEEK_END) == len(GZIP_RECORDS) and stream.read() == b""
        stream.seek(10)
        assert stream.read() == GZIP_RECORDS[10:]
        assert stream.seek(-90, io.SEEK_CUR) == len(GZIP_RECORDS) - 90  # relative to the end it reached
        assert stream.read() == GZIP_RECORDS[-90:]
    finally:
        stream.close()


GZIP_DAMAGE = {
    # cut off: footer bytes, the last deflate bytes, half the file
    **{f"truncated by {cut}": (lambda packed, cut=cut: packed[:-cut]) for cut in (1, 4, 8, 9, 20)},
    "truncated in half": lambda packed: packed[:len(packed) // 2],
    "flipped CRC": lambda packed: packed[:-8] + bytes([packed[-8] ^ 0xFF]) + packed[-7:],
    "flipped size": lambda packed: packed[:-1] + bytes([packed[-1] ^ 0x01]),
    "garbage after the end": lambda packed: packed + b"not gzip\n",
    # deflate data damaged inside (ISA-L's own error type, IsalError, where ISA-L reads it)
    "bytes flipped in the middle": lambda packed: (packed[:len(packed) // 2] + bytes(
        b ^ 0x5A for b in packed[len(packed) // 2:len(packed) // 2 + 16]) + packed[len(packed) // 2 + 16:]),
    # rapidgzip takes 1 to 4 bytes after the last member for part of the file (the fuzz's case 6808 of seed 47)
    "1 byte after the end": lambda packed: packed + b"x",
    "3 bytes after the end": lambda packed: packed + b"\x80\xde\x81",
}


def test_the_decompressors_errors_are_decompression_errors():
    """An error type of each optional decompressor that xopen may use is
    among those a reads file's error is translated from (one line, exit 1),
    once its module is imported (the one that raised was); the standard
    library's always."""
    import isal.igzip_lib
    import isal.isal_zlib

    errors = bpbc.io._decompression_errors()
    assert errors[:4] == (EOFError, OSError, zlib.error, lzma.LZMAError)
    assert isal.igzip_lib.IsalError in errors and isal.isal_zlib.error in errors
    for module, name in (("zlib_ng.zlib_ng", "error"), ("backports.zstd", "ZstdError")):
        imported = pytest.importorskip(module)
        assert getattr(imported, name) in bpbc.io._decompression_errors(), module


@pytest.mark.parametrize("members", [1, 3])
@pytest.mark.parametrize("damage", sorted(GZIP_DAMAGE))
def test_damaged_gzip_is_one_line_error(tmp_path, capfd, gzip_reader, members, damage):
    packed = GZIP_DAMAGE[damage](_gzip_members(GZIP_RECORDS, members))
    path = write(tmp_path / "r.fq.gz", packed)
    with pytest.raises(InputError) as caught:
        with SequenceSource(path, raw_fastq=True) as source:
            for _chunk in source.chunks(500):
                pass
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    assert re.search(r"corrupt compressed data|the compressed file is truncated|line \d+", message)
    # nothing else on stderr, but for the one diagnostic line rapidgzip's C++
    # code prints itself where a file ends inside its last 8 bytes (the gzip
    # footer) and that bpbc cannot silence (a documented limitation)
    native = capfd.readouterr().err.splitlines()
    assert all(re.fullmatch(r"Unexpected end of file when getting block at .* on demand", line) for line in native)
    assert not native or (gzip_reader in ("rapidgzip", "process") and damage.startswith("truncated by"))


EMPTY_GZIP = gzip.compress(b"")


@pytest.mark.parametrize("packed", [
    EMPTY_GZIP[:-8] + b"\x00\x10\x00\x00" + EMPTY_GZIP[-4:],  # a CRC of 0x1000 (the fuzz's case 9155 of seed 47)
    EMPTY_GZIP[:-4] + b"\x00\x00\x00\xec",  # a length of 0xec000000 (case 3768)
    EMPTY_GZIP + b"3A",  # two bytes after the end (case 1014)
], ids=["wrong CRC", "wrong length", "2 bytes after the end"])
def test_a_damaged_gzip_of_no_data_is_one_line_error(tmp_path, gzip_reader, packed):
    """Found by the fuzz with rapidgzip forced onto every gzip input: it
    checks neither the CRC nor the length of a member that holds no data,
    nor 1-4 bytes after the end, and such a file ran as an empty input."""
    path = write(tmp_path / "r.fq.gz", packed)
    with pytest.raises(InputError, match=r"^\S+r\.fq\.gz: (corrupt compressed data|the compressed file is truncated)"):
        with SequenceSource(path, raw_fastq=True) as source:
            for _chunk in source.chunks(500):
                pass


@pytest.mark.parametrize("raw_fastq", [False, True])
def test_gzip_readers_read_a_file_that_ends_in_bgzfs_end_block(tmp_path, gzip_reader, raw_fastq):
    path = write(tmp_path / "r.fq.gz", _gzip_members(GZIP_RECORDS, 5) + bpbc.gzip_reader._BGZF_EOF)
    with SequenceSource(path, raw_fastq=raw_fastq) as source:
        assert sum(len(chunk) for chunk in source.chunks(500)) == 3000


def test_a_record_longer_than_the_read_block_is_scanned_a_few_times(tmp_path, monkeypatch):
    """Found by fuzzing (with small read blocks): a record longer than the
    read block was completed one block at a time, and each time everything
    read so far was copied and scanned again: quadratic (a record of 1 GB
    meant 250 reads of 4 MiB and some 125 GB copied). Each scan now waits for
    at least as much again as the incomplete record already holds."""
    import bpbc.chunks
    import bpbc.io

    monkeypatch.setattr(bpbc.io, "READ_BLOCK", 64)
    long = b"ACGT" * 50_000
    data = b"@long\n" + long + b"\n+\n" + b"I" * len(long) + b"\n@short\nACGT\n+\nIIII\n"
    scanned = []
    scan = bpbc.chunks.scan_fastq

    def counted(buf, pos, end, *args):
        scanned.append(end - pos)
        return scan(buf, pos, end, *args)

    monkeypatch.setattr(bpbc.chunks, "scan_fastq", counted)
    with SequenceSource(write(tmp_path / "r.fq", data), raw_fastq=True) as source:
        chunks = list(source.chunks(10))
    assert [len(chunk) for chunk in chunks] == [2]
    assert chunks[0].lengths.tolist() == [len(long), 4]
    assert len(scanned) < 20 and sum(scanned) < 4 * len(data), f"{len(scanned)} scans of {sum(scanned)} bytes"


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_empty_compressed_output_is_a_valid_empty_stream(tmp_path, suffix):
    """Nothing written, compressed in this thread (--threads 1): the file still
    decompresses, to nothing (zstd in-process writes no frame for no data)."""
    from xopen import xopen

    from bpbc.io import AtomicOutput

    output = AtomicOutput(tmp_path / f"empty.fq{suffix}", "reads")
    output.open_binary(threads=0)
    output.commit()
    with xopen(tmp_path / f"empty.fq{suffix}", "rb") as handle:
        assert handle.read() == b""


@pytest.mark.parametrize("line", ["header", "quality"])
def test_a_line_ending_in_two_carriage_returns_is_an_error(tmp_path, line):
    r"""Found by fuzzing: with '\r\r\n' dnaio takes one '\r' for the line end
    and keeps the other in the quality (or name): a 30-base read with 29
    qualities and a '\r' passed, and was written back as '...I\r\n', which
    reads as 29 qualities: an unreadable output. Now an error naming the
    record. (dnaio's FASTA reader drops both.)"""
    records = [b"@r%d\r\nACGTACGT\r\n+\r\nIIIIIIII\r\n" % i for i in range(5)]
    records[3] = (b"@r3\r\r\nACGTACGT\r\n+\r\nIIIIIIII\r\n" if line == "header"
                  else b"@r3\r\nACGTACGT\r\n+\r\nIIIIIII\r\r\n")
    path = write(tmp_path / "r.fq", b"".join(records))
    with pytest.raises(InputError, match=r"r\.fq: record 4 \('r3(\\r)?'\): its " + line
                       + r" line ends in a carriage return that is not part of the line end"):
        with SequenceSource(path, raw_fastq=True) as source:
            list(source.chunks(2))


def test_the_decompressor_after_an_xz_stream_behaves_as_lzmas_own():
    """bpbc.io._NextXzStream, fed directly: it starts in the state of a fresh
    ``lzma.LZMADecompressor``; null padding counts across calls (2 + 2 is a
    whole word, 2 + 1 + 1 too); padding not in fours before a stream, or
    anything but padding or a stream, is an error; ``max_length`` bounds
    each output as lzma's does; ``memlimit`` reaches the stream's
    decompressor."""
    from bpbc.io import _NextXzStream

    fresh, plain = _NextXzStream(), lzma.LZMADecompressor(lzma.FORMAT_XZ)
    assert (fresh.eof, fresh.unused_data, fresh.needs_input) == (plain.eof, plain.unused_data, plain.needs_input)
    assert type(fresh.eof) is bool and type(fresh.needs_input) is bool
    stream = lzma.compress(FASTQ)
    for pieces in ([b"\0\0", b"\0\0" + stream], [b"\0", b"\0\0", b"\0" + stream[:7], stream[7:]], [stream]):
        decompressor, out = _NextXzStream(), b""
        for piece in pieces:
            out += decompressor.decompress(piece)
        assert out == FASTQ and decompressor.eof and decompressor.unused_data == b""
    for pieces, eof in (([b"\0\0", b"\0\0"], True), ([b"\0\0", b"\0"], False), ([b"\0" * 7, b"\0"], True)):
        decompressor = _NextXzStream()
        for piece in pieces:
            assert decompressor.decompress(piece) == b""
        assert (decompressor.eof, decompressor.needs_input) == (eof, not eof)
    for pieces, message in (([b"\0\0", b"\0" + stream], "stream padding that is not a multiple of four bytes"),
                            ([b"\0" * 4 + b"X" * 16], "Input format not supported by decoder"),
                            ([b"X" * 16], "Input format not supported by decoder")):
        decompressor = _NextXzStream()
        with pytest.raises(lzma.LZMAError) as error:
            for piece in pieces:
                decompressor.decompress(piece)
        assert message in str(error.value)
    assert str(error.value) != "None"
    with pytest.raises(lzma.LZMAError) as error:
        decompressor = _NextXzStream()
        decompressor.decompress(b"\0\0\0")
        decompressor.decompress(stream)
    assert str(error.value) == "Corrupt input data: stream padding that is not a multiple of four bytes"
    decompressor = _NextXzStream()
    first = decompressor.decompress(b"\0" * 4 + stream, max_length=10)
    assert first == FASTQ[:10] and not decompressor.eof
    assert first + decompressor.decompress(b"") == FASTQ
    big = lzma.compress(b"A" * 100, preset=9)  # a 64 MiB dictionary: more than the limit below
    with pytest.raises(lzma.LZMAError, match="Memory usage limit"):
        _NextXzStream(memlimit=1 << 20).decompress(big)
    assert _NextXzStream(memlimit=1 << 30).decompress(big) == b"A" * 100


def test_the_errors_of_every_decompressor_xopen_uses_are_known(monkeypatch):
    """_decompression_errors: the exception type of each decompression
    module xopen may use, where that module is loaded (a module not loaded
    cannot have raised): ISA-L's IsalError and isal_zlib's error, zlib-ng's,
    and zstd's from backports.zstd, Python 3.14's compression.zstd and
    zstandard. Where one is not installed here a stand-in module is."""
    import types

    from bpbc.io import _decompression_errors

    base = _decompression_errors()
    assert {EOFError, OSError, zlib.error, lzma.LZMAError} <= set(base)
    planted = {}
    for module_name, attribute in (("isal.igzip_lib", "IsalError"), ("isal.isal_zlib", "error"),
                                   ("zlib_ng.zlib_ng", "error"), ("backports.zstd", "ZstdError"),
                                   ("compression.zstd", "ZstdError"), ("zstandard", "ZstdError")):
        stand_in = types.ModuleType(module_name)
        planted[module_name] = type(f"{attribute}_of_{module_name}", (Exception,), {})
        setattr(stand_in, attribute, planted[module_name])
        setattr(stand_in, "error" if attribute != "error" else "Error", type("Other", (Exception,), {}))
        monkeypatch.setitem(sys.modules, module_name, stand_in)
    got = _decompression_errors()
    assert set(planted.values()) <= set(got)
    assert len(got) == 4 + len(planted)  # not another attribute of those modules
    monkeypatch.setattr(sys.modules["zstandard"], "ZstdError", "not a type")
    assert planted["zstandard"] not in _decompression_errors()


def test_the_end_check_decompresses_again_only_where_the_end_proves_nothing(tmp_path, monkeypatch):
    """ParallelGzip._check_end: where the file ends in the footer of the one
    member holding all the data (its length field is the data's size), or
    in BGZF's end block (an empty BGZF file too), rapidgzip's reading is
    whole and the file is not decompressed again; otherwise (several
    members, no data) it is, once, up to END_CHECK_MAX_BYTES and not above."""
    pytest.importorskip("rapidgzip")
    isal_igzip = pytest.importorskip("isal.igzip")
    real_open, opened = isal_igzip.open, []

    def counted_open(path, *args, **kwargs):
        opened.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(isal_igzip, "open", counted_open)

    def decompressed_again(data: bytes, expected: bytes) -> int:
        path = write(tmp_path / "r.fq.gz", data)
        opened.clear()
        stream = bpbc.gzip_reader.ParallelGzip(path, 2)
        try:
            assert stream.read() == expected
        finally:
            stream.close()
        return len(opened)

    several = _gzip_members(GZIP_RECORDS, 3)
    assert decompressed_again(gzip.compress(GZIP_RECORDS), GZIP_RECORDS) == 0
    assert decompressed_again(several + bpbc.gzip_reader._BGZF_EOF, GZIP_RECORDS) == 0
    assert decompressed_again(bpbc.gzip_reader._BGZF_EOF, b"") == 0
    assert decompressed_again(several, GZIP_RECORDS) == 1
    assert decompressed_again(gzip.compress(b""), b"") == 1
    monkeypatch.setattr(bpbc.gzip_reader, "END_CHECK_MAX_BYTES", len(several))
    assert decompressed_again(several, GZIP_RECORDS) == 1
    monkeypatch.setattr(bpbc.gzip_reader, "END_CHECK_MAX_BYTES", len(several) - 1)
    assert decompressed_again(several, GZIP_RECORDS) == 0
