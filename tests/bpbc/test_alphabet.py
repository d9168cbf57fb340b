"""Read and pattern encoding: every input form, the fast paths, the errors."""

from __future__ import annotations

import dnaio
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpbc.alphabet import (
    COMPLEMENT_MASK,
    INVALID,
    SequenceError,
    encode_pattern,
    encode_patterns,
    encode_reads,
    matches,
)
from tests.bpbc.conftest import IUPAC_BASES, read_texts


def expected_codes(read: str) -> list[int]:
    """Independent of bpbc.alphabet's tables: A/C/G/T(U) -> 0..3, else INVALID."""
    return ["ACGT".index(IUPAC_BASES[c.upper()]) if len(IUPAC_BASES[c.upper()]) == 1 else INVALID for c in read]


@settings(max_examples=80, deadline=None)
@given(st.lists(read_texts(max_size=40), max_size=12))
def test_every_input_form_gives_the_same_padded_codes(reads):
    records = [dnaio.SequenceRecord(f"r{i}", r) for i, r in enumerate(reads)]
    results = [encode_reads(form) for form in (reads, [r.encode() for r in reads], records)]
    width = max(map(len, reads), default=0)
    for codes, lengths in results:
        assert codes.shape == (len(reads), width) and codes.dtype == np.uint8
        assert lengths.tolist() == [len(r) for r in reads]
        for row, read in zip(codes, reads):
            assert row[: len(read)].tolist() == expected_codes(read)
            assert np.all(row[len(read):] == INVALID)


def test_equal_length_fast_path_and_mixed_lists():
    codes, lengths = encode_reads(["ACGT", "TTNA"])
    assert codes.tolist() == [[0, 1, 2, 3], [3, 3, INVALID, 0]]
    mixed = encode_reads(["ACGT", b"tt", dnaio.SequenceRecord("x", "G")])
    assert mixed[0].tolist() == [[0, 1, 2, 3], [3, 3, INVALID, INVALID], [2, INVALID, INVALID, INVALID]]


@pytest.mark.parametrize("reads, names, message", [
    (["ACGT", "ACXT"], None, "read #2: character 'X' at position 3 is not an IUPAC nucleotide code"),
    (["ACGT", "AC-T"], ["a", "b"], "read b: character '-' at position 3"),
    (["AAAA", "ACGé"], lambda i: f"name{i}", "read name1: non-ASCII byte 0xc3 at position 4"),
    ([b"AC\xffT"], None, "read #1: non-ASCII byte 0xff at position 3"),
])
def test_bad_reads_name_the_record_and_position(reads, names, message):
    with pytest.raises(SequenceError, match=message):
        encode_reads(reads, names)


def test_patterns_encode_iupac_sets_and_complement():
    masks = encode_pattern("ACGTNRYU")
    assert masks.tolist() == [1, 2, 4, 8, 15, 1 | 4, 2 | 8, 8]
    assert COMPLEMENT_MASK[encode_pattern("AACGRM")[::-1]].tolist() == encode_pattern("KYCGTT").tolist()
    with pytest.raises(SequenceError, match="pattern p1: sequence is empty"):
        encode_pattern("", "p1")
    with pytest.raises(SequenceError, match="pattern q: character 'J' at position 2"):
        encode_pattern("AJ", "q")


def test_match_rule_read_n_never_matches():
    n_pattern = encode_pattern("N")[0]
    assert all(matches(code, n_pattern) for code in range(4))
    assert not matches(INVALID, n_pattern)
    assert matches(0, encode_pattern("R")[0]) and not matches(1, encode_pattern("R")[0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(read_texts(max_size=40), st.sampled_from(["str", "bytes", "record"])), max_size=30))
def test_joined_bytes_copied_in_parallel_as_joined_in_python(items):
    """joined_bytes copies a list's text out on numba's threads from
    GATHER_FROM sequences on, else joins in Python: the same bytes, offsets
    and lengths, and encode_reads the same codes, for every form and mix."""
    import bpbc.alphabet as alphabet

    made = [text if form == "str" else text.encode() if form == "bytes" else dnaio.SequenceRecord(f"r{i}", text)
            for i, (text, form) in enumerate(items)]
    before = alphabet.GATHER_FROM
    try:
        results = []
        for gather_from in (0, 10**9):
            alphabet.GATHER_FROM = gather_from
            results.append((alphabet.joined_bytes(made), encode_reads(made)))
    finally:
        alphabet.GATHER_FROM = before
    (parallel, parallel_codes), (python, python_codes) = results
    for got, want in zip(parallel + parallel_codes, python + python_codes):
        assert np.array_equal(got, want)
    assert python[0].tobytes() == "".join(text for text, _ in items).encode()


def test_a_bad_byte_after_empty_reads_names_its_read():
    with pytest.raises(SequenceError, match="read #4: character 'X' at position 1"):
        encode_reads(["AC", "", "", "XG", ""])
    with pytest.raises(SequenceError, match="read #1: character 'X' at position 2"):
        encode_reads(["AX", "", "GG"])


class _PlainRecord:
    """A record of a type the parallel copy cannot read (its ``sequence`` in an instance dict)."""

    def __init__(self, name: str, sequence: str):
        self.name, self.sequence = name, sequence


def _forms(texts: list[str]) -> dict:
    return {"str": list(texts), "bytes": [t.encode() for t in texts],
            "dnaio records": [dnaio.SequenceRecord(f"r{i}", t) for i, t in enumerate(texts)],
            "plain records": [_PlainRecord(f"r{i}", t) for i, t in enumerate(texts)],
            "tuple": tuple(texts), "generator": (t for t in texts)}


def _check_joined(got, texts: list[str]) -> None:
    data, offsets, lengths = got
    assert data.dtype == np.uint8 and data.tobytes() == "".join(texts).encode()
    assert offsets.dtype == lengths.dtype == np.int64
    assert lengths.tolist() == [len(t) for t in texts]
    assert offsets.tolist() == np.concatenate([[0], np.cumsum([len(t) for t in texts])]).tolist()


def test_joined_bytes_takes_the_documented_path_for_each_form(monkeypatch):
    """From GATHER_FROM sequences on, every form is copied on numba's
    threads (bpbc.pyobjects.gather), never joined in Python: str, bytes and
    dnaio records in one pass over the list, records of another type by
    their sequences in a second; a tuple or a generator as the list of its
    items. Fewer sequences are joined in Python: ASCII text (str, or records
    whose sequence is a str) in one ``"".join(...).encode()``, never
    sequence by sequence (``as_bytes``); anything else sequence by sequence."""
    import bpbc.alphabet as alphabet
    import bpbc.pyobjects as pyobjects

    if pyobjects.layout() is None:
        pytest.skip("this interpreter's objects are not laid out as bpbc.pyobjects reads them")
    rng = np.random.default_rng(7)
    texts = ["".join(rng.choice(list("ACGTN"), int(rng.integers(0, 30)))) for _ in range(alphabet.GATHER_FROM)]
    real_gather, gathered = pyobjects.gather, []

    def counted_gather(items):
        gathered.append(type(items[0]).__name__ if items else None)
        return real_gather(items)

    def no_python_join(seqs):
        raise AssertionError("joined in Python")

    monkeypatch.setattr(pyobjects, "gather", counted_gather)
    with monkeypatch.context() as patched:
        patched.setattr(alphabet, "_joined_in_python", no_python_join)
        for form, made in _forms(texts).items():
            gathered.clear()
            _check_joined(alphabet.joined_bytes(made), texts)
            first = {"bytes": "bytes", "dnaio records": "SequenceRecord", "plain records": "_PlainRecord"}
            assert gathered == [first.get(form, "str")] + (["str"] if form == "plain records" else []), form

    def no_sequence_by_sequence(seq):
        raise AssertionError("sequence by sequence")

    few = texts[:alphabet.GATHER_FROM - 1]
    gathered.clear()
    for form, made in _forms(few).items():
        if form in ("bytes",):
            continue
        with monkeypatch.context() as patched:
            patched.setattr(alphabet, "as_bytes", no_sequence_by_sequence)
            _check_joined(alphabet.joined_bytes(made), few)
    _check_joined(alphabet.joined_bytes([t.encode() for t in few]), few)
    assert gathered == []
    # not ASCII, or a mixed list: sequence by sequence, the text kept as its UTF-8 bytes
    for mixed in (["AC", "G\xe9T"], ["AC", b"GT", _PlainRecord("x", "TT")], [_PlainRecord("x", "TT"), b"GT"]):
        data, offsets, lengths = alphabet.joined_bytes(mixed)
        assert data.tobytes() == b"".join(alphabet.as_bytes(s) for s in mixed)
        assert lengths.dtype == np.int64 and lengths.tolist() == [len(alphabet.as_bytes(s)) for s in mixed]


@pytest.mark.parametrize("byte, said", [(0x7F, "character '\\x7f' at position 3 is not an IUPAC nucleotide code"),
                                        (0x80, "non-ASCII byte 0x80 at position 3"),
                                        (0xFF, "non-ASCII byte 0xff at position 3")])
def test_a_bad_byte_is_named_as_a_character_below_128_and_as_a_byte_from_128_on(byte, said):
    with pytest.raises(SequenceError) as error:
        encode_reads([b"AC" + bytes([byte]) + b"GT"])
    assert str(error.value) == f"read #1: {said}"


def test_as_bytes_of_every_form_and_its_refusal():
    from bpbc.alphabet import as_bytes, record_name

    assert as_bytes("ACGT") == b"ACGT" and as_bytes(b"AC") == b"AC"
    assert as_bytes(bytearray(b"GG")) == b"GG" and type(as_bytes(memoryview(b"TT"))) is bytes
    assert as_bytes(dnaio.SequenceRecord("r", "ACG")) == b"ACG"
    # text that is no valid Unicode keeps its bytes (an unpaired surrogate, as os.fsdecode gives them)
    assert as_bytes("AC\udcff") == b"AC\xff"
    for bad in (object(), 5, None):
        with pytest.raises(TypeError) as error:
            as_bytes(bad)
        assert str(error.value) == ("expected a sequence (str, bytes or a record with .sequence), got "
                                    f"{type(bad).__name__}")
    assert record_name(dnaio.SequenceRecord("r1 two words", "A"), 0, "read") == "r1"
    assert record_name("ACGT", 4, "read") == "read5"


def test_a_pattern_without_a_name_is_called_pattern():
    with pytest.raises(SequenceError) as error:
        encode_pattern("")
    assert str(error.value) == "pattern pattern: sequence is empty"
    with pytest.raises(SequenceError) as error:
        encode_pattern("AXG")
    assert str(error.value) == "pattern pattern: character 'X' at position 2 is not an IUPAC nucleotide code"
    with pytest.raises(SequenceError) as error:
        encode_pattern("AXG", name="p7")
    assert str(error.value).startswith("pattern p7: character 'X'")


def test_a_panel_encodes_as_its_patterns_one_at_a_time():
    texts = ["ACGTN", "ryk", "T", "GATTACA" * 9]
    encoded = encode_patterns(texts, ["a", "b", "c", "d"])
    assert [masks.tolist() for masks in encoded] == [encode_pattern(t).tolist() for t in texts]
    assert encode_patterns([], []) == []


@pytest.mark.parametrize("texts", [["ACGT", "AXGT", ""], ["ACGT", "", "AXGT"], ["ACGT", "AC-T"]])
def test_a_panel_raises_the_error_of_its_first_unusable_pattern(texts):
    names = [f"p{k}" for k in range(len(texts))]
    with pytest.raises(SequenceError) as one_at_a_time:
        for text, name in zip(texts, names):
            encode_pattern(text, name)
    with pytest.raises(SequenceError) as panel:
        encode_patterns(texts, names)
    assert str(panel.value) == str(one_at_a_time.value)
