"""Plain FASTQ parsed in blocks on several threads (:mod:`bpbc.fastq_blocks`)
against the serial route of :class:`bpbc.io.SequenceSource`: the same
records in the same order, the same switch to dnaio at a record that is not
plain, the same errors, with blocks a few hundred bytes long so that their
boundaries fall everywhere (inside headers, sequences, qualities that begin
with '@' or '+', between records)."""

from __future__ import annotations

import gzip
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpbc import fastq_blocks
from bpbc.chunks import RawFastqChunk
from bpbc.errors import InputError
from bpbc.fastq_blocks import BlockChunks, first_record
from bpbc.io import SequenceSource
from tests.bpbc.test_fastq_scan import records as damaged_records

#: threads that make SequenceSource parse in blocks
THREADS = 8


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of about 300 bytes with 200 bytes of room in front."""
    monkeypatch.setattr(fastq_blocks, "MIN_BLOCK", 300)
    monkeypatch.setattr(fastq_blocks, "MAX_BLOCK", 300)  # (max_bases lowers it further)
    monkeypatch.setattr(fastq_blocks, "ROOM", 200)


def fastq(rng: np.random.Generator, count: int, longest: int = 40) -> bytes:
    """Plain records whose qualities often begin with '@' or '+' (the lines a resynchronisation could mistake)."""
    out = []
    for i in range(count):
        length = int(rng.integers(0, longest + 1))
        sequence = "".join(rng.choice(list("ACGTN"), length))
        quality = "".join(rng.choice(list("@+I#F"), length))
        out.append(f"@r{i} {'x' * int(rng.integers(0, 5))}\n{sequence}\n+\n{quality}\n")
    return "".join(out).encode()


def read_all(path, in_blocks: bool, size: int = 7, ramp: int = 1):
    """(records as raw bytes or dnaio's text, chunk kinds, chunk lengths, error or None)."""
    texts, kinds, lengths = [], [], []
    try:
        with SequenceSource(path, raw_fastq=True, threads=THREADS, in_blocks=in_blocks) as source:
            assert source._in_blocks == (in_blocks and source.fileformat == "fastq" and source._pending[:1] == b"@")
            for chunk in source.chunks(size, ramp=ramp):
                kinds.append(type(chunk).__name__)
                lengths.append(len(chunk))
                if isinstance(chunk, RawFastqChunk):
                    texts += [bytes(chunk.data[a:b]) for a, b in zip(chunk.rec_start.tolist(), chunk.rec_end.tolist())]
                else:
                    texts += [f"{r.name}|{r.sequence}|{r.qualities}".encode() for r in chunk.records]
    except InputError as error:
        return texts, kinds, lengths, str(error)
    return texts, kinds, lengths, None


def assert_same_as_serial(path, size: int = 7):
    serial = read_all(path, False, size)
    blocks = read_all(path, True, size)
    assert blocks[0] == serial[0]
    assert blocks[3] == serial[3]
    assert max(blocks[2], default=0) <= size
    # dnaio takes over at the same record: the same records came as raw bytes before it
    raw = sum(n for kind, n in zip(blocks[1], blocks[2]) if kind == "RawFastqChunk")
    assert raw == sum(n for kind, n in zip(serial[1], serial[2]) if kind == "RawFastqChunk")
    return blocks


@pytest.fixture
def from_blocks(monkeypatch) -> list[int]:
    """The sizes of the chunks that came from blocks (not from the serial route after them)."""
    taken: list[int] = []
    original = BlockChunks.chunks

    def counted(self, *args):
        for chunk in original(self, *args):
            taken.append(len(chunk))
            yield chunk

    monkeypatch.setattr(BlockChunks, "chunks", counted)
    return taken


@pytest.mark.parametrize("seed", range(6))
def test_plain_records_cut_everywhere(tmp_path, small_blocks, from_blocks, seed):
    """Every block boundary is linked up: the whole file comes from blocks (but
    the last record where the last block holds no record start: the serial
    route reads it)."""
    rng = np.random.default_rng(seed)
    path = tmp_path / "r.fq"
    path.write_bytes(fastq(rng, 200, longest=int(rng.integers(1, 80))))
    texts, kinds, lengths, error = assert_same_as_serial(path)
    assert error is None and len(texts) == 200 and set(kinds) == {"RawFastqChunk"}
    assert sum(from_blocks) >= 199
    assert len(lengths) > 200 * 20 // 300  # many blocks: the boundaries fell inside records


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=st.lists(damaged_records(), min_size=1, max_size=60), plain_first=st.integers(0, 40),
       final_newline=st.booleans())
def test_damaged_records_as_serial(tmp_path_factory, small_blocks, drawn, plain_first, final_newline):
    """Records that are not plain (dnaio's from there), blank lines, bytes >= 128,
    a missing last newline: records, switch point and error as the serial route."""
    data = fastq(np.random.default_rng(plain_first), plain_first) + b"".join(text for text, _ in drawn)
    if not final_newline:
        data = data[:-1]
    path = tmp_path_factory.mktemp("d") / "r.fq"
    path.write_bytes(data)
    assert_same_as_serial(path)


@pytest.mark.parametrize("length", [150, 250, 700])
def test_records_longer_than_the_room_or_a_block(tmp_path, small_blocks, length):
    """A record longer than the room in front of a block, or than a block (no
    record starts in it): the serial route reads on, the records unchanged."""
    rng = np.random.default_rng(length)
    long = f"@long\n{'A' * length}\n+\n{'I' * length}\n".encode()
    path = tmp_path / "r.fq"
    path.write_bytes(fastq(rng, 30) + long + fastq(rng, 30))
    texts, kinds, _, error = assert_same_as_serial(path)
    assert error is None and len(texts) == 61 and long in texts


def test_truncated_input_errors_as_serial(tmp_path, small_blocks):
    data = fastq(np.random.default_rng(7), 200)
    errors = []
    for cut in range(1, 60):
        path = tmp_path / f"{cut}.fq"
        path.write_bytes(data[:-cut])
        errors.append(assert_same_as_serial(path)[3])
    assert errors[0] is None  # no final newline: dnaio reads the last record
    assert sum(error is not None for error in errors) > 30


def test_gzip_and_chunk_sizes(tmp_path, small_blocks):
    data = fastq(np.random.default_rng(3), 500)
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(data))
    texts, kinds, lengths, error = read_all(path, True, size=40, ramp=4)
    assert error is None and b"".join(texts) == data
    assert max(lengths) <= 40 and lengths[0] <= 10  # the ramp: the first chunk sized for 40 / 4 records


class _FailingStream:
    """``data``, then an OSError after ``fail_at`` bytes."""

    def __init__(self, data: bytes, fail_at: int):
        self._data, self._at, self._fail_at = data, 0, fail_at

    def readinto(self, buffer) -> int:
        if self._at >= self._fail_at:
            raise OSError("disk on fire")
        size = min(len(buffer), self._fail_at - self._at)
        buffer[:size] = self._data[self._at:self._at + size]
        self._at += size
        return size


def test_a_read_error_comes_after_the_records_before_it(small_blocks):
    data = fastq(np.random.default_rng(4), 300)
    blocks = BlockChunks(_FailingStream(data, 5000), b"", workers=2, bytes_per_record=40.0)
    texts = [bytes(c.data[a:b]) for c in blocks.chunks(lambda: 9, 9)
             for a, b in zip(c.rec_start.tolist(), c.rec_end.tolist())]
    assert isinstance(blocks.error, OSError)
    handed = b"".join(texts)
    assert data.startswith(handed) and len(handed) <= 5000
    # what came before the error and was not handed out is given back, in order
    assert handed + b"".join(bytes(a) for a in blocks.leftover) == data[:5000]
    assert blocks.close()


def test_abandoned_iteration_stops_the_threads(tmp_path, small_blocks):
    path = tmp_path / "r.fq"
    path.write_bytes(fastq(np.random.default_rng(5), 2000))
    before = {t.ident for t in threading.enumerate()}
    with SequenceSource(path, raw_fastq=True, threads=THREADS, in_blocks=True) as source:
        chunks = source.chunks(7)
        next(chunks)
        chunks.close()
    left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    for thread in left:
        thread.join(2)
    assert not [t.name for t in left if t.is_alive()]


def test_the_route_calls_its_kernels_with_the_types_prepare_compiles(tmp_path, small_blocks, monkeypatch):
    """numba compiles a kernel for each set of argument types, and bpbc.prepare
    compiles first_record as its block-parsing task calls it and scan_fastq on
    writable buffers: the route's calls are of those types, else a first run
    of several blocks compiled more (session 31: 0.62 s for scan_fastq on a
    read-only view of the head's bytes, 0.33 s for first_record)."""
    import numba

    from bpbc import chunks, prepare

    calls: dict[str, set] = {"first_record": set(), "scan_fastq": set()}

    def spy(name, kernel):
        def call(*args):
            calls[name].add(tuple(numba.typeof(argument) for argument in args))
            return kernel(*args)
        return call

    monkeypatch.setattr(fastq_blocks, "first_record", spy("first_record", first_record))
    monkeypatch.setattr(fastq_blocks, "scan_fastq", spy("scan_fastq", chunks.scan_fastq))
    monkeypatch.setattr(chunks, "scan_fastq", spy("scan_fastq", chunks.scan_fastq))
    prepare._block_parsing_task()
    prepared = set(calls["first_record"])
    path = tmp_path / "r.fq"
    path.write_bytes(fastq(np.random.default_rng(5), 300))
    texts, _, _, error = read_all(path, in_blocks=True)
    assert error is None and len(texts) == 300
    assert len(prepared) == 1 and calls["first_record"] == prepared  # the route reached first_record
    assert calls["scan_fastq"] and all(types[0].mutable for types in calls["scan_fastq"])


def test_first_record_skips_lines_a_resynchronisation_could_mistake():
    # a quality line beginning with '@', then a header: the header is the start
    text = b"IIII\n@III\n@r2\nACG\n+\nIII\n"
    buf = np.frombuffer(text, np.uint8)
    assert first_record(buf, 0, len(buf), False) == text.index(b"@r2")
    assert first_record(buf, 5, len(buf), True) == text.index(b"@r2")
    assert first_record(buf, 0, text.index(b"+"), False) == -1  # the '+' line not complete: unknown


def test_the_pipeline_output_is_the_serial_one(tmp_path, small_blocks):
    """The whole run on 8 threads (blocks) and on 1 (serial): the same PAF and matched reads."""
    from bpbc.pipeline import ScreenSettings, screen_files

    rng = np.random.default_rng(6)
    pattern = "ACGTACGTTGCAACGT"
    records = []
    for i in range(300):
        sequence = "".join(rng.choice(list("ACGT"), 60))
        if i % 3 == 0:
            sequence = sequence[:20] + pattern + sequence[36:]
        records.append(f"@r{i}\n{sequence}\n+\n{'I' * 60}\n")
    reads = tmp_path / "r.fq"
    reads.write_text("".join(records))
    patterns = tmp_path / "p.fa"
    patterns.write_text(f">p\n{pattern}\n")
    outputs = {}
    for threads in (1, THREADS):
        paf, matched = tmp_path / f"{threads}.paf", tmp_path / f"{threads}.fq"
        screen_files(reads, patterns, ScreenSettings(threshold=20, threads=threads, device="cpu", chunk_size=50),
                     output=paf, matched=matched)
        outputs[threads] = (paf.read_bytes(), matched.read_bytes())
    assert outputs[1] == outputs[THREADS] and outputs[1][0].count(b"\n") >= 100


def test_chunks_of_long_reads_end_near_max_bases(tmp_path, small_blocks):
    """With ``max_bases`` the blocks hold at most twice as many bytes: a chunk
    at most that many bases and the record joined in front."""
    rng = np.random.default_rng(11)
    path = tmp_path / "r.fq"
    path.write_bytes(fastq(rng, 300, longest=60))
    bases = []
    with SequenceSource(path, raw_fastq=True, threads=THREADS, in_blocks=True) as source:
        for chunk in source.chunks(1000, max_bases=100):
            bases.append(int(chunk.lengths.sum()))
    assert len(bases) > 10 and max(bases) <= 100 + 60


@pytest.mark.parametrize("workers, size, slots", [(2, 34 << 20, 1), (2, 128 << 20, 2), (2, 64 << 20, 1),
                                                  (2, 65 << 20, 2), (2, 256 << 20, 2), (8, 34 << 20, 1),
                                                  (8, 256 << 20, 4)])
def test_large_blocks_take_more_of_the_read_ahead(workers, size, slots):
    """A block read ahead takes a slot (of the parsing threads' and two
    more) for each SLOT_BYTES, two blocks at least: 34 MB blocks (100k
    short reads) a slot each as before, 128 MB ones (a chunk of long reads)
    two, so two of them with two parsing threads, not four."""
    blocks = BlockChunks(None, b"", workers, 100.0)
    try:
        assert blocks._slots_of(size) == slots
        assert blocks._slots // blocks._slots_of(size) >= min(2, blocks._slots)
    finally:
        blocks.close()


@pytest.mark.parametrize("held", [None, 2, 4])
def test_large_blocks_are_read_while_fewer_than_large_live_are_held(tmp_path, monkeypatch, small_blocks, held):
    """With ``large_live``, a large block (SLOT_BYTES or more: here every
    block) is read only while fewer than that many are held by chunks not
    yet let go; a consumer that lets each chunk go gets every record, as
    without the limit."""
    monkeypatch.setattr(fastq_blocks, "SLOT_BYTES", 1)
    rng = np.random.default_rng(7)
    path = tmp_path / "r.fq"
    path.write_bytes(fastq(rng, 400, longest=60))
    names, most = [], 0
    with SequenceSource(path, raw_fastq=True, threads=THREADS, in_blocks=True) as source:
        for chunk in source.chunks(25, large_live=held):
            names += chunk.read_names(np.arange(len(chunk))).strings()
            blocks = source._blocks
            if held is not None and blocks is not None:
                most = max(most, blocks._large_taken)
            del chunk
    assert names == [f"r{i}" for i in range(400)]
    assert held is None or 1 < most <= held  # blocks of about 300 bytes: many, a few held at once
