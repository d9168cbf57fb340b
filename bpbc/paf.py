"""PAF output: one line per passing (read, pattern, strand).

The query is the read, the target is the pattern. Columns follow the PAF
specification (minimap2): 0-based, end-exclusive coordinates on each
sequence's forward strand; the CIGAR (``cg:Z:``) reads along the target's
forward strand, so for strand '-' it runs from the read's end to its start.
"""

from __future__ import annotations

from collections.abc import Sequence

from bpbc.result import Alignment, AlignmentTable

#: the 12 standard columns, in order
PAF_COLUMNS = (
    "query_name",
    "query_length",
    "query_start",
    "query_end",
    "strand",
    "target_name",
    "target_length",
    "target_start",
    "target_end",
    "matches",
    "block_length",
    "mapq",
)
#: mapping quality: 255 means "not available", as in SAM
MAPQ_UNAVAILABLE = 255


def _line(query_name, query_length, query_start, query_end, strand, target_name, target_length, target_start,
          target_end, matches, length, score, nm, cigar) -> str:
    return (
        f"{query_name}\t{query_length}\t{query_start}\t{query_end}\t{strand}\t"
        f"{target_name}\t{target_length}\t{target_start}\t{target_end}\t"
        f"{matches}\t{length}\t{MAPQ_UNAVAILABLE}\t"
        f"tp:A:P\tAS:i:{score}\tNM:i:{nm}\tcg:Z:{cigar}\n"
    )


def paf_line(alignment: Alignment, query_name: str, query_length: int, target_name: str, target_length: int) -> str:
    """One PAF line (with a trailing newline) for one alignment."""
    a = alignment
    return _line(query_name, query_length, a.read_start, a.read_end, a.strand, target_name, target_length,
                 a.pattern_start, a.pattern_end, a.matches, a.length, a.score, a.nm, a.cigar)


def paf_lines(
    alignments: AlignmentTable,
    query_names: Sequence[str],
    query_lengths: Sequence[int],
    target_names: Sequence[str],
    target_lengths: Sequence[int],
) -> str:
    """PAF lines for a table of alignments, in its order: ``query_names`` and
    ``query_lengths`` hold one entry per alignment, the targets are looked up
    by ``pattern_index``."""
    a = alignments
    patterns = a.pattern_index.tolist()
    return "".join(map(
        _line, query_names, query_lengths, a.read_start.tolist(), a.read_end.tolist(),
        [a.strands[s] for s in a.strand.tolist()], [target_names[p] for p in patterns],
        [target_lengths[p] for p in patterns], a.pattern_start.tolist(), a.pattern_end.tolist(),
        a.matches.tolist(), a.length.tolist(), a.score.tolist(), a.nm.tolist(), a.cigar,
    ))
