"""Alignment helpers for the tests: one read at a time, CIGAR parsing and
scoring, one PAF line at a time; plain code to check the package's batch
paths against."""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from bpbc.alphabet import INVALID
from bpbc.paf import MAPQ_UNAVAILABLE
from bpbc.patterns import PatternTable
from bpbc.result import Alignment
from bpbc.scoring import Scoring
from bpbc.traceback import align_hits


class LocalAlignment(NamedTuple):
    """One alignment in the coordinates of the arrays that were aligned."""

    score: int
    read_start: int
    read_end: int
    pattern_start: int
    pattern_end: int
    cigar: str
    nm: int
    matches: int
    length: int


def align_codes(read_codes, pattern_masks, scoring: Scoring = Scoring(), eqx: bool = False) -> LocalAlignment:
    """Align one encoded read (codes 0..3, INVALID) against encoded pattern
    masks (already oriented for the strand), through the package's traceback."""
    read = np.asarray(read_codes, dtype=np.uint8).reshape(1, -1)
    zero = np.zeros(1, dtype=np.int64)
    table = PatternTable.of([np.asarray(pattern_masks, np.uint8)])
    (a,) = align_hits(read, np.array([read.shape[1]], dtype=np.int64), zero, zero, table, ("+",), scoring,
                      eqx).to_list()
    return LocalAlignment(a.score, a.read_start, a.read_end, a.pattern_start, a.pattern_end, a.cigar, a.nm,
                          a.matches, a.length)


def align_instances(
    codes, lengths, read_indices, pattern_masks, pattern_index: int, strand: str,
    scoring: Scoring = Scoring(), eqx: bool = False,
) -> list[Alignment]:
    """Align reads ``read_indices`` against one FORWARD pattern on one strand
    (see :func:`align_hits`); the alignments carry ``pattern_index``."""
    if strand not in ("+", "-"):
        raise ValueError(f"strand must be '+' or '-', got {strand!r}")
    table = PatternTable.build([pattern_masks], (strand,))
    table.pattern[:] = pattern_index
    rows = np.asarray(read_indices, dtype=np.int64)
    return align_hits(codes, lengths, rows, np.zeros(len(rows), np.int64), table, (strand,), scoring, eqx).to_list()


_CIGAR_RUN = re.compile(r"(\d+)([MIDNSHP=X])")


def parse_cigar(cigar: str) -> list[tuple[int, str]]:
    """CIGAR text as a list of (length, op)."""
    runs = [(int(length), op) for length, op in _CIGAR_RUN.findall(cigar)]
    if "".join(f"{length}{op}" for length, op in runs) != cigar:
        raise ValueError(f"malformed CIGAR {cigar!r}")
    return runs


def cigar_score(cigar: str, read_codes, pattern_masks, scoring: Scoring = Scoring()) -> int:
    """Score of a CIGAR over the aligned segments: ``read_codes`` and
    ``pattern_masks`` are exactly the aligned read and pattern slices, in the
    order the CIGAR reads them. Each I or D run is one gap (open + k*extend);
    '=' and 'X' are checked against the bases."""
    read = [int(c) for c in read_codes]
    pattern = [int(p) for p in pattern_masks]
    i = j = 0
    score = 0
    for length, op in parse_cigar(cigar):
        if op in "M=X":
            for _ in range(length):
                is_match = read[i] != INVALID and (pattern[j] >> read[i]) & 1 == 1
                if (op == "=" and not is_match) or (op == "X" and is_match):
                    raise ValueError(f"CIGAR op {op} at read {i}, pattern {j} disagrees with the bases")
                score += scoring.match if is_match else -scoring.mismatch
                i += 1
                j += 1
        elif op == "I":
            score -= scoring.gap_open + length * scoring.gap_extend
            i += length
        elif op == "D":
            score -= scoring.gap_open + length * scoring.gap_extend
            j += length
        else:
            raise ValueError(f"CIGAR op {op} is not used in local alignments")
    if i != len(read) or j != len(pattern):
        raise ValueError(
            f"CIGAR {cigar!r} covers {i} read and {j} pattern bases, "
            f"segments have {len(read)} and {len(pattern)}"
        )
    return score


def paf_line(alignment: Alignment, query_name: str, query_length: int, target_name: str, target_length: int) -> str:
    """One PAF line (with a trailing newline) for one alignment."""
    a = alignment
    return (
        f"{query_name}\t{query_length}\t{a.read_start}\t{a.read_end}\t{a.strand}\t"
        f"{target_name}\t{target_length}\t{a.pattern_start}\t{a.pattern_end}\t"
        f"{a.matches}\t{a.length}\t{MAPQ_UNAVAILABLE}\t"
        f"tp:A:P\tAS:i:{a.score}\tNM:i:{a.nm}\tcg:Z:{a.cigar}\n"
    )
