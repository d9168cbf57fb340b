"""One reads file cut into parts (bpbc.file_parts): the parts, read one after
the other, are the file's records, each once, in order; a file that cannot be
cut is not; a wrong cut is found, never read as records."""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpbc import file_parts, gzip_reader
from bpbc.file_parts import FilePart, UnreadablePart, plan_parts
from bpbc.io import InputError
from bpbc.pipeline import ScreenSettings, screen_files
from tests.bpbc.conftest import planted_fastq


def _fastq(rng: np.random.Generator, count: int, newline: str = "\n") -> bytes:
    """FASTQ whose quality lines often begin with '@' or '+' (what a record start must not be taken for);
    some reads are empty."""
    records = []
    for number in range(count):
        length = int(rng.integers(0, 40))
        sequence = "".join(rng.choice(list("ACGTN"), length))
        quality = "".join(rng.choice(list("@+F#:"), length))
        plus = "+" if number % 3 else f"+r{number} x"
        records.append(newline.join([f"@r{number} x", sequence, plus, quality]) + newline)
    return "".join(records).encode()


def _fasta(rng: np.random.Generator, count: int) -> bytes:
    records = []
    for number in range(count):
        sequence = "".join(rng.choice(list("ACGT"), int(rng.integers(1, 200))))
        lines = [sequence[i:i + 60] for i in range(0, len(sequence), 60)]
        records.append(f">s{number}\n" + "\n".join(lines) + "\n")
    return "".join(records).encode()


def _members(data: bytes, size: int) -> bytes:
    """``data`` as gzip members of ``size`` bytes each (what concatenated gzip files are)."""
    return b"".join(gzip.compress(data[i:i + size], mtime=0) for i in range(0, len(data), size))


def _bgzf(data: bytes, size: int = 4000) -> bytes:
    """``data`` as BGZF blocks (the SAM specification, 4.1): gzip members with a BC extra field."""
    blocks = []
    for i in range(0, len(data), size):
        piece = data[i:i + size]
        compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
        deflated = compressor.compress(piece) + compressor.flush()
        header = b"\x1f\x8b\x08\x04" + b"\0" * 4 + b"\0\xff" + struct.pack("<HBBHH", 6, 66, 67, 2,
                                                                          len(deflated) + 25)
        blocks.append(header + deflated + struct.pack("<II", zlib.crc32(piece), len(piece)))
    return b"".join(blocks) + bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


@pytest.fixture(params=["one thread", "rapidgzip", "rapidgzip in a process"])
def threads(request, monkeypatch) -> int:
    """How a gzip part is decompressed: member after member on one thread, or
    by rapidgzip on four (here or in a child process), whatever its size."""
    if request.param == "one thread":
        return 1
    monkeypatch.setattr(gzip_reader, "PARALLEL_GZIP_MIN_BYTES", 1)
    monkeypatch.setattr(gzip_reader, "GZIP_PROCESS_MIN_BYTES", 1 if request.param.endswith("process") else 1 << 60)
    return 4


def _read_part(part: FilePart, size: int = 777, threads: int = 1) -> bytes:
    got = bytearray()
    buffer = bytearray(size)
    with part.open(threads) as stream:
        while count := stream.readinto(buffer):
            got += buffer[:count]
    return bytes(got)


def _assert_parts_are_the_records(path, data: bytes, count: int, threads: int = 1) -> list[FilePart]:
    parts = plan_parts(path, count, min_bytes=1)
    assert parts is not None and [part.number for part in parts] == list(range(len(parts)))
    texts = [_read_part(part, 1 << 16, threads) for part in parts]
    assert b"".join(texts) == data
    first = data[:1]
    assert all(text[:1] in (first, b"") for text in texts)  # each begins with a record (or is empty)
    return parts


@pytest.mark.parametrize("count", [2, 3, 8, 61, 5000])
@pytest.mark.parametrize("kind", ["fastq", "fastq-crlf", "fasta"])
def test_the_parts_of_a_plain_file_are_its_records(tmp_path, kind, count):
    rng = np.random.default_rng(count)
    data = _fasta(rng, 300) if kind == "fasta" else _fastq(rng, 800, "\r\n" if kind == "fastq-crlf" else "\n")
    path = tmp_path / "reads"
    path.write_bytes(data)
    parts = _assert_parts_are_the_records(path, data, count)
    assert len(parts) == count  # a plain file is cut anywhere
    assert [part.fileformat for part in parts] == ["fasta" if kind == "fasta" else "fastq"] * count


@pytest.mark.parametrize("count", [2, 5, 40])
@pytest.mark.parametrize("layout", ["members", "bgzf"])
def test_the_parts_of_gzip_members_are_its_records(tmp_path, layout, count, threads):
    data = _fastq(np.random.default_rng(7), 3000)
    path = tmp_path / "reads.fq.gz"
    path.write_bytes(_members(data, 9000) if layout == "members" else _bgzf(data))
    parts = _assert_parts_are_the_records(path, data, count, threads)
    assert len(parts) >= min(count, 3) and all(part.kind == "members" for part in parts)
    with open(path, "rb") as handle:  # every part begins with a member
        for part in parts:
            handle.seek(part.start)
            assert handle.read(3) == b"\x1f\x8b\x08"


@pytest.mark.parametrize("count", [2, 7, 40])
def test_the_parts_of_one_gzip_member_through_its_index_are_its_records(tmp_path, count, threads):
    """One member (what gzip writes) cannot be cut by members; through
    rapidgzip's index of it, at any offset of its data."""
    data = _fastq(np.random.default_rng(count), 3000)
    path = tmp_path / "reads.fq.gz"
    path.write_bytes(gzip.compress(data))
    assert plan_parts(path, count, min_bytes=1) is None and file_parts.indexable(path, count, min_bytes=1)
    index = tmp_path / "reads.gzidx"
    file_parts.write_gzip_index(path, index, 2)
    parts = plan_parts(path, count, min_bytes=1, index=str(index))
    assert parts is not None and len(parts) == min(count, len(path.read_bytes()))
    assert {part.kind for part in parts} == {"indexed"} and parts[-1].end == len(data)
    assert b"".join(_read_part(part, 1 << 16, threads) for part in parts) == data
    plain = tmp_path / "reads.fq"
    plain.write_bytes(data)
    members = tmp_path / "members.fq.gz"
    members.write_bytes(_members(data, 9000))
    assert not file_parts.indexable(plain, count, min_bytes=1) and file_parts.indexable(members, 2, 1)
    assert not file_parts.indexable(path, count, min_bytes=len(path.read_bytes()))  # too small for two parts


_LINE = st.text(alphabet="ACGTN@+F#:> ", max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.tuples(_LINE, st.integers(0, 12), _LINE), max_size=40),
       newline=st.sampled_from(["\n", "\r\n"]), count=st.integers(2, 60), layout=st.sampled_from(["plain",
                                                                                               "members"]),
       member_bytes=st.integers(1, 200), data=st.data())
def test_any_fastq_cut_anyhow_is_its_records(tmp_path_factory, records, newline, count, layout, member_bytes, data):
    """Records whose names, sequences and qualities begin with anything the
    rules look at ('@', '+', '>'), cut into up to 60 parts: the parts, one
    after the other, are the file, each beginning with a record (or empty)."""
    sequences = [data.draw(st.text("ACGTN", min_size=length, max_size=length)) for _, length, _ in records]
    text = "".join(newline.join([f"@{name}", sequence, "+", quality[:len(sequence)].ljust(len(sequence), "F")])
                   + newline for (name, _, quality), sequence in zip(records, sequences)).encode()
    path = tmp_path_factory.mktemp("parts") / "reads"
    path.write_bytes(_members(text, member_bytes) if layout == "members" else text)
    parts = plan_parts(path, count, min_bytes=1)
    if parts is None:  # no records, too small, or one gzip member
        assert not text or len(path.read_bytes()) < 2 or layout == "members" and len(text) <= member_bytes
        return
    texts = [_read_part(part, 5) for part in parts]
    assert b"".join(texts) == text
    assert all(piece[:1] in (b"@", b"") for piece in texts)


def test_files_that_cannot_be_cut(tmp_path):
    data = _fastq(np.random.default_rng(1), 3000)
    one_member = tmp_path / "one.fq.gz"
    one_member.write_bytes(gzip.compress(data))
    assert plan_parts(one_member, 4, min_bytes=1) is None  # a single member: read from its start
    plain = tmp_path / "reads.fq"
    plain.write_bytes(data)
    assert plan_parts(plain, 4, min_bytes=len(data) // 2 + 1) is None  # too small for two parts
    assert plan_parts(plain, 1, min_bytes=1) is None
    other = tmp_path / "reads.txt"
    other.write_bytes(b"BAM\x01" + data)
    assert plan_parts(other, 4, min_bytes=1) is None
    assert plan_parts(tmp_path, 4, min_bytes=1) is None  # a directory
    assert plan_parts(tmp_path / "missing.fq", 4, min_bytes=1) is None
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    assert plan_parts(pipe, 4, min_bytes=1) is None  # not a regular file: never opened
    assert len(plan_parts(plain, 4, min_bytes=1) or []) == 4
    assert plan_parts(plain, 4) is None and len(data) < 2 * file_parts.MIN_PART_BYTES  # the default


def test_a_part_that_does_not_decompress_to_its_end_is_unreadable(tmp_path, threads):
    """A cut that is not a member start, or a damaged member: the part says so
    (the run then reads the file whole, which names any damage)."""
    data = _fastq(np.random.default_rng(3), 3000)
    path = tmp_path / "reads.fq.gz"
    compressed = _members(data, 9000)
    path.write_bytes(compressed)
    parts = plan_parts(path, 4, min_bytes=1)
    assert parts is not None
    with pytest.raises(UnreadablePart):
        _read_part(replace(parts[1], end=parts[1].end + 1), threads=threads)  # the member after starts before
    with pytest.raises(UnreadablePart):
        _read_part(replace(parts[1], end=parts[1].end - 1), threads=threads)  # ... or after
    with pytest.raises(UnreadablePart):
        _read_part(replace(parts[2], start=parts[2].start + 1), threads=threads)  # not a member's start
    path.write_bytes(compressed[:-5])  # the last member cut short
    with pytest.raises(UnreadablePart):
        _read_part(replace(parts[-1], end=len(compressed) - 5), threads=threads)


def test_a_part_is_read_by_the_pipeline_as_its_records(tmp_path):
    """Each part screened on its own: PAF and matched reads joined are the whole file's."""
    adapter = "AGATCGGAAGAGCACACGTCTGAACTCCAGTCA"
    data = planted_fastq(np.random.default_rng(11), 4000, [adapter], "q").encode()
    path = tmp_path / "reads.fq.gz"
    path.write_bytes(_members(data, 50_000))
    patterns = tmp_path / "p.fa"
    patterns.write_text(f">truseq\n{adapter}\n")
    settings = ScreenSettings(threshold=40, device="cpu", threads=1)
    whole = screen_files(path, patterns, settings, output=tmp_path / "whole.paf", matched=tmp_path / "whole.fq")
    parts = plan_parts(path, 5, min_bytes=1)
    assert parts is not None and len(parts) == 5
    pafs, matched, reads = b"", b"", 0
    for part in parts:
        summary = screen_files(part, patterns, settings, output=tmp_path / "p.paf", matched=tmp_path / "p.fq")
        reads += summary.reads
        pafs += (tmp_path / "p.paf").read_bytes()
        matched += (tmp_path / "p.fq").read_bytes()
    assert reads == whole.reads == 4000 and whole.reads_passing > 500
    assert pafs == (tmp_path / "whole.paf").read_bytes() and matched == (tmp_path / "whole.fq").read_bytes()


def test_errors_in_a_part_name_the_file_and_the_part(tmp_path):
    text = _fastq(np.random.default_rng(5), 3000).decode().splitlines(keepends=True)
    text[4 * 2500 + 1] = "ACGT*ACGT\n"  # read r2500 of 3000: in the last of three parts
    text[4 * 2500 + 3] = "IIIIIIIII\n"
    path = tmp_path / "reads.fq.gz"
    path.write_bytes(_members("".join(text).encode(), 9000))
    parts = plan_parts(path, 3, min_bytes=1)
    assert parts is not None and len(parts) == 3
    settings = ScreenSettings(threshold=20, device="cpu", threads=1)
    patterns = tmp_path / "p.fa"
    patterns.write_text(">a\nACGTACGTACGTACGTACGT\n")
    screen_files(parts[0], patterns, settings, output=tmp_path / "p.paf")
    with pytest.raises(InputError, match=rf"reads\.fq\.gz \(part 3 of 3, from byte {parts[2].start}\): read r2500"):
        screen_files(parts[2], patterns, settings, output=tmp_path / "p.paf")
