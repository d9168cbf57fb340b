"""PAF output: one line per passing (read, pattern, strand).

The query is the read, the target is the pattern. Columns follow the PAF
specification (minimap2): 0-based, end-exclusive coordinates on each
sequence's forward strand; the CIGAR (``cg:Z:``) reads along the target's
forward strand, so for strand '-' it runs from the read's end to its start.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bpbc.result import AlignmentTable, Texts

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


_NM_TAG = np.frombuffer(b"\tNM:i:", dtype=np.uint8)
_CG_TAG = np.frombuffer(b"\tcg:Z:", dtype=np.uint8)


@njit(cache=True, nogil=True, inline="always")
def _put_text(out, at, source, start, stop):
    for i in range(start, stop):
        out[at] = source[i]
        at += 1
    return at


@njit(cache=True, nogil=True, inline="always")
def _put_int(out, at, value):
    digits = 1
    power = 10
    while value >= power:
        digits += 1
        power *= 10
    for d in range(digits):
        out[at + digits - 1 - d] = 48 + value % 10
        value //= 10
    return at + digits


@njit(cache=True, nogil=True)
def _format_paf(query_buffer, query_offsets, query_lengths, target_buffer, target_offsets, target_lengths,
                numbers, signs, cigar_buffer, cigar_offsets, tags):
    """PAF lines as bytes. numbers[t] = (pattern, read_start, read_end,
    pattern_start, pattern_end, matches, length, score, nm); tags: the
    constant '\\t255\\ttp:A:P\\tAS:i:' between the block length and the score."""
    count = numbers.shape[0]
    size = 0
    for t in range(count):
        p = numbers[t, 0]
        size += (query_offsets[t + 1] - query_offsets[t]) + (target_offsets[p + 1] - target_offsets[p])
        size += cigar_offsets[t + 1] - cigar_offsets[t] + 12 * 20 + tags.shape[0] + 24
    out = np.empty(size, np.uint8)
    at = 0
    tab = 9
    for t in range(count):
        p = numbers[t, 0]
        at = _put_text(out, at, query_buffer, query_offsets[t], query_offsets[t + 1])
        out[at] = tab
        at = _put_int(out, at + 1, query_lengths[t])
        out[at] = tab
        at = _put_int(out, at + 1, numbers[t, 1])
        out[at] = tab
        at = _put_int(out, at + 1, numbers[t, 2])
        out[at] = tab
        out[at + 1] = signs[t]
        out[at + 2] = tab
        at = _put_text(out, at + 3, target_buffer, target_offsets[p], target_offsets[p + 1])
        out[at] = tab
        at = _put_int(out, at + 1, target_lengths[p])
        for column in range(3, 7):
            out[at] = tab
            at = _put_int(out, at + 1, numbers[t, column])
        at = _put_text(out, at, tags, 0, tags.shape[0])
        at = _put_int(out, at, numbers[t, 7])
        at = _put_text(out, at, _NM_TAG, 0, _NM_TAG.shape[0])
        at = _put_int(out, at, numbers[t, 8])
        at = _put_text(out, at, _CG_TAG, 0, _CG_TAG.shape[0])
        at = _put_text(out, at, cigar_buffer, cigar_offsets[t], cigar_offsets[t + 1])
        out[at] = 10
        at += 1
    return out[:at]


_TAGS = np.frombuffer(f"\t{MAPQ_UNAVAILABLE}\ttp:A:P\tAS:i:".encode(), dtype=np.uint8)


def paf_lines(alignments: AlignmentTable, query_names: Texts, query_lengths, target_names: Texts,
              target_lengths) -> bytes:
    """PAF lines for a
    table of alignments, in its order: ``query_names`` and ``query_lengths``
    hold one entry per alignment, the targets are looked up by pattern index."""
    a = alignments
    numbers = np.column_stack([a.pattern_index, a.read_start, a.read_end, a.pattern_start, a.pattern_end,
                               a.matches, a.length, a.score, a.nm]).astype(np.int64)
    signs = np.frombuffer("".join(a.strands).encode(), dtype=np.uint8)[a.strand]
    return _format_paf(query_names.buffer, query_names.offsets, np.asarray(query_lengths, dtype=np.int64),
                       target_names.buffer, target_names.offsets, np.asarray(target_lengths, dtype=np.int64),
                       numbers.reshape(-1, 9), signs, a.cigars.buffer, a.cigars.offsets, _TAGS).tobytes()
