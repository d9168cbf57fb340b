"""PAF formatting, and an engine-independent check of the golden PAF files in tests/data.

The golden files are produced by the real engine (see test_cli.py for how to
regenerate them). Here every line is checked against the sequences with code
that shares nothing with bpbc: the CIGAR is replayed base by base with its
own IUPAC table, its score, NM, match count and block length must equal the
columns, the score must be the optimum parasail finds, and every (read,
pattern, strand) left out of the file must score below the threshold.
"""

from __future__ import annotations

from pathlib import Path

import dnaio
import pytest

from bpbc.paf import MAPQ_UNAVAILABLE, PAF_COLUMNS, paf_lines
from tests.bpbc.alignments import paf_line
from bpbc.result import Alignment
from bpbc.scoring import Scoring
from tests.bpbc.conftest import IUPAC_BASES, parasail_sw

DATA = Path(__file__).resolve().parents[1] / "data"

#: golden file -> (threshold, strands) it was generated with (see test_cli.GOLDEN)
GOLDEN = {
    "expected.paf": (20, ("+", "-")),
    "expected_forward_eqx.paf": (30, ("+",)),
}

_COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A", "U": "A"}


def reverse_complement(read: str) -> str:
    """Read text reverse complemented; anything but A/C/G/T/U becomes N (it never matches)."""
    return "".join(_COMPLEMENT.get(c, "N") for c in reversed(read.upper()))


def base_matches(read_letter: str, pattern_letter: str) -> bool:
    bases = IUPAC_BASES[read_letter.upper()]
    return len(bases) == 1 and bases in IUPAC_BASES[pattern_letter.upper()]


def replay_cigar(cigar: str, read: str, pattern: str, scoring: Scoring):
    """Walk a CIGAR over aligned read/pattern segments; returns (score, nm,
    matches, columns, read bases used, pattern bases used)."""
    import re

    runs = re.findall(r"(\d+)([MIDX=])", cigar)
    assert "".join(n + op for n, op in runs) == cigar, f"malformed CIGAR {cigar}"
    score = nm = matches = columns = i = j = 0
    for count, op in runs:
        count = int(count)
        columns += count
        if op in "M=X":
            for _ in range(count):
                hit = base_matches(read[i], pattern[j])
                assert op == "M" or (op == "=") == hit, f"{op} disagrees with the bases at read {i}, pattern {j}"
                score += scoring.match if hit else -scoring.mismatch
                matches += hit
                nm += not hit
                i += 1
                j += 1
        else:
            score -= scoring.gap_open + count * scoring.gap_extend
            nm += count
            if op == "I":
                i += count
            else:
                j += count
    return score, nm, matches, columns, i, j


def test_paf_line_has_the_12_columns_and_4_tags():
    a = Alignment(read_index=0, pattern_index=1, strand="-", score=33, read_start=5, read_end=24,
                  pattern_start=1, pattern_end=19, cigar="10M1I8M", nm=2, matches=17, length=19)
    line = paf_line(a, "read7", 150, "primer", 20)
    assert line.endswith("\n") and line.count("\n") == 1
    fields = line.rstrip("\n").split("\t")
    assert len(fields) == len(PAF_COLUMNS) + 4
    assert fields[:12] == ["read7", "150", "5", "24", "-", "primer", "20", "1", "19", "17", "19", "255"]
    assert fields[12:] == ["tp:A:P", "AS:i:33", "NM:i:2", "cg:Z:10M1I8M"]


def test_the_columns_are_the_pafs_and_mapq_is_not_available():
    """minimap2's PAF specification: the 12 columns in order; 255 is a
    mapping quality not available, as in SAM."""
    assert PAF_COLUMNS == ("query_name", "query_length", "query_start", "query_end", "strand", "target_name",
                           "target_length", "target_start", "target_end", "matches", "block_length", "mapq")
    assert MAPQ_UNAVAILABLE == 255


def test_paf_lines_of_a_table_equal_paf_line_of_each_alignment():
    import numpy as np

    from bpbc.result import AlignmentTable, Texts

    alignments = [
        Alignment(2, 0, "+", 40, 0, 20, 0, 20, "20M", 0, 20, 20),
        Alignment(0, 1, "-", 30, 3, 18, 2, 17, "15M", 0, 15, 15),
    ]
    columns = {name: np.array([getattr(a, name) for a in alignments]) for name in (
        "read_index", "pattern_index", "score", "read_start", "read_end", "pattern_start", "pattern_end", "nm",
        "matches", "length")}
    table = AlignmentTable(**columns, strand=np.array([0, 1]), cigars=Texts.of(["20M", "15M"]), strands=("+", "-"))
    assert table.to_list() == alignments
    text = paf_lines(table, Texts.of(["r2", "r0"]), [70, 50], Texts.of(["p0", "p1"]), [20, 25]).decode()
    assert text == paf_line(alignments[0], "r2", 70, "p0", 20) + paf_line(alignments[1], "r0", 50, "p1", 25)
    empty = AlignmentTable(**{k: v[:0] for k, v in columns.items()}, strand=np.zeros(0, int), cigars=Texts.of([]),
                           strands=("+",))
    assert paf_lines(empty, Texts.of([]), [], Texts.of(["p"]), [1]) == b""


def _load(path: Path) -> dict[str, str]:
    with dnaio.open(path) as reader:
        return {record.id: record.sequence for record in reader}


@pytest.mark.parametrize("golden", sorted(GOLDEN))
def test_golden_paf_is_consistent_with_the_sequences(golden):
    threshold, strands = GOLDEN[golden]
    scoring = Scoring()
    reads = _load(DATA / "reads.fq")
    patterns = _load(DATA / "patterns.fa")
    lines = (DATA / golden).read_text().splitlines()
    assert lines, "golden file is empty"
    reported = set()
    for line in lines:
        fields = line.split("\t")
        assert len(fields) == 16
        qname, qlen, qs, qe, strand, tname, tlen, ts, te, n_match, block, mapq = fields[:12]
        tags = dict(field.rsplit(":", 1) for field in fields[12:])
        assert tags["tp:A"] == "P" and mapq == "255"
        read, pattern = reads[qname], patterns[tname]
        qlen, qs, qe, tlen, ts, te = (int(v) for v in (qlen, qs, qe, tlen, ts, te))
        assert (qlen, tlen) == (len(read), len(pattern))
        assert 0 <= qs < qe <= qlen and 0 <= ts < te <= tlen
        assert strand in strands
        # PAF coordinates are on the forward strands; on '-' the read is reverse complemented
        # and the CIGAR reads along the forward pattern
        segment = read[qs:qe] if strand == "+" else reverse_complement(read)[qlen - qe : qlen - qs]
        cigar = tags["cg:Z"]
        if "eqx" in golden:
            assert "M" not in cigar
        else:
            assert "=" not in cigar and "X" not in cigar
        score, nm, matches, columns, used_read, used_pattern = replay_cigar(cigar, segment, pattern[ts:te], scoring)
        assert (used_read, used_pattern) == (qe - qs, te - ts)
        assert score == int(tags["AS:i"]) >= threshold
        assert (nm, matches, columns) == (int(tags["NM:i"]), int(n_match), int(block))
        oriented = read if strand == "+" else reverse_complement(read)
        assert parasail_sw(oriented, pattern, scoring) == score, "not the optimal local alignment"
        assert (qname, tname, strand) not in reported, "duplicate instance"
        reported.add((qname, tname, strand))
    # nothing above the threshold is missing, and lines follow read, pattern, strand order
    read_order, pattern_order = list(reads), list(patterns)
    expected = [
        (r, p, s)
        for r in read_order
        for p in pattern_order
        for s in strands
        if parasail_sw(reads[r] if s == "+" else reverse_complement(reads[r]), patterns[p], scoring) >= threshold
    ]
    assert [tuple(line.split("\t")[k] for k in (0, 5, 4)) for line in lines] == expected
