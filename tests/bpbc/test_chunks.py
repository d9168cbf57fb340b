"""Raw FASTQ chunks against dnaio records: the same reads, names, codes and
output bytes, across block and chunk boundaries; anything not plain goes to
dnaio."""

from __future__ import annotations

import io

import dnaio
import numpy as np
import pytest

import bpbc.io
from bpbc.alphabet import SequenceError, encode_reads
from bpbc.chunks import RawFastqChunk, RecordChunk
from bpbc.io import SequenceSource


def random_fastq(rng, n, two_headers_at=None) -> bytes:
    records = []
    for i in range(n):
        length = int(rng.integers(0, 60))
        seq = "".join(rng.choice(list("ACGTNacgtRy"), length))
        qual = "".join(rng.choice(list("I#@+5"), length))  # '@' and '+' open quality lines too
        name = f"r{i}" + ("" if i % 3 else f" comment\t{i}") + ("\tx" if i % 5 == 0 else "")
        plus = f"+{name}" if i == two_headers_at else "+"
        records.append(f"@{name}\n{seq}\n{plus}\n{qual}\n")
    return "".join(records).encode()


def dnaio_records(data: bytes) -> list:
    with dnaio.open(io.BytesIO(data)) as reader:
        return list(reader)


class BytesSink:
    def __init__(self):
        self.parts = []

    def scratch(self, size):
        return np.empty(size, np.uint8)

    def write_bytes(self, data):
        self.parts.append(bytes(data))

    def write_runs(self, data, first, last):
        return False  # not a file: the records are gathered and written

    def write_records(self, records):
        self.parts.extend(record.fastq_bytes() for record in records)


def read_all(tmp_path, data: bytes, size: int, block: int, monkeypatch):
    monkeypatch.setattr(bpbc.io, "READ_BLOCK", block)
    path = tmp_path / "r.fq"
    path.write_bytes(data)
    with SequenceSource(path, raw_fastq=True) as source:
        return list(source.chunks(size)), source


@pytest.mark.parametrize("size, block", [(1, 7), (3, 50), (7, 1 << 20), (1000, 64)])
def test_raw_chunks_are_the_records_dnaio_reads(tmp_path, monkeypatch, size, block):
    rng = np.random.default_rng(size)
    data = random_fastq(rng, 40)
    chunks, source = read_all(tmp_path, data, size, block, monkeypatch)
    assert all(isinstance(chunk, RawFastqChunk) for chunk in chunks)
    assert [len(c) for c in chunks][:-1] == [size] * (len(chunks) - 1) and source.records_read == 40
    records = dnaio_records(data)
    assert [c.read_id(i) for c in chunks for i in range(len(c))] == [r.id for r in records]
    assert sum((c.read_names(np.arange(len(c))).strings() for c in chunks), []) == [r.id for r in records]
    start = 0
    for chunk in chunks:
        codes, lengths = chunk.encode()
        expect_codes, expect_lengths = encode_reads(records[start:start + len(chunk)])
        assert np.array_equal(codes, expect_codes) and np.array_equal(lengths, expect_lengths)
        start += len(chunk)
    selected = rng.random(40) < 0.5
    sink, expected = BytesSink(), BytesSink()
    offset = 0
    for chunk in chunks:
        chunk.write(sink, np.flatnonzero(selected[offset:offset + len(chunk)]))
        offset += len(chunk)
    expected.write_records([r for r, keep in zip(records, selected) if keep])
    assert b"".join(sink.parts) == b"".join(expected.parts)


@pytest.mark.parametrize("damage", ["crlf", "two_headers", "no_final_newline"])
def test_fastq_that_is_not_plain_goes_to_dnaio(tmp_path, monkeypatch, damage):
    rng = np.random.default_rng(1)
    data = random_fastq(rng, 30, two_headers_at=12 if damage == "two_headers" else None)
    if damage == "crlf":
        cut = data.index(b"@r20")
        data = data[:cut] + data[cut:].replace(b"\n", b"\r\n")
    elif damage == "no_final_newline":
        data = data[:-1]
    chunks, source = read_all(tmp_path, data, 4, 64, monkeypatch)
    kinds = [type(c) for c in chunks]
    assert RecordChunk in kinds and kinds[0] is RawFastqChunk
    assert kinds == sorted(kinds, key=lambda kind: kind is RecordChunk)  # raw first, then records
    records = dnaio_records(data)
    assert [c.read_id(i) for c in chunks for i in range(len(c))] == [r.id for r in records]
    assert not source.two_headers  # the first record decides, as dnaio's writer would


def test_bad_base_names_the_read(tmp_path, monkeypatch):
    data = b"@a\nACGT\n+\nIIII\n@b  x\nACZT\n+\nIIII\n"
    chunks, _ = read_all(tmp_path, data, 10, 1 << 20, monkeypatch)
    with pytest.raises(SequenceError, match="read b: character 'Z' at position 3"):
        chunks[0].encode()


@pytest.mark.parametrize("count", [0, 5, 2500])
def test_encoding_on_one_thread_and_on_all_gives_the_same_codes(count, monkeypatch):
    from bpbc import chunks as chunks_module
    from bpbc.chunks import _encode_sequences
    from bpbc.reads import Reads

    rng = np.random.default_rng(count)
    reads = ["".join(rng.choice(list("ACGTNacgtuRy"), int(rng.integers(0, 200)))) for _ in range(count)]
    buffer = Reads.of(reads)
    expect_codes, expect_lengths = encode_reads(reads)
    monkeypatch.setattr(chunks_module, "get_num_threads", lambda: 2)  # as on a machine of several cores
    for parallel_from in (0, 1 << 30):  # every count on all threads, then on one
        monkeypatch.setattr(chunks_module, "ENCODE_PARALLEL_FROM", parallel_from)
        codes, lengths = _encode_sequences(buffer.data, buffer.seq_start, buffer.lengths, buffer.name)
        assert np.array_equal(codes, expect_codes) and np.array_equal(lengths, expect_lengths)
        if count:
            bad = Reads.of(reads[:-1] + ["ACZT"])
            with pytest.raises(SequenceError, match=f"read read{count}: character 'Z' at position 3"):
                _encode_sequences(bad.data, bad.seq_start, bad.lengths, bad.name)


def test_fasta_is_read_as_records(tmp_path):
    path = tmp_path / "r.fa"
    path.write_bytes(b">a\nAC\nGT\n>b\nTT\n")
    with SequenceSource(path, raw_fastq=True) as source:
        (chunk,) = list(source.chunks(10))
    assert isinstance(chunk, RecordChunk) and [r.sequence for r in chunk.records] == ["ACGT", "TT"]


def test_a_quality_line_ending_in_a_carriage_return_is_not_plain(tmp_path, monkeypatch):
    """Found by fuzzing: 'IIII\\r\\n' as the quality of a 5-base read passed the
    raw route (five bytes before the '\\n'), though as every FASTQ reader (and
    dnaio on the route it takes next) reads it the quality is 'IIII', one
    short; the record was written back unchanged, unreadable. It now goes to
    dnaio, which reports it."""
    data = b"@a\nACGTA\n+\nIIIII\n@b\nACGTA\n+\nIIII\r\n@c\nACGTA\n+\nIIIII\n"
    monkeypatch.setattr(bpbc.io, "READ_BLOCK", 1 << 20)
    path = tmp_path / "r.fq"
    path.write_bytes(data)
    with SequenceSource(path, raw_fastq=True) as source:
        chunks = source.chunks(10)
        first = next(chunks)
        assert isinstance(first, RawFastqChunk) and len(first) == 1
        with pytest.raises(bpbc.io.InputError, match=r"r\.fq: line 8: Length of sequence and qualities differ"):
            next(chunks)


def mutated(rng, data: bytes) -> bytes:
    """data with a few bytes replaced, inserted or deleted (newlines, '@', '+', CR, high bytes among them)."""
    out = bytearray(data)
    for _ in range(int(rng.integers(0, 4))):
        at = int(rng.integers(0, len(out) + 1))
        byte = int(rng.choice([10, 13, 64, 43, 65, 0, 200, 9]))
        kind = rng.integers(0, 3)
        if kind == 0 and at < len(out):
            out[at] = byte
        elif kind == 1:
            out.insert(at, byte)
        elif at < len(out):
            del out[at]
    return bytes(out)


@pytest.mark.parametrize("seed", range(6))
def test_fast_scan_agrees_with_the_byte_by_byte_definition(seed):
    """scan_fastq (structure first, then one pass over the bytes) against
    _scan_fastq_exact on damaged buffers cut anywhere: the same records and
    end. The one allowed difference: a record cut off by the end of the data
    that is damaged inside is seen as damaged only once it is complete (the
    next scan, with more data, reports it)."""
    from bpbc.chunks import _scan_fastq_exact, scan_fastq

    rng = np.random.default_rng(seed)
    for _ in range(150):
        data = mutated(rng, random_fastq(rng, int(rng.integers(1, 12))))
        buf = np.frombuffer(data, np.uint8)
        end = int(rng.integers(0, len(data) + 1))
        size = int(rng.integers(1, 15))
        fast = [np.full(size, -1, np.int64) for _ in range(3)]
        exact = [np.full(size, -1, np.int64) for _ in range(3)]
        got = scan_fastq(buf, 0, end, size, *fast)
        want = _scan_fastq_exact(buf, 0, end, size, *exact)
        assert all(np.array_equal(a[:want[0]], b[:want[0]]) for a, b in zip(fast, exact))
        assert got == want or (got[:2] == want[:2] and want[2] and not got[2])


@pytest.mark.parametrize("name", ["out.fq", "out.fq.gz"])
@pytest.mark.parametrize("short_writes", [False, True])
def test_long_runs_written_in_place_are_the_gathered_records(tmp_path, monkeypatch, name, short_writes):
    """Runs of records long enough go to an uncompressed file with os.writev
    (ReadsOutput.write_runs), compressed ones are gathered: the same bytes,
    also when os.writev writes less than asked, and after a buffered write."""
    import gzip
    import os

    rng = np.random.default_rng(3)
    records = [f"@r{i} x\n{''.join(rng.choice(list('ACGT'), 150))}\n+\n{'I' * 150}\n".encode() for i in range(3000)]
    data = b"".join(records)
    ends = np.cumsum([len(r) for r in records])
    starts = np.r_[0, ends[:-1]]
    chunk = RawFastqChunk(data, starts, ends, starts, np.full(len(records), 150))
    rows = np.flatnonzero(rng.random(len(records)) > 0.03)
    monkeypatch.setattr(bpbc.io, "IOV_MAX", 7)
    if short_writes:
        def writev(fd, views):  # the first two buffers but their last 5 bytes
            return os.write(fd, b"".join(views[:2])[:-5])

        monkeypatch.setattr(bpbc.io.os, "writev", writev)
    source = type("Source", (), {"fileformat": "fastq", "two_headers": False})()
    with bpbc.io.AtomicOutput(tmp_path / name, "test") as atomic:
        output = bpbc.io.ReadsOutput(atomic, source)
        output.write_bytes(b"@first\nA\n+\nI\n")
        chunk.write(output, rows)
        chunk.write(output, rows[:3])
        atomic.close_handles()
        atomic.commit()
    written = (tmp_path / name).read_bytes()
    if name.endswith(".gz"):
        written = gzip.decompress(written)
    expected = b"@first\nA\n+\nI\n" + b"".join(records[r] for r in rows) + b"".join(records[r] for r in rows[:3])
    assert written == expected


def test_a_chunk_keeping_some_records_is_those_records_in_a_buffer_of_their_size(tmp_path, monkeypatch):
    rng = np.random.default_rng(41)
    data = random_fastq(rng, 60)
    (chunk,), _ = read_all(tmp_path, data, 100, 1 << 20, monkeypatch)
    rows = np.array([0, 3, 4, 17, 59])
    kept = chunk.keeping(rows)
    assert len(kept) == len(chunk) and len(kept.data) == int((chunk.rec_end - chunk.rec_start)[rows].sum())
    assert kept.read_names(rows).strings() == chunk.read_names(rows).strings()
    for a, b in zip(kept.subset(rows).encode(), chunk.subset(rows).encode()):
        assert np.array_equal(a, b)
    written, expected = BytesSink(), BytesSink()
    kept.write(written, rows)
    chunk.write(expected, rows)
    assert b"".join(written.parts) == b"".join(expected.parts)
    assert kept.lengths[1] == 0 and kept.keeping(np.zeros(0, np.int64)).data.size == 0  # the others: empty
