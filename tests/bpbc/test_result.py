"""bpbc.result: ScreenResult's attributes and lazy dense table, Texts and
AlignmentTable's conversion to Alignment objects, checked on tables built
by hand."""

from __future__ import annotations

import numpy as np
import pytest

import bpbc
from bpbc.result import Alignment, AlignmentTable, ScreenResult, Texts


def test_texts_hold_the_strings_back_to_back():
    strings = ["r1", "", "read two", "x" * 300]
    texts = Texts.of(strings)
    assert len(texts) == 4 and texts.strings() == strings
    assert texts.buffer.dtype == np.uint8 and texts.buffer.tobytes() == "".join(strings).encode()
    assert texts.offsets.dtype == np.int64 and texts.offsets.tolist() == [0, 2, 2, 10, 310]
    empty = Texts.of([])
    assert len(empty) == 0 and empty.strings() == [] and empty.offsets.tolist() == [0]
    with pytest.raises(UnicodeEncodeError):
        Texts.of(["ré"])


def table(rows: list[tuple], strands=("+", "-")) -> AlignmentTable:
    columns = list(zip(*rows)) if rows else [()] * 12
    numbers = [np.array(column, np.int64) for column in columns[:11]]
    return AlignmentTable(*numbers, Texts.of(list(columns[11])), strands)


ROWS = [(0, 1, 1, 25, 3, 20, 0, 17, 1, 15, 17, "3M1I13M"), (4, 0, 0, 30, 0, 15, 2, 17, 0, 15, 15, "15M"),
        (4, 2, 1, 41, 10, 31, 0, 21, 2, 19, 22, "2=1X18=1D")]


def test_alignment_table_to_list_keeps_every_column_in_order():
    got = table(ROWS).to_list()
    assert got == [Alignment(r, p, "+-"[s], score, rs, re, ps, pe, cigar, nm, m, length)
                   for r, p, s, score, rs, re, ps, pe, nm, m, length, cigar in ROWS]
    assert all(type(a.read_index) is int and type(a.score) is int for a in got)
    assert len(table(ROWS)) == 3 and table([]).to_list() == [] and len(table([])) == 0


def test_screen_result_attributes_and_its_dense_table_computed_once():
    calls = []
    scores, capped = np.arange(12, dtype=np.int32).reshape(2, 3, 2), np.zeros((2, 3, 2), bool)

    def dense():
        calls.append(1)
        return scores, capped

    result = ScreenResult(np.array([0, 4]), table(ROWS), [20, 25, 30], ("+", "-"), ["a", "b", "c"], dense)
    assert result.threshold == [20, 25, 30] and result.strands == ("+", "-")
    assert result.pattern_names == ["a", "b", "c"] and result.indices.tolist() == [0, 4]
    assert repr(result) == "ScreenResult(2 passing reads, 3 alignments, threshold=[20, 25, 30], strands=('+', '-'))"
    assert calls == []  # nothing dense until asked for
    assert result.alignments == table(ROWS).to_list() and result.alignments is result.alignments
    assert result.capped is capped and result.scores is scores and calls == [1]


def test_screen_returns_its_threshold_and_strands():
    result = bpbc.screen(["TTTTACGTACGTTGCAACGTAGGTTTTT", "GGGGGGGGGGGG"], ["ACGTACGTTGCA"], threshold=20,
                         device="cpu", strand="forward")
    assert result.threshold == 20 and result.strands == ("+",) and result.indices.tolist() == [0]
    assert repr(result) == "ScreenResult(1 passing reads, 1 alignments, threshold=20, strands=('+',))"
    assert result.scores[:, 0, 0].tolist() == [24, 2]  # the whole pattern; one G (no GG in it)
