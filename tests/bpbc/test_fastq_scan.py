"""The parallel plain-FASTQ scanner against the byte-by-byte definition
(:func:`bpbc.chunks._scan_fastq_exact`): the same records, end and verdict on
damaged, truncated buffers, with segments a few bytes long so that their
boundaries fall everywhere; and on megabytes at the default segment size."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpbc.chunks import _scan_fastq_exact, scan_fastq
from bpbc.fastq_scan import MIN_SPAN, SEGMENT, _plain_records, _scan_parallel, scan_fastq_parallel

#: how a record may be spoilt ("" keeps it plain; "empty" and "quality@" are plain too)
DAMAGE = ["", "", "", "", "", "empty", "quality@", "quality+", "cr-header", "cr-sequence", "cr-plus", "cr-quality",
          "plus-name", "longer", "shorter", "high-header", "high-sequence", "high-quality", "newline-sequence",
          "newline-quality", "no-at", "blank-line"]
PLAIN = {"", "empty", "quality@", "quality+"}


@st.composite
def records(draw) -> tuple[bytes, str]:
    name = draw(st.text("ab1 \t:", max_size=6))
    damage = draw(st.sampled_from(DAMAGE))
    length = 0 if damage == "empty" else draw(st.integers(0, 12))
    sequence = draw(st.text("ACGTN", min_size=length, max_size=length))
    quality = draw(st.text("I#F5", min_size=length, max_size=length))
    header, plus, at = f"@{name}\n", "+\n", length // 2
    if damage == "quality@" and length:
        quality = "@" + quality[1:]
    elif damage == "quality+" and length:
        quality = "+" + quality[1:]
    elif damage == "cr-header":
        header = f"@{name}\r\n"
    elif damage == "cr-sequence":  # the lines as long as each other: only the '\r' is wrong
        sequence, quality = (sequence[:-1], quality) if length else ("", "I")
        sequence += "\r"
    elif damage == "cr-plus":
        plus = "+\r\n"
    elif damage == "cr-quality":
        sequence, quality = (sequence, quality[:-1]) if length else ("A", "")
        quality += "\r"
    elif damage == "plus-name":
        plus = f"+{name}\n"
    elif damage == "longer":
        quality += "I"
    elif damage == "shorter":
        quality = quality[:-1]
    elif damage == "high-header":
        header = f"@{name}\xe9\n"
    elif damage == "high-sequence":
        sequence = sequence[:at] + "\xe9" + sequence[at + 1:]
    elif damage == "high-quality":
        quality = quality[:at] + "\xe9" + quality[at + 1:]
    elif damage == "newline-sequence":
        sequence = sequence[:at] + "\n" + sequence[at:]
    elif damage == "newline-quality":
        quality = quality[:at] + "\n" + quality[at + 1:]  # as long as before: the next line break is where it belongs
    elif damage == "no-at":
        header = header[1:]
    elif damage == "blank-line":
        header = "\n" + header
    return f"{header}{sequence}\n{plus}{quality}\n".encode("latin-1"), damage


@st.composite
def buffers(draw):
    """(buffer, pos, end, max_records, array size, segment, plain): records
    after ``pos`` bytes of something else, perhaps without the last newline,
    perhaps a byte changed, cut at ``end``; ``plain``: no record is damaged."""
    drawn = draw(st.lists(records(), max_size=10))
    data = b"".join(text for text, _ in drawn)
    plain = all(damage in PLAIN for _, damage in drawn)
    if data and draw(st.booleans()):
        data = data[:-1]  # no final newline: the last record is not complete
    if data and draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.sampled_from([b"\n", b"\r", b"@", b"+", b"A", b"\x80"])) + data[at + 1:]
        plain = False
    prefix = draw(st.binary(max_size=4))  # never read
    buf = np.frombuffer(prefix + data, np.uint8)
    end = len(prefix) + draw(st.integers(0, len(data)))
    max_records = draw(st.integers(0, len(drawn) + 2))
    size = max_records + draw(st.integers(0, 2))
    segment = draw(st.integers(1, 40))
    return buf, len(prefix), end, max_records, size, segment, plain


def scanned(scan, buf, pos, end, max_records, size, *args):
    """scan's (records, position, irregular) and the records' three arrays."""
    arrays = [np.full(size, -7, np.int64) for _ in range(3)]
    found, position, irregular = scan(buf, pos, end, max_records, *arrays, *args)
    return (found, position, irregular), [a[:found].tolist() for a in arrays]


@settings(max_examples=400, deadline=None)
@given(buffers())
def test_parallel_scan_is_the_definition(case):
    buf, pos, end, max_records, size, segment, plain = case
    want = scanned(_scan_fastq_exact, buf, pos, end, max_records, size)
    assert scanned(_scan_parallel, buf, pos, end, max_records, size, segment) == want
    assert scanned(scan_fastq_parallel, buf, pos, end, max_records, size, segment, 0) == want
    if plain:
        # the parallel part alone takes every record of plain data that the definition takes:
        # the line phases and the checks between segments are right, nothing is left to the definition
        arrays = [np.full(size, -7, np.int64) for _ in range(3)]
        assert _plain_records(buf, pos, end, max_records, *arrays, segment) == want[0][:2]


EDGES = [
    b"",
    b"@r\nACGT\n+\nIIII\n",
    b"@r\nACGT\n+\nIIII",  # no final newline: not complete, left for dnaio
    b"@r\nACGT\n+\nIIII\n@s",  # a header not yet ended
    b"@r\nACGT\n+\nIIII\n@s\nAC\n+",  # a '+' line not complete
    b"@r\nACGT\n+\nIIII\n@s\nAC\n+\nI",  # a quality line running past the end
    b"@r\n\n+\n\n@s\nA\n+\nI\n",  # an empty sequence
    b"r\nACGT\n+\nIIII\n",  # not '@' first
    b"@r\nACGT\n+\nIIII\n\n@s\nA\n+\nI\n",  # a blank line between records
    b"@r\r\nACGT\r\n+\r\nIIII\r\n@s\nA\n+\nI\n",  # Windows line ends
    b"@r\nACGT\n+r\nIIII\n@s\nA\n+\nI\n",  # the name repeated on the '+' line
    b"@r\nACGT\n+\nIII\n@s\nA\n+\nI\n",  # a quality line too short
    b"@r\nACG\n+\nIII\n@s\nA\n+\n+\n@cd\nACGT\n+\nIIII\n",  # a guess at the line end (3) that fits, wrongly
    b"@r\nACGT\n+\nII\nI\n@s\nA\n+\nI\n",  # a newline inside a quality line
    # four newlines inside a quality line: the line phase after it is the same again
    b"@r\nAC\n+\nII\n@q\nACGTACGTA\n+\nI\nI\nI\nI\nI\n@s\nA\n+\nI\n@t\nA\n+\nI\n",
    b"@r\xc3\xa9\nACGT\n+\nIIII\n@s\nA\n+\nI\n",  # not ASCII
]


@pytest.mark.parametrize("data", EDGES)
def test_edge_cases_at_every_cut_and_segment(data):
    buf = np.frombuffer(data, np.uint8)
    for end in range(len(data) + 1):
        for max_records in (0, 1, 2, 3, 8):
            want = scanned(_scan_fastq_exact, buf, 0, end, max_records, max_records)
            for segment in range(1, len(data) + 2):
                assert scanned(_scan_parallel, buf, 0, end, max_records, max_records, segment) == want


@pytest.mark.parametrize("segment", [1, 5, 11, 1 << 20])
def test_a_guess_that_jumps_over_a_line_end(segment):
    """Record s's sequence line (1) is shorter than the one before (3), and
    the bytes at the guessed line ends fit: the walk takes "A\\n+" for a
    sequence. The newlines counted give it away, and the segment is walked
    again, line by line: all records are taken in parallel."""
    data = b"@r\nACG\n+\nIII\n@s\nA\n+\n+\n@cd\nACGT\n+\nIIII\n" * 3
    buf = np.frombuffer(data, np.uint8)
    arrays = [np.empty(10, np.int64) for _ in range(3)]
    assert _plain_records(buf, 0, len(data), 10, *arrays, segment) == (9, len(data))
    assert scanned(_scan_parallel, buf, 0, len(data), 10, 10, segment) == scanned(_scan_fastq_exact, buf, 0, len(data), 10, 10)


def test_below_the_minimum_span_the_sequential_scan():
    data = b"@r\nACGT\n+\nIIII\n" * 100 + b"@s\nAC"
    buf = np.frombuffer(data, np.uint8)
    assert scanned(scan_fastq_parallel, buf, 0, len(data), 150, 150) == scanned(scan_fastq, buf, 0, len(data), 150, 150)
    assert scanned(scan_fastq_parallel, buf, 0, len(data), 150, 150)[0] == (100, len(data) - 5, False)


def megabytes_of_fastq(rng, reads: int) -> bytes:
    lengths = rng.integers(0, 300, reads)
    bases = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, int(lengths.sum()))].tobytes()
    qualities = np.frombuffer(b"F:,#@+", np.uint8)[rng.integers(0, 6, int(lengths.sum()))].tobytes()
    ends = np.cumsum(lengths).tolist()
    parts, start = [], 0
    for i, stop in enumerate(ends):
        parts.append(b"@A00123:8:H5:1:%d 1:N:0:ACGT\n%s\n+\n%s\n" % (i, bases[start:stop], qualities[start:stop]))
        start = stop
    return b"".join(parts)


@pytest.fixture(scope="module")
def big_fastq():
    return megabytes_of_fastq(np.random.default_rng(7), 60_000)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("damage", [None, b"\r", b"\n", b"\xff", b"@", "cut"])
def test_megabytes_at_the_default_segment(big_fastq, threads, damage):
    """Plain, then spoilt in one place (a record's byte changed into another,
    or cut off in mid-record), at the default segment size and above the
    minimum span, on one thread and two (one: scan_fastq_parallel is scan_fastq)."""
    data = big_fastq
    assert len(data) > max(MIN_SPAN, 8 * SEGMENT)
    rng = np.random.default_rng(len(data) + threads)
    for _ in range(3):
        spoilt = data
        if damage == "cut":
            spoilt = data[:int(rng.integers(len(data) // 2, len(data)))]
        elif damage is not None:
            at = int(rng.integers(len(data) // 4, len(data)))
            spoilt = data[:at] + damage + data[at + 1:]
        buf = np.frombuffer(spoilt, np.uint8)
        size = 70_000
        want = scanned(_scan_fastq_exact, buf, 0, len(spoilt), size, size)
        before = numba.get_num_threads()
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
        try:
            assert scanned(_scan_parallel, buf, 0, len(spoilt), size, size, SEGMENT) == want
            assert scanned(scan_fastq_parallel, buf, 0, len(spoilt), size, size) == want
        finally:
            numba.set_num_threads(before)
        if damage is None:
            assert want[0] == (60_000, len(data), False)
        if damage == "cut":
            arrays = [np.empty(size, np.int64) for _ in range(3)]
            assert _plain_records(buf, 0, len(spoilt), size, *arrays, SEGMENT) == want[0][:2]
