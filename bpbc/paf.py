"""PAF output: one line per passing (read, pattern, strand).

The query is the read, the target is the pattern. Columns follow the PAF
specification (minimap2): 0-based, end-exclusive coordinates on each
sequence's forward strand; the CIGAR (``cg:Z:``) reads along the target's
forward strand, so for strand '-' it runs from the read's end to its start.
"""

from __future__ import annotations

from collections.abc import Sequence

from bpbc.result import Alignment

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
#: the optional SAM-style tags after the 12 columns, in order
PAF_TAGS = ("tp:A", "AS:i", "NM:i", "cg:Z")
#: mapping quality: 255 means "not available", as in SAM
MAPQ_UNAVAILABLE = 255


def paf_line(alignment: Alignment, query_name: str, query_length: int, target_name: str, target_length: int) -> str:
    """One PAF line (with a trailing newline) for one alignment."""
    a = alignment
    return (
        f"{query_name}\t{query_length}\t{a.read_start}\t{a.read_end}\t{a.strand}\t"
        f"{target_name}\t{target_length}\t{a.pattern_start}\t{a.pattern_end}\t"
        f"{a.matches}\t{a.length}\t{MAPQ_UNAVAILABLE}\t"
        f"tp:A:P\tAS:i:{a.score}\tNM:i:{a.nm}\tcg:Z:{a.cigar}\n"
    )


def paf_text(
    alignments: Sequence[Alignment],
    read_names: Sequence[str],
    read_lengths: Sequence[int],
    pattern_names: Sequence[str],
    pattern_lengths: Sequence[int],
) -> str:
    """PAF lines for a batch of alignments, in the order given.

    ``alignments[k].read_index`` indexes ``read_names``/``read_lengths`` and
    ``pattern_index`` indexes ``pattern_names``/``pattern_lengths``.
    """
    return "".join(
        paf_line(
            a,
            read_names[a.read_index],
            read_lengths[a.read_index],
            pattern_names[a.pattern_index],
            pattern_lengths[a.pattern_index],
        )
        for a in alignments
    )
