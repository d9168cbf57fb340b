"""Gotoh traceback: scores against the reference, CIGAR validity, the tie rule,
strands and batches."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from bpbc.alphabet import INVALID, encode_pattern, encode_reads
from bpbc.reference import sw_matrices, sw_score_codes
from bpbc.result import Alignment
from bpbc.scoring import Scoring
from tests.bpbc.alignments import LocalAlignment, align_codes, align_instances, cigar_score, parse_cigar
from tests.bpbc.conftest import (
    IUPAC_BASES,
    SCORINGS,
    mutate,
    parasail_sw_codes,
    pattern_texts,
    random_pattern,
    random_read,
    read_texts,
    related_pair,
    reverse_complement_masks,
    scoring_id,
    scorings,
)

NO_ALIGNMENT = LocalAlignment(0, 0, 0, 0, 0, "", 0, 0, 0)


def encode(read: str, pattern: str):
    codes, lengths = encode_reads([read])
    return codes[0, : lengths[0]], encode_pattern(pattern)


def reverse_complement_codes(codes):
    codes = np.asarray(codes, dtype=np.uint8)[::-1]
    return np.where(codes == INVALID, INVALID, 3 - codes).astype(np.uint8)


def is_match(code, mask) -> bool:
    return code != INVALID and (int(mask) >> int(code)) & 1 == 1


def rule_traceback(read, pattern, scoring: Scoring) -> LocalAlignment:
    """The documented tie rule, walked on the reference matrices in plain
    Python: end = first max-H cell in (read end, pattern end) order; in H
    prefer diagonal, then E (I), then F (D); in a gap state prefer closing the
    gap; stop where H is 0."""
    H, E, F = sw_matrices(read, pattern, scoring)
    open_cost = scoring.gap_open + scoring.gap_extend
    best = max(map(max, H))
    if best == 0:
        return NO_ALIGNMENT
    end_i, end_j = next((i, j) for i, row in enumerate(H) for j, h in enumerate(row) if h == best)
    i, j, state, ops = end_i, end_j, "H", []
    while True:
        if state == "H":
            if H[i][j] == 0:
                break
            s = scoring.match if is_match(read[i - 1], pattern[j - 1]) else -scoring.mismatch
            if H[i][j] == H[i - 1][j - 1] + s:
                ops.append("=" if s > 0 else "X")
                i, j = i - 1, j - 1
            elif H[i][j] == E[i][j]:
                state = "E"
            else:
                assert H[i][j] == F[i][j]
                state = "F"
        elif state == "E":
            ops.append("I")
            if E[i][j] == H[i - 1][j] - open_cost:
                state = "H"
            else:
                assert E[i][j] == E[i - 1][j] - scoring.gap_extend
            i -= 1
        else:
            ops.append("D")
            if F[i][j] == H[i][j - 1] - open_cost:
                state = "H"
            else:
                assert F[i][j] == F[i][j - 1] - scoring.gap_extend
            j -= 1
    ops.reverse()
    runs = []
    for op in ops:
        if runs and runs[-1][1] == op:
            runs[-1][0] += 1
        else:
            runs.append([1, op])
    cigar = "".join(f"{length}{op}" for length, op in runs)
    nm = sum(op in "XID" for op in ops)
    return LocalAlignment(best, i, end_i, j, end_j, cigar, nm, ops.count("="), len(ops))


def check_alignment(al, read, pattern, scoring: Scoring, eqx: bool):
    """Everything an alignment must satisfy on its own (``read``/``pattern``
    in the orientation the CIGAR reads them)."""
    n, m = len(read), len(pattern)
    if al.score == 0:
        assert tuple(al) == tuple(NO_ALIGNMENT)
        return
    assert 0 <= al.read_start < al.read_end <= n
    assert 0 <= al.pattern_start < al.pattern_end <= m
    runs = parse_cigar(al.cigar)
    assert all(a[1] != b[1] for a, b in zip(runs, runs[1:])), al.cigar  # proper run-length encoding
    assert set(op for _, op in runs) <= (set("=XID") if eqx else set("MID"))
    assert sum(k for k, op in runs if op in "M=XI") == al.read_end - al.read_start
    assert sum(k for k, op in runs if op in "M=XD") == al.pattern_end - al.pattern_start
    assert sum(k for k, _ in runs) == al.length
    segment_read = read[al.read_start : al.read_end]
    segment_pattern = pattern[al.pattern_start : al.pattern_end]
    assert cigar_score(al.cigar, segment_read, segment_pattern, scoring) == al.score
    # local alignments begin and end with a matching base
    assert is_match(segment_read[0], segment_pattern[0])
    assert is_match(segment_read[-1], segment_pattern[-1])
    # recount matches and edits column by column
    matched = edits = i = j = 0
    for length, op in runs:
        if op in "M=X":
            for _ in range(length):
                if is_match(segment_read[i], segment_pattern[j]):
                    matched += 1
                else:
                    edits += 1
                i, j = i + 1, j + 1
        else:
            edits += length
            i, j = (i + length, j) if op == "I" else (i, j + length)
    assert (al.matches, al.nm) == (matched, edits)


def check_eqx_consistent(plain, eqx):
    """The M CIGAR is the =/X CIGAR with = and X merged; other fields agree."""
    assert plain._replace(cigar="") == eqx._replace(cigar="")
    merged = []
    for length, op in parse_cigar(eqx.cigar):
        op = "M" if op in "=X" else op
        if merged and merged[-1][1] == op:
            merged[-1][0] += length
        else:
            merged.append([length, op])
    assert plain.cigar == "".join(f"{length}{op}" for length, op in merged)


def low_entropy(rng, length):
    """Sequences full of ties: two letters or short repeats."""
    if rng.random() < 0.5:
        return "".join(rng.choice(list("AC"), size=length))
    unit = "".join(rng.choice(list("ACGT"), size=int(rng.integers(1, 4))))
    return (unit * (length // len(unit) + 1))[:length]


def mixed_pairs(seed: int, count: int, max_length: int):
    rng = np.random.default_rng(seed)
    for k in range(count):
        n = int(rng.integers(0, max_length + 1))
        m = int(rng.integers(1, max_length + 1))
        kind = k % 4
        if kind == 0:
            yield related_pair(rng, n, m, rate=0.2, iupac_rate=0.1, n_rate=0.03)
        elif kind == 1:
            yield random_read(rng, n, n_rate=0.1, lower_rate=0.1), random_pattern(rng, m, iupac_rate=0.2)
        elif kind == 2:
            read = low_entropy(rng, n)
            yield read, (read[: m] if rng.random() < 0.3 and read else low_entropy(rng, m))
        else:
            pattern = low_entropy(rng, m)
            yield random_read(rng, n // 3) + pattern + random_read(rng, n // 3), pattern


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_equals_rule_traceback_on_reference_matrices(scoring):
    """Score = reference score, and coordinates and CIGAR are exactly what the
    documented tie rule gives on the reference matrices."""
    failures = []
    for read_text, pattern_text in mixed_pairs(10 + scoring.match + 10 * scoring.gap_open, 300, 45):
        read, pattern = encode(read_text, pattern_text)
        expected = rule_traceback(read, pattern, scoring)
        got = align_codes(read, pattern, scoring, eqx=True)
        if got != expected:
            failures.append((read_text, pattern_text, got, expected))
            continue
        check_alignment(got, read, pattern, scoring, eqx=True)
        check_eqx_consistent(align_codes(read, pattern, scoring), got)
    assert not failures, f"{len(failures)} differ, first: {failures[:3]}"


def test_long_pairs_score_and_validity():
    failures = []
    rng = np.random.default_rng(20)
    for k in range(80):
        scoring = SCORINGS[k % len(SCORINGS)]
        n = int(rng.integers(100, 301))
        m = int(rng.integers(n, 320)) if k % 5 == 0 else int(rng.integers(20, 250))
        read, pattern = encode(*related_pair(rng, n, m, rate=0.15, iupac_rate=0.05, n_rate=0.01))
        for eqx in (False, True):
            al = align_codes(read, pattern, scoring, eqx=eqx)
            check_alignment(al, read, pattern, scoring, eqx)
        if al.score != sw_score_codes(read, pattern, scoring):
            failures.append((k, al))
    assert not failures


@settings(max_examples=200, deadline=None)
@given(read_text=read_texts(max_size=60), pattern_text=pattern_texts(max_size=40), scoring=scorings())
def test_hypothesis_rule_traceback(read_text, pattern_text, scoring):
    read, pattern = encode(read_text, pattern_text)
    got = align_codes(read, pattern, scoring, eqx=True)
    assert got == rule_traceback(read, pattern, scoring)
    check_alignment(got, read, pattern, scoring, eqx=True)


def test_tie_rule_hand_made():
    s = Scoring()
    # two equal hits: the smaller read end wins
    read, pattern = encode("GATTACATTTTGATTACA", "GATTACA")
    assert align_codes(read, pattern, s, eqx=True) == LocalAlignment(14, 0, 7, 0, 7, "7=", 0, 7, 7)
    # same read end, two pattern ends: the smaller pattern end wins
    read, pattern = encode("AC", "ACGAC")
    assert align_codes(read, pattern, s) == LocalAlignment(4, 0, 2, 0, 2, "2M", 0, 2, 2)
    # a base deleted from a homopolymer: diagonal first from the end puts the gap leftmost
    cheap_gaps = Scoring(5, 4, 1, 1)
    read, pattern = encode("GAAAC", "GAAAAC")
    assert align_codes(read, pattern, cheap_gaps, eqx=True) == LocalAlignment(23, 0, 5, 0, 6, "1=1D4=", 1, 5, 6)
    read, pattern = encode("GAAAAC", "GAAAC")
    assert align_codes(read, pattern, cheap_gaps, eqx=True) == LocalAlignment(23, 0, 6, 0, 5, "1=1I4=", 1, 5, 6)
    # H = E = F at the cell after CCCC (mismatch too dear): walking back, E (I)
    # is taken before F (D), so the forward CIGAR shows the D first
    dear_mismatch = Scoring(2, 10, 1, 1)
    read, pattern = encode("CCCCAGGGG", "CCCCTGGGG")
    assert align_codes(read, pattern, dear_mismatch, eqx=True) == LocalAlignment(
        12, 0, 9, 0, 9, "4=1D1I4=", 2, 8, 10
    )
    # in a gap state, closing the gap beats extending it: 3=1I6= (9 matches,
    # one 1-base gap: 27 - 5) ties with 4=4I6= (10 matches, 30 - 8)
    s = Scoring(3, 2, 4, 1)
    read, pattern = encode("AACCACCACACACCA", "AACCCACACC")
    assert align_codes(read, pattern, s, eqx=True) == LocalAlignment(22, 4, 14, 1, 10, "3=1I6=", 1, 9, 10)
    # the same for D: 2=1D5= (21 - 5) ties with 3=4D5= (24 - 8)
    read, pattern = encode("CCAAACCC", "ACAACCAACACAACCCC")
    assert align_codes(read, pattern, s, eqx=True) == LocalAlignment(16, 1, 8, 8, 16, "2=1D5=", 1, 7, 8)


def test_zero_score_returns_no_alignment():
    for scoring in SCORINGS:
        for read_text, pattern_text in [("NNNNNN", "ACGTN"), ("", "ACGT"), ("AAAA", "CCCBBB"), ("RYKM", "N")]:
            read, pattern = encode(read_text, pattern_text)
            assert align_codes(read, pattern, scoring) == NO_ALIGNMENT
            assert align_codes(read, pattern, scoring, eqx=True) == NO_ALIGNMENT
    codes, lengths = encode_reads(["NNNN", "", "TTTT"])
    for strand in "+-":
        for al in align_instances(codes, lengths, np.arange(3), encode_pattern("CCCC"), 7, strand, Scoring()):
            # '-' aligns against GGGG: still nothing matches
            assert (al.score, al.read_start, al.read_end, al.pattern_start, al.pattern_end) == (0, 0, 0, 0, 0)
            assert (al.cigar, al.nm, al.matches, al.length, al.pattern_index, al.strand) == ("", 0, 0, 0, 7, strand)


def _batch(seed, count, scoring, max_pattern=200):
    rng = np.random.default_rng(seed)
    pattern_text = random_pattern(rng, int(rng.integers(30, max_pattern)), iupac_rate=0.05)
    reads = []
    for k in range(count):
        n = int(rng.integers(0, 300))
        if k % 2:
            read = related_from(rng, pattern_text, n)
        else:
            read = random_read(rng, n, n_rate=0.05)
        reads.append(read)
    codes, lengths = encode_reads(reads)
    return codes, lengths, encode_pattern(pattern_text)


def related_from(rng, pattern_text, n):
    """A read holding a mutated copy of ``pattern_text`` (either strand)."""
    concrete = "".join(str(rng.choice(list(IUPAC_BASES[c.upper()]))) for c in pattern_text)
    insert = mutate(rng, concrete, 0.1)
    if rng.random() < 0.5:
        insert = "".join({"A": "T", "C": "G", "G": "C", "T": "A"}[b] for b in reversed(insert))
    flank = max(0, n - len(insert))
    left = int(rng.integers(0, flank + 1))
    return random_read(rng, left) + insert + random_read(rng, flank - left)


@pytest.mark.parametrize("scoring", SCORINGS[:3], ids=scoring_id)
def test_instances_plus_strand_equal_single_alignments(scoring):
    codes, lengths, pattern = _batch(30 + scoring.match, 120, scoring)
    rows = np.random.default_rng(31).permutation(np.concatenate([np.arange(len(lengths)), [0, 5, 5]]))
    alignments = align_instances(codes, lengths, rows, pattern, 3, "+", scoring, eqx=True)
    assert len(alignments) == len(rows)
    for row, al in zip(rows, alignments):
        assert isinstance(al, Alignment)
        assert (al.read_index, al.pattern_index, al.strand) == (row, 3, "+")
        single = align_codes(codes[row, : lengths[row]], pattern, scoring, eqx=True)
        assert LocalAlignment(al.score, al.read_start, al.read_end, al.pattern_start, al.pattern_end,
                              al.cigar, al.nm, al.matches, al.length) == single


@pytest.mark.parametrize("scoring", SCORINGS[:3], ids=scoring_id)
def test_minus_strand(scoring):
    codes, lengths, pattern = _batch(40 + scoring.match, 100, scoring, max_pattern=120)
    m = len(pattern)
    rc_pattern = reverse_complement_masks(pattern)
    rows = np.arange(len(lengths))
    minus = align_instances(codes, lengths, rows, pattern, 0, "-", scoring, eqx=True)
    unique_checked = 0
    for row, al in zip(rows, minus):
        read = codes[row, : lengths[row]]
        n = len(read)
        # definition: the '+' alignment against the reverse-complement pattern, mapped back
        direct = align_codes(read, rc_pattern, scoring, eqx=True)
        assert al.score == direct.score == parasail_sw_codes(read, rc_pattern, scoring)
        assert (al.read_start, al.read_end) == (direct.read_start, direct.read_end)
        if al.score:
            assert (al.pattern_start, al.pattern_end) == (m - direct.pattern_end, m - direct.pattern_start)
            assert parse_cigar(al.cigar) == parse_cigar(direct.cigar)[::-1]
        # the reported CIGAR aligns the reverse-complemented read with the forward pattern
        rc_read = reverse_complement_codes(read)
        in_rc_frame = LocalAlignment(al.score, n - al.read_end if al.score else 0, n - al.read_start if al.score else 0,
                                     al.pattern_start, al.pattern_end, al.cigar, al.nm, al.matches, al.length)
        check_alignment(in_rc_frame, rc_read, pattern, scoring, eqx=True)
        # the '+' alignment of the reverse-complemented read: same score; same
        # spans whenever the optimal alignment's ends are unique
        plus_rc = align_codes(rc_read, pattern, scoring, eqx=True)
        assert plus_rc.score == al.score
        if al.score and n * m <= 12000 and unique_ends(rc_read, pattern, scoring):
            unique_checked += 1
            assert (plus_rc.read_start, plus_rc.read_end) == (n - al.read_end, n - al.read_start)
            assert (plus_rc.pattern_start, plus_rc.pattern_end) == (al.pattern_start, al.pattern_end)
    assert unique_checked >= 10  # the span comparison actually ran


def unique_ends(read, pattern, scoring):
    """Whether all optimal alignments share both ends: max H is reached in a
    single cell, for the sequences and for both reversed."""
    for r, p in ((read, pattern), (read[::-1], pattern[::-1])):
        H, _, _ = sw_matrices(r, p, scoring)
        best = max(map(max, H))
        if sum(row.count(best) for row in H) != 1:
            return False
    return True


def test_instances_large_batch_against_parasail():
    """A batch big enough to run on all threads; scores against parasail and
    each alignment valid."""
    scoring = Scoring()
    codes, lengths, pattern = _batch(50, 600, scoring)
    rows = np.arange(len(lengths))
    for strand, oriented in (("+", pattern), ("-", reverse_complement_masks(pattern))):
        alignments = align_instances(codes, lengths, rows, pattern, 1, strand, scoring)
        for row, al in zip(rows, alignments):
            read = codes[row, : lengths[row]]
            assert al.score == parasail_sw_codes(read, oriented, scoring)
            if strand == "+":
                check_alignment(al, read, pattern, scoring, eqx=False)


def test_rejects_bad_input():
    codes, lengths = encode_reads(["ACGT"])
    with pytest.raises(ValueError):
        align_instances(codes, lengths, [0], encode_pattern("ACGT"), 0, "x", Scoring())
    with pytest.raises(ValueError):
        cigar_score("3M", [0, 1, 2, 3], encode_pattern("ACGT"))  # covers too little
    with pytest.raises(ValueError):
        cigar_score("4=", [0, 1, 2, 3], encode_pattern("ACGA"))  # '=' on a mismatch
    with pytest.raises(ValueError):
        parse_cigar("4M2")
    read, pattern = encode("ACGTTACGT", "ACGTACGT")
    assert cigar_score("4M1I4M", read, pattern, Scoring()) == 16 - 7
    assert cigar_score("4M2D", [0, 1, 2, 3], encode_pattern("ACGTAA"), Scoring()) == 8 - 9


def test_no_instances_give_an_empty_table_like_a_batch_of_one():
    """No hits (the common chunk): an empty table of the same columns and
    types as a real batch, without the kernels being called."""
    from bpbc.patterns import PatternTable
    from bpbc.traceback import align_hits

    codes, lengths = encode_reads(["ACGTTACGTA", "GGGG"])
    table = PatternTable.build([encode_pattern("ACGTACGT")], ("+", "-"))
    empty = align_hits(codes, lengths, np.zeros(0, np.int64), np.zeros(0, np.int64), table, ("+", "-"))
    one = align_hits(codes, lengths, np.array([0]), np.array([1]), table, ("+", "-"))
    assert len(empty) == 0 and len(one) == 1 and empty.strands == one.strands
    for name in ("read_index", "pattern_index", "strand", "score", "read_start", "read_end", "pattern_start",
                 "pattern_end", "nm", "matches", "length"):
        column, reference = getattr(empty, name), getattr(one, name)
        assert column.shape == (0,) and column.dtype == reference.dtype, name
    assert empty.cigars.strings() == [] and empty.to_list() == []


def _run_both_widths(codes, lengths, rows, table, ks, scoring, eqx=False):
    from bpbc.traceback import _run_batch

    reverse = np.zeros(len(rows), dtype=bool)
    return [_run_batch(codes, lengths, rows, table, ks, scoring, eqx, reverse, cell_bits=bits) for bits in (16, 32)]


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_int16_and_int32_cells_give_the_same_alignments(scoring):
    """The forward pass on 32 int16 lanes (where the values fit) and on 16
    int32 lanes: the same result table and CIGARs, bit for bit, over many
    patterns of both strands, blocks of any fill, IUPAC codes and Ns."""
    from bpbc.patterns import PatternTable

    rng = np.random.default_rng(41)
    pattern_texts = [random_pattern(rng, int(rng.integers(5, 90)), iupac_rate=0.05) for _ in range(12)]
    reads = [related_from(rng, pattern_texts[k % 12], int(rng.integers(0, 250))) if k % 3
             else random_read(rng, int(rng.integers(0, 250)), n_rate=0.05) for k in range(500)]
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(p) for p in pattern_texts], ("+", "-"))
    rows = rng.integers(0, len(reads), 1500)
    # half the instances the pattern a read was made from (strand '+'), half any
    ks = np.where(np.arange(1500) % 2, 2 * (rows % 12), rng.integers(0, len(table), 1500))
    (narrow, narrow_cigars), (wide, wide_cigars) = _run_both_widths(codes, lengths, rows, table, ks, scoring, True)
    assert np.array_equal(narrow, wide)
    assert narrow_cigars.strings() == wide_cigars.strings()
    assert (narrow[:, 0] >= 15 * scoring.match).sum() > 100  # many real alignments among them


@pytest.mark.parametrize("eqx", [False, True])
def test_cigars_on_one_thread_and_on_all_are_the_same(eqx, monkeypatch):
    """The CIGARs of a batch written on the calling thread (fewer instances
    than _CIGARS_PARALLEL_FROM) and on all threads: the same bytes, forward
    and reversed."""
    from bpbc import traceback
    from bpbc.patterns import PatternTable

    rng = np.random.default_rng(43)
    pattern_texts = [random_pattern(rng, int(rng.integers(5, 90))) for _ in range(4)]
    reads = [related_from(rng, pattern_texts[k % 4], int(rng.integers(0, 200))) for k in range(300)]
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(p) for p in pattern_texts], ("+", "-"))
    rows = rng.integers(0, len(reads), 700)
    ks = 2 * (rows % 4) + rng.integers(0, 2, 700)
    reverse = rng.integers(0, 2, 700).astype(bool)
    found = []
    for parallel_from in (0, 1 << 30):
        monkeypatch.setattr(traceback, "_CIGARS_PARALLEL_FROM", parallel_from)
        found.append(traceback._run_batch(codes, lengths, rows, table, ks, Scoring(), eqx, reverse))
    (parallel, parallel_cigars), (serial, serial_cigars) = found
    assert np.array_equal(parallel, serial)
    assert parallel_cigars.strings() == serial_cigars.strings()
    assert sum(len(cigar) > 3 for cigar in serial_cigars.strings()) > 200  # real alignments among them


def test_int16_cells_up_to_their_largest_score_and_int32_beyond():
    """int16 cells where the best score can reach 32767 and no further
    (match 1000, 32 matching bases: 32000 exactly, gaps and mismatches of
    1000 each), int32 cells past that; both exact (against the reference)."""
    from bpbc.patterns import PatternTable
    from bpbc.traceback import _fits_int16, _run_batch

    scoring = Scoring(1000, 1000, 1000, 1000)
    rng = np.random.default_rng(43)
    for length, fits in ((32, True), (33, False)):
        pattern_text = random_read(rng, length)
        reads = [pattern_text, pattern_text[:10] + "A" + pattern_text[10:], random_read(rng, 40),
                 pattern_text[:length - 5] + "T" + pattern_text[length - 4:]]
        codes, lengths = encode_reads(reads)
        table = PatternTable.build([encode_pattern(pattern_text)], ("+",))
        assert _fits_int16(codes.shape[1], length, scoring) == fits
        rows = np.arange(len(reads))
        auto, _ = _run_batch(codes, lengths, rows, table, np.zeros(len(reads), np.int64), scoring, False,
                             np.zeros(len(reads), bool))
        expected = [sw_score_codes(codes[r, :lengths[r]], table.oriented(0), scoring) for r in rows]
        assert auto[:, 0].tolist() == expected and expected[0] == 1000 * length
    assert _fits_int16(150, 24, Scoring()) and not _fits_int16(40_000, 24, Scoring())


def test_int16_cells_only_where_a_blocks_pointers_stay_small(monkeypatch):
    """Twice the lanes are twice the pointer bytes a block: past
    _INT16_POINTERS (long reads against long patterns) the int32 blocks run."""
    from bpbc import traceback as tb
    from bpbc.patterns import PatternTable

    codes, lengths = encode_reads(["ACGTTGCAACGTAGGT" * 4] * 40)
    table = PatternTable.build([encode_pattern("ACGTTGCAAC")], ("+",))
    pointer_bytes = (codes.shape[1] + 1) * (10 + 1) * tb.LANES16

    def refused(*args):
        raise AssertionError("int16 kernel called")

    for name in ("_align_batch_parallel16", "_align_batch_serial16"):
        monkeypatch.setattr(tb, name, refused)
    rows = np.arange(40)
    for limit, int16 in ((pointer_bytes, True), (pointer_bytes - 1, False)):
        monkeypatch.setattr(tb, "_INT16_POINTERS", limit)
        if int16:
            with pytest.raises(AssertionError, match="int16 kernel called"):
                tb.align_hits(codes, lengths, rows, np.zeros(40, np.int64), table, ("+",))
        else:
            found = tb.align_hits(codes, lengths, rows, np.zeros(40, np.int64), table, ("+",))
            assert (found.score == 20).all()


def _three_widths(codes, lengths, rows, table, ks, scoring, reverse=None):
    """_run_batch on int8 (where it fits: else the cells that hold the values), int16 and int32 cells."""
    from bpbc.traceback import _run_batch

    reverse = np.zeros(len(rows), dtype=bool) if reverse is None else reverse
    return [_run_batch(codes, lengths, rows, table, ks, scoring, True, reverse, cell_bits=bits) for bits in (8, 16, 32)]


def _int8_kernel_calls(monkeypatch):
    """A list that counts the instances each call of the int8 kernels aligns."""
    from bpbc import traceback as tb

    calls = []
    for name in ("_align_batch_parallel8", "_align_batch_serial8"):
        def counted(*args, kernel=getattr(tb, name)):
            calls.append(len(args[2]))
            return kernel(*args)

        monkeypatch.setattr(tb, name, counted)
    return calls


@pytest.mark.parametrize("scoring", [Scoring(), Scoring(1, 1, 1, 1), Scoring(3, 2, 4, 1)], ids=scoring_id)
def test_int8_int16_and_int32_cells_give_the_same_alignments(scoring, monkeypatch):
    """Short patterns (5-63 bases, IUPAC codes) against reads of 0-200 bases
    (Ns), both strands, more instances than a block of 64 lanes and blocks
    of any fill: the int8 pass gives the int16 and int32 passes' result table
    and CIGARs bit for bit, and it is the one that ran (where the values fit)."""
    from bpbc.patterns import PatternTable
    from bpbc.traceback import _fits_int8

    rng = np.random.default_rng(53)
    longest = 127 // scoring.match if scoring.match > 1 else 63
    pattern_texts = [random_pattern(rng, int(rng.integers(5, min(64, longest + 1))), iupac_rate=0.05)
                     for _ in range(6)]
    reads = [related_from(rng, pattern_texts[k % 6], int(rng.integers(0, 201))) if k % 3
             else random_read(rng, int(rng.integers(0, 201)), n_rate=0.05) for k in range(300)]
    codes, lengths = encode_reads(reads)
    longest = max(len(p) for p in pattern_texts)
    assert _fits_int8(codes.shape[1], longest, scoring)
    table = PatternTable.build([encode_pattern(p) for p in pattern_texts], ("+", "-"))
    rows = rng.integers(0, len(reads), 700)
    ks = np.where(np.arange(700) % 2, 2 * (rows % 6) + rng.integers(0, 2, 700), rng.integers(0, len(table), 700))
    calls = _int8_kernel_calls(monkeypatch)
    (narrow, narrow_cigars), (middle, middle_cigars), (wide, wide_cigars) = _three_widths(
        codes, lengths, rows, table, ks, scoring, reverse=np.arange(700) % 3 == 0)
    assert len(calls) == 1 and calls[0] > 600  # all but reads under a quarter of their pattern (windowed)
    assert np.array_equal(narrow, middle) and np.array_equal(narrow, wide)
    assert narrow_cigars.strings() == middle_cigars.strings() == wide_cigars.strings()
    assert (narrow[:, 0] >= 10 * scoring.match).sum() > 100  # many real alignments among them


@pytest.mark.parametrize("match, length, fits", [(1, 127, True), (1, 128, False), (2, 63, True), (2, 64, False)])
def test_int8_cells_up_to_score_and_column_127(match, length, fits, monkeypatch):
    """int8 cells where the best score and the columns reach 127 and no
    further: a pattern matched in full at the end of a read of more than 255
    bases (its best row past what int8 and uint8 hold: the rows are kept
    apart), alone and beside other reads. Exact against the rule's traceback
    on the reference matrices; the int8 kernel runs iff the values fit."""
    from bpbc.patterns import PatternTable
    from bpbc.traceback import _fits_int8, _run_batch

    scoring = Scoring(match, 3, 5, 2)
    rng = np.random.default_rng(59 + length)
    pattern_text = random_read(rng, length)
    reads = [random_read(rng, 300) + pattern_text, random_read(rng, 200) + pattern_text[:40] + "A" +
             pattern_text[40:] + random_read(rng, 30), random_read(rng, 330, n_rate=0.1),
             pattern_text[:length - 5] + "T" + pattern_text[length - 4:] + random_read(rng, 170)]
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(pattern_text)], ("+",))
    assert _fits_int8(codes.shape[1], length, scoring) == fits
    calls = _int8_kernel_calls(monkeypatch)
    rows = np.arange(len(reads))
    found, cigars = _run_batch(codes, lengths, rows, table, np.zeros(len(reads), np.int64), scoring, True,
                               np.zeros(len(reads), bool), cell_bits=8)
    assert calls == ([len(reads)] if fits else [])
    assert found[0, 0] == match * length and found[0, 2] == 300 + length  # the best row, past 255
    for r in rows:
        read = codes[r, :lengths[r]]
        expected = rule_traceback(read, table.oriented(0), scoring)
        assert (found[r, 0], found[r, 1], found[r, 2], found[r, 3], found[r, 4], cigars.strings()[r]) == \
            (expected.score, expected.read_start, expected.read_end, expected.pattern_start, expected.pattern_end,
             expected.cigar), r


@pytest.mark.parametrize("scoring, fits", [(Scoring(1, 32, 30, 2), True), (Scoring(1, 32, 1, 31), True),
                                           (Scoring(1, 33, 30, 2), False), (Scoring(1, 1, 31, 2), False)],
                         ids=["mismatch32", "extend31", "mismatch33", "open_extend33"])
def test_int8_cells_up_to_their_largest_costs(scoring, fits, monkeypatch):
    """Mismatch and gap costs at int8's bound (32, _NEG8 = -64 below every
    E and F, and -64 - extend still an int8) and past it: alignments with
    gaps and mismatches, exact against the rule's traceback, on the int8
    kernel iff the costs fit."""
    from bpbc.patterns import PatternTable
    from bpbc.traceback import _fits_int8, _run_batch

    rng = np.random.default_rng(61)
    pattern_text = random_read(rng, 100)
    other = {"A": "C", "C": "G", "G": "T", "T": "A"}[pattern_text[50]]
    reads = [random_read(rng, 20) + pattern_text[:50] + other + pattern_text[50:],  # one inserted base
             pattern_text[:50] + pattern_text[51:] + random_read(rng, 40),  # one deleted base
             random_read(rng, 90, n_rate=0.1), pattern_text[:50] + other + pattern_text[51:],  # one substitution
             pattern_text[:25] + "T" * 25 + pattern_text[25:]]
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(pattern_text)], ("+",))
    assert _fits_int8(codes.shape[1], 100, scoring) == fits
    calls = _int8_kernel_calls(monkeypatch)
    rows = np.arange(len(reads))
    found, cigars = _run_batch(codes, lengths, rows, table, np.zeros(len(reads), np.int64), scoring, True,
                               np.zeros(len(reads), bool), cell_bits=8)
    assert calls == ([len(reads)] if fits else [])
    for r in rows:
        expected = rule_traceback(codes[r, :lengths[r]], table.oriented(0), scoring)
        assert (found[r, 0], found[r, 1], found[r, 2], found[r, 3], found[r, 4], cigars.strings()[r]) == \
            (expected.score, expected.read_start, expected.read_end, expected.pattern_start, expected.pattern_end,
             expected.cigar), r
    assert "1I" in cigars.strings()[0] and "1D" in cigars.strings()[1] and "1X" in cigars.strings()[3]


def test_int8_blocks_past_the_pointer_budget_take_int16_segments(monkeypatch):
    """int8 blocks keep H of every cell for the walk, all rows at once: a
    block whose bytes pass the budget takes int16 cells in segments of rows
    instead, even where int8 cells are asked for, with the same alignments
    (best cells in the first, a middle and the last segment)."""
    from bpbc import traceback as tb
    from bpbc.patterns import PatternTable

    rng = np.random.default_rng(67)
    pattern_text = random_read(rng, 33)
    reads = [random_read(rng, left) + pattern_text + random_read(rng, 260 - left) for left in range(0, 260, 4)]
    reads += [random_read(rng, 293, n_rate=0.05) for _ in range(10)]
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(pattern_text)], ("+",))
    rows = np.arange(len(reads))
    ks = np.zeros(len(reads), np.int64)
    whole = tb._run_batch(codes, lengths, rows, table, ks, Scoring(), True, np.zeros(len(reads), bool), cell_bits=8)
    monkeypatch.setattr(tb, "POINTER_BUDGET", 40 * 34 * tb.LANES8)  # 294 rows: segments of sqrt(2 x 293) = 24
    calls = _int8_kernel_calls(monkeypatch)
    segmented = tb._run_batch(codes, lengths, rows, table, ks, Scoring(), True, np.zeros(len(reads), bool),
                              cell_bits=8)
    assert calls == []
    assert np.array_equal(whole[0], segmented[0]) and whole[1].strings() == segmented[1].strings()
    assert whole[0][:65, 0].min() == 66 and sorted(set(whole[0][:65, 2].tolist())) == list(range(33, 290, 4))


def test_alignments_with_long_deletions_fit_their_ops():
    """The ops of a hit are sized by the read (its bases, and the deletions
    its matches can pay for), not the longest pattern: an alignment with a
    deletion as long as the score allows, against a pattern much longer than
    the read, keeps its exact CIGAR (against the rule's traceback)."""
    from bpbc.traceback import _most_ops

    scoring = Scoring(10, 30, 20, 1)
    rng = np.random.default_rng(47)
    left, right = random_read(rng, 20), random_read(rng, 20)
    gap = random_read(rng, 150)  # 20M 150D 20M: 400 - 170 = 230 > 200, the best alignment
    pattern_text = random_read(rng, 300) + left + gap + right + random_read(rng, 300)
    read, pattern = encode(left + right, pattern_text)
    al = align_codes(read, pattern, scoring, eqx=True)
    assert al.cigar == "20=150D20=" and al.score == 230
    assert al == rule_traceback(read, pattern, scoring)
    assert _most_ops(40, len(pattern), scoring) == 40 + 400 >= len("M" * 40 + "D" * 150)
    assert _most_ops(150, 10_000, Scoring()) == 300


def _long_pattern_case(rng, count, read_count):
    """Patterns many times the reads' length (some of them tandem repeats,
    whose equal-scoring ends and paths test the tie rule), IUPAC codes and Ns,
    and reads holding mutated pieces of them (either strand), near their
    ends too, beside random reads."""
    patterns = []
    for k in range(count):
        length = int(rng.integers(300, 1500))
        if k % 3 == 0:
            unit = random_read(rng, int(rng.integers(2, 9)))
            patterns.append((unit * (length // len(unit) + 1))[:length])
        else:
            patterns.append(random_pattern(rng, length, iupac_rate=0.02))
    reads, ks = [], []
    for r in range(read_count):
        k = int(rng.integers(0, count))
        pattern = patterns[k]
        size = int(rng.integers(10, 70))
        at = int(rng.choice([0, len(pattern) - size, int(rng.integers(0, len(pattern) - size))]))
        piece = mutate(rng, "".join(str(rng.choice(list(IUPAC_BASES[c.upper()]))) for c in pattern[at:at + size]),
                       0.15)
        read = random_read(rng, int(rng.integers(0, 20)), n_rate=0.05) + piece + random_read(rng, int(rng.integers(0, 20)))
        if r % 7 == 0:
            read = random_read(rng, int(rng.integers(0, 90)), n_rate=0.05)
        minus = r % 2
        reads.append(reverse_complement_text(read) if minus else read)
        ks.append(2 * k + minus if r % 5 else int(rng.integers(0, 2 * count)))
    return patterns, reads, np.array(ks)


def reverse_complement_text(text):
    return text[::-1].translate(str.maketrans("ACGTN", "TGCAN"))


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_windows_after_the_score_pass_give_the_whole_patterns_alignments(scoring, monkeypatch):
    """Against patterns many times the read's length the score pass finds
    the end cells and the pointer pass covers only a window of columns: the
    result table and CIGARs are those of the pointer pass over the whole
    pattern, bit for bit (ties included: tandem repeats), on int16 and int32
    cells, and the rule's traceback on the reference matrices for some."""
    from bpbc import traceback as tb
    from bpbc.patterns import PatternTable

    rng = np.random.default_rng(53)
    patterns, reads, ks = _long_pattern_case(rng, 9, 400)
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(p) for p in patterns], ("+", "-"))
    rows = np.arange(len(reads))
    assert (table.lengths[ks] > tb._WINDOW_FROM * np.maximum(lengths[rows], 1)).mean() > 0.9
    windowed = _run_both_widths(codes, lengths, rows, table, ks, scoring, True)
    monkeypatch.setattr(tb, "_WINDOW_FROM", float("inf"))
    whole = _run_both_widths(codes, lengths, rows, table, ks, scoring, True)
    for (got, got_cigars), (expected, expected_cigars) in zip(windowed, whole):
        assert np.array_equal(got, expected)
        assert got_cigars.strings() == expected_cigars.strings()
    assert (whole[0][0][:, 0] >= 15 * scoring.match).sum() > 150
    monkeypatch.undo()
    for r in range(0, 400, 37):
        read, pattern = codes[r, :lengths[r]], table.oriented(ks[r])
        assert align_codes(read, pattern, scoring, eqx=True) == rule_traceback(read, pattern, scoring)


def test_box_holds_the_widest_alignment_of_a_score():
    """A read whose alignment holds a long deletion (20M 150D 20M, score 230
    with match 10, gap 20 + 1 a base) against a pattern 40 times the read's
    length: the box from its end cell is the alignment's 40 rows and 190
    columns, and it is aligned as by the whole pattern's pass."""
    from bpbc import traceback as tb
    from bpbc.patterns import PatternTable

    scoring = Scoring(10, 30, 20, 1)
    rng = np.random.default_rng(59)
    left, right, gap = random_read(rng, 20), random_read(rng, 20), random_read(rng, 150)
    # the deleted bases neither go on matching the read's left half nor start its right one
    other = {"A": "C", "C": "G", "G": "T", "T": "A"}
    gap = other[right[0]] + gap[1:-1] + other[left[-1]]
    pattern_text = random_read(rng, 700) + left + gap + right + random_read(rng, 700)
    read, pattern = encode(left + right, pattern_text)
    al = align_codes(read, pattern, scoring, eqx=True)
    assert al.cigar == "20=150D20=" and al.score == 230 and al == rule_traceback(read, pattern, scoring)
    codes, lengths = encode_reads([left + right])
    table = PatternTable.build([encode_pattern(pattern_text)], ("+",))
    box = tb.start_boxes(codes, lengths, np.array([0]), table, np.array([0]), [230], [al.read_end], [al.pattern_end],
                         scoring)
    assert box.tolist() == [[40, 190]]


def reverse_anchored_box(read, pattern, scoring: Scoring, score: int, end: int, column: int) -> tuple[int, int]:
    """The most rows and columns up to the end cell (end, column) spanned by
    an alignment of ``score`` that ends there: Gotoh's recurrences run
    backwards from the end cell in plain Python, over every cell, no bound."""
    neg = -(1 << 40)
    open_cost = scoring.gap_open + scoring.gap_extend
    h = [[neg] * (column + 1) for _ in range(end + 1)]
    e = [[neg] * (column + 1) for _ in range(end + 1)]
    f = [[neg] * (column + 1) for _ in range(end + 1)]
    h[0][0] = 0
    rows = columns = 0
    for r in range(1, end + 1):
        for c in range(1, column + 1):
            s = scoring.match if is_match(read[end - r], pattern[column - c]) else -scoring.mismatch
            e[r][c] = max(e[r - 1][c] - scoring.gap_extend, h[r - 1][c] - open_cost)
            f[r][c] = max(f[r][c - 1] - scoring.gap_extend, h[r][c - 1] - open_cost)
            h[r][c] = max(h[r - 1][c - 1] + s, e[r][c], f[r][c])
            assert h[r][c] <= score
            if h[r][c] == score:
                rows, columns = max(rows, r), max(columns, c)
    return rows, columns


def gapped_pairs(seed: int, count: int):
    """Patterns and reads holding a copy of them with gaps: an exact copy
    but for one gap (nothing before it to make up for a wrong bound), or a
    copy with many (deletions, insertions, substitutions), in random or
    two-letter or repeated text (ties), N and IUPAC codes in some."""
    rng = np.random.default_rng(seed)
    for k in range(count):
        n = int(rng.integers(4, 70))
        pattern = low_entropy(rng, n) if k % 3 == 0 else random_pattern(rng, n, iupac_rate=0.05 * (k % 2))
        concrete = "".join(str(rng.choice(list(IUPAC_BASES[c.upper()]))) for c in pattern)
        if k % 2:
            at, stop = int(rng.integers(1, n)), 0
            stop = min(n, at + int(rng.integers(1, 7)))
            copy = concrete[:at] + concrete[stop:] if k % 4 == 1 else concrete[:at] + random_read(rng, stop - at) + \
                concrete[at:]
        else:
            copy = mutate(rng, concrete, 0.25)
        yield random_read(rng, int(rng.integers(0, 12)), n_rate=0.05) + copy + random_read(rng, int(rng.integers(0, 12))), \
            pattern


def gapped_case(seed: int, count: int, scoring: Scoring):
    """The pairs of :func:`gapped_pairs` as the traceback takes them: (codes,
    lengths, the patterns' table, one strand, pattern t for read t) and the
    rule's traceback of each on the reference matrices."""
    from bpbc.patterns import PatternTable

    pairs = list(gapped_pairs(seed, count))
    codes, lengths = encode_reads([read for read, _ in pairs])
    table = PatternTable.build([encode_pattern(p) for _, p in pairs], ("+",))
    return codes, lengths, table, [rule_traceback(codes[t, :lengths[t]], table.oriented(t), scoring)
                                   for t in range(len(pairs))]


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_start_boxes_are_those_of_every_alignment_ending_at_the_end_cell(scoring):
    """start_boxes (a backward pass from the end cell, cells dropped where
    they can no longer reach the score) gives the rows and columns of the
    optimal alignments ending at the end cell that a backward pass over
    every cell finds, on 32 int16 lanes and 16 int32 ones."""
    from bpbc import traceback as tb

    codes, lengths, table, ends = gapped_case(61, 160, scoring)
    chosen = np.array([t for t, al in enumerate(ends) if al.score > 0])
    expected = [reverse_anchored_box(codes[t, :lengths[t]], table.oriented(t), scoring, ends[t].score,
                                     ends[t].read_end, ends[t].pattern_end) for t in chosen]
    score = np.array([ends[t].score for t in chosen])
    read_end = np.array([ends[t].read_end for t in chosen])
    pattern_end = np.array([ends[t].pattern_end for t in chosen])
    for int16 in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(tb, "_fits_int16_start", lambda widest, scoring, int16=int16: int16)
            found = tb.start_boxes(codes, lengths, chosen, table, chosen, score, read_end, pattern_end, scoring)
        assert [tuple(box) for box in found.tolist()] == expected
    assert len(chosen) > 120 and sum(rows < end for (rows, _), end in zip(expected, read_end)) > 60


def record_boxed(monkeypatch, boxed: list) -> None:
    """Have the traceback's pass over the boxes add the instances it
    aligns (score > 0) to ``boxed``."""
    from bpbc import traceback as tb

    monkeypatch.setattr(tb, "_boxed_blocks", lambda chosen, score, *rest, boxed_blocks=tb._boxed_blocks: (
        boxed.extend(chosen[score > 0].tolist()), boxed_blocks(chosen, score, *rest))[1])


def table_alignments(found, cigars) -> list[LocalAlignment]:
    """The rows of _run_batch's table and its CIGARs as alignments."""
    return [LocalAlignment(int(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4]), cigar, int(row[6]),
                           int(row[7]), int(row[5])) for row, cigar in zip(found, cigars.strings())]


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_alignments_in_bands_are_those_of_the_whole_dp(scoring, monkeypatch):
    """Instances whose end cells a score pass found are aligned in the band
    of cells an alignment of their score ending there can pass: each alone
    (its band its own, narrow: on one int32 lane where the cells are not
    asked for) and all in blocks, on int16 and int32 cells, every one in its
    band (none left to the pass over the box), the rule's traceback on the
    reference matrices; and the same with no band (the box)."""
    from bpbc import traceback as tb

    codes, lengths, table, expected = gapped_case(67, 120, scoring)
    boxed = []
    record_boxed(monkeypatch, boxed)
    monkeypatch.setattr(tb, "_WINDOW_FROM", -1)  # every instance through the score pass

    def aligned(rows, bits):
        found, cigars = tb._run_batch(codes, lengths, rows, table, rows, scoring, True, np.zeros(len(rows), bool),
                                      bits)
        return table_alignments(found, cigars)

    for bits in (16, 32, None):
        alone = [aligned(np.array([t]), bits)[0] for t in range(len(expected))]
        together = aligned(np.arange(len(expected)), bits)
        assert alone == expected and together == expected
        assert not boxed
        monkeypatch.setattr(tb, "BANDED", False)
        assert aligned(np.arange(len(expected)), bits) == expected
        assert len(boxed) > 100
        monkeypatch.setattr(tb, "BANDED", True)
        boxed.clear()
    assert sum("I" in al.cigar or "D" in al.cigar for al in expected) > 40


def test_end_cells_keep_each_instances_own_cells(monkeypatch):
    """end_cells runs each instance on int16 cells where its own values fit
    and on int32 where they do not, in one batch: match 1000 and 32 or 33
    matching bases (32000 fits int16, 33000 does not), mixed with reads
    that score little; every end cell the rule's on the reference
    matrices, on one thread and on all, blocks of both cells in the call."""
    from bpbc import traceback as tb
    from bpbc.patterns import PatternTable

    scoring = Scoring(1000, 1000, 1000, 1000)
    rng = np.random.default_rng(71)
    patterns = [random_read(rng, 33) for _ in range(3)] + [random_read(rng, 32) for _ in range(3)]
    reads, ks = [], []
    for k, pattern in enumerate(patterns):
        for read in (pattern, random_read(rng, 5) + pattern + random_read(rng, 4), mutate(rng, pattern, 0.1),
                     random_read(rng, 40), random_read(rng, 30) + pattern[:20]):
            reads.append(read)
            ks.append(k)
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(p) for p in patterns], ("+",))
    rows, ks = np.arange(len(reads)), np.array(ks)
    narrow = tb._fits_int16_score(lengths[rows], table.lengths[ks], scoring)
    assert narrow.any() and not narrow.all()
    expected = []
    for t in rows:
        al = rule_traceback(codes[t, :lengths[t]], table.oriented(ks[t]), scoring)
        expected.append([al.score, al.read_end, al.pattern_end])
    assert max(score for score, _, _ in expected) == 33000
    kinds = []
    monkeypatch.setattr(tb, "get_num_threads", lambda: 2)  # as many threads as blocks: not the wavefront
    for name in ("_score_blocks_parallel", "_score_blocks_serial"):
        monkeypatch.setattr(tb, name, lambda *args, kernel=getattr(tb, name): kinds.append(set(args[8].tolist())) or
                            kernel(*args))
    for parallel in (False, True):
        assert tb.end_cells(codes, lengths, rows, table, ks, scoring, parallel=parallel).tolist() == expected
    assert kinds == [{False, True}, {False, True}]


def test_end_cells_on_int16_lanes_past_column_32767():
    """The score pass keeps the best cell's column outside its lanes, so
    int16 lanes serve a pattern of 40,000 bases: a 300-base read copied
    (with a few substitutions) at column 39,000 ends there on int16 lanes
    as on int32 ones, at parasail's score and end (unique: the copy)."""
    import parasail

    from bpbc import traceback as tb
    from bpbc.patterns import PatternTable

    scoring = Scoring()
    rng = np.random.default_rng(73)
    read = random_read(rng, 300)
    pattern_text = random_read(rng, 39_000) + mutate(rng, read, 0.02) + random_read(rng, 700)
    reads = [read, random_read(rng, 250) + read[:200], random_read(rng, 300)]
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(pattern_text)], ("+", "-"))
    rows, ks = np.array([0, 1, 2, 0]), np.array([0, 0, 0, 1])
    assert tb._fits_int16_score(lengths[rows], table.lengths[ks], scoring).all()
    narrow = tb.end_cells(codes, lengths, rows, table, ks, scoring, fits=True)
    wide = tb.end_cells(codes, lengths, rows, table, ks, scoring, fits=False)
    assert np.array_equal(narrow, wide) and np.array_equal(tb.end_cells(codes, lengths, rows, table, ks, scoring), wide)
    matrix = parasail.matrix_create("ACGT", scoring.match, -scoring.mismatch)
    result = parasail.sw_trace_striped_32(reads[0], pattern_text, scoring.gap_open + scoring.gap_extend,
                                          scoring.gap_extend, matrix)
    assert narrow[0].tolist() == [result.score, result.end_query + 1, result.end_ref + 1]
    assert narrow[0, 2] > 39_000 and narrow[0, 0] > 500


def test_blocks_whose_bands_pass_the_budget_are_banded_lane_by_lane(monkeypatch):
    """A block of which one row of the lanes' bands together passes
    POINTER_BUDGET is aligned again instance by instance, each in a band of
    its own on one lane (not the pass over the boxes), in segments of rows
    where its band passes the budget: every instance aligned in a band,
    the rule's traceback on the reference matrices."""
    from bpbc import traceback as tb

    scoring = Scoring()
    codes, lengths, table, expected = gapped_case(79, 120, scoring)
    boxed, lone = [], []
    record_boxed(monkeypatch, boxed)

    def banded(*args, one_lane=False, inner=tb._banded):
        rows, aligned = inner(*args, one_lane=one_lane)
        if one_lane:
            lone.append(int(aligned.sum()))
        return rows, aligned

    monkeypatch.setattr(tb, "_banded", banded)
    monkeypatch.setattr(tb, "_WINDOW_FROM", -1)  # every instance through the score pass
    monkeypatch.setattr(tb, "POINTER_BUDGET", 200)  # a lane's rows fit (under 100 columns), 16 or 32 lanes' do not
    rows = np.arange(len(expected))
    found, cigars = tb._run_batch(codes, lengths, rows, table, rows, scoring, True, np.zeros(len(rows), bool))
    got = table_alignments(found, cigars)
    assert got == expected
    assert not boxed and lone and sum(lone) > 40


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_score_pass_in_stripes_on_threads_is_the_whole_pass(scoring, monkeypatch):
    """A block of the score pass cut into stripes of rows, each on a thread
    of its own and waiting on the stripe above column by column (a
    wavefront), gives the end cells of the rule's traceback on the
    reference matrices: stripes of 3 rows and more, 2 to 7 of them (more
    than the threads too), int16 and int32 lanes, ties in two-letter and
    repeated text among them; and end_cells takes that road where its
    blocks are fewer than the threads."""
    from bpbc import traceback as tb

    codes, lengths, table, alignments = gapped_case(83, 80, scoring)
    rows = np.arange(len(alignments))
    expected = [[al.score, al.read_end, al.pattern_end] for al in alignments]
    monkeypatch.setattr(tb, "_STRIPE_ROWS", 3)
    block_first = np.append(np.arange(0, len(rows), 8), len(rows)).astype(np.int64)
    block_width = np.maximum.reduceat(table.lengths[rows], block_first[:-1]).astype(np.int64)
    for threads in (2, 3, 7):
        for wide in (True, False):
            found = tb._score_waves(codes, lengths, rows, table, rows, block_first, block_width,
                                    np.full(len(block_first) - 1, wide), scoring, threads)
            assert found.tolist() == expected
    waves = []
    monkeypatch.setattr(tb, "_score_waves", lambda *args, waves_of=tb._score_waves: waves.append(args[-1]) or
                        waves_of(*args))
    monkeypatch.setattr(tb, "get_num_threads", lambda: 40)  # more threads than blocks
    assert tb.end_cells(codes, lengths, rows, table, rows, scoring, parallel=True).tolist() == expected
    assert waves == [40]
    assert sum(score > 0 and end < lengths[t] for t, (score, end, _) in enumerate(expected)) > 30



@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_score_pass_of_instances_alone_is_the_whole_pass(scoring, monkeypatch):
    """Instances scored alone, a stripe of their rows a lane, each lane a
    column behind the one above (_score_skewed_body), give the end cells of
    the rule's traceback on the reference matrices: lanes of 1 row and
    more, reads padded to the lanes, up to 7 stripes a read on 1 to 7
    threads, int16 and int32 lanes, ties in two-letter and repeated text
    among them; and end_cells takes that road for blocks that would leave
    lanes idle, and not for full blocks of like instances."""
    from bpbc import traceback as tb

    codes, lengths, table, alignments = gapped_case(89, 80, scoring)
    rows = np.arange(len(alignments))
    expected = [[al.score, al.read_end, al.pattern_end] for al in alignments]
    monkeypatch.setattr(tb, "_SKEWED_LANE_ROWS", 1)
    for threads in (1, 2, 3, 7):
        for wide in (True, False):
            found = tb._score_skewed_instances(codes, lengths, rows[:threads - 1 or None], table,
                                               rows[:threads - 1 or None], wide, scoring, threads)
            assert found.tolist() == expected[:threads - 1 or None]
    alone = []
    monkeypatch.setattr(tb, "_score_skewed_instances", lambda *args, inner=tb._score_skewed_instances:
                        alone.append(len(args[2])) or inner(*args))
    monkeypatch.setattr(tb, "_SKEWED_SHARE", 1e9)  # every block
    assert tb.end_cells(codes, lengths, rows, table, rows, scoring, parallel=True).tolist() == expected
    assert sum(alone) == len(rows)
    monkeypatch.setattr(tb, "_SKEWED_SHARE", 0.8)
    alone.clear()
    monkeypatch.setattr(tb, "_SKEWED_LANE_ROWS", 64)
    assert tb.end_cells(codes, lengths, rows, table, rows, scoring, parallel=True).tolist() == expected
    assert alone == []  # 80 short instances: full blocks



def test_instances_alone_try_int16_lanes_first():
    """Instances that need int32 lanes by their lengths are scored alone on
    int16 lanes first, and again on int32 lanes where their best came
    within a match of int16's top: match 1000, perfect copies of 31 bases
    (31000: kept) and of 32 and 33 (32000, 33000: scored again), each the
    rule's end cell on the reference matrices."""
    from bpbc import traceback as tb
    from bpbc.patterns import PatternTable

    scoring = Scoring(1000, 1000, 1000, 1000)
    rng = np.random.default_rng(101)
    patterns = [random_read(rng, length) for length in (31, 32, 33)]
    reads = [random_read(rng, 50) + pattern + random_read(rng, 40) for pattern in patterns]
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(p) for p in patterns], ("+",))
    rows = np.arange(3)
    expected = []
    for t in rows:
        al = rule_traceback(codes[t, :lengths[t]], table.oriented(t), scoring)
        expected.append([al.score, al.read_end, al.pattern_end])
    assert [score for score, _, _ in expected] == [31000, 32000, 33000]
    runs = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tb, "_score_skewed_runs", lambda *args, inner=tb._score_skewed_runs:
                      runs.append((args[5], args[2].tolist())) or inner(*args))
        assert tb._score_skewed_instances(codes, lengths, rows, table, rows, True, scoring, 2).tolist() == expected
    assert runs == [(False, [0, 1, 2]), (True, [1, 2])]

def test_one_long_instance_is_scored_alone_on_every_thread(monkeypatch):
    """One read of 30 kb holding a noisy copy of a 3 kb pattern: end_cells
    scores it alone, in stripes on the threads, at parasail's score and
    end (unique: the copy), on int16 lanes, and where end_cells is told
    int32 on int16 first too."""
    import parasail

    from bpbc import traceback as tb
    from bpbc.patterns import PatternTable

    scoring = Scoring()
    rng = np.random.default_rng(97)
    letters = np.frombuffer(b"ACGT", np.uint8)
    pattern = letters[rng.integers(0, 4, 3000)]
    read = letters[rng.integers(0, 4, 30_000)]
    copy = _noisy_copy(rng, pattern[200:2800], 0.06)
    read[17_000:17_000 + len(copy)] = copy
    codes, lengths = encode_reads([read.tobytes().decode()])
    table = PatternTable.build([encode_pattern(pattern.tobytes().decode())], ("+",))
    calls = []
    monkeypatch.setattr(tb, "_score_skewed_instances", lambda *args, inner=tb._score_skewed_instances:
                        calls.append((args[5], args[7])) or inner(*args))
    monkeypatch.setattr(tb, "get_num_threads", lambda: 3)
    matrix = parasail.matrix_create("ACGT", scoring.match, -scoring.mismatch)
    result = parasail.sw_trace_striped_32(read.tobytes().decode(), pattern.tobytes().decode(),
                                          scoring.gap_open + scoring.gap_extend, scoring.gap_extend, matrix)
    for fits in (True, False):
        found = tb.end_cells(codes, lengths, np.array([0]), table, np.array([0]), scoring, fits=fits, parallel=True)
        assert found[0].tolist() == [result.score, result.end_query + 1, result.end_ref + 1]
    assert calls == [(False, 3), (True, 3)]
    assert result.score > 3000


def _noisy_copy(rng, piece: np.ndarray, rate: float) -> np.ndarray:
    """``piece`` (uint8 ACGT) with about ``rate`` errors, a third each substitutions, insertions, deletions."""
    letters = np.frombuffer(b"ACGT", np.uint8)
    kind = rng.random(len(piece))
    out = piece.copy()
    substituted = kind < rate / 3
    out[substituted] = letters[(np.searchsorted(letters, out[substituted]) + 1) % 4]
    kept = out[~((kind >= rate / 3) & (kind < 2 * rate / 3))]
    inserted = np.flatnonzero(rng.random(len(kept)) < rate / 3)
    return np.insert(kept, inserted, letters[rng.integers(0, 4, len(inserted))])


def test_banded_pointers_are_mapped_within_one_budget_whatever_the_threads(monkeypatch):
    """Long hits (bands of megabytes) from known end cells: the bands'
    pointers are mapped scratch (bpbc.scratch), all given back after the
    call, never more at once than the budget or the largest band alone,
    and the alignments are the same whatever the budget."""
    from bpbc import scratch
    from bpbc import traceback as tb
    from bpbc.patterns import PatternTable

    rng = np.random.default_rng(41)
    letters = np.frombuffer(b"ACGT", np.uint8)
    pattern = letters[rng.integers(0, 4, 9000)]
    reads = []
    for _ in range(12):
        start = int(rng.integers(0, 4000))
        piece = _noisy_copy(rng, pattern[start:start + int(rng.integers(2500, 4500))], 0.06)
        reads.append(np.concatenate([letters[rng.integers(0, 4, 300)], piece,
                                     letters[rng.integers(0, 4, 300)]]).tobytes().decode())
    scoring = Scoring()
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(pattern.tobytes().decode())], ("+",))
    rows, ks = np.arange(len(reads)), np.zeros(len(reads), np.int64)
    ends = tb.end_cells(codes, lengths, rows, table, ks, scoring)
    results, most = [], []
    for budget in (1 << 40, 1, 3 * scratch.MAPPED_FROM):
        monkeypatch.setattr(scratch, "BUDGET", budget)
        monkeypatch.setattr(tb, "_BAND_FROM_CELLS", 0)
        scratch.LEDGER[1] = 0
        found = tb.align_hits(codes, lengths, rows, ks, table, ("+",), scoring, known_ends=ends)
        assert scratch.LEDGER[0] == 0
        most.append(int(scratch.LEDGER[1]))
        results.append(found.to_list())
    assert results[0] == results[1] == results[2]
    assert [a.score for a in results[0]] == ends[:, 0].tolist()
    largest = most[1]  # budget 1: each band's pointers alone
    assert largest >= scratch.MAPPED_FROM and most[2] <= max(3 * scratch.MAPPED_FROM, largest)


def test_band_segments_hold_the_budget_or_none():
    """_band_segments: the first row of each segment, as few as greedily
    fit the budget, then the row past the last; none where a row alone
    passes it."""
    from bpbc import traceback as tb

    widths = np.array([3, 4, 2, 5, 1, 1, 6])  # bytes of rows 1 to 7
    pointer_row = np.concatenate([[0, 0], np.cumsum(widths)]).astype(np.int64)
    assert tb._band_segments(pointer_row, 7, 100).tolist() == [1, 8]
    assert tb._band_segments(pointer_row, 7, 7).tolist() == [1, 3, 5, 7, 8]
    assert tb._band_segments(pointer_row, 7, 6).tolist() == [1, 2, 4, 6, 7, 8]
    assert tb._band_segments(pointer_row, 7, 5).tolist() == []


@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_bands_past_the_budget_are_aligned_in_segments_of_rows(scoring, monkeypatch):
    """Blocks whose bands pass POINTER_BUDGET (every row of them within it)
    are aligned in segments of a few rows each, from checkpoints, on int16
    and int32 cells: the rule's traceback on the reference matrices, gaps
    across the segments' edges among them, none aligned lane by lane or
    over its box."""
    from bpbc import traceback as tb

    codes, lengths, table, expected = gapped_case(89, 120, scoring)
    boxed, lone = [], []
    record_boxed(monkeypatch, boxed)
    monkeypatch.setattr(tb, "_banded", lambda *args, one_lane=False, inner=tb._banded: (
        lone.append(one_lane), inner(*args, one_lane=one_lane))[1])
    monkeypatch.setattr(tb, "_WINDOW_FROM", -1)  # every instance through the score pass
    rows = np.arange(len(expected))
    for bits, budget in ((16, 32 * 100), (32, 16 * 100), (16, 32 * 130)):  # rows of at most 100 columns fit
        monkeypatch.setattr(tb, "POINTER_BUDGET", budget)
        found, cigars = tb._run_batch(codes, lengths, rows, table, rows, scoring, True, np.zeros(len(rows), bool),
                                      bits)
        got = table_alignments(found, cigars)
        assert got == expected
    assert not boxed and not any(lone)
    assert max(lengths) < 100 and sum("I" in al.cigar or "D" in al.cigar for al in expected) > 40


@pytest.mark.parametrize("gap", ["I", "D"])
def test_start_pass_keeps_a_suffix_that_scores_1(gap):
    """The start pass drops cells whose value (the best from there to the
    end cell) is below 0: an alignment whose part after a gap scores 1 (a
    gap of k bases, then 3 + k matches: 2 (3 + k) - 5 - 2k) keeps that gap
    and that part, the rule's traceback on the reference matrices, and its
    box is that of the plain backward pass over every cell (flanks of A in
    the read and C in the pattern: nothing to add to the alignment)."""
    from bpbc import traceback as tb
    from bpbc.patterns import PatternTable

    scoring = Scoring()
    rng = np.random.default_rng(97)
    cases = 0
    for k in range(1, 5):
        body, tail = random_read(rng, 30), random_read(rng, 3 + k)
        extra = random_read(rng, k)
        read_core, pattern_core = (body + extra + tail, body + tail) if gap == "I" else (body + tail,
                                                                                         body + extra + tail)
        read_text = "A" * 40 + read_core + "A" * 40
        pattern_text = "C" * 60 + pattern_core + "C" * 60
        read, pattern = encode(read_text, pattern_text)
        expected = rule_traceback(read, pattern, scoring)
        if expected.score != 60 + 1 or f"{k}{gap}" not in expected.cigar:
            continue  # the random bases made a better alignment: not this case
        codes, lengths = encode_reads([read_text])
        table = PatternTable.build([encode_pattern(pattern_text)], ("+",))
        zero = np.zeros(1, np.int64)
        ends = np.array([[expected.score, expected.read_end, expected.pattern_end]])
        (got,) = tb.align_hits(codes, lengths, zero, zero, table, ("+",), scoring, eqx=True,
                               known_ends=ends).to_list()
        assert (got.score, got.read_start, got.read_end, got.pattern_start, got.pattern_end, got.cigar) == \
            expected[:6]
        box = tb.start_boxes(codes, lengths, zero, table, zero, ends[:, 0], ends[:, 1], ends[:, 2], scoring)
        assert tuple(box[0]) == reverse_anchored_box(read, pattern, scoring, expected.score, expected.read_end,
                                                     expected.pattern_end)
        cases += 1
    assert cases >= 2


def test_long_planted_hits_from_their_end_cells_are_the_whole_dps(monkeypatch):
    """Reads of 1.5-3 kb pieces of a 7 kb pattern with about 6 % errors
    (substitutions, insertions, deletions) amid random bases, both strands,
    aligned from their end cells (end_cells) in bands, whole or in
    segments of rows, one lane each or in blocks: the same alignments
    (score, coordinates, NM, CIGAR) as the pointer pass over the whole
    pattern, which neither the start pass nor the bands take part in, and
    parasail's scores."""
    from bpbc import traceback as tb
    from bpbc.patterns import PatternTable

    rng = np.random.default_rng(43)
    letters = np.frombuffer(b"ACGT", np.uint8)
    pattern = letters[rng.integers(0, 4, 7000)]
    complement = str.maketrans("ACGT", "TGCA")
    reads = []
    for r in range(10):
        start = int(rng.integers(0, 5000))
        piece = _noisy_copy(rng, pattern[start:start + int(rng.integers(1500, 3000))], 0.06).tobytes().decode()
        if r % 2:
            piece = piece.translate(complement)[::-1]
        reads.append(random_read(rng, int(rng.integers(0, 1500))) + piece + random_read(rng, int(rng.integers(0, 400))))
    scoring = Scoring()
    strands = ("+", "-")
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(pattern.tobytes().decode())], strands)
    rows, ks = np.repeat(np.arange(len(reads)), 2), np.tile(np.arange(2), len(reads))
    ends = tb.end_cells(codes, lengths, rows, table, ks, scoring)
    hit = ends[:, 0] >= 1000
    rows, ks, ends = rows[hit], ks[hit], ends[hit]
    assert len(rows) == len(reads)
    with monkeypatch.context() as plain:
        plain.setattr(tb, "_BAND_FROM_CELLS", 1 << 60)
        plain.setattr(tb, "_WINDOW_FROM", 1 << 60)
        whole = tb.align_hits(codes, lengths, rows, ks, table, strands, scoring).to_list()
    for budget in (1 << 40, 1 << 16, 1 << 11):  # one piece, segments, and blocks lane by lane in segments
        monkeypatch.setattr(tb, "POINTER_BUDGET", budget)
        for count in (1, len(rows)):  # one lane alone, and blocks
            found = [tb.align_hits(codes, lengths, rows[t:t + count], ks[t:t + count], table, strands, scoring,
                                   known_ends=ends[t:t + count]).to_list() for t in range(0, len(rows), count)]
            assert sum(found, []) == whole
    for al, read in zip(whole, (reads[r] for r in rows)):
        assert al.score == parasail_sw_codes(*encode(read, pattern.tobytes().decode()), scoring) if al.strand == "+" \
            else True
    assert {al.strand for al in whole} == {"+", "-"} and min(al.score for al in whole) > 1500
