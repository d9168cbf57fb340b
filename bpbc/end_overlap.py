"""Bit-sliced end-overlap decision on the CPU: does a read have a passing partial adapter at its end?

The first pass of :func:`bpbc.trimming.end_overlaps`: for every read of a
chunk and every end task, whether some overlap length L (``min_overlap`` <= L
<= m, m the task's pattern length less one) reaches its threshold
ceil(F x match x L) at the read's end. The reads it flags then go through the
exact DP of :mod:`bpbc.trimming` for their score and cut, so the results are
that DP's bit for bit; a read it does not flag has no passing overlap (the
decision is exact both ways, tests/bpbc/test_end_overlap.py).

The DP is the first pass of :mod:`bpbc.trimming` (``_any_overlap_lanes``):
run from the read's end (row i >= 1 holds the read's i-th base from its end;
for a 5' end, the i-th from its start, against the reversed pattern), column
c = m - L starting overlap length L with value -ceil(F x match x L), a read
passing where a cell of column m holds a value >= 0 in a row i <= n (its
length). Every read's last base is row 1: the reads are right-aligned, so
one row index serves all lanes, and a lane whose read is shorter than the
window only needs its rows past n left out of the decision (``alive``).

Bit-sliced exactly, 512 reads per vector of 8 uint64 words (one AVX-512
register per bit plane), by a change of variable that makes every step a
subtraction: a cell of column c holding v is stored as

    u = max(0, v + match x (m - c) + 1)

so that a diagonal step (column c - 1 to c) keeps u on a match and takes
match + mismatch off on a mismatch, a vertical gap step (E, same column)
takes open + extend or extend off, a horizontal one (F) takes open + extend
+ match or extend + match off, and H = max(diagonal, E, F) as before. The
floor at 0 is exact for the decision: from column c a path gains at most
match per column, so a cell with v < -match x (m - c), u <= 0, can never
reach a value >= 0 in column m, and 0 is the identity of max; and in column
m, u >= 1 exactly where v >= 0. No value ever grows, so the planes needed are
the bit length of the largest start value, ``match x L - ceil(F x match x
L) + 1`` (4 for a 33 bp adapter at F = 0.8 and match 2): no overflow, no
saturation at the top. Once a row holds no cell above 0 in a lane, none of
the lane's later rows does (E <= H, F <= H): the pass stops where every lane
of the 512 has passed, died or run past its read's start. Cells more than
``slack`` rows below the diagonal cannot be on a passing path (the band of
:mod:`bpbc.trimming`): they are left out for all lanes at once.

The reads' last bases (first, for a 5' end) are transposed into one-hot
planes (A, C, G, T; N and other codes in none) a few rows at a time, as the
DP needs them. The kernel is generated per plane count and scoring (the
constants folded into the subtractors, as bpbc/cpu_engine.py does for the
screen) and cached on disk by numba.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .cpu_engine import cpu_target, generated_module
from .cpu_vector import VERSION as VECTOR_VERSION
from .cpu_vector import u64x8
from .scoring import Scoring

#: uint64 words per superblock (one u64x8 vector per bit plane): 512 reads
WORDS = 8
LANES = WORDS * 64
#: one-hot slots of a row: A, C, G, T (N and other codes in none)
SLOTS = 4
#: rows transposed at first: most superblocks settle within them
FIRST_ROWS = 16
#: a kernel's version (part of its generated source and so of its cache key)
VERSION = 1
#: from this many planes on, the vector DP of bpbc.trimming is used instead
MAX_PLANES = 12

_END5 = 1


# ----------------------------------------------------------------- start values


def start_values(thresholds: np.ndarray, m: int, min_overlap: int, scoring: Scoring) -> np.ndarray:
    """int64 (m + 1,): u of every column of row 0 (module docstring): column c
    starts overlap length L = m - c at match x L - threshold[L] + 1 (L >=
    ``min_overlap``), deletions along the row (F) taken into account, floored
    at 0."""
    ma = scoring.match
    first_f, extend_f = scoring.first_gap + ma, scoring.gap_extend + ma
    values = np.zeros(m + 1, np.int64)
    h_left, f = 0, 0
    for c in range(m + 1):
        if c > 0:
            f = max(0, h_left - first_f, f - extend_f)
        length = m - c
        start = ma * length - int(thresholds[length]) + 1 if length >= min_overlap else 0
        h_left = max(start, f, 0)
        values[c] = h_left
    return values


# ----------------------------------------------------------------- the transpose

#: the bit of a gathered byte that says the read has a base there (an N too)
BASE_BIT = 0x10


@intrinsic
def byte_bits(typingctx, array, index, mask):
    """uint64 whose bit q says whether array[index + q] & mask is nonzero, q
    < 64 (array: 1-d contiguous uint8): one 64-byte load, a test and a move
    of the 64 lane bits (vptestmb and kmovq on AVX-512BW; LLVM lowers it on
    any target)."""
    if not (isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C"
            and array.dtype == types.uint8) or not isinstance(index, types.Integer) \
            or not isinstance(mask, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        bytes64 = ir.VectorType(ir.IntType(8), 64)
        position = context.cast(builder, args[1], signature.args[1], types.intp)
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        pointer = builder.bitcast(builder.gep(data, [position]), bytes64.as_pointer())
        values = builder.load(pointer, align=1)
        byte = builder.trunc(context.cast(builder, args[2], signature.args[2], types.int64), ir.IntType(8))
        splat = builder.shuffle_vector(builder.insert_element(ir.Constant(bytes64, None), byte,
                                                              ir.Constant(ir.IntType(32), 0)),
                                       ir.Constant(bytes64, None), ir.Constant(ir.VectorType(ir.IntType(32), 64),
                                                                               [0] * 64))
        tested = builder.icmp_unsigned("!=", builder.and_(values, splat), ir.Constant(bytes64, None))
        return builder.bitcast(tested, ir.IntType(64))

    return types.uint64(array, index, mask), codegen


@intrinsic
def prefetch(typingctx, array, index):
    """A hint to load the cache line of array[index] (llvm.prefetch: read, keep in all levels; no fault)."""
    if not isinstance(array, types.Array) or array.layout != "C" or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        position = context.cast(builder, args[1], signature.args[1], types.intp)
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        pointer = builder.bitcast(builder.gep(data, [position]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [pointer.type, i32, i32, i32]),
                                                  "llvm.prefetch.p0")
        builder.call(function, [pointer, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen


@intrinsic
def vany(typingctx, value):
    """Whether any bit of a u64x8 is set (vptestmq and kortestb on AVX-512)."""
    if value is not u64x8:
        return None

    def codegen(context, builder, signature, args):
        words = builder.icmp_unsigned("!=", args[0], ir.Constant(u64x8.ir_type, None))
        return builder.icmp_unsigned("!=", builder.bitcast(words, ir.IntType(8)), ir.Constant(ir.IntType(8), 0))

    return types.boolean(value), codegen


#: lanes ahead whose read bytes the gather asks the cache for
PREFETCH_AHEAD = 16


@njit(cache=True, nogil=True)
def _load_rows(onehot, alive, gathered, first_row, stop_row, buf, seq_start, lengths, rows, first, count,
               bit_table, reverse):
    """DP rows first_row .. stop_row - 1 (row i >= 1: the read's i-th base
    from its end, from its start where ``reverse``) of reads rows[first:first
    + count] as one-hot planes: bit q of onehot[(i x SLOTS + c) x WORDS + q
    // 64] is set where lane q's base has code c (bit_table of the byte: 1 <<
    code, 0 for N and other codes, BASE_BIT set for every base).
    alive[i x WORDS + w]: the lanes whose read has at least i bases (row 0:
    every lane with a read). The bytes are gathered first, one lane at a
    time (a read's few bytes, so that many lanes' cache misses are in flight
    at once), into ``gathered`` (row i's lanes at i x LANES), then turned
    into the lane words a row of 64 bytes at a time."""
    lanes = WORDS * 64
    # unsigned indices: no wraparound checks in the byte loop (half its time)
    stride = np.uint64(lanes)
    low = max(first_row, 1)
    for q in range(count):
        if q + PREFETCH_AHEAD < count:  # a read's bytes are in memory, not in cache, more often than not
            ahead = rows[first + q + PREFETCH_AHEAD]
            if reverse:
                prefetch(buf, seq_start[ahead] + low - 1)
                prefetch(buf, seq_start[ahead] + stop_row - 2)
            else:
                end = seq_start[ahead] + lengths[ahead]
                prefetch(buf, max(end - low, 0))
                prefetch(buf, max(end - stop_row + 1, 0))
        r = rows[first + q]
        n = lengths[r]
        last = min(stop_row, n + 1)
        if first_row == 0:
            gathered[q] = BASE_BIT
        lane = np.uint64(q)
        if reverse:
            at = np.uint64(seq_start[r] - 1)
            for i in range(max(first_row, 1), last):
                row = np.uint64(i)
                gathered[row * stride + lane] = bit_table[np.uint64(buf[at + row])]
        else:
            at = np.uint64(seq_start[r] + n)
            for i in range(max(first_row, 1), last):
                row = np.uint64(i)
                gathered[row * stride + lane] = bit_table[np.uint64(buf[at - row])]
        for i in range(max(first_row, last), stop_row):
            gathered[i * lanes + q] = 0
    for q in range(count, lanes):
        for i in range(first_row, stop_row):
            gathered[i * lanes + q] = 0
    for i in range(first_row, stop_row):
        for w in range(WORDS):
            at = i * lanes + w * 64
            for c in range(SLOTS):
                onehot[(i * SLOTS + c) * WORDS + w] = byte_bits(gathered, at, 1 << c)
            alive[i * WORDS + w] = byte_bits(gathered, at, BASE_BIT)


@njit(cache=True, nogil=True, inline="always")
def _read_of(rows, lane):
    """The read in ``lane``: rows[lane], or ``lane`` where ``rows`` is empty (the identity)."""
    return rows[lane] if rows.shape[0] else lane


@njit(cache=True, nogil=True)
def _group_lengths(lengths, rows, first, count, group_length):
    """group_length[w]: the length of every read of lanes first + 64 w ..
    first + 64 w + 63 (of the ``count`` from ``first``) where they share one,
    else -1 (-2: no lane). Returns the longest read of the lanes."""
    longest = 0
    for w in range(WORDS):
        low = w * 64
        here = min(64, count - low)
        if here <= 0:
            group_length[w] = -2
            continue
        n = lengths[_read_of(rows, first + low)]
        shared = n
        for q in range(here):
            other = lengths[_read_of(rows, first + low + q)]
            longest = max(longest, other)
            if other != n:
                shared = -1
        group_length[w] = shared
    return longest


@njit(cache=True, nogil=True)
def _load_plane_rows(onehot, alive, first_row, stop_row, cols, width, words, lengths, rows, first, count,
                     group_length, reverse):
    """:func:`_load_rows` from a CPU screen's batch as it holds it
    (bpbc.cpu_engine.PreparedReads): ``cols`` its superblock columns
    flattened, (superblocks, ``width``, 3, ``words``): the low and high
    code bit and the valid bit (A, C, G, T; not N) of base j of the reads of
    word group g (lanes 64 g ..) at ((g // words x width + j) x 3 + plane) x
    words + g % words. Lane first + q holds read rows[first + q] (the
    identity where ``rows`` is empty); ``group_length`` as
    :func:`_group_lengths` gives it. A word group of reads of one length (of
    a batch sorted by length: nearly all) takes a row with three loads."""
    plane = words
    column = 3 * words
    for w in range(WORDS):
        shared = group_length[w]
        if shared == -2:  # no read
            for i in range(first_row, stop_row):
                for c in range(SLOTS):
                    onehot[(i * SLOTS + c) * WORDS + w] = 0
                alive[i * WORDS + w] = 0
            continue
        low_lane = first + w * 64
        here = min(64, count - w * 64)
        mask = ~np.uint64(0) if here == 64 else (np.uint64(1) << np.uint64(here)) - np.uint64(1)
        group = low_lane // 64
        base = (group // words) * width * column + group % words
        if shared >= 0:
            for i in range(first_row, stop_row):
                o = i * SLOTS * WORDS + w
                if i == 0 or i > shared:
                    for c in range(SLOTS):
                        onehot[o + c * WORDS] = 0
                    alive[i * WORDS + w] = mask if i == 0 else np.uint64(0)
                    continue
                at = base + (i - 1 if reverse else shared - i) * column
                low, high, valid = cols[at], cols[at + plane], cols[at + 2 * plane] & mask
                onehot[o] = valid & ~low & ~high
                onehot[o + WORDS] = valid & low & ~high
                onehot[o + 2 * WORDS] = valid & ~low & high
                onehot[o + 3 * WORDS] = valid & low & high
                alive[i * WORDS + w] = mask
            continue
        for i in range(first_row, stop_row):  # reads of several lengths: lane by lane
            for c in range(SLOTS):
                onehot[(i * SLOTS + c) * WORDS + w] = 0
            alive[i * WORDS + w] = 0
        for q in range(here):
            n = lengths[_read_of(rows, low_lane + q)]
            bit = np.uint64(1) << np.uint64(q)
            for i in range(first_row, min(stop_row, n + 1)):
                alive[i * WORDS + w] |= bit
                if i == 0:
                    continue
                at = base + (i - 1 if reverse else n - i) * column
                if cols[at + 2 * plane] & bit:
                    code = (1 if cols[at] & bit else 0) + (2 if cols[at + plane] & bit else 0)
                    onehot[(i * SLOTS + code) * WORDS + w] |= bit


# ----------------------------------------------------------------- the generated kernel


def _subtract_lines(planes: int, dst: str, x: str, const: int, borrow: str) -> list[str]:
    """dst = max(x - const, 0) plane by plane (``const`` > 0)."""
    if const >= 1 << planes:
        return [f"{dst}{k} = zero" for k in range(planes)]
    lines = []
    live = False
    for k in range(planes):
        bit = (const >> k) & 1
        if not live:
            lines.append(f"{dst}{k} = ~{x}{k}" if bit else f"{dst}{k} = {x}{k}")
            if bit:
                lines.append(f"{borrow} = ~{x}{k}")
                live = True
        elif bit:
            lines.append(f"{dst}{k} = ~({x}{k} ^ {borrow})")
            lines.append(f"{borrow} = ~{x}{k} | {borrow}")
        else:
            lines.append(f"{dst}{k} = {x}{k} ^ {borrow}")
            lines.append(f"{borrow} = ~{x}{k} & {borrow}")
    # the borrow out: x < const, the result floored at 0
    lines += [f"{dst}{k} = {dst}{k} & ~{borrow}" for k in range(planes)]
    return lines


def _max_lines(planes: int, dst: str, x: str, y: str) -> list[str]:
    """dst = max(x, y): x > y decided from the lowest plane up, then a select."""
    lines = [f"g = {x}0 & ~{y}0"]
    for k in range(1, planes):
        lines.append(f"g = ({x}{k} & ~{y}{k}) | (g & ({x}{k} | ~{y}{k}))")
    lines += [f"{dst}{k} = {y}{k} ^ (({x}{k} ^ {y}{k}) & g)" for k in range(planes)]
    return lines


def _cell_lines(planes: int, scoring: Scoring, diagonal: bool) -> list[str]:
    """One cell: hd (H of the row above, column before), hu, eu (H, E of the
    row above), hl, f (H, F of this row, column before), mw (the match word)
    in; h, e, f out (e, f: the gaps of this cell)."""
    b = planes
    lines = []
    if diagonal:
        lines += _subtract_lines(b, "dm", "hd", scoring.match + scoring.mismatch, "bw")
        lines += [f"d{k} = dm{k} ^ ((hd{k} ^ dm{k}) & mw)" for k in range(b)]
    lines += _subtract_lines(b, "eo", "hu", scoring.first_gap, "bw")
    lines += _subtract_lines(b, "ee", "eu", scoring.gap_extend, "bw")
    lines += _max_lines(b, "e", "eo", "ee")
    if diagonal:
        lines += _subtract_lines(b, "fo", "hl", scoring.first_gap + scoring.match, "bw")
        lines += _subtract_lines(b, "fe", "f", scoring.gap_extend + scoring.match, "bw")
        lines += _max_lines(b, "f", "fo", "fe")
        lines += _max_lines(b, "t", "d", "e")
        lines += _max_lines(b, "h", "t", "f")
    else:  # column 0: only E
        lines += [f"h{k} = e{k}" for k in range(b)]
    return lines


_KERNEL = '''\
"""Generated by bpbc/end_overlap.py ({target}): the bit-sliced end-overlap
decision for {planes} planes, scoring {scoring}. Do not edit."""
import numpy as np
from numba import njit

from bpbc.cpu_vector import vload, vstore, vzero8 as vzero
from bpbc.end_overlap import SLOTS, WORDS, vany, _group_lengths, _load_plane_rows, _load_rows, _read_of

# versions: end_overlap {version} ({module_digest}), cpu_vector {vector_version}
B = {planes}


@njit(cache=True, nogil=True)
def rows_kernel(onehot, alive, table, hs, es, columns, m, slack, row_from, row_to, found, span):
    """Rows row_from..row_to of one task's DP over one superblock (state hs,
    es: column c plane k at (c * B + k) * WORDS); found: the lanes passed so
    far; span: the first and last column holding a cell above 0 in a lane
    still open (not passed, its read not ended) in the row before, every
    other column in the band holding 0 there. Returns the last row computed,
    or minus the row where every lane settled."""
    zero = vzero()
    ones = ~zero
    fd = vload(found, 0)
    lo = span[0]
    hi = span[1]
    for i in range(row_from, row_to + 1):
        o = i * SLOTS * WORDS
        s0 = vload(onehot, o)
        s1 = vload(onehot, o + WORDS)
        s2 = vload(onehot, o + 2 * WORDS)
        s3 = vload(onehot, o + 3 * WORDS)
{table_lines}
        lanes = vload(alive, i * WORDS)
        keep = lanes & ~fd
        left = max(i - slack, lo)
        live = zero
        first_live = m + 1
        last_live = -1
        # column left - 1 of this row holds 0 in every open lane: outside the band, or left of the span
        before = False
        if left <= 0:
{column0_lines}
            left = 1
        else:
{band_lines}
        last = left - 1
        for c in range(left, m + 1):
            if c > hi + 1 and not before:
                break  # no cell of an open lane above 0 from here on (its three sources hold 0)
            mw = vload(table, columns[c] * WORDS)
{cell_lines}
            last = c
        if last == m:
            fd = fd | ((hl0{or_hl}) & lanes)
        lo = first_live
        hi = last_live
        if not vany(live & lanes & ~fd):
            vstore(found, 0, fd)
            span[0] = lo
            span[1] = hi
            return -i
    vstore(found, 0, fd)
    span[0] = lo
    span[1] = hi
    return row_to


@njit(cache=True, nogil=True)
def _start(hs, es, values, m, found, alive, span):
    """Row 0: every column's start value in all lanes; E dead; found: every
    lane with a read where column m starts at a passing value; span: the
    first and last column starting above 0."""
    span[0] = m + 1
    span[1] = -1
    for c in range(m + 1):
        if values[c] > 0:
            span[0] = min(span[0], c)
            span[1] = c
        for k in range(B):
            word = np.uint64(0) - np.uint64((values[c] >> k) & 1)
            for w in range(WORDS):
                hs[(c * B + k) * WORDS + w] = word
                es[(c * B + k) * WORDS + w] = 0
    for w in range(WORDS):
        found[w] = alive[w] if values[m] > 0 else 0


@njit(cache=True, nogil=True)
def first_pass(buf, seq_start, lengths, rows, reads, bit_table, cols, cols_width, cols_words, task_columns,
               task_starts, task_end, task_slack, task_values, first_rows, group, groups, flags, listed):
    """flags[rows[j], k] = 1 where read rows[j] has a passing overlap in task
    k, j < ``reads`` (``rows`` empty: the identity): the superblocks of 512
    reads of group ``group`` of ``groups`` (each group's flags are rows of
    its own: threads may run groups at once). The reads' bases come from
    their bytes (``buf``, ``seq_start``, through ``bit_table``) or, where
    ``cols_words`` > 0, from a CPU batch's bit planes (``cols``, lane j
    holding read rows[j]: _load_plane_rows). Returns how many reads it
    flagged, each once, listed in ``listed`` (in lane order; one thread's
    group only: ``groups`` 1) where it has room for every read."""
    count_listed = 0
    listing = listed.shape[0] >= reads
    tasks = task_starts.shape[0] - 1
    blocks = (reads + WORDS * 64 - 1) // (WORDS * 64)
    longest_pattern = 0
    longest_reach = 1
    for k in range(tasks):
        longest_pattern = max(longest_pattern, task_starts[k + 1] - task_starts[k])
        longest_reach = max(longest_reach, task_starts[k + 1] - task_starts[k] + task_slack[k])
    onehot = np.zeros((longest_reach + 1) * SLOTS * WORDS, np.uint64)
    gathered = np.zeros((longest_reach + 1) * WORDS * 64, np.uint8)
    alive = np.zeros((longest_reach + 1) * WORDS, np.uint64)
    table = np.zeros(16 * WORDS, np.uint64)
    hs = np.zeros((longest_pattern + 1) * B * WORDS, np.uint64)
    es = np.zeros_like(hs)
    found = np.zeros(WORDS, np.uint64)
    span = np.zeros(2, np.int64)
    ahead = np.zeros(2, np.int64)  # per end: load every row at once (the last block needed more than the first)
    group_length = np.zeros(WORDS, np.int64)
    for block in range(group * blocks // groups, (group + 1) * blocks // groups):
        first = block * WORDS * 64
        count = min(WORDS * 64, reads - first)
        longest = _group_lengths(lengths, rows, first, count, group_length)
        for end in range(2):
            loaded = 0
            needed = 0  # the most rows a task of this end needed
            for k in range(tasks):
                if task_end[k] != end:
                    continue
                m = task_starts[k + 1] - task_starts[k] - 1  # columns 0..m
                if m < 1:
                    continue
                width = min(longest, m + task_slack[k])
                if loaded == 0:
                    # a few rows at first, unless the last block needed them all (reads with adapters)
                    loaded = min(width, first_rows if ahead[end] == 0 else width)
                    if cols_words:
                        _load_plane_rows(onehot, alive, 0, loaded + 1, cols, cols_width, cols_words, lengths, rows,
                                         first, count, group_length, end == 1)
                    else:
                        _load_rows(onehot, alive, gathered, 0, loaded + 1, buf, seq_start, lengths, rows, first,
                                   count, bit_table, end == 1)
                columns = task_columns[task_starts[k]:task_starts[k + 1]]
                _start(hs, es, task_values[task_starts[k]:task_starts[k + 1]], m, found, alive, span)
                done = 0
                while 0 <= done < width:
                    if loaded < width and done >= loaded:
                        if cols_words:
                            _load_plane_rows(onehot, alive, loaded + 1, width + 1, cols, cols_width, cols_words,
                                             lengths, rows, first, count, group_length, end == 1)
                        else:
                            _load_rows(onehot, alive, gathered, loaded + 1, width + 1, buf, seq_start, lengths, rows,
                                       first, count, bit_table, end == 1)
                        loaded = width
                    done = rows_kernel(onehot, alive, table, hs, es, columns, m, task_slack[k], done + 1,
                                       min(width, loaded), found, span)
                needed = max(needed, -done if done < 0 else width)
                for w in range(WORDS):
                    word = found[w]
                    while word:
                        bit = 0
                        probe = word
                        while (probe & np.uint64(1)) == 0:
                            probe >>= np.uint64(1)
                            bit += 1
                        read = _read_of(rows, first + w * 64 + bit)
                        if listing:
                            new = True
                            for other in range(tasks):
                                if flags[read, other]:
                                    new = False
                            if new:
                                listed[count_listed] = read
                                count_listed += 1
                        flags[read, k] = 1
                        word &= word - np.uint64(1)
            ahead[end] = 1 if needed > first_rows else 0
    return count_listed
'''


@cache
def _module_digest() -> str:
    """A digest of this file: the generated kernel calls its helpers, and
    numba's cache of the kernel does not follow changes to them."""
    with open(__file__, "rb") as fh:
        return hashlib.sha1(fh.read()).hexdigest()[:12]


def _indent(lines: list[str], depth: int) -> str:
    return "\n".join(" " * depth + line for line in lines)


def kernel_source(planes: int, scoring: Scoring, target: str = "") -> str:
    """Python source of the generated module for ``planes`` planes and ``scoring``."""
    b = planes
    table_lines = ["vstore(table, 0, zero)"]
    for mask in range(1, 16):
        terms = " | ".join(f"s{base}" for base in range(4) if mask >> base & 1)
        table_lines.append(f"vstore(table, {mask * WORDS}, {terms})")
    load_up = [f"hu{k} = vload(hs, (c * B + {k}) * WORDS)" for k in range(b)]
    load_up += [f"eu{k} = vload(es, (c * B + {k}) * WORDS)" for k in range(b)]
    store = [f"vstore(hs, (c * B + {k}) * WORDS, h{k})" for k in range(b)]
    store += [f"vstore(es, (c * B + {k}) * WORDS, e{k})" for k in range(b)]
    # a column's cells above 0 in an open lane: the span of the row, and whether the next column can hold any
    live = ["hor = " + " | ".join(f"h{k}" for k in range(b)), "live = live | hor", "before = vany(hor & keep)",
            "if before:", "    first_live = min(first_live, c)", "    last_live = c"]
    shift = [f"hd{k} = hu{k}" for k in range(b)] + [f"hl{k} = h{k}" for k in range(b)]
    column0 = ["c = 0"] + load_up + _cell_lines(b, scoring, diagonal=False) + store + live + shift
    column0 += [f"f{k} = zero" for k in range(b)]
    band = [f"hd{k} = vload(hs, ((left - 1) * B + {k}) * WORDS)" for k in range(b)]
    band += [f"hl{k} = zero" for k in range(b)] + [f"f{k} = zero" for k in range(b)]
    cell = load_up + _cell_lines(b, scoring, diagonal=True) + store + live + shift
    return _KERNEL.format(
        target=target, planes=b, scoring=scoring, version=VERSION, vector_version=VECTOR_VERSION,
        module_digest=_module_digest(),
        table_lines=_indent(table_lines, 8), column0_lines=_indent(column0, 12), band_lines=_indent(band, 12),
        cell_lines=_indent(cell, 12), or_hl="".join(f" | hl{k}" for k in range(1, b)))


@cache
def kernel_module(planes: int, scoring: Scoring):
    """The generated module for ``planes`` and ``scoring`` (written to the
    cache directory on first use, compiled by numba or loaded from its cache)."""
    source = kernel_source(planes, scoring, cpu_target().label)
    return generated_module(f"bpbc_end_overlap_b{planes}", source)


# ----------------------------------------------------------------- the pass


class Decision:
    """What the bit-sliced pass needs of a trimmer's end tasks, computed once:
    each task's columns (pattern masks in DP order, column c holding P's base
    m - c), start values and the plane count of the kernel (None: no read can
    pass any task; ``planes`` > MAX_PLANES: use the vector DP instead)."""

    def __init__(self, tasks, min_overlap: int, scoring: Scoring):
        self.scoring = scoring
        columns, values = [], []
        starts = [0]
        largest = 0
        for k in range(len(tasks)):
            masks = tasks.masks[tasks.starts[k]:tasks.starts[k + 1]]
            m = len(masks)
            column = np.zeros(m + 1, np.int64)
            column[1:] = masks[::-1]  # column c: masks[m - c]
            value = (start_values(tasks.thresholds[k], m, min_overlap, scoring) if m >= min_overlap
                     else np.zeros(m + 1, np.int64))
            largest = max(largest, int(value.max()) if len(value) else 0)
            columns.append(column)
            values.append(value)
            starts.append(starts[-1] + m + 1)
        self.columns = np.concatenate(columns) if columns else np.zeros(0, np.int64)
        self.values = np.concatenate(values) if values else np.zeros(0, np.int64)
        self.starts = np.array(starts, np.int64)
        self.end = np.ascontiguousarray(tasks.end, np.int64)
        self.slack = np.ascontiguousarray(tasks.slack, np.int64)
        self.planes = int(largest).bit_length()
        #: the arrays above on each GPU (device ordinal -> cupy arrays), copied there on first use
        self.device_arrays: dict[int, tuple] = {}

    @property
    def usable(self) -> bool:
        return self.planes <= MAX_PLANES

    def module(self):
        return kernel_module(max(self.planes, 1), self.scoring)

    def flags(self, buf, seq_start, lengths, bit_table, rows: np.ndarray, out: np.ndarray,
              first_rows: int = FIRST_ROWS) -> None:
        """out[rows[j], k] = 1 where read rows[j] has a passing overlap in task
        k: read r is bytes buf[seq_start[r]:][:lengths[r]], each through
        :func:`bit_table`; ``first_rows``: the rows transposed at first."""
        if self.planes == 0 or not len(rows):
            return
        # one thread: the pass is a few milliseconds per 100,000 reads, and in
        # a run the screen's kernels keep the other cores busy meanwhile (on 2
        # cores, with the screen of the next chunk running, shared between 2
        # threads it took 17-25 ms per 400,000 adapter-free reads, on one 9.5)
        self.module().first_pass(buf, seq_start, lengths, rows, len(rows), bit_table, _NO_COLUMNS, 0, 0, self.columns,
                                 self.starts, self.end, self.slack, self.values, max(1, first_rows), 0, 1, out,
                                 _NO_ROWS)

    def plane_flags(self, prepared, lengths: np.ndarray, out: np.ndarray,
                    first_rows: int = FIRST_ROWS) -> np.ndarray:
        """:meth:`flags` of every read of a CPU screen's batch from its bit
        planes (``prepared``: a bpbc.cpu_engine.PreparedReads, lane i holding
        read ``order[i]``; ``lengths``: int64, the reads' lengths in input
        order), not from the reads' bytes: a row of 64 reads of one length is
        three words of the batch's columns, where gathering a row's bytes a
        read at a time cost as much as the DP (2-core Zen 5, one thread,
        100,000 reads of 150 bp, the same flags: adapter-free 1.83 -> 0.77
        ms, planted 3.36 -> 1.95 ms). Returns the reads flagged, ascending
        (no pass over ``out`` for them: 0.14 ms per 100,000 reads)."""
        if self.planes == 0 or not prepared.n:
            return _NO_ROWS
        cols = prepared.cols
        listed = np.empty(prepared.n, np.int64)
        count = self.module().first_pass(_NO_BYTES, _NO_ROWS, lengths, prepared.lane_order, prepared.n, _NO_BYTES,
                                         cols.reshape(-1), cols.shape[1], cols.shape[3], self.columns, self.starts,
                                         self.end, self.slack, self.values, max(1, first_rows), 0, 1, out, listed)
        listed = listed[:count]
        if len(prepared.lane_order) or len(self.starts) > 2:  # lanes in length order, or listed task by task
            listed.sort()
        return listed


_NO_BYTES = np.zeros(0, np.uint8)
_NO_ROWS = np.zeros(0, np.int64)
_NO_COLUMNS = np.zeros(0, np.uint64)


# ----------------------------------------------------------------- the GPU pass (bpbc/end_overlap.cu)

GPU_KERNEL_PATH = Path(__file__).with_name("end_overlap.cu")
GPU_THREADS_PER_BLOCK = 128
#: the kernel on sequence bytes, and the one on a batch's bit planes
GPU_KERNELS = ("end_overlap_decide", "end_overlap_decide_planes")


def gpu_expression(planes: int, scoring: Scoring, columns: int, kernel: str = GPU_KERNELS[0]) -> str:
    """The name expression of a kernel's instance (``kernel``, one of
    GPU_KERNELS): planes, the five subtracted constants, and the local
    state's columns (``columns``, at least the longest task's m + 1, rounded
    up to a multiple of 8)."""
    ma, first_gap, extend = scoring.match, scoring.first_gap, scoring.gap_extend
    columns = -(-columns // 8) * 8
    return f"{kernel}<{planes},{ma + scoring.mismatch},{first_gap},{extend},{first_gap + ma},{extend + ma},{columns}>"


@cache
def _gpu_function(expression: str, device: int):
    """The kernel instance, compiled by NVRTC (cached by CuPy on disk) for ``device``."""
    import cupy
    from cupy.cuda.compiler import CompileException

    from .errors import InternalError

    module = cupy.RawModule(code=GPU_KERNEL_PATH.read_text(), options=("-std=c++17",), name_expressions=(expression,))
    try:
        module.compile()
    except CompileException as error:
        raise InternalError(f"NVRTC failed to compile {GPU_KERNEL_PATH} ({expression}):\n{error}") from error
    return module.get_function(expression)


def gpu_function(decision: Decision, kernel: str = GPU_KERNELS[0]):
    """``kernel``'s instance for ``decision`` on the current device
    (compiled, or loaded from CuPy's cache, on first use)."""
    import cupy

    longest = int(np.diff(decision.starts).max())
    return _gpu_function(gpu_expression(max(decision.planes, 1), decision.scoring, longest, kernel),
                         cupy.cuda.runtime.getDevice())


def warm_up_gpu(decision: Decision, device: int) -> None:
    """Load the planes kernel for ``decision`` on ``device`` (compiled by
    NVRTC where CuPy's cache is cold), beside the run's first batches; a
    failure is left for the run to meet where it would anyway."""
    if decision.planes == 0:
        return
    try:
        import cupy

        with cupy.cuda.Device(device):
            gpu_function(decision, GPU_KERNELS[1])
            _task_arrays(decision)
    except Exception:  # noqa: BLE001 - no usable GPU, or a broken one: the run says so
        pass


def _task_arrays(decision: Decision) -> tuple:
    """The decision's task arrays on the current device, copied there once
    (the columns as int32, the others as the kernels take them)."""
    import cupy

    device = cupy.cuda.runtime.getDevice()
    arrays = decision.device_arrays.get(device)
    if arrays is None:
        arrays = (cupy.asarray(decision.columns, cupy.int32), cupy.asarray(decision.starts, cupy.int64),
                  cupy.asarray(decision.end, cupy.int32), cupy.asarray(decision.slack, cupy.int32),
                  cupy.asarray(decision.values, cupy.int32))
        cupy.cuda.get_current_stream().synchronize()  # there for kernels on any stream
        decision.device_arrays[device] = arrays
    return arrays


def gpu_flags(decision: Decision, buf, seq_start, lengths, bit_table, rows: np.ndarray, out: np.ndarray) -> None:
    """:meth:`Decision.flags` on the GPU (CuPy, imported here) from sequence
    bytes: one thread per task and 32 reads. ``buf``, ``seq_start``,
    ``lengths`` may be host (numpy) or device (cupy) arrays: host ones are
    copied to the device."""
    if decision.planes == 0 or not len(rows):
        return
    import cupy

    tasks = len(decision.starts) - 1
    function = gpu_function(decision)
    device_rows = cupy.asarray(np.ascontiguousarray(rows, np.int64))
    flags = cupy.zeros(out.shape, cupy.int32)
    threads = -(-len(rows) // 32) * tasks
    blocks = -(-threads // GPU_THREADS_PER_BLOCK)
    function((blocks,), (GPU_THREADS_PER_BLOCK,), (
        cupy.asarray(buf).view(cupy.uint8).reshape(-1), cupy.asarray(seq_start, cupy.int64),
        cupy.asarray(lengths, cupy.int64), device_rows, np.int64(len(rows)), cupy.asarray(bit_table, cupy.uint8),
        *_task_arrays(decision), np.int32(tasks), flags))
    np.maximum(out, flags.get(), out=out)


def lane_flags(words: np.ndarray, order: np.ndarray) -> np.ndarray:
    """bool (n, tasks) in input order from the planes kernel's words (uint32
    (groups, tasks): bit q of [g, k] for lane 32 g + q of the sorted batch),
    ``order`` the batch's sorting permutation (lane i holds read order[i])."""
    n = len(order)
    groups, tasks = words.shape
    bits = np.unpackbits(np.ascontiguousarray(words, "<u4").view(np.uint8).reshape(groups, tasks, 4), axis=2,
                         bitorder="little")
    flags = np.empty((n, tasks), bool)
    flags[order] = bits.transpose(0, 2, 1).reshape(groups * 32, tasks)[:n]
    return flags


class PlaneFlags:
    """The decision begun on the GPU over a batch's bit planes
    (:func:`launch_plane_flags`); :meth:`result` waits for it. It holds the
    planes until then: the batch may be gone, and its memory must not be
    handed to other work while the kernel reads it."""

    def __init__(self, words, order: np.ndarray, stream, planes):
        self._words, self._order, self._stream, self._planes = words, order, stream, planes
        self._flags: np.ndarray | None = None

    def result(self) -> np.ndarray:
        """bool (reads, tasks) in input order: True where the read has a passing overlap in the task."""
        if self._flags is None:
            import cupy

            with cupy.cuda.Device(self._words.device.id):
                words = self._words.get(stream=self._stream)  # waits for this stream only
            self._flags = lane_flags(words, self._order)
            self._words = self._planes = None
        return self._flags


class NoFlags:
    """:class:`PlaneFlags` of a decision where no read can pass (no kernel run)."""

    def __init__(self, reads: int, tasks: int):
        self._flags = np.zeros((reads, tasks), bool)

    def result(self) -> np.ndarray:
        return self._flags


def launch_plane_flags(decision: Decision, planes, sorted_lengths: np.ndarray, order: np.ndarray, stream):
    """Begin the decision over a batch as the GPU screen holds it: its bit
    planes (cupy uint32 (groups, width, 3), transpose/cpu.py's layout, on the
    current device), the reads' lengths in that (sorted) order, the sorting
    permutation (lane i holds read order[i]). Launched on ``stream`` (a
    non-blocking stream: the screen of the next batch may already be queued
    on the default one; the batch's own screen, which wrote nothing to the
    planes, has returned). Only the lengths are copied to the device, and
    only a word per task and 32 reads comes back. Returns a
    :class:`PlaneFlags` (or :class:`NoFlags`)."""
    n, tasks = len(order), len(decision.starts) - 1
    if decision.planes == 0 or not n or not tasks:
        return NoFlags(n, tasks)
    import cupy

    if planes.dtype != cupy.uint32 or planes.ndim != 3 or planes.shape[2] != 3 or not planes.flags.c_contiguous:
        raise ValueError("the planes must be C-contiguous uint32 (groups, width, 3)")
    groups = -(-n // 32)
    if planes.shape[0] < groups:
        raise ValueError(f"{planes.shape[0]} word groups of planes for {n} reads")
    with stream:
        function = gpu_function(decision, GPU_KERNELS[1])
        lengths = cupy.asarray(np.ascontiguousarray(sorted_lengths, np.int32))
        words = cupy.zeros((groups, tasks), cupy.uint32)
        blocks = -(-groups * tasks // GPU_THREADS_PER_BLOCK)
        function((blocks,), (GPU_THREADS_PER_BLOCK,), (
            planes, np.int32(planes.shape[1]), lengths, np.int64(n), *_task_arrays(decision), np.int32(tasks),
            words))
    return PlaneFlags(words, order, stream, planes)


def bit_table(table: np.ndarray) -> np.ndarray:
    """byte -> gathered byte: 1 << its read code (through ``table``) for A, C,
    G, T, 0 for other codes, BASE_BIT set for all."""
    return (np.where(table < 4, np.left_shift(1, np.minimum(table, 7)), 0) | BASE_BIT).astype(np.uint8)
