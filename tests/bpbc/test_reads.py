"""Reads in one buffer: made from a buffer and offsets or from any in-memory input, encoded as encode_reads does."""

from __future__ import annotations

import dnaio
import numpy as np
import pytest

import bpbc
from bpbc import alphabet
from bpbc.alphabet import SequenceError, encode_reads
from bpbc.reads import Reads

READS = ["ACGTN", "", "GGTacgu", "RYKMn", "T" * 70, ""]


def buffer_of(reads: list[str], lead: bytes = b"") -> tuple[bytes, np.ndarray]:
    offsets = np.zeros(len(reads) + 1, np.int64)
    np.cumsum([len(read) for read in reads], out=offsets[1:])
    return lead + "".join(reads).encode(), offsets + len(lead)


def assert_encodes_as(reads: Reads, expected: list[str]) -> None:
    codes, lengths = reads.encode()
    want_codes, want_lengths = encode_reads(expected)
    assert np.array_equal(codes, want_codes) and np.array_equal(lengths, want_lengths)


@pytest.mark.parametrize("gather_from", [0, 10**9], ids=["copied in parallel", "joined in python"])
def test_every_form_encodes_as_the_strings_do(monkeypatch, gather_from):
    monkeypatch.setattr(alphabet, "GATHER_FROM", gather_from)
    data, offsets = buffer_of(READS, lead=b"junk")
    forms = {
        "str": READS,
        "bytes": [read.encode() for read in READS],
        "records": [dnaio.SequenceRecord(f"r{i}", read) for i, read in enumerate(READS)],
        "mixed": [READS[0], READS[1].encode(), dnaio.SequenceRecord("x", READS[2]), *READS[3:]],
        "iterator": iter(READS),
        "tuple": tuple(READS),
        "buffer": Reads.from_buffer(data, offsets),
        "array": Reads.from_buffer(np.frombuffer(data, np.uint8).copy(), offsets.tolist()),
        "int8 array": Reads.from_buffer(np.frombuffer(data, np.int8), offsets.astype(np.int32)),
        "bytearray": Reads.from_buffer(bytearray(data), offsets),
        "memoryview": Reads.from_buffer(memoryview(data), offsets),
    }
    for name, form in forms.items():
        reads = Reads.of(form)
        assert len(reads) == len(READS), name
        assert reads.lengths.tolist() == [len(read) for read in READS], name
        assert_encodes_as(reads, READS)
        rows = np.array([4, 0, 2])
        assert_encodes_as(reads.subset(rows), [READS[r] for r in rows])


def test_reads_pass_through():
    reads = Reads.of(READS)
    assert Reads.of(reads) is reads
    assert repr(reads) == f"Reads(6 reads, {sum(map(len, READS))} bases)"


def test_no_reads():
    for reads in (Reads.of([]), Reads.from_buffer(b"", [0]), Reads.from_buffer(b"ACGT", [3])):
        codes, lengths = reads.encode()
        assert len(reads) == 0 and codes.shape == (0, 0) and lengths.shape == (0,)


def test_the_buffer_is_not_copied():
    data = np.frombuffer(b"ACGTTT", np.uint8).copy()
    reads = Reads.from_buffer(data, [0, 4, 6])
    assert np.shares_memory(reads.data, data)


@pytest.mark.parametrize("gather_from", [0, 10**9], ids=["copied in parallel", "joined in python"])
def test_a_bad_byte_names_its_read(monkeypatch, gather_from):
    """A record by its name, a read given by names by its name, else read<i + 1>,
    also in a subset (which keeps the reads' own numbers)."""
    monkeypatch.setattr(alphabet, "GATHER_FROM", gather_from)
    reads = ["ACGT", "", "ACXT", "GG"]
    records = [dnaio.SequenceRecord(f"r{i} words", read) for i, read in enumerate(reads)]
    data, offsets = buffer_of(reads)
    cases = [
        (Reads.of(reads), "read read3: character 'X' at position 3 is not an IUPAC nucleotide code"),
        (Reads.of(records), "read r2: character 'X' at position 3"),
        (Reads.of(iter(records)), "read r2: character 'X' at position 3"),  # an iterator's records kept too
        (Reads.of(tuple(records)), "read r2: character 'X' at position 3"),
        (Reads.from_buffer(data, offsets), "read read3: character 'X' at position 3"),
        (Reads.from_buffer(data, offsets, names=["a", "b", "c", "d"]), "read c: character 'X' at position 3"),
        (Reads.of(["ACGT", "ACG\xe9"]), "read read2: non-ASCII byte 0xc3 at position 4"),
        (Reads.of([b"AC\xff"]), "read read1: non-ASCII byte 0xff at position 3"),
    ]
    for made, message in cases:
        with pytest.raises(SequenceError, match=message):
            made.encode()
        if len(made) > 3:
            with pytest.raises(SequenceError, match=message):
                made.subset(np.array([3, 2])).encode()
            with pytest.raises(SequenceError, match=message):  # a subset of a subset: still the reads' own numbers
                made.subset(np.array([0, 2, 3])).subset(np.array([2, 1])).encode()


@pytest.mark.parametrize("data, offsets, names, error, message", [
    (b"ACGT", [0, 5], None, ValueError, "at most the data's size"),
    (b"ACGT", [2, 1], None, ValueError, "must rise"),
    (b"ACGT", [-1, 2], None, ValueError, "from 0 or more"),
    (b"ACGT", [], None, ValueError, "one more than there are reads"),
    (b"ACGT", [[0, 4]], None, ValueError, "1-D"),
    (b"ACGT", [0.0, 4.0], None, ValueError, "integers"),
    (b"ACGT", [0, 2, 4], ["a"], ValueError, "1 names given for 2 reads"),
    (np.zeros((2, 2), np.uint8), [0, 4], None, TypeError, "1-D uint8 array"),
    (np.zeros(4, np.int32), [0, 4], None, TypeError, "1-D uint8 array"),
    ("ACGT", [0, 4], None, TypeError, "bytes-like"),
])
def test_buffers_that_do_not_fit_their_offsets(data, offsets, names, error, message):
    with pytest.raises(error, match=message):
        Reads.from_buffer(data, offsets, names)


def test_public_name():
    assert bpbc.Reads is Reads
