"""Full Gotoh local alignment with traceback, for the instances that pass the screen.

Recurrences (the same as :mod:`bpbc.reference`): i runs over the read, j over
the pattern, and for i, j >= 1::

    E[i][j] = max(E[i-1][j] - extend, H[i-1][j] - (open + extend))   # I: read base vs gap
    F[i][j] = max(F[i][j-1] - extend, H[i][j-1] - (open + extend))   # D: pattern base vs gap
    H[i][j] = max(0, H[i-1][j-1] + s, E[i][j], F[i][j])

A gap state is entered only from H, so an insertion next to a deletion pays
two gap openings (parasail's model too).

Tie rule (the one rule every alignment follows):

* End cell: the cell with maximal H; among equal cells the smallest read end
  i, then the smallest pattern end j.
* In state H, the traceback prefers the diagonal (M, i.e. = or X), then E
  (I, gap in the pattern), then F (D, gap in the read): H's source is the
  first of these, in that order, whose value equals H. Walking back from the
  end with the diagonal first puts a gap in a repeat as far toward the
  alignment start as possible (GAAAC vs GAAAAC gives 1M1D4M).
* In a gap state (E or F) the traceback prefers closing the gap, i.e.
  returning to the H cell the gap was opened from, over extending it, when
  both give the same value. The traceback always follows the state that
  produced the value, so gap opens and extends are charged exactly.
* The alignment starts at the first cell on the traced path (walking back
  from the end) whose H is 0, or at row/column 0. It therefore begins and
  ends with a matching base.
* All of this holds in the orientation that is aligned: on strand '-' the
  read is aligned against the reverse-complement pattern by these rules, and
  only then are pattern coordinates and CIGAR mapped to the forward pattern.

Score 0 (no base matches anything): no alignment. Everything is reported as
0 (score, coordinates, nm, matches, length; for either strand) with an empty
CIGAR. The screen only asks for instances with score >= threshold >= 1.

Coordinates are 0-based and end-exclusive. CIGAR ops: M (or = / X with
``eqx``), I = base only in the read, D = base only in the pattern. ``nm`` is
mismatches + inserted + deleted bases (an IUPAC pattern position matched by
the read base counts as a match), ``matches`` the number of matching columns,
``length`` the number of alignment columns.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from bpbc.alphabet import INVALID
from bpbc.result import AlignmentTable, Texts
from bpbc.scoring import Scoring

# alignment op codes in the kernels
OP_MATCH, OP_MISMATCH, OP_INS, OP_DEL = 0, 1, 2, 3
# traceback pointer bits, one byte per DP cell
_H_FROM_ZERO, _H_FROM_DIAG, _H_FROM_E, _H_FROM_F = 0, 1, 2, 3
_H_SOURCE = 3
_E_OPENED = 4  # E[i][j] came from H[i-1][j] (gap opened), else from E[i-1][j]
_F_OPENED = 8  # F[i][j] came from H[i][j-1], else from F[i][j-1]
_NEG = -(1 << 29)  # E and F on row/column 0: no gap can end there (int32 cells)
LANES = 16  #: reads aligned together: one int32 AVX-512 vector per DP operation

# result columns of the batch kernel
_SCORE, _READ_START, _READ_END, _PAT_START, _PAT_END, _N_OPS, _NM, _MATCHES = range(8)

_EQX_LETTERS = np.array([ord("="), ord("X"), ord("I"), ord("D")], dtype=np.uint8)
_M_LETTERS = np.array([ord("M"), ord("M"), ord("I"), ord("D")], dtype=np.uint8)


SLOTS = 8  # per column: H, E of the row above, then the carried h_diag, h_left, f, best, best_i, best_j


@njit(cache=True, nogil=True)
def _forward_lanes(block, pattern, match, mismatch, gap_open, gap_extend, pointers, result):
    """Gotoh forward pass for LANES reads at once (block: (n, LANES) codes,
    padded with INVALID); pointer bytes into pointers (n+1, m+1, LANES);
    result (LANES, 3): best, best_i, best_j (first maximum in (i, j) order).
    State for column j sits in slots of one flat array, and the values carried
    along a row move from column j-1's slots to column j's: every access is
    ``cells[CONSTANT + q]`` of one view, so LLVM vectorises over the lanes."""
    n = block.shape[0]
    m = pattern.shape[0]
    K = LANES
    C = SLOTS * K
    # every DP value, index and pointer bit is an int32 (numba would widen
    # int32 arithmetic to int64, and 64-bit max and blends are several
    # instructions each without AVX-512): np.int32 around each result lets
    # LLVM keep 32-bit lanes throughout
    oc = np.int32(gap_open + gap_extend)
    ge = np.int32(gap_extend)
    ma = np.int32(match)
    mi = np.int32(-mismatch)
    zero = np.int32(0)
    neg = np.int32(_NEG)
    from_zero, from_diag = np.int32(_H_FROM_ZERO), np.int32(_H_FROM_DIAG)
    from_e, from_f = np.int32(_H_FROM_E), np.int32(_H_FROM_F)
    e_flag, f_flag = np.int32(_E_OPENED), np.int32(_F_OPENED)
    st = np.zeros((m + 1) * C, np.int32)
    for j in range(m + 1):
        st[j * C + K: j * C + 2 * K] = neg
    for i in range(1, n + 1):
        codes = block[i - 1]
        row = np.int32(i)
        for q in range(K):
            st[2 * K + q] = st[q]  # h_diag = H[i-1][0]
            st[3 * K + q] = 0  # h_left = H[i][0]
            st[4 * K + q] = neg  # f
            st[5 * K + q] = st[m * C + 5 * K + q]  # best so far: from the end of the previous row
            st[6 * K + q] = st[m * C + 6 * K + q]
            st[7 * K + q] = st[m * C + 7 * K + q]
        for j in range(1, m + 1):
            pm = np.int32(pattern[j - 1])
            col = np.int32(j)
            cells = st[(j - 1) * C:(j + 1) * C]
            prow = pointers[i, j]
            for q in range(K):
                code = np.int32(codes[q])
                s = ma if (code < 4) & (np.int32(np.int32(pm >> np.int32(code & 3)) & 1) == 1) else mi
                h_up = cells[C + q]
                e_open = np.int32(h_up - oc)
                e_extend = np.int32(cells[C + K + q] - ge)
                e_opened = e_open >= e_extend
                e = max(e_open, e_extend)
                f_open = np.int32(cells[3 * K + q] - oc)
                f_extend = np.int32(cells[4 * K + q] - ge)
                f_opened = f_open >= f_extend
                f = max(f_open, f_extend)
                diag = np.int32(cells[2 * K + q] + s)
                source = from_diag if diag > 0 else from_zero
                h = max(diag, zero)
                source = from_e if e > h else source
                h = max(h, e)
                source = from_f if f > h else source
                h = max(h, f)
                source = np.int32(source | (e_flag if e_opened else zero))
                prow[q] = np.uint8(source | (f_flag if f_opened else zero))
                best = cells[5 * K + q]
                better = h > best
                cells[C + q] = h
                cells[C + K + q] = e
                cells[C + 2 * K + q] = h_up
                cells[C + 3 * K + q] = h
                cells[C + 4 * K + q] = f
                cells[C + 5 * K + q] = h if better else best
                cells[C + 6 * K + q] = row if better else cells[6 * K + q]
                cells[C + 7 * K + q] = col if better else cells[7 * K + q]
    for q in range(K):
        result[q, 0] = st[m * C + 5 * K + q]
        result[q, 1] = st[m * C + 6 * K + q]
        result[q, 2] = st[m * C + 7 * K + q]


@njit(cache=True, nogil=True)
def _walk(read, pattern, pointers, best_i, best_j, ops):
    """Follow the pointers back from the end cell (best_i, best_j); writes the
    ops in read order into ``ops``; returns (read_start, pattern_start, n_ops)."""
    i = best_i
    j = best_j
    n_ops = 0
    state = 0  # 0 = H, 1 = E, 2 = F
    while True:
        if state == 0:
            if i == 0 or j == 0:
                break
            source = pointers[i, j] & _H_SOURCE
            if source == _H_FROM_ZERO:
                break
            if source == _H_FROM_DIAG:
                code = read[i - 1]
                if code != INVALID and (pattern[j - 1] >> code) & 1:
                    ops[n_ops] = OP_MATCH
                else:
                    ops[n_ops] = OP_MISMATCH
                n_ops += 1
                i -= 1
                j -= 1
            elif source == _H_FROM_E:
                state = 1
            else:
                state = 2
        elif state == 1:
            ops[n_ops] = OP_INS
            n_ops += 1
            if pointers[i, j] & _E_OPENED:
                state = 0
            i -= 1
        else:
            ops[n_ops] = OP_DEL
            n_ops += 1
            if pointers[i, j] & _F_OPENED:
                state = 0
            j -= 1
    # ops were collected end to start
    for k in range(n_ops // 2):
        tmp = ops[k]
        ops[k] = ops[n_ops - 1 - k]
        ops[n_ops - 1 - k] = tmp
    return i, j, n_ops


def _align_batch_body(codes, lengths, rows, pattern_codes, pattern_start, block_first, block_pattern,
                      match, mismatch, gap_open, gap_extend, ops):
    """Align reads ``codes[rows[t], :lengths[rows[t]]]``, block b (rows
    block_first[b] to block_first[b + 1], at most LANES) against oriented
    pattern block_pattern[b] of the flat table (pattern_codes, pattern_start),
    in parallel over blocks (pass rows sorted by length within a pattern to
    waste little on padding). Fills ``ops[t]`` and returns an int64 (k, 8)
    table (see the _SCORE.. column names). Padding rows hold INVALID codes:
    their cells stay below the real maximum, so they change no alignment."""
    k = rows.shape[0]
    out = np.zeros((k, 8), dtype=np.int64)
    for b in prange(block_first.shape[0] - 1):
        first = block_first[b]
        count = block_first[b + 1] - first
        p = block_pattern[b]
        pattern = pattern_codes[pattern_start[p]:pattern_start[p + 1]]
        m = pattern.shape[0]
        n = 0
        for q in range(count):
            n = max(n, lengths[rows[first + q]])
        block = np.full((n, LANES), INVALID, dtype=np.uint8)
        for q in range(count):
            row = rows[first + q]
            for i in range(lengths[row]):
                block[i, q] = codes[row, i]
        pointers = np.empty((n + 1, m + 1, LANES), dtype=np.uint8)
        best = np.zeros((LANES, 3), dtype=np.int64)
        _forward_lanes(block, pattern, match, mismatch, gap_open, gap_extend, pointers, best)
        for q in range(count):
            t = first + q
            row = rows[t]
            read = codes[row, : lengths[row]]
            rs, ps, n_ops = _walk(read, pattern, pointers[:, :, q], best[q, 1], best[q, 2], ops[t])
            n_match = 0
            for o in range(n_ops):
                if ops[t, o] == OP_MATCH:
                    n_match += 1
            out[t, _SCORE] = best[q, 0]
            out[t, _READ_START] = rs
            out[t, _READ_END] = best[q, 1]
            out[t, _PAT_START] = ps
            out[t, _PAT_END] = best[q, 2]
            out[t, _N_OPS] = n_ops
            out[t, _NM] = n_ops - n_match
            out[t, _MATCHES] = n_match
    return out


@njit(cache=True, nogil=True)
def _cigar_text(ops, n_ops, letters, reverse, buf):
    """Write the run-length CIGAR of ``ops[:n_ops]`` (read backwards when
    ``reverse``) into ``buf``; returns the number of bytes. With ``buf`` of
    size 0 it only counts."""
    size = 0
    q = 0
    while q < n_ops:
        letter = letters[ops[n_ops - 1 - q] if reverse else ops[q]]
        run = 1
        while q + run < n_ops and letters[ops[n_ops - 1 - q - run] if reverse else ops[q + run]] == letter:
            run += 1
        digits = 1
        power = 10
        while run >= power:
            digits += 1
            power *= 10
        if buf.shape[0]:
            value = run
            for d in range(digits):
                buf[size + digits - 1 - d] = 48 + value % 10
                value //= 10
            buf[size + digits] = letter
        size += digits + 1
        q += run
    return size


def _cigars_body(ops, n_ops, letters, reverse):
    """All CIGARs of a batch in one byte buffer (CIGAR t read backwards where
    ``reverse[t]``); returns (buf, offsets)."""
    k = n_ops.shape[0]
    empty = np.empty(0, dtype=np.uint8)
    sizes = np.zeros(k, dtype=np.int64)
    for t in prange(k):
        sizes[t] = _cigar_text(ops[t], n_ops[t], letters, reverse[t], empty)
    offsets = np.zeros(k + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(sizes)
    buf = np.empty(offsets[k], dtype=np.uint8)
    for t in prange(k):
        _cigar_text(ops[t], n_ops[t], letters, reverse[t], buf[offsets[t] : offsets[t + 1]])
    return buf, offsets


# Parallel kernels for batches, serial twins for a few instances: starting a
# parallel region costs far more than aligning one read, above all on a busy
# machine where the worker threads have to be woken up.
_align_batch_parallel = njit(parallel=True, cache=True, nogil=True)(_align_batch_body)
_align_batch_serial = njit(cache=True, nogil=True)(_align_batch_body)
_cigars_parallel = njit(parallel=True, cache=True, nogil=True)(_cigars_body)
_cigars_serial = njit(cache=True, nogil=True)(_cigars_body)
_PARALLEL_FROM = 32  #: instances from which the parallel kernels are used


def _run_batch(codes, lengths, rows, table, ks, scoring, eqx, reverse_cigar):
    """Align (rows[t], oriented pattern ks[t] of ``table``) for every t:
    the (t, 8) result table and the CIGARs (read backwards where
    ``reverse_cigar[t]``)."""
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    ks = np.ascontiguousarray(ks, dtype=np.int64)
    if codes.ndim != 2:
        raise ValueError("codes must be 2-D (reads x positions)")
    if rows.size and (lengths[rows] > codes.shape[1]).any():
        raise ValueError("a read length exceeds the width of the code matrix")
    count = rows.shape[0]
    longest = int(table.lengths.max()) if len(table) else 0
    ops = np.empty((count, max(codes.shape[1] + longest, 1)), dtype=np.uint8)
    parallel = count >= _PARALLEL_FROM
    align_batch = _align_batch_parallel if parallel else _align_batch_serial
    cigars_of = _cigars_parallel if parallel else _cigars_serial
    # instances of one pattern, by read length, share blocks of LANES: little padding
    by_pattern = np.lexsort((lengths[rows], ks))
    sorted_ks = ks[by_pattern]
    _, first, sizes = np.unique(sorted_ks, return_index=True, return_counts=True)
    block_first = np.concatenate(
        [np.arange(f, f + size, LANES) for f, size in zip(first, sizes)] + [np.array([count])]).astype(np.int64)
    table_rows = np.empty((count, 8), dtype=np.int64)
    table_rows[by_pattern] = align_batch(
        codes, lengths, rows[by_pattern], table.masks, table.starts, block_first, sorted_ks[block_first[:-1]],
        scoring.match, scoring.mismatch, scoring.gap_open, scoring.gap_extend, ops,
    )
    ops[by_pattern] = ops.copy()
    letters = _EQX_LETTERS if eqx else _M_LETTERS
    reverse = np.ascontiguousarray(np.broadcast_to(reverse_cigar, (count,)), dtype=np.bool_)
    buf, offsets = cigars_of(ops, np.ascontiguousarray(table_rows[:, _N_OPS]), letters, reverse)
    return table_rows, Texts(buf, offsets)


def align_hits(codes, lengths, reads, ks, table, strands: tuple[str, ...], scoring: Scoring = Scoring(),
               eqx: bool = False) -> AlignmentTable:
    """Align every instance (reads[t], oriented pattern ks[t] of ``table``, a
    :class:`bpbc.patterns.PatternTable` whose strand indices refer to
    ``strands``), in parallel. Rows index ``codes``/``lengths`` as from
    :func:`bpbc.alphabet.encode_reads`.

    On strand '-' the read is aligned against the pattern's reverse
    complement, as the table holds it; pattern coordinates are then reported on
    the forward pattern and the CIGAR is reversed so that it reads along the
    forward pattern (PAF/SAM convention). Read coordinates are always on the
    read's forward strand.
    """
    reads = np.asarray(reads, dtype=np.int64)
    ks = np.asarray(ks, dtype=np.int64)
    strand = table.strand[ks]
    minus = np.array([sign == "-" for sign in strands], dtype=bool)[strand]
    out, cigars = _run_batch(codes, lengths, reads, table, ks, scoring, eqx, minus)
    m = table.lengths[ks]
    flip = minus & (out[:, _SCORE] > 0)
    pattern_start = np.where(flip, m - out[:, _PAT_END], out[:, _PAT_START])
    pattern_end = np.where(flip, m - out[:, _PAT_START], out[:, _PAT_END])
    return AlignmentTable(reads, table.pattern[ks], strand, out[:, _SCORE], out[:, _READ_START], out[:, _READ_END],
                          pattern_start, pattern_end, out[:, _NM], out[:, _MATCHES], out[:, _N_OPS], cigars,
                          tuple(strands))
