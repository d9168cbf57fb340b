"""Copying the text of str, bytes and records out of the objects: the same bytes as Python's own joins, or a refusal."""

from __future__ import annotations

import sys

import dnaio
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpbc import pyobjects
from tests.bpbc.conftest import read_texts


class Text(str):
    pass


class SlotRecord:
    __slots__ = ("name", "sequence", "qualities")

    def __init__(self, name, sequence, qualities=None):
        self.name, self.sequence, self.qualities = name, sequence, qualities


class DictRecord:
    def __init__(self, name, sequence, qualities=None):
        self.name, self.sequence = name, sequence


class PropertyRecord:
    __slots__ = ("_sequence",)

    def __init__(self, name, sequence, qualities=None):
        self._sequence = sequence

    @property
    def sequence(self):
        return self._sequence.upper()


def python_join(items) -> tuple[bytes, list[int]]:
    texts = [item if isinstance(item, (str, bytes)) else item.sequence for item in items]
    data = [text.encode() if isinstance(text, str) else text for text in texts]
    return b"".join(data), [len(d) for d in data]


def check_gathered(items) -> None:
    gathered = pyobjects.gather(items)
    assert gathered is not None
    data, offsets, lengths = gathered
    expected, expected_lengths = python_join(items)
    assert data.dtype == np.uint8 and data.tobytes() == expected
    assert lengths.tolist() == expected_lengths
    assert offsets.tolist() == [0] + np.cumsum(expected_lengths, dtype=np.int64).tolist()


@pytest.mark.skipif(sys.implementation.name != "cpython" or not getattr(sys, "_is_gil_enabled", lambda: True)(),
                    reason="the layout is probed on CPython with a GIL only")
def test_the_layout_is_found_on_this_interpreter():
    """Else every list would take the slow route, quietly: the probe must agree here."""
    assert pyobjects.layout() is not None
    assert pyobjects.record_slot(dnaio.SequenceRecord) is not None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(read_texts(max_size=60), st.sampled_from(["str", "bytes", "record", "fastq"])), max_size=40))
def test_str_bytes_and_records_copy_as_python_joins_them(items):
    """Every form and mix (a list led by a record reads records and str and
    bytes; one led by str or bytes reads those two), empty texts included."""
    made = [text if form == "str" else text.encode() if form == "bytes"
            else dnaio.SequenceRecord(f"r{i}", text, "I" * len(text) if form == "fastq" else None)
            for i, (text, form) in enumerate(items)]
    if made and any(isinstance(item, dnaio.SequenceRecord) for item in made) and not isinstance(
            made[0], dnaio.SequenceRecord):
        assert pyobjects.gather(made) is None
    else:
        check_gathered(made)


def test_large_lists_and_texts():
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 5000, 3000)
    letters = np.frombuffer(b"ACGTNacgtn", np.uint8)
    texts = [letters[rng.integers(0, 10, n)].tobytes().decode() for n in lengths]
    check_gathered(texts)
    check_gathered([dnaio.SequenceRecord(f"r{i}", t) for i, t in enumerate(texts)])
    check_gathered([])


@pytest.mark.parametrize("items", [
    ["ACGT", "AC\xe9T"],  # latin-1 text
    ["ACGT", "AC\u0100T"],  # two bytes a character
    ["AC\U00010000"],  # four
    ["ACGT", Text("ACGT")],  # a str subclass
    ["ACGT", bytearray(b"AC")],
    ["ACGT", memoryview(b"AC")],
    ["ACGT", 5],
    ["ACGT", None],
    ["ACGT", dnaio.SequenceRecord("r", "ACGT")],  # a record in a list of text
    [dnaio.SequenceRecord("r", "ACGT"), SlotRecord("s", "ACGT")],  # another record type
    [SlotRecord("r", "ACGT"), SlotRecord("s", "AC\xe9T")],  # a record of non-ASCII text
    [DictRecord("r", "ACGT")],
    [PropertyRecord("r", "acgt")],
])
def test_anything_else_is_declined(items):
    """The caller then joins in Python, which also words the errors."""
    assert pyobjects.gather(items) is None


def test_only_lists_are_read():
    assert pyobjects.gather(("ACGT", "GG")) is None
    assert pyobjects.gather(iter(["ACGT"])) is None


def test_records_with_a_slot_are_read_through_it():
    assert pyobjects.record_slot(SlotRecord) is not None
    check_gathered([SlotRecord("a", "ACGT"), SlotRecord("b", b"GG"), "TT"])
    assert pyobjects.record_slot(DictRecord) is None and pyobjects.record_slot(PropertyRecord) is None
    assert pyobjects.record_slot(str) is None


def test_lists_of_several_pieces():
    """The kernels run over pieces of PIECE items, each piece's offsets from
    the sums of those before: texts of every length across several pieces
    (a last piece part full, empty texts), and the first item not read here
    is the first of all pieces, wherever the pieces are run."""
    rng = np.random.default_rng(3)
    n = 3 * pyobjects.PIECE + 17
    texts = ["".join(rng.choice(list("ACGTN"), int(length))) for length in rng.integers(0, 300, n)]
    texts[pyobjects.PIECE - 1] = texts[pyobjects.PIECE] = ""
    check_gathered(texts)
    check_gathered([text.encode() if i % 3 else text for i, text in enumerate(texts)])
    fields = pyobjects._fields(texts)
    for unread in ([2 * pyobjects.PIECE + 5, pyobjects.PIECE + 1], [n - 1], [0, n - 1]):
        items = list(texts)
        for i in unread:
            items[i] = "\xe9" + items[i]  # not ASCII: not read here
        sums = np.empty(4, np.int64)
        assert pyobjects._locate(id(items), fields, np.empty(n, np.int64), sums) == min(unread)
        assert pyobjects.gather(items) is None


def test_the_text_is_a_copy():
    texts = ["ACGT" * 300, "GG" * 700]
    data, _, _ = pyobjects.gather(texts)
    data[:4] = np.frombuffer(b"TTTT", np.uint8)
    assert texts[0].startswith("ACGT")


def test_a_buffer_is_used_again_only_once_nothing_holds_it(monkeypatch):
    """The copy's buffers come from a pool: a buffer still held (by the
    reads of a result the caller keeps) is never written by the next copy,
    and one no longer held is used again."""
    from bpbc.buffers import BufferPool

    monkeypatch.setattr(pyobjects, "_TEXT_BUFFERS", BufferPool(keep=2))

    def address(array):
        return array.__array_interface__["data"][0]

    first, _, _ = pyobjects.gather(["ACGT" * 40] * 2000)
    first_address = address(first)
    held = first[100:200]  # a view holds the whole buffer
    del first
    second, _, _ = pyobjects.gather(["GGTA" * 40] * 2000)
    assert address(second) != first_address and held.tobytes() == b"ACGT" * 25
    del held
    third, _, _ = pyobjects.gather(["TTAC" * 40] * 1500)  # smaller: the free buffer fits
    assert address(third) == first_address and third.tobytes() == b"TTAC" * 40 * 1500
    assert second.tobytes() == b"GGTA" * 40 * 2000


def test_the_copy_reads_the_list_again_and_checks_it():
    """Another thread may run between the two kernels: the copy reads every
    object afresh and refuses a list whose size or texts' lengths changed."""
    items = ["".join(["ACGT"] * 10) for _ in range(100)]
    fields = pyobjects._fields(items)
    lengths, offsets, sums, start = np.empty(100, np.int64), np.empty(101, np.int64), np.empty(1, np.int64), \
        np.zeros(1, np.int64)
    assert pyobjects._locate(id(items), fields, lengths, sums) == -1 and sums[0] == 4000
    data = np.empty(sums[0], np.uint8)
    items[5] = "TTTT" * 10  # as long: copied as it is now
    assert pyobjects._copy(id(items), fields, lengths, start, offsets, data)
    assert data[200:240].tobytes() == b"TTTT" * 10
    items[7] = "ACGT"  # shorter
    assert not pyobjects._copy(id(items), fields, lengths, start, offsets, data)
    items[7] = "ACGT" * 10
    items.append("A")
    assert not pyobjects._copy(id(items), fields, lengths, start, offsets, data)
