"""bpbc.patterns: the table of oriented patterns every engine reads, checked
against the IUPAC complement written out by hand (not bpbc's mask
arithmetic)."""

from __future__ import annotations

import numpy as np
import pytest

from bpbc.alphabet import encode_pattern
from bpbc.patterns import PatternTable

#: the IUPAC complement, letter by letter
COMPLEMENT = dict(zip("ACGTURYSWKMBDHVN", "TGCAAYRSWMKVHDBN"))

PATTERNS = ["ACGTTGCA", "GATTACAN", "RYKMSWBDHV", "T"]


def reverse_complement(text: str) -> str:
    return "".join(COMPLEMENT[base] for base in reversed(text.upper()))


@pytest.mark.parametrize("strands", [("+",), ("+", "-"), ("-",), ("-", "+")])
def test_table_holds_every_pattern_on_every_strand_in_order(strands):
    table = PatternTable.build([encode_pattern(p) for p in PATTERNS], strands)
    expected = [(p, s, text if sign == "+" else reverse_complement(text))
                for p, text in enumerate(PATTERNS) for s, sign in enumerate(strands)]
    assert len(table) == len(expected)
    assert table.pattern.tolist() == [p for p, _, _ in expected]
    assert table.strand.tolist() == [s for _, s, _ in expected]
    for k, (_, _, text) in enumerate(expected):
        assert table.oriented(k).tolist() == encode_pattern(text).tolist()
    lengths = [len(text) for _, _, text in expected]
    assert table.lengths.tolist() == lengths
    assert table.starts.tolist() == np.concatenate([[0], np.cumsum(lengths)]).tolist()
    assert table.masks.tolist() == encode_pattern("".join(text for _, _, text in expected)).tolist()
    # the engines' kernels take these types
    assert (table.masks.dtype, table.starts.dtype, table.pattern.dtype, table.strand.dtype) == (
        np.uint8, np.int64, np.int64, np.int64)


def test_of_numbers_the_patterns_in_order_on_strand_zero():
    oriented = [encode_pattern(p) for p in PATTERNS]
    table = PatternTable.of(oriented)
    assert table.pattern.tolist() == [0, 1, 2, 3] and table.strand.tolist() == [0, 0, 0, 0]
    assert table.pattern.dtype == table.strand.dtype == np.int64
    assert [table.oriented(k).tolist() for k in range(4)] == [m.tolist() for m in oriented]
    empty = PatternTable.of([])
    assert len(empty) == 0 and empty.masks.dtype == np.uint8 and empty.masks.size == 0
    assert empty.starts.tolist() == [0]
    given = PatternTable.of(oriented[:2], np.array([5, 7]), np.array([1, 0]))
    assert given.pattern.tolist() == [5, 7] and given.strand.tolist() == [1, 0]


def test_subset_keeps_each_oriented_patterns_pattern_and_strand():
    table = PatternTable.build([encode_pattern(p) for p in PATTERNS], ("+", "-"))
    for ks in ([5, 0, 3], [7], [], (1, 1)):
        part = table.subset(ks)
        assert len(part) == len(ks)
        assert part.pattern.tolist() == [table.pattern[k] for k in ks]
        assert part.strand.tolist() == [table.strand[k] for k in ks]
        assert [part.oriented(j).tolist() for j in range(len(ks))] == [table.oriented(k).tolist() for k in ks]
        assert part.pattern.dtype == part.strand.dtype == part.starts.dtype == np.int64
    assert table.subset(np.array([6], np.int32)).pattern.tolist() == [3]


def test_masks_given_as_lists_are_stored_as_uint8():
    """The engines read the masks as uint8, whatever the caller's form."""
    table = PatternTable.of([[1, 2, 4], [8, 15]])
    assert table.masks.dtype == np.uint8 and table.masks.tolist() == [1, 2, 4, 8, 15]
    assert table.starts.tolist() == [0, 3, 5] and table.lengths.tolist() == [3, 2]
    built = PatternTable.build([[1, 2, 4]], ("+", "-"))
    assert built.masks.dtype == np.uint8 and built.masks.tolist() == [1, 2, 4, 2, 4, 8]


def test_a_large_panel_gives_each_pattern_its_own_reverse_complement():
    """The reverse complements come from one lookup over the whole panel: each still its own."""
    rng = np.random.default_rng(5)
    letters = np.array(list("ACGTRYKMSWBDHVN"))
    texts = ["".join(rng.choice(letters, n)) for n in rng.integers(1, 40, 300)]
    table = PatternTable.build([encode_pattern(t) for t in texts], ("+", "-"))
    for p, text in enumerate(texts):
        assert table.oriented(2 * p).tolist() == encode_pattern(text).tolist()
        assert table.oriented(2 * p + 1).tolist() == encode_pattern(reverse_complement(text)).tolist()


def test_an_empty_panel_gives_an_empty_table():
    table = PatternTable.build([], ("+", "-"))
    assert len(table) == 0 and table.masks.size == 0 and table.starts.tolist() == [0]
