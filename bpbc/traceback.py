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

import types

import numpy as np
from numba import get_num_threads, njit, prange

from bpbc.cpu_engine import lexsort2
from bpbc.cpu_vector import (load_acquire, lowest_bit, store_release, take_next, vany, vbits64, vload16, vload32, vload64,
                              vmax16, vmax32, vmax64, vselect16, vselect32, vselect64, vsplat16, vsplat32, vsplat64,
                              vshift, vstore16, vstore32, vstore64, yield_thread)
from bpbc import scratch
from bpbc.buffers import BufferPool
from bpbc.scratch import MAPPED_FROM, give, take
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
_NEG16 = -(1 << 14)  # the same for int16 cells: below -(open + extend), and minus extend still an int16
LANES = 16  #: reads aligned together with int32 cells: one 16 x int32 vector per DP value (one zmm, or two ymm)
LANES16 = 32  #: reads aligned together with int16 cells, where the values fit (see _fits_int16)
LANES8 = 64  #: and with int8 cells, where the scores and columns fit (see _fits_int8)
_NEG8 = -(1 << 6)  #: _NEG16 for int8 cells: below -(open + extend), and minus extend still an int8
#: int8 cells are used while these hold (_fits_int8): the largest score and the columns
#: (patterns up to 127 bases), and costs that keep _NEG8 below every value and its
#: differences inside int8
_INT8_SCORE, _INT8_COST = (1 << 7) - 1, 1 << 5
#: int16 cells are used while these hold: the largest score (match x the
#: shorter of the longest read and pattern) and the row and column numbers
#: an int16 lane carries, and gap and mismatch costs that keep _NEG16 below
#: every value a cell takes and its differences inside int16
_INT16_SCORE, _INT16_COST = (1 << 15) - 1, 1 << 13
#: and while a block's pointer bytes stay within this (150 bp reads: patterns up to 3.4 kb):
#: past it a block's pointers leave the caches, and the int32 blocks, of half the bytes, run
#: faster (2-core Zen 5, 2048 reads of 150 bp against one pattern, int16 against int32 cells:
#: 1 kb 20 against 12 GCUPS, 3 kb 17 against 12, 8 kb, 39 MB a block, 4.1 against 10.8)
_INT16_POINTERS = 16 << 20

# result columns of the batch kernel
_SCORE, _READ_START, _READ_END, _PAT_START, _PAT_END, _N_OPS, _NM, _MATCHES = range(8)

_EQX_LETTERS = np.array([ord("="), ord("X"), ord("I"), ord("D")], dtype=np.uint8)
_M_LETTERS = np.array([ord("M"), ord("M"), ord("I"), ord("D")], dtype=np.uint8)


# The names the two kernel bodies below take from this module: each kernel
# made from them binds its own (_named, at the end); these are the int32 one's.
_K, _CELL, _CELL_NEG, _STATE, _SEGMENTS = LANES, np.int32, _NEG, np.int32, True
_vsplat, _vload, _vstore, _vmax, _vselect, _vany = vsplat16, vload16, vstore16, vmax16, vselect16, vany


def _forward_body(block, pattern, match, mismatch, gap_open, gap_extend, first, last, h_column, e_column, state,
                  pointers):
    """Gotoh forward pass for _K reads at once (block: (n, _K) read bases
    as IUPAC mask bits, 0 for N and padding) against _K pattern windows
    (pattern: (m, _K) mask bits, lane q's pattern base j in pattern[j, q], 0
    for padding), over rows ``first`` to ``last`` (1-based, inclusive):
    h_column and e_column ((m + 1) x _K cells) hold H and E of row first - 1
    and are left holding those of row ``last``; pointer bytes of row i go to
    pointers[i - first + 1] ((last - first + 2, m + 1, _K)); state (3 x _K
    cells: best, best_i, best_j) carries the first maximum in (i, j) order
    from call to call. A whole block is rows 1 to n from H = 0 and E = _CELL_NEG
    (:func:`_new_rows`); a block too large for its pointers runs in segments
    of rows (_align_batch_body). One vector of _K lanes of type _CELL per DP
    value (bpbc.cpu_vector; _forward_lanes: 16 x int32, _forward_lanes16: 32
    x int16, the same code): H and E of the row above come from memory,
    everything carried along a row stays in registers."""
    m = pattern.shape[0]
    K = _K
    flat_pointers = pointers.reshape(-1)
    flat_block = block.reshape(-1)
    flat_pattern = pattern.reshape(-1)
    open_cost = _vsplat(gap_open + gap_extend)
    extend_cost = _vsplat(gap_extend)
    match_score = _vsplat(match)
    mismatch_score = _vsplat(-mismatch)
    zero = _vsplat(0)
    from_zero, from_diag = _vsplat(_H_FROM_ZERO), _vsplat(_H_FROM_DIAG)
    from_e, from_f = _vsplat(_H_FROM_E), _vsplat(_H_FROM_F)
    e_flag, f_flag = _vsplat(_E_OPENED), _vsplat(_F_OPENED)
    best = _vload(state, 0)
    best_i = _vload(state, K)
    best_j = _vload(state, 2 * K)
    for i in range(first, last + 1):
        read_bits = _vload(flat_block, (i - 1) * K)
        row = _vsplat(i)
        h_diag = zero  # H[i-1][0]
        h_left = zero  # H[i][0]
        f = _vsplat(_CELL_NEG)
        row_pointers = (i - first + 1) * (m + 1) * K
        for j in range(1, m + 1):
            s = _vselect((read_bits & _vload(flat_pattern, (j - 1) * K)) != zero, match_score, mismatch_score)
            h_up = _vload(h_column, j * K)
            e_open = h_up - open_cost
            e_extend = _vload(e_column, j * K) - extend_cost
            e = _vmax(e_open, e_extend)
            f_open = h_left - open_cost
            f_extend = f - extend_cost
            f = _vmax(f_open, f_extend)
            diag = h_diag + s
            source = _vselect(diag > zero, from_diag, from_zero)
            h = _vmax(diag, zero)
            source = _vselect(e > h, from_e, source)
            h = _vmax(h, e)
            source = _vselect(f > h, from_f, source)
            h = _vmax(h, f)
            source = source | _vselect(e_open >= e_extend, e_flag, zero) | _vselect(f_open >= f_extend, f_flag, zero)
            _vstore(flat_pointers, row_pointers + j * K, source)
            _vstore(h_column, j * K, h)
            _vstore(e_column, j * K, e)
            better = h > best
            best = _vselect(better, h, best)
            best_i = _vselect(better, row, best_i)
            best_j = _vselect(better, _vsplat(j), best_j)
            h_diag = h_up
            h_left = h
    _vstore(state, 0, best)
    _vstore(state, K, best_i)
    _vstore(state, 2 * K, best_j)


def _forward8_body(block, pattern, match, mismatch, gap_open, gap_extend, first, last, h_column, e_column, state,
                   scores):
    """:func:`_forward_body` on 64 int8 lanes (i8x64, AVX-512BW: twice the
    reads of 32 int16 lanes for the same instructions), where every value
    fits (:func:`_fits_int8`): scores up to 127, and columns, so patterns of
    at most 127 bases, over all rows of a block at once (first = 1; a block
    that would need segments takes int16 cells). It keeps no pointers: H of
    every cell fits a byte, so the pass stores H itself, scores[i, j, q]
    (row 0 and column 0 zero), and :func:`_walk_scores` finds each step's
    source again from those values by the tie rule; H of the row above comes
    from there too (h_column is not used). About 12 of 30 instructions a
    cell fewer than choosing and storing pointer bytes. Rows need not fit:
    the row of each lane's best cell is kept apart, in ``state`` (int32 here:
    best, best_i, best_j of each lane, 3 x 64), set once a row for the lanes
    whose best rose in it (best_j, kept per cell, is then its column). The
    same values and first maximum as the int16 and int32 passes."""
    m = pattern.shape[0]
    K = LANES8
    row_bytes = (m + 1) * K
    flat_scores = scores.reshape(-1)
    flat_block = block.reshape(-1)
    flat_pattern = pattern.reshape(-1)
    carried = np.empty(2 * K, dtype=np.int8)
    for q in range(K):
        carried[q] = state[q]
        carried[K + q] = state[2 * K + q]
    open_cost = vsplat64(gap_open + gap_extend)
    extend_cost = vsplat64(gap_extend)
    match_score = vsplat64(match)
    mismatch_score = vsplat64(-mismatch)
    zero = vsplat64(0)
    best = vload64(carried, 0)
    best_j = vload64(carried, K)
    if first == 1:
        flat_scores[:row_bytes] = 0  # row 0
    for i in range(first, last + 1):
        read_bits = vload64(flat_block, (i - 1) * K)
        row_best = best
        h_diag = zero  # H[i-1][0]
        h_left = zero  # H[i][0]
        f = vsplat64(_NEG8)
        above = (i - first) * row_bytes
        here = above + row_bytes
        vstore64(flat_scores, here, zero)  # column 0
        for j in range(1, m + 1):
            s = vselect64((read_bits & vload64(flat_pattern, (j - 1) * K)) != zero, match_score, mismatch_score)
            h_up = vload64(flat_scores, above + j * K)
            e = vmax64(h_up - open_cost, vload64(e_column, j * K) - extend_cost)
            f = vmax64(h_left - open_cost, f - extend_cost)
            h = vmax64(vmax64(vmax64(h_diag + s, zero), e), f)
            vstore64(flat_scores, here + j * K, h)
            vstore64(e_column, j * K, e)
            better = h > best
            best = vselect64(better, h, best)
            best_j = vselect64(better, vsplat64(j), best_j)
            h_diag = h_up
            h_left = h
        rose = vbits64(best > row_best)
        while rose:
            state[K + lowest_bit(rose)] = i
            rose &= rose - np.uint64(1)
    vstore64(carried, 0, best)
    vstore64(carried, K, best_j)
    for q in range(K):
        state[q] = carried[q]
        state[2 * K + q] = carried[K + q]


def _new_rows_body(m, h_column, e_column, state):
    """Row 0 of a block against m pattern columns into h_column and e_column
    (H = 0, E = _CELL_NEG: no gap ends there), and no best yet in state."""
    h_column[:(m + 1) * _K] = 0
    e_column[:(m + 1) * _K] = _CELL_NEG
    state[:] = 0


@njit(cache=True, nogil=True)
def _copy(source, source_at, target, target_at, count):
    """target[target_at:][:count] = source[source_at:][:count]."""
    for k in range(count):
        target[target_at + k] = source[source_at + k]


@njit(cache=True, nogil=True)
def _walk_start(best, count):
    """Where the walks of lanes 0 to count - 1 of a block begin: at each
    lane's end cell (best[q, 1], best[q, 2]), in state H, no ops yet: the
    (count, 3) table of i, j and ops so far, and the states (0 = H, 1 = E,
    2 = F, 3 = done)."""
    at = np.empty((count, 3), np.int64)
    for q in range(count):
        at[q, 0] = best[q, 1]
        at[q, 1] = best[q, 2]
        at[q, 2] = 0
    return at, np.zeros(count, np.int64)


@njit(cache=True, nogil=True)
def _walk_rows(block, pattern, pointers, first, at, state, targets, ops, best, match, mismatch, gap_open, gap_extend):
    """Follow the pointers back (the lanes' places and states in ``at`` and
    ``state``, see :func:`_walk_start`), lane q's ops in walking order into
    ``ops[targets[q]]``, as far as the pointers of rows ``first`` on reach
    (row i's in pointers[i - first + 1]): a lane that comes to a row above
    them waits there for the next segment's (_align_batch_body). One lane
    after the other, its place, state and op count in registers, a run of
    diagonal steps (most of an alignment) in a loop of its own on flat
    offsets: the next cell's address is known ahead, the branch predicted,
    and the loads of the pointers (in L2) overlap. Stepping every lane in
    turn, each lane's place kept in ``at``, took 2.5-3x the time (64 lanes of
    trimming's hits, 150 x 33 cells: 164 against 64 ns a lane on Zen 4): a
    lane's step waited on its stores of the step before, and the lanes done
    or waiting were tested at every turn."""
    K = pointers.shape[2]
    row_stride = pointers.shape[1] * K
    flat = pointers.reshape(-1)
    flat_block = block.reshape(-1)
    flat_pattern = pattern.reshape(-1)
    for q in range(targets.shape[0]):
        lane_state = state[q]
        if lane_state == 3:
            continue
        i = at[q, 0]
        j = at[q, 1]
        n_ops = at[q, 2]
        lane_ops = ops[targets[q]]
        while True:
            if lane_state == 0:
                while i >= first and i > 0 and j > 0:  # a run of diagonal steps
                    if flat[(i - first + 1) * row_stride + j * K + q] & _H_SOURCE != _H_FROM_DIAG:
                        break
                    lane_ops[n_ops] = OP_MISMATCH - ((flat_block[(i - 1) * K + q] & flat_pattern[(j - 1) * K + q])
                                                     != 0)
                    n_ops += 1
                    i -= 1
                    j -= 1
                if i == 0 or j == 0:
                    lane_state = 3
                    break
                if i < first:
                    break  # its pointers are in a segment above
                source = flat[(i - first + 1) * row_stride + j * K + q] & _H_SOURCE
                if source == _H_FROM_ZERO:
                    lane_state = 3
                    break
                lane_state = 1 if source == _H_FROM_E else 2
            if i < first:
                break
            pointer = flat[(i - first + 1) * row_stride + j * K + q]
            if lane_state == 1:
                lane_ops[n_ops] = OP_INS
                n_ops += 1
                if pointer & _E_OPENED:
                    lane_state = 0
                i -= 1
            else:
                lane_ops[n_ops] = OP_DEL
                n_ops += 1
                if pointer & _F_OPENED:
                    lane_state = 0
                j -= 1
        at[q, 0] = i
        at[q, 1] = j
        at[q, 2] = n_ops
        state[q] = lane_state


@njit(cache=True, nogil=True)
def _walk_scores(block, pattern, scores, first, at, state, targets, ops, best, match, mismatch, gap_open,
                 gap_extend):
    """:func:`_walk_rows` over the H values of a whole block
    (:func:`_forward8_body`: scores[i, j, q], first = 1) instead of pointer
    bytes: each step's source is found again from the values, by the tie
    rule the pointers record. In state H at a cell of value v (v = 0: the
    alignment starts here), the source is the diagonal where H[i-1][j-1] +
    s(i, j) = v; else E where some gap up reaches v: E[i][j] = max over k of
    H[i-k][j] - open - k x extend, so the gap is the least such k (closing a
    gap is preferred to extending it, so the walk closes at the first k that
    gives v), never more rows than can still reach v (every H of the lane is
    at most its best, ``best[q, 0]``); else F, likewise along the row. The
    same ops as the pointers give."""
    K = scores.shape[2]
    row_stride = scores.shape[1] * K
    flat = scores.reshape(-1)
    flat_block = block.reshape(-1)
    flat_pattern = pattern.reshape(-1)
    open_cost = gap_open + gap_extend
    for q in range(targets.shape[0]):
        if state[q] == 3:
            continue
        i = at[q, 0]
        j = at[q, 1]
        n_ops = at[q, 2]
        lane_ops = ops[targets[q]]
        top = best[q, 0]
        v = np.int64(flat[i * row_stride + j * K + q])
        while v > 0 and i > 0 and j > 0:
            at_cell = i * row_stride + j * K + q
            matched = (flat_block[(i - 1) * K + q] & flat_pattern[(j - 1) * K + q]) != 0
            diag = np.int64(flat[at_cell - row_stride - K]) + (match if matched else -mismatch)
            if diag == v:
                lane_ops[n_ops] = OP_MATCH if matched else OP_MISMATCH
                n_ops += 1
                i -= 1
                j -= 1
                v = np.int64(flat[at_cell - row_stride - K])
                continue
            gap = 0
            k = 1
            while k <= i and top - open_cost - (k - 1) * gap_extend >= v:  # a gap of k read bases (E)
                if np.int64(flat[at_cell - k * row_stride]) - open_cost - (k - 1) * gap_extend == v:
                    gap = k
                    break
                k += 1
            if gap:
                for _ in range(gap):
                    lane_ops[n_ops] = OP_INS
                    n_ops += 1
                i -= gap
                v = np.int64(flat[at_cell - gap * row_stride])
                continue
            k = 1
            while k <= j and top - open_cost - (k - 1) * gap_extend >= v:  # a gap of k pattern bases (F)
                if np.int64(flat[at_cell - k * K]) - open_cost - (k - 1) * gap_extend == v:
                    gap = k
                    break
                k += 1
            for _ in range(gap):
                lane_ops[n_ops] = OP_DEL
                n_ops += 1
            j -= gap
            v = np.int64(flat[at_cell - gap * K])
            if gap == 0:  # no source: cannot happen with the values of a forward pass
                break
        at[q, 0] = i
        at[q, 1] = j
        at[q, 2] = n_ops
        state[q] = 3


_walk = _walk_rows  #: the walk of _align_batch_body: each kernel binds its own (_named)


@njit(cache=True, nogil=True)
def _walk_end(at, targets, ops):
    """Each lane's ops, collected end to start, put in read order."""
    for q in range(targets.shape[0]):
        t = targets[q]
        n_ops = at[q, 2]
        for k in range(n_ops // 2):
            tmp = ops[t, k]
            ops[t, k] = ops[t, n_ops - 1 - k]
            ops[t, n_ops - 1 - k] = tmp


def _score_body(block, pattern, match, mismatch, gap_open, gap_extend, result):
    """The forward pass's scores without its pointers, for _K reads (block:
    (n, _K) mask bits) against _K patterns (pattern: (m, _K) mask bits, 0
    past a lane's pattern): result (_K, 3) as _forward_body's, the end cell
    by the same tie rule (the first maximum in (i, j) order). Column by
    column (j outer): the columns of H and F it keeps are the read's length,
    in L1 whatever the pattern's. Each column's best cell (the first in
    (i)) is kept as the column is filled, and then compared with the best so
    far (a second scan of the columns that could replace it cost as much as
    the pass itself: along a hit's diagonal nearly every column does). The
    best cell's column is kept in int64 outside the lanes (once a column, in
    the lanes where it changes): int16 lanes serve patterns of any length."""
    n = block.shape[0]
    size = (pattern.shape[0] + 1) * _K
    # the whole block as one stripe: the row above is row 0 (H = 0, E = _CELL_NEG), nothing to wait for
    above_e = np.full(size, _CELL_NEG, _CELL)
    _score_stripe(block, pattern, match, mismatch, gap_open, gap_extend, 1, n, np.zeros(size, _CELL), above_e,
                  np.empty(size, _CELL), np.empty(size, _CELL), np.zeros(1, np.int64), 0, result)


def _score_rows_body(block, bits, h_column, f_column, row0, rows, h_diag, h_up, e, match, mismatch, gap_open,
                     gap_extend):
    """One column of the score pass over rows row0 + 1 to row0 + rows of
    _K lanes: block (rows of _K mask bits; row i at (i - 1) * _K), bits the
    column's pattern mask bits, h_column and f_column (H and F of the rows
    in the column before, at r * _K; overwritten with this column's), and
    from the row above H diagonal, H and E. Returns H and E of the last row,
    each lane's greatest H in the column and its first row at it (0 where
    no cell is above 0)."""
    K = _K
    open_cost = _vsplat(gap_open + gap_extend)
    extend_cost = _vsplat(gap_extend)
    match_score = _vsplat(match)
    mismatch_score = _vsplat(-mismatch)
    zero = _vsplat(0)
    top = zero
    top_i = zero
    for r in range(1, rows + 1):
        i = row0 + r
        s = _vselect((_vload(block, (i - 1) * K) & bits) != zero, match_score, mismatch_score)
        h_left = _vload(h_column, r * K)
        f = _vmax(h_left - open_cost, _vload(f_column, r * K) - extend_cost)
        e = _vmax(h_up - open_cost, e - extend_cost)
        h = _vmax(_vmax(h_diag + s, zero), _vmax(e, f))
        _vstore(h_column, r * K, h)
        _vstore(f_column, r * K, f)
        higher = h > top
        top = _vselect(higher, h, top)
        top_i = _vselect(higher, _vsplat(i), top_i)
        h_diag = h_left
        h_up = h
    return h_up, e, top, top_i


def _first_best_body(top, top_i, best, best_i):
    """The first maximum so far (best, at row best_i) after a column whose
    greatest H is ``top``, first at row top_i (the columns in order: the
    greater, or the same at a lesser row), and the lanes where the column's
    is the new one."""
    better = top > _vselect(best_i > top_i, best - _vsplat(1), best)
    return _vselect(better, top, best), _vselect(better, top_i, best_i), better


@njit(inline="always")
def _wait_for(progress, stripe, column, ready):
    """What the stripe above ``stripe`` has finished (progress[stripe - 1]),
    once it has finished ``column``: ``ready`` where that is already so,
    else read again (acquire), the core given away after 64 tries."""
    if ready < column:
        ready = load_acquire(progress, stripe - 1)
        waited = 0
        while ready < column:
            waited += 1
            if waited > 64:
                yield_thread()
            ready = load_acquire(progress, stripe - 1)
    return ready


def _score_stripe_body(block, pattern, match, mismatch, gap_open, gap_extend, first, last, above_h, above_e,
                       below_h, below_e, progress, k, result):
    """_score_body over rows ``first`` to ``last`` (1-based, inclusive) of
    the block only, one stripe of a pass that threads run together
    (_score_wave_body): H and E of the row above the stripe, column by
    column, come from above_h and above_e ((m + 1) x _K: row 0's, H = 0 and
    E = _CELL_NEG, for the first stripe), written by the stripe above
    (``k`` - 1), which stores j in progress[k - 1] once its column j is
    there; this stripe writes H and E of its last row to below_h and
    below_e and its own progress to progress[k] likewise. result (_K, 3):
    the stripe's first maximum (rows in the block's numbers), as
    _score_body's. The values are those of the pass over all rows."""
    m = pattern.shape[0]
    K = _K
    rows = last - first + 1
    flat_block = block.reshape(-1)
    flat_pattern = pattern.reshape(-1)
    h_column = np.zeros((rows + 1) * K, _CELL)  # H[i][j-1], then H[i][j], of the stripe's rows
    f_column = np.full((rows + 1) * K, _CELL_NEG, _CELL)
    scratch = np.empty(K, _CELL)
    zero = _vsplat(0)
    one = _vsplat(1)
    best = zero
    best_i = zero
    ready = 0 if k > 0 else m  # the columns the stripe above has finished
    for j in range(1, m + 1):
        ready = _wait_for(progress, k, j, ready)
        # from H[first - 1][j - 1], H[first - 1][j] and E[first - 1][j]
        h_up, e, top, top_i = _score_rows(flat_block, _vload(flat_pattern, (j - 1) * K), h_column, f_column, first - 1,
                                          rows, _vload(above_h, (j - 1) * K), _vload(above_h, j * K),
                                          _vload(above_e, j * K), match, mismatch, gap_open, gap_extend)
        _vstore(below_h, j * K, h_up)
        _vstore(below_e, j * K, e)
        store_release(progress, k, j)
        best, best_i, better = _first_best(top, top_i, best, best_i)
        if _vany(better):
            _vstore(scratch, 0, _vselect(better, one, zero))
            for q in range(K):
                if scratch[q]:
                    result[q, 2] = j
    for column, lanes in enumerate((best, best_i)):
        _vstore(scratch, 0, lanes)
        for q in range(K):
            result[q, column] = scratch[q]


def _score_wave_body(block, pattern, match, mismatch, gap_open, gap_extend, stripes, result):
    """_score_body for one block on ``stripes`` threads at once: its rows
    cut into that many stripes, each on a thread of its own
    (_score_stripe_body), a stripe starting column j once the stripe above
    has finished it (a wavefront: the values are the whole pass's); the
    first maximum is the best stripe's, the first (the least rows) where
    they tie. A stripe takes its number as it starts (take_next), so it
    waits only on stripes already running."""
    n = block.shape[0]
    m = pattern.shape[0]
    K = _K
    size = (m + 1) * K
    edge_h = np.zeros((stripes + 1) * size, _CELL)
    edge_e = np.full((stripes + 1) * size, _CELL_NEG, _CELL)
    progress = np.zeros(stripes, np.int64)
    found = np.zeros((stripes, K, 3), np.int64)
    taken = np.zeros(1, np.int64)
    for _ in prange(stripes):
        k = take_next(taken)
        _score_stripe(block, pattern, match, mismatch, gap_open, gap_extend, 1 + k * n // stripes,
                      (k + 1) * n // stripes, edge_h[k * size:(k + 1) * size], edge_e[k * size:(k + 1) * size],
                      edge_h[(k + 1) * size:(k + 2) * size], edge_e[(k + 1) * size:(k + 2) * size], progress, k,
                      found[k])
    for q in range(K):
        for k in range(stripes):
            if k == 0 or found[k, q, 0] > result[q, 0]:
                for c in range(3):
                    result[q, c] = found[k, q, c]


def _score_skewed_body(read, pattern, match, mismatch, gap_open, gap_extend, first, rows, above_h, above_e, below_h,
                       below_e, progress, k, limit, stop, result):
    """_score_stripe_body for one instance alone, its rows ``first`` to
    ``first + rows - 1`` (1-based; rows a multiple of _K) cut into _K
    stripes of rows / _K, one a lane: lane q runs column t - q at step t, a
    column behind the lane above, whose last row it takes from that lane
    as it was one step before (vshift): every lane busy where a block of
    one instance would leave all but one idle. read: the instance's read
    as mask bits (0 past its end: rows there score below the best and come
    after it, so they are never its first maximum); pattern: its pattern's
    mask bits (m,). above_h, above_e, below_h, below_e ((m + 1,) each),
    progress and k as _score_stripe_body's, for stripes of _K lanes each.
    result (3,): the stripe's first maximum (score, read end, pattern end),
    by the same rule; (0, 0, 0) where no cell scores. Where a cell scores
    above ``limit``, the stripe sets stop[0] and ends, and so does every
    stripe of the instance at its next column (their results then mean
    nothing); each one that ends says it has finished every column."""
    m = pattern.shape[0]
    K = _K
    stripe = rows // K
    block = np.empty(stripe * K, np.uint8)  # row r of lane q: read row first + q * stripe + r
    for q in range(K):
        for r in range(stripe):
            block[r * K + q] = read[first - 1 + q * stripe + r]
    lane_numbers = np.arange(K).astype(_CELL)
    h_column = np.zeros((stripe + 1) * K, _CELL)
    f_column = np.full((stripe + 1) * K, _CELL_NEG, _CELL)
    scratch = np.empty(K, _CELL)
    best_j = np.zeros(K, np.int64)
    lane = _vload(lane_numbers, 0)
    zero = _vsplat(0)
    one = _vsplat(1)
    best = zero
    best_r = zero
    bits = zero  # lane q: the pattern's base at column t - q (0 outside it)
    last_h = zero  # each lane's H and E of its last row, one step back: the lane below's row above
    last_e = _vsplat(_CELL_NEG)
    earlier_h = zero  # and two steps back: the lane below's diagonal
    ready = 0 if k > 0 else m
    above_limit = _vsplat(limit)
    for t in range(1, m + K):
        if load_acquire(stop, 0):
            break
        top_h, top_e, top_diagonal, base = 0, _CELL_NEG, 0, 0
        if t <= m:
            ready = _wait_for(progress, k, t, ready)
            top_h, top_e, top_diagonal, base = above_h[t], above_e[t], above_h[t - 1], pattern[t - 1]
        bits = vshift(bits, base)
        h_up, e, top, top_r = _score_rows(block, bits, h_column, f_column, 0, stripe, vshift(earlier_h, top_diagonal),
                                          vshift(last_h, top_h), vshift(last_e, top_e), match, mismatch, gap_open,
                                          gap_extend)
        if _vany(top > above_limit):
            store_release(stop, 0, 1)
            break
        earlier_h = last_h
        last_h = h_up
        last_e = e
        column = t - K + 1  # the last lane's, the stripe's last row: the next stripe's row above
        if column >= 1:
            _vstore(scratch, 0, h_up)
            below_h[column] = scratch[K - 1]
            _vstore(scratch, 0, e)
            below_e[column] = scratch[K - 1]
            store_release(progress, k, column)
        if t > m:  # lanes past the pattern's end: not cells
            inside = lane > _vsplat(t - m - 1)
            top = _vselect(inside, top, zero)
            top_r = _vselect(inside, top_r, zero)
        best, best_r, better = _first_best(top, top_r, best, best_r)
        if _vany(better):
            _vstore(scratch, 0, _vselect(better, one, zero))
            for q in range(K):
                if scratch[q]:
                    best_j[q] = t - q
    store_release(progress, k, m)  # (where it stopped early: the stripe below must not wait for ever)
    # the first maximum over the lanes: the greatest, then the least rows (the lanes' rows rise with q)
    _vstore(scratch, 0, best_r)
    rows_at = scratch.copy()
    _vstore(scratch, 0, best)
    result[0], result[1], result[2] = 0, 0, 0
    for q in range(K):
        if scratch[q] > result[0]:
            result[0], result[1], result[2] = scratch[q], first - 1 + q * stripe + rows_at[q], best_j[q]


def _score_skewed_runs_body(read, read_first, pattern, pattern_first, stripes, stripe_rows, match, mismatch,
                            gap_open, gap_extend, limit, out):
    """The score pass over instances one by one, each in stripes of rows
    run by _score_skewed_body: instance i's read mask bits
    read[read_first[i]:read_first[i + 1]] (stripes[i] x stripe_rows[i] of
    them, a multiple of _K a stripe; 0 past its read), its pattern's
    pattern[pattern_first[i]:pattern_first[i + 1]]. Its stripes are tasks
    in turn, each waiting on the stripe above column by column (a
    wavefront); the threads take the tasks in order (take_next), so a
    stripe waits only on stripes already running. out (count, 3): each
    instance's first maximum, the best stripe's, the first where they tie;
    (limit + 1, 0, 0) for an instance where a cell scores above ``limit``
    (its stripes stop there)."""
    count = stripes.shape[0]
    task_first = np.zeros(count + 1, np.int64)
    edge_first = np.zeros(count + 1, np.int64)
    for i in range(count):
        task_first[i + 1] = task_first[i] + stripes[i]
        edge_first[i + 1] = edge_first[i] + (stripes[i] + 1) * (pattern_first[i + 1] - pattern_first[i] + 1)
    tasks = task_first[count]
    task_instance = np.empty(tasks, np.int64)
    for i in range(count):
        task_instance[task_first[i]:task_first[i + 1]] = i
    edge_h = np.zeros(edge_first[count], _CELL)
    edge_e = np.full(edge_first[count], _CELL_NEG, _CELL)
    progress = np.zeros(tasks, np.int64)
    found = np.zeros((tasks, 3), np.int64)
    stops = np.zeros(count, np.int64)
    taken = np.zeros(1, np.int64)
    for _ in prange(tasks):
        task = take_next(taken)
        i = task_instance[task]
        k = task - task_first[i]
        size = pattern_first[i + 1] - pattern_first[i] + 1
        edges = edge_first[i]
        _score_skewed(read[read_first[i]:read_first[i + 1]], pattern[pattern_first[i]:pattern_first[i + 1]], match,
                      mismatch, gap_open, gap_extend, 1 + k * stripe_rows[i], stripe_rows[i],
                      edge_h[edges + k * size:edges + (k + 1) * size], edge_e[edges + k * size:edges + (k + 1) * size],
                      edge_h[edges + (k + 1) * size:edges + (k + 2) * size],
                      edge_e[edges + (k + 1) * size:edges + (k + 2) * size],
                      progress[task_first[i]:task_first[i + 1]], k, limit, stops[i:i + 1], found[task])
    for i in range(count):
        for task in range(task_first[i], task_first[i + 1]):
            if task == task_first[i] or found[task, 0] > out[i, 0]:
                for c in range(3):
                    out[i, c] = found[task, c]
        if stops[i]:
            out[i, 0], out[i, 1], out[i, 2] = limit + 1, 0, 0


def _start_body(block, pattern, target, base, row_base, match, mismatch, gap_open, gap_extend, result, band):
    """Where the alignments of score target[q] that end at a known end cell
    can start, for _K instances at once: block ((n, _K) mask bits) holds
    each lane's read from its end cell's row up (row r: the r-th base
    before the end, inclusive), pattern ((w, _K) mask bits) its pattern from
    the end cell's column back likewise (0 past it). The pass is Gotoh's
    forward pass on these reversed sequences anchored at the end cell (the
    end cell's pair first, no zero floor): a cell's H is then the best score
    of an alignment that starts there and ends at the end cell, at most the
    target, and the target exactly at the starts of the optimal alignments
    that end there. A cell is dead (_CELL_NEG) where its value plus match x
    the fewer of the rows and the pattern columns left past it stays below
    the target (in any state: what the rest of the pass adds comes from
    pairs, each a row and a column further): nothing past it can reach the
    target (base[q] = target[q] - match x lane q's pattern end, row_base[q],
    int64, = target[q] - match x its rows). A cell is dead too where its
    value is below 0: cut an optimal alignment anywhere (in a gap too), and
    its part before the cut scores at most the target (a part ending in a
    gap scores less than without those gap columns, and a local alignment's
    score is at most the whole DP's best, the target), so its part from the
    cut to the end cell, at most the cell's value, scores at least 0. Past
    the alignments' starts the values fall only slowly on random bases (a
    lambda hit of score 2,600 at the default scoring: 0.75 a row), so this
    stops the rows some target / 0.75 rows past the start, where the other
    bound would run on to the read's start. Rows run until every cell of one
    is dead, each over the columns its row above left alive (and those its
    F carries on). result (_K, 2) int64: the most rows and the most columns
    of any cell at the target (0 where none): every optimal alignment ending
    at the end cell lies in that many rows and columns up to it. band (n, 2)
    int64: the first and last column of each row where a cell of some lane
    is alive (every cell of every such alignment is), (1, 0) past the last
    row with one. In the forward pass's places a gap is one column (E) or
    one row (F) further: its band is this one widened (_banded_batch_body)."""
    n = block.shape[0]
    w = pattern.shape[0]
    K = _K
    flat_block = block.reshape(-1)
    flat_pattern = pattern.reshape(-1)
    h_row = np.empty((w + 1) * K, _CELL)
    e_row = np.empty((w + 1) * K, _CELL)
    scratch = np.empty(K, _CELL)
    row_bound = np.empty(K, _CELL)
    neg = _vsplat(_CELL_NEG)
    for c in range(w + 1):
        _vstore(h_row, c * K, neg)
        _vstore(e_row, c * K, neg)
    zero = _vsplat(0)
    _vstore(h_row, 0, zero)  # the anchor: H of row 0, column 0
    open_cost = _vsplat(gap_open + gap_extend)
    extend_cost = _vsplat(gap_extend)
    match_score = _vsplat(match)
    mismatch_score = _vsplat(-mismatch)
    one = _vsplat(1)
    step = _vsplat(match)
    goal = _vload(target, 0)
    bound = _vload(base, 0)
    widest = zero
    low, high = 0, 0  # the columns of the row above that may be alive
    for r in range(1, n + 1):
        read_bits = _vload(flat_block, (r - 1) * K)
        c = max(low, 1)
        h_diag = _vload(h_row, (c - 1) * K)
        if r == 1:
            _vstore(h_row, 0, neg)  # column 0 below the anchor: no alignment starts there
        h_left = neg
        f = neg
        for q in range(K):  # below _CELL_NEG it binds nothing: the columns' bound is above it
            row_bound[q] = max(row_base[q] + match * r, _CELL_NEG)
        by_rows = _vload(row_bound, 0)
        by_columns = bound + _vsplat(match * c)
        row_hit = zero
        new_low, new_high = -1, -1
        while c <= w:
            s = _vselect((read_bits & _vload(flat_pattern, (c - 1) * K)) != zero, match_score, mismatch_score)
            h_up = _vload(h_row, c * K)
            e = _vmax(h_up - open_cost, _vload(e_row, c * K) - extend_cost)
            f = _vmax(h_left - open_cost, f - extend_cost)
            h = _vmax(h_diag + s, _vmax(e, f))
            threshold = _vmax(_vmax(by_columns, by_rows), zero)  # zero: see the docstring
            alive = h >= threshold
            h = _vselect(alive, h, neg)
            e = _vselect(e >= threshold, e, neg)
            f = _vselect(f >= threshold, f, neg)
            _vstore(h_row, c * K, h)
            _vstore(e_row, c * K, e)
            at_goal = h >= goal
            row_hit = row_hit | _vselect(at_goal, one, zero)
            widest = _vmax(widest, _vselect(at_goal, _vsplat(c), zero))
            h_diag = h_up
            h_left = h
            if _vany(alive):
                if new_low < 0:
                    new_low = c
                new_high = c
            elif c > high:
                break
            c += 1
            by_columns = by_columns + step
        _vstore(scratch, 0, row_hit)
        for q in range(K):
            if scratch[q]:
                result[q, 0] = r
        if new_low < 0:
            break
        band[r - 1, 0] = new_low
        band[r - 1, 1] = new_high
        low, high = new_low, new_high
    _vstore(scratch, 0, widest)
    for q in range(K):
        result[q, 1] = scratch[q]


@njit(cache=True, nogil=True)
def _fill_block(codes, lengths, rows, skips, first, count, n, block):
    """The reads rows[first:first + count] as IUPAC mask bits, as the
    pattern's: 1 << code, 0 for N and INVALID, and for the padding past a read
    (or past row n) and in empty lanes; lane q's read from its base
    skips[first + q] on."""
    for q in range(count):
        row = rows[first + q]
        skip = skips[first + q]
        for i in range(min(lengths[row] - skip, n)):
            code = codes[row, skip + i]
            block[i, q] = (1 << code) if code < 4 else 0


@njit(cache=True, nogil=True)
def _fill_reads(codes, lengths, rows, first, out):
    """Read rows[t] as _fill_block's mask bits from out[first[t]] on (the
    rest of its span left as it is: 0)."""
    for t in range(rows.shape[0]):
        row = rows[t]
        for i in range(lengths[row]):
            code = codes[row, i]
            out[first[t] + i] = (1 << code) if code < 4 else 0


@njit(cache=True, nogil=True)
def _fill_patterns(pattern_codes, pattern_start, lane_pattern, lane_offset, first, count, bits):
    """Lane q's pattern window: bits[j, q] = base j + lane_offset[first + q]
    of oriented pattern lane_pattern[first + q], 0 outside the pattern."""
    width = bits.shape[0]
    for q in range(count):
        p = lane_pattern[first + q]
        offset = lane_offset[first + q]
        start = pattern_start[p]
        m = pattern_start[p + 1] - start
        for j in range(max(0, -offset), min(width, m - offset)):
            bits[j, q] = pattern_codes[start + offset + j]


@njit(cache=True, nogil=True)
def _take_block(taken, block_order, block_first):
    """The block a thread of a batch kernel takes next, block_order[k] for the
    k-th taken (take_next on ``taken``), with its first instance and its
    count of instances; b = -1 once every block is taken."""
    k = take_next(taken)
    if k >= block_first.shape[0] - 1:
        return -1, 0, 0
    b = block_order[k]
    first = block_first[b]
    return b, first, block_first[b + 1] - first


def _score_blocks_body(codes, lengths, rows, pattern_codes, pattern_start, lane_pattern, block_first, block_width,
                       block_wide, block_order, match, mismatch, gap_open, gap_extend, threads):
    """The end cell of every instance (rows[t], oriented pattern
    lane_pattern[t]) by _score_body: block b (instances block_first[b] to
    block_first[b + 1], patterns up to block_width[b] long) on 16 int32
    lanes where block_wide[b], else on 32 int16 lanes (the values of a long
    read need int32, those of reads under 16 kb do not: a batch of both
    keeps each read's own), each of ``threads`` taking the next block of
    block_order as it is done with one: the int64 (k, 3) table of score,
    read end and pattern end."""
    k = rows.shape[0]
    out = np.zeros((k, 3), dtype=np.int64)
    zero_offset = np.zeros(k, dtype=np.int64)
    blocks = block_first.shape[0] - 1
    taken = np.zeros(1, dtype=np.int64)
    for _ in prange(min(blocks, threads)):
        while True:
            b, first, count = _take_block(taken, block_order, block_first)
            if b < 0:
                break
            n = 0
            for q in range(count):
                n = max(n, lengths[rows[first + q]])
            best = np.zeros((LANES16, 3), dtype=np.int64)
            if block_wide[b]:
                block = np.zeros((n, LANES), dtype=np.uint8)
                _fill_block(codes, lengths, rows, zero_offset, first, count, n, block)
                bits = np.zeros((block_width[b], LANES), dtype=np.uint8)
                _fill_patterns(pattern_codes, pattern_start, lane_pattern, zero_offset, first, count, bits)
                _score_lanes(block, bits, match, mismatch, gap_open, gap_extend, best)
            else:
                block16 = np.zeros((n, LANES16), dtype=np.uint8)
                _fill_block(codes, lengths, rows, zero_offset, first, count, n, block16)
                bits16 = np.zeros((block_width[b], LANES16), dtype=np.uint8)
                _fill_patterns(pattern_codes, pattern_start, lane_pattern, zero_offset, first, count, bits16)
                _score_lanes16(block16, bits16, match, mismatch, gap_open, gap_extend, best)
            for q in range(count):
                for c in range(3):
                    out[first + q, c] = best[q, c]
    return out


def _start_batch_body(codes, rows, pattern_codes, pattern_start, lane_pattern, score, read_end, pattern_end,
                      block_first, block_width, block_order, match, mismatch, gap_open, gap_extend, threads):
    """_start_body for every instance (rows[t], oriented pattern
    lane_pattern[t]) whose alignment of score score[t] ends at read base
    read_end[t] (exclusive) and pattern base pattern_end[t], blocks as in
    _score_blocks_body, each of ``threads`` taking the next block of
    block_order as it is done with one: the int64 (k, 2) table of the rows
    and columns up to the end that hold every optimal alignment ending
    there."""
    k = rows.shape[0]
    out = np.zeros((k, 2), dtype=np.int64)
    blocks = block_first.shape[0] - 1
    taken = np.zeros(1, dtype=np.int64)
    for _ in prange(min(blocks, threads)):
        while True:
            b, first, count = _take_block(taken, block_order, block_first)
            if b < 0:
                break
            n = 0
            for q in range(count):
                n = max(n, read_end[first + q])
            block = np.zeros((n, _K), dtype=np.uint8)
            bits = np.zeros((block_width[b], _K), dtype=np.uint8)
            target = np.ones(_K, dtype=_CELL)  # empty lanes: a target above every score
            base = np.ones(_K, dtype=_CELL)
            row_base = np.ones(_K, dtype=np.int64)
            for q in range(count):
                t = first + q
                row, end, column = rows[t], read_end[t], pattern_end[t]
                for r in range(end):
                    code = codes[row, end - 1 - r]
                    block[r, q] = (1 << code) if code < 4 else 0
                start = pattern_start[lane_pattern[t]]
                for c in range(column):
                    bits[c, q] = pattern_codes[start + column - 1 - c]
                target[q] = score[t]
                base[q] = score[t] - match * column
                row_base[q] = score[t] - match * end
            found = np.zeros((_K, 2), dtype=np.int64)
            _start(block, bits, target, base, row_base, match, mismatch, gap_open, gap_extend, found,
                   np.empty((n, 2), dtype=np.int64))
            for q in range(count):
                out[first + q, 0] = found[q, 0]
                out[first + q, 1] = found[q, 1]
    return out


def _band_forward_body(block, pattern, match, mismatch, gap_open, gap_extend, band_low, band_high, pointer_row,
                       first, last, h_column, e_column, pointers):
    """_forward_body over a band, rows ``first`` to ``last`` (1-based,
    inclusive): row i only over columns band_low[i] to band_high[i] (none
    where low > high), every other cell H = 0 and E, F = _CELL_NEG (no
    better than the whole DP's), its pointers (band cells only) from
    pointers[pointer_row[i] - pointer_row[first]] on, a cell a vector of
    _K. h_column and e_column ((m + 1) x _K) hold H and E of row first - 1
    in its band and H = 0, E = _CELL_NEG outside it on entry (row 0: all of
    them), and are left so for row ``last``. No best cell: the end cell is
    known."""
    K = _K
    flat_block = block.reshape(-1)
    flat_pattern = pattern.reshape(-1)
    open_cost = _vsplat(gap_open + gap_extend)
    extend_cost = _vsplat(gap_extend)
    match_score = _vsplat(match)
    mismatch_score = _vsplat(-mismatch)
    zero = _vsplat(0)
    neg = _vsplat(_CELL_NEG)
    from_zero, from_diag = _vsplat(_H_FROM_ZERO), _vsplat(_H_FROM_DIAG)
    from_e, from_f = _vsplat(_H_FROM_E), _vsplat(_H_FROM_F)
    e_flag, f_flag = _vsplat(_E_OPENED), _vsplat(_F_OPENED)
    above_low, above_high = band_low[first - 1], band_high[first - 1]
    for i in range(first, last + 1):
        low, high = band_low[i], band_high[i]
        if low <= high:
            read_bits = _vload(flat_block, (i - 1) * K)
            h_diag = _vload(h_column, (low - 1) * K)
            h_left = zero
            f = neg
            at = pointer_row[i] - pointer_row[first] - low * K
            for j in range(low, high + 1):
                s = _vselect((read_bits & _vload(flat_pattern, (j - 1) * K)) != zero, match_score, mismatch_score)
                h_up = _vload(h_column, j * K)
                e_open = h_up - open_cost
                e_extend = _vload(e_column, j * K) - extend_cost
                e = _vmax(e_open, e_extend)
                f_open = h_left - open_cost
                f_extend = f - extend_cost
                f = _vmax(f_open, f_extend)
                diag = h_diag + s
                source = _vselect(diag > zero, from_diag, from_zero)
                h = _vmax(diag, zero)
                source = _vselect(e > h, from_e, source)
                h = _vmax(h, e)
                source = _vselect(f > h, from_f, source)
                h = _vmax(h, f)
                source = source | _vselect(e_open >= e_extend, e_flag, zero) | _vselect(f_open >= f_extend, f_flag,
                                                                                        zero)
                _vstore(pointers, at + j * K, source)
                _vstore(h_column, j * K, h)
                _vstore(e_column, j * K, e)
                h_diag = h_up
                h_left = h
        # the row above's band outside this row's: back to H = 0, E = _CELL_NEG
        for j in range(above_low, above_high + 1):
            if j < low or j > high:
                _vstore(h_column, j * K, zero)
                _vstore(e_column, j * K, neg)
        above_low, above_high = low, high


@njit(cache=True, nogil=True)
def _band_segments(pointer_row, n, budget):
    """The first row of each segment of a band's rows 1 to n (row i's
    pointers: pointer_row[i + 1] - pointer_row[i] bytes), as few as
    greedily hold no more than ``budget`` bytes each, then n + 1; none
    (an empty array) where one row alone passes the budget."""
    firsts = np.empty(n + 2, dtype=np.int64)
    firsts[0] = 1
    k = 0
    for i in range(1, n + 1):
        if pointer_row[i + 1] - pointer_row[firsts[k]] > budget:
            if pointer_row[i + 1] - pointer_row[i] > budget:
                return firsts[:0]
            k += 1
            firsts[k] = i
    firsts[k + 1] = n + 1
    return firsts[:k + 2]


@njit(cache=True, nogil=True)
def _walk_band(block, pattern, pointers, pointer_row, band_low, band_high, first, lanes, at, state, targets, ops):
    """_walk_rows over the pointers of a band's rows ``first`` on
    (_band_forward_body: row i's from pointers[pointer_row[i] -
    pointer_row[first]]): a lane that comes to a row above them waits there
    (``at`` and ``state``) for the next segment's; a lane in state H at a
    cell outside the band stops there (its H is 0: the cell before an
    alignment's first); in a gap state it cannot be there (every cell of the
    alignment is in the band): returns False."""
    count = targets.shape[0]
    base = pointer_row[first]
    for q in range(count):
        t = targets[q]
        while state[q] != 3:
            i = at[q, 0]
            j = at[q, 1]
            lane_state = state[q]
            if 0 < i < first:
                break  # its pointers are in a segment above
            if i == 0 or j == 0 or j < band_low[i] or j > band_high[i]:
                if lane_state != 0:
                    return False
                state[q] = 3
                break
            pointer = pointers[pointer_row[i] - base + (j - band_low[i]) * lanes + q]
            if lane_state == 0:
                source = pointer & _H_SOURCE
                if source == _H_FROM_ZERO:
                    state[q] = 3
                elif source == _H_FROM_DIAG:
                    if block[i - 1, q] & pattern[j - 1, q]:
                        ops[t, at[q, 2]] = OP_MATCH
                    else:
                        ops[t, at[q, 2]] = OP_MISMATCH
                    at[q, 2] += 1
                    at[q, 0] = i - 1
                    at[q, 1] = j - 1
                elif source == _H_FROM_E:
                    state[q] = 1
                else:
                    state[q] = 2
            elif lane_state == 1:
                ops[t, at[q, 2]] = OP_INS
                at[q, 2] += 1
                if pointer & _E_OPENED:
                    state[q] = 0
                at[q, 0] = i - 1
            else:
                ops[t, at[q, 2]] = OP_DEL
                at[q, 2] += 1
                if pointer & _F_OPENED:
                    state[q] = 0
                at[q, 1] = j - 1
    return True


def _banded_batch_body(codes, rows, order, pattern_codes, pattern_start, lane_pattern, score, read_end, pattern_end,
                       box_rows, box_columns, block_first, match, mismatch, gap_open, gap_extend, ops, threads,
                       budget, ledger, memory):
    """Align the instances (rows[t], oriented pattern lane_pattern[t])
    whose alignments of score score[t] end at read base read_end[t]
    (exclusive) and pattern base pattern_end[t], every one of them within
    box_rows[t] rows and box_columns[t] columns up to there (start_boxes),
    blocks of _K (block b: instances block_first[b] to block_first[b + 1]),
    each thread taking the next block as it is done with one. In a block
    the lanes' end cells are its last row and column. The start pass runs
    again bounded by the boxes (the prefix of an alignment before a cell
    scores at most match x the rows and columns of the box before it): the
    band of cells where an alignment of the score ending at the end cell
    can pass, far narrower than the box. The pointer pass then covers only
    the band (_band_forward_body), and the walk (_walk_band) the same
    alignment as the whole DP's: its values there are the whole DP's on
    every cell of every such alignment. A band whose pointers pass
    ``budget`` bytes is computed and walked in segments of rows
    (_band_segments), as _align_batch_body does with its rows: at most
    twice the pointer pass, pointers of one segment at a time. Fills
    ``ops[order[t]]`` and row order[t] of the (k, 8) table; returns it and,
    per block, 1 where it was aligned, 0 where one row of its band would
    pass ``budget`` bytes (not aligned: the caller aligns it otherwise). The
    table has a row for each row of ``ops``. A segment's pointers of
    MAPPED_FROM bytes or more are
    mapped for its block alone (:func:`bpbc.scratch.take`), within
    ``memory`` bytes of such scratch of all threads at once, counted in
    ``ledger``; smaller ones go to an array each thread keeps."""
    out = np.zeros((ops.shape[0], 8), dtype=np.int64)
    blocks = block_first.shape[0] - 1
    done = np.zeros(blocks, dtype=np.int64)
    taken = np.zeros(1, dtype=np.int64)
    block_order = np.arange(blocks - 1, -1, -1)  # blocks come by box size: the largest first, the last a small one
    for _ in prange(min(blocks, threads)):
        space = np.empty(0, dtype=np.uint8)
        while True:
            b, first, count = _take_block(taken, block_order, block_first)
            if b < 0:
                break
            n = 0
            m = 0
            for q in range(count):
                n = max(n, box_rows[first + q])
                m = max(m, box_columns[first + q])
            # the start pass again, bounded by the boxes: the band, in rows and columns from the end cell
            reversed_block = np.zeros((n, _K), dtype=np.uint8)
            reversed_bits = np.zeros((m, _K), dtype=np.uint8)
            target = np.ones(_K, dtype=_CELL)
            base = np.ones(_K, dtype=_CELL)
            row_base = np.ones(_K, dtype=np.int64)
            for q in range(count):
                t = first + q
                row, end, column = rows[t], read_end[t], pattern_end[t]
                for r in range(box_rows[t]):
                    code = codes[row, end - 1 - r]
                    reversed_block[r, q] = (1 << code) if code < 4 else 0
                start = pattern_start[lane_pattern[t]]
                for c in range(box_columns[t]):
                    reversed_bits[c, q] = pattern_codes[start + column - 1 - c]
                target[q] = score[t]
                base[q] = score[t] - match * box_columns[t]
                row_base[q] = score[t] - match * box_rows[t]
            found = np.zeros((_K, 2), dtype=np.int64)
            band = np.zeros((n, 2), dtype=np.int64)
            band[:, 0] = 1
            _start(reversed_block, reversed_bits, target, base, row_base, match, mismatch, gap_open, gap_extend,
                   found, band)
            # the band in the block's rows and columns (row n, column m: the end cells), its pointers' places
            band_low = np.ones(n + 1, dtype=np.int64)
            band_high = np.zeros(n + 1, dtype=np.int64)
            pointer_row = np.zeros(n + 2, dtype=np.int64)
            for i in range(1, n + 1):
                # the pass's cell (row, column) from the end is the forward pass's pair there, but
                # its E is the forward E one column nearer the end, and its F the forward F one row
                # nearer: the forward pass's row i (the pass's row n + 1 - i, at band[n - i]) takes
                # that row's columns, one more, and the columns of the row after it in the pass
                r = n - i
                low, high = m + 1, -1
                if band[r, 0] <= band[r, 1]:
                    low, high = band[r, 0], band[r, 1] + 1
                if r >= 1 and band[r - 1, 0] <= band[r - 1, 1]:
                    low, high = min(low, band[r - 1, 0]), max(high, band[r - 1, 1])
                if low <= high:
                    band_low[i] = max(m - high + 1, 1)
                    band_high[i] = m - low + 1
                pointer_row[i + 1] = pointer_row[i] + max(band_high[i] - band_low[i] + 1, 0) * _K
            # the band's rows in segments whose pointers fit the budget (_band_segments): a first pass
            # over them in order keeps H and E of the row above each (in that row's band: outside it
            # they are H = 0, E = _CELL_NEG); then each, from the last up, is computed again from there
            # with its pointers and walked back until every lane has left it (the last one's pointers
            # are the first pass's): the values of one pass, so the same alignment, in at most twice
            # its time. One segment where they fit at once
            seg_first = _band_segments(pointer_row, n, budget)
            segments = seg_first.shape[0] - 1
            if segments < 1:
                continue  # a row alone passes the budget: the caller aligns it otherwise
            need = 0
            kept = np.zeros(segments + 1, dtype=np.int64)  # where each segment's checkpoint starts
            for g in range(segments):
                need = max(need, pointer_row[seg_first[g + 1]] - pointer_row[seg_first[g]])
                above = seg_first[g] - 1
                kept[g + 1] = kept[g] + max(band_high[above] - band_low[above] + 1, 0) * _K
            block = np.zeros((n, _K), dtype=np.uint8)
            bits = np.zeros((m, _K), dtype=np.uint8)
            for q in range(count):
                t = first + q
                row, end, column = rows[t], read_end[t], pattern_end[t]
                for r in range(box_rows[t]):
                    code = codes[row, end - 1 - r]
                    block[n - 1 - r, q] = (1 << code) if code < 4 else 0
                start = pattern_start[lane_pattern[t]]
                for c in range(box_columns[t]):
                    bits[m - 1 - c, q] = pattern_codes[start + column - 1 - c]
            h_column = np.zeros((m + 1) * _K, dtype=_CELL)
            e_column = np.full((m + 1) * _K, _CELL_NEG, dtype=_CELL)
            kept_h = np.empty(kept[segments] if segments > 1 else 0, dtype=_CELL)
            kept_e = np.empty(kept_h.shape[0], dtype=_CELL)
            targets = order[first:first + count]
            starts = np.empty((count, 3), np.int64)
            for q in range(count):
                starts[q, 0] = n
                starts[q, 1] = m
                starts[q, 2] = 0
            walking = np.zeros(count, np.int64)
            # the pointers: mapped for this block, within the budget of all threads (bpbc.scratch), and
            # given back before anything else is allocated; small ones in the thread's own array
            if need >= MAPPED_FROM:
                pointers = take(need, ledger, memory)
            else:
                if space.shape[0] < need:
                    space = np.empty(need, dtype=np.uint8)
                pointers = space
            for g in range(segments):
                if segments > 1:
                    above = seg_first[g] - 1
                    _copy(h_column, band_low[above] * _K, kept_h, kept[g], kept[g + 1] - kept[g])
                    _copy(e_column, band_low[above] * _K, kept_e, kept[g], kept[g + 1] - kept[g])
                _band_forward(block, bits, match, mismatch, gap_open, gap_extend, band_low, band_high, pointer_row,
                              seg_first[g], seg_first[g + 1] - 1, h_column, e_column, pointers)
            walked = True
            for g in range(segments - 1, -1, -1):
                if g < segments - 1:  # the last segment's pointers are those the first pass left
                    above = seg_first[g] - 1
                    h_column[:] = 0
                    e_column[:] = _CELL_NEG
                    _copy(kept_h, kept[g], h_column, band_low[above] * _K, kept[g + 1] - kept[g])
                    _copy(kept_e, kept[g], e_column, band_low[above] * _K, kept[g + 1] - kept[g])
                    _band_forward(block, bits, match, mismatch, gap_open, gap_extend, band_low, band_high,
                                  pointer_row, seg_first[g], seg_first[g + 1] - 1, h_column, e_column, pointers)
                walked = walked and _walk_band(block, bits, pointers, pointer_row, band_low, band_high, seg_first[g],
                                               _K, starts, walking, targets, ops)
            if need >= MAPPED_FROM:
                give(pointers, ledger)
            if not walked:
                continue  # not marked done: the caller's own pass aligns it, and its check finds the fault
            _walk_end(starts, targets, ops)
            for q in range(count):
                t = targets[q]
                n_ops = starts[q, 2]
                n_match = 0
                for o in range(n_ops):
                    if ops[t, o] == OP_MATCH:
                        n_match += 1
                out[t, _SCORE] = score[first + q]
                out[t, _READ_START] = starts[q, 0] - n + read_end[first + q]
                out[t, _READ_END] = read_end[first + q]
                out[t, _PAT_START] = starts[q, 1] - m + pattern_end[first + q]
                out[t, _PAT_END] = pattern_end[first + q]
                out[t, _N_OPS] = n_ops
                out[t, _NM] = n_ops - n_match
                out[t, _MATCHES] = n_match
            done[b] = 1
    return out, done


def _align_batch_body(codes, lengths, rows, skips, order, pattern_codes, pattern_start, lane_pattern, lane_offset,
                      ends, block_first, block_width, match, mismatch, gap_open, gap_extend, ops, threads, budget):
    """Align reads ``codes[rows[t], :lengths[rows[t]]]`` against windows of
    oriented patterns of the flat table (pattern_codes, pattern_start): block
    b (instances block_first[b] to block_first[b + 1], at most _K) on
    block_width[b] columns, lane t's column j holding base j +
    lane_offset[t] of pattern lane_pattern[t] (none outside the pattern), in
    parallel over blocks; lane t's rows are its read from base skips[t] on
    (coordinates reported in the read). Where ends[t, 0] >= 0 the alignment
    is known to end with score ends[t, 0] at row ends[t, 1] and at the
    block's last column (a score pass found it: see _run_batch), else the
    forward pass finds its end. Instance t is the caller's instance order[t]: fills
    ``ops[order[t]]`` and row order[t] of the int64 (k, 8) table it returns
    (see the _SCORE.. column names). Padding rows and columns match nothing
    (as INVALID codes): their cells stay below the real maximum, so they
    change no alignment.

    A block whose pointers (a byte per cell and lane) would pass ``budget``
    bytes is aligned in segments of about sqrt(2 x cell bytes x rows) rows,
    in space of the square root of the rows times a row (checkpoints, as
    CUDAlign's and Myers-Miller's passes keep rows, not the matrix): a first
    forward pass keeps H and E of the row above each segment (and the best
    cell), then each segment, from the last up, is computed again from its
    checkpoint with its pointers and walked back until every lane has left
    it. The values are those of one pass, so the alignment is the same;
    the time is about twice the forward pass.

    Each of ``threads`` takes the next block as it gets done with one (take_next),
    its pointers into space of its own, allocated once: a block's pointers
    (600 kB for 32 reads of 150 bp against 128 bp) allocated afresh were
    written to memory far from the core at every block, and on 16 threads
    the blocks ran at 5.4x one thread's rate."""
    out = np.zeros((ops.shape[0], 8), dtype=np.int64)  # a row for each of ops: instances go to several kernels
    blocks = block_first.shape[0] - 1
    taken = np.zeros(1, dtype=np.int64)
    block_order = np.arange(blocks)  # the blocks in turn
    for _ in prange(min(blocks, threads)):
        space = np.empty(0, dtype=np.uint8)
        h_column = np.empty(0, dtype=_CELL)
        e_column = np.empty(0, dtype=_CELL)
        checkpoints = np.empty(0, dtype=_CELL)
        state = np.zeros(3 * _K, dtype=_STATE)
        again = np.zeros(3 * _K, dtype=_STATE)  # the best cells of a segment's second pass, not used
        while True:
            b, first, count = _take_block(taken, block_order, block_first)
            if b < 0:
                break
            m = block_width[b]
            n = 0
            for q in range(count):  # rows past a known end are not needed
                n = max(n, ends[first + q, 1] if ends[first + q, 0] >= 0 else lengths[rows[first + q]])
            block = np.zeros((n, _K), dtype=np.uint8)
            _fill_block(codes, lengths, rows, skips, first, count, n, block)
            bits = np.zeros((m, _K), dtype=np.uint8)
            _fill_patterns(pattern_codes, pattern_start, lane_pattern, lane_offset, first, count, bits)
            row_bytes = (m + 1) * _K
            segment = max(n, 1)
            if (n + 1) * row_bytes > budget and _SEGMENTS:  # int8 blocks: never (_run_batch keeps them small)
                # rows a segment: its pointers (segment x row_bytes bytes) take what the checkpoints
                # (2 x n / segment rows of cells) take, the least the two can take together
                segment = max(1, min(n, int(np.sqrt(2.0 * h_column.itemsize * n))))
            segments = (n + segment - 1) // segment
            size = (min(n, segment) + 1) * row_bytes
            if space.shape[0] < size:
                space = np.empty(size, dtype=np.uint8)
            pointers = space[:size].reshape((min(n, segment) + 1, m + 1, _K))
            if h_column.shape[0] < row_bytes:
                h_column = np.empty(row_bytes, dtype=_CELL)
                e_column = np.empty(row_bytes, dtype=_CELL)
            _new_rows(m, h_column, e_column, state)
            if segments > 1 and checkpoints.shape[0] < 2 * segments * row_bytes:
                checkpoints = np.empty(2 * segments * row_bytes, dtype=_CELL)
            for s in range(segments):
                if segments > 1:
                    _copy(h_column, 0, checkpoints, 2 * s * row_bytes, row_bytes)
                    _copy(e_column, 0, checkpoints, (2 * s + 1) * row_bytes, row_bytes)
                _forward(block, bits, match, mismatch, gap_open, gap_extend, s * segment + 1,
                         min(n, (s + 1) * segment), h_column, e_column, state, pointers)
            best = np.zeros((_K, 3), dtype=np.int64)
            for q in range(_K):
                for c in range(3):
                    best[q, c] = state[c * _K + q]
            for q in range(count):
                if ends[first + q, 0] >= 0:
                    best[q, 0] = ends[first + q, 0]
                    best[q, 1] = ends[first + q, 1]  # 0 where the score is 0: no alignment, nothing walked
                    best[q, 2] = m if ends[first + q, 0] > 0 else 0
            targets = order[first:first + count]
            starts, walking = _walk_start(best, count)
            for s in range(segments - 1, -1, -1):
                if s < segments - 1:  # the last segment's pointers are those the first pass left
                    _copy(checkpoints, 2 * s * row_bytes, h_column, 0, row_bytes)
                    _copy(checkpoints, (2 * s + 1) * row_bytes, e_column, 0, row_bytes)
                    _forward(block, bits, match, mismatch, gap_open, gap_extend, s * segment + 1,
                             min(n, (s + 1) * segment), h_column, e_column, again, pointers)
                _walk(block, bits, pointers, s * segment + 1, starts, walking, targets, ops, best, match, mismatch,
                      gap_open, gap_extend)
            if segments == 0:
                _walk(block, bits, pointers, 1, starts, walking, targets, ops, best, match, mismatch, gap_open,
                      gap_extend)
            _walk_end(starts, targets, ops)
            for q in range(count):
                t = targets[q]
                offset = lane_offset[first + q] if best[q, 0] > 0 else 0  # score 0: all zero
                skip = skips[first + q] if best[q, 0] > 0 else 0
                rs, ps, n_ops = starts[q, 0] + skip, starts[q, 1], starts[q, 2]
                n_match = 0
                for o in range(n_ops):
                    if ops[t, o] == OP_MATCH:
                        n_match += 1
                out[t, _SCORE] = best[q, 0]
                out[t, _READ_START] = rs
                out[t, _READ_END] = best[q, 1] + skip
                out[t, _PAT_START] = ps + offset
                out[t, _PAT_END] = best[q, 2] + offset
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


def _named(function, suffix: str, **names):
    """A copy of ``function`` under its name + ``suffix``, the global
    ``names`` bound to the values given. numba's disk cache files a kernel
    under its Python function's qualified name (and line), so two kernels
    made from one function shared one entry, and whichever was compiled
    first was loaded for both: the parallel traceback ran the serial code
    (0.124 s for 100k instances on 1 and on 2 threads)."""
    copy = types.FunctionType(function.__code__, {**function.__globals__, **names}, function.__name__ + suffix,
                              function.__defaults__, function.__closure__)
    copy.__qualname__ = function.__qualname__ + suffix
    return copy


@njit(inline="always")
def _splat1(x):
    return np.int32(x)


@njit(inline="always")
def _load1(array, i):
    return array[i]


@njit(inline="always")
def _store1(array, i, value):
    array[i] = value


@njit(inline="always")
def _max1(a, b):
    return max(a, b)


@njit(inline="always")
def _select1(mask, a, b):
    return a if mask else b


@njit(inline="always")
def _any1(mask):
    return mask


# The forward pass on 16 int32 lanes, and on 32 int16 lanes where the values
# fit: the same instructions for twice the reads (a 16-bit lane is as fast as
# a 32-bit one); each lane width's cell type and vector operations. And on
# one int32 lane: a lone instance whose pointers are large takes a 16th of
# the memory of a block of 16 lanes, in about the same time
_INT32_LANES = dict(_K=LANES, _CELL=np.int32, _CELL_NEG=_NEG, _vsplat=vsplat16, _vload=vload16, _vstore=vstore16,
                    _vmax=vmax16, _vselect=vselect16, _vany=vany)
_INT16_LANES = dict(_K=LANES16, _CELL=np.int16, _CELL_NEG=_NEG16, _vsplat=vsplat32, _vload=vload32, _vstore=vstore32,
                    _vmax=vmax32, _vselect=vselect32, _vany=vany)
_ONE_LANE = dict(_K=1, _CELL=np.int32, _CELL_NEG=_NEG, _vsplat=_splat1, _vload=_load1, _vstore=_store1, _vmax=_max1,
                 _vselect=_select1, _vany=_any1)


def _lane_kernels(body, **kernels):
    """``body`` compiled for int32 lanes and for int16 lanes, the names
    ``kernels`` bound to the first or the second of their pair."""
    return (njit(cache=True, nogil=True)(_named(body, "_i32", **_INT32_LANES,
                                                **{name: pair[0] for name, pair in kernels.items()})),
            njit(cache=True, nogil=True)(_named(body, "_i16", **_INT16_LANES,
                                                **{name: pair[1] for name, pair in kernels.items()})))


def _batch_kernels(body, suffix: str, **names):
    """``body`` as a parallel kernel for batches and its serial twin for a
    few instances: starting a parallel region costs far more than aligning
    one read, above all on a busy machine where the worker threads have to
    be woken up."""
    return (njit(parallel=True, cache=True, nogil=True)(_named(body, "_parallel" + suffix, **names)),
            njit(cache=True, nogil=True)(_named(body, "_serial" + suffix, **names)))


_forward_lanes, _forward_lanes16 = _lane_kernels(_forward_body)
_new_rows_lanes, _new_rows_lanes16 = _lane_kernels(_new_rows_body)
_forward, _new_rows = _forward_lanes, _new_rows_lanes
_forward_lane1 = njit(cache=True, nogil=True)(_named(_forward_body, "_1", **_ONE_LANE))
_new_rows_lane1 = njit(cache=True, nogil=True)(_named(_new_rows_body, "_1", **_ONE_LANE))
# and on 64 int8 lanes, where the scores and the columns fit (short patterns: _fits_int8)
_forward_lanes8 = njit(cache=True, nogil=True)(_forward8_body)
_new_rows_lanes8 = njit(cache=True, nogil=True)(_named(_new_rows_body, "_i8", _K=LANES8, _CELL_NEG=_NEG8))
_align_batch_parallel, _align_batch_serial = _batch_kernels(
    _align_batch_body, "", _K=LANES, _CELL=np.int32, _STATE=np.int32, _forward=_forward_lanes,
    _new_rows=_new_rows_lanes, _walk=_walk_rows)
_align_batch_parallel16, _align_batch_serial16 = _batch_kernels(
    _align_batch_body, "16", _K=LANES16, _CELL=np.int16, _STATE=np.int16, _forward=_forward_lanes16,
    _new_rows=_new_rows_lanes16, _walk=_walk_rows)
_align_batch_parallel8, _align_batch_serial8 = _batch_kernels(
    _align_batch_body, "8", _K=LANES8, _CELL=np.int8, _STATE=np.int32, _forward=_forward_lanes8,
    _new_rows=_new_rows_lanes8, _walk=_walk_scores, _SEGMENTS=False)
_align_batch_parallel1, _align_batch_serial1 = _batch_kernels(
    _align_batch_body, "1", _K=1, _CELL=np.int32, _STATE=np.int32, _forward=_forward_lane1,
    _new_rows=_new_rows_lane1, _walk=_walk_rows)
# The score pass (long patterns), likewise
# (a block is one stripe of rows; one block on all threads is a stripe each: a wavefront)
_score_rows_lanes, _score_rows_lanes16 = _lane_kernels(_score_rows_body)
_score_rows = _score_rows_lanes  # as _score: named for readers and linters
_first_best_lanes, _first_best_lanes16 = _lane_kernels(_first_best_body)
_first_best = _first_best_lanes  # likewise
_COLUMN_KERNELS = dict(_score_rows=(_score_rows_lanes, _score_rows_lanes16),
                       _first_best=(_first_best_lanes, _first_best_lanes16))
_score_stripe_lanes, _score_stripe_lanes16 = _lane_kernels(_score_stripe_body, **_COLUMN_KERNELS)
_score_stripe = _score_stripe_lanes  # as _score: named for readers and linters
_score_lanes = njit(cache=True, nogil=True)(_named(_score_body, "_i32", **_INT32_LANES,
                                                   _score_stripe=_score_stripe_lanes))
_score_lanes16 = njit(cache=True, nogil=True)(_named(_score_body, "_i16", **_INT16_LANES,
                                                     _score_stripe=_score_stripe_lanes16))
_score_blocks_parallel, _score_blocks_serial = _batch_kernels(_score_blocks_body, "")
_score_wave = njit(parallel=True, cache=True, nogil=True)(_named(_score_wave_body, "_i32", **_INT32_LANES,
                                                                 _score_stripe=_score_stripe_lanes))
_score_wave16 = njit(parallel=True, cache=True, nogil=True)(_named(_score_wave_body, "_i16", **_INT16_LANES,
                                                                   _score_stripe=_score_stripe_lanes16))
# and over one long instance, a stripe of its rows a lane (where a block would hold few instances)
_score_skewed_lanes, _score_skewed_lanes16 = _lane_kernels(_score_skewed_body, **_COLUMN_KERNELS)
_score_skewed = _score_skewed_lanes  # as _score: named for readers and linters
_score_skewed_runs_parallel, _score_skewed_runs_serial = _batch_kernels(
    _score_skewed_runs_body, "_i32", **_INT32_LANES, _score_skewed=_score_skewed_lanes)
_score_skewed_runs_parallel16, _score_skewed_runs_serial16 = _batch_kernels(
    _score_skewed_runs_body, "_i16", **_INT16_LANES, _score_skewed=_score_skewed_lanes16)
# The start pass (known end cells), likewise
_start_lanes, _start_lanes16 = _lane_kernels(_start_body)
_start = _start_lanes  # as _score: named for readers and linters
_start_batch_parallel, _start_batch_serial = _batch_kernels(_start_batch_body, "", _K=LANES, _CELL=np.int32,
                                                            _start=_start_lanes)
_start_batch_parallel16, _start_batch_serial16 = _batch_kernels(_start_batch_body, "16", _K=LANES16, _CELL=np.int16,
                                                                _start=_start_lanes16)
_band_forward_lanes, _band_forward_lanes16 = _lane_kernels(_band_forward_body)
_band_forward = _band_forward_lanes
_banded_batch_parallel, _banded_batch_serial = _batch_kernels(
    _banded_batch_body, "", _K=LANES, _CELL=np.int32, _CELL_NEG=_NEG, _start=_start_lanes,
    _band_forward=_band_forward_lanes)
_banded_batch_parallel16, _banded_batch_serial16 = _batch_kernels(
    _banded_batch_body, "16", _K=LANES16, _CELL=np.int16, _CELL_NEG=_NEG16, _start=_start_lanes16,
    _band_forward=_band_forward_lanes16)
# and on one lane: a few long instances, each a block of its own (on a thread of its own), its
# band's pointers a 16th of a 16-lane block's
_start_lane1 = njit(cache=True, nogil=True)(_named(_start_body, "_1", **_ONE_LANE))
_band_forward_lane1 = njit(cache=True, nogil=True)(_named(_band_forward_body, "_1", **_ONE_LANE))
_banded_batch_parallel1, _banded_batch_serial1 = _batch_kernels(
    _banded_batch_body, "1", _K=1, _CELL=np.int32, _CELL_NEG=_NEG, _start=_start_lane1,
    _band_forward=_band_forward_lane1)
_cigars_parallel, _cigars_serial = _batch_kernels(_cigars_body, "")
_PARALLEL_FROM = 32  #: instances from which the parallel kernels are used
#: the ops of a batch's alignments, a buffer used again from call to call
#: (fresh, the 2.2 MB of 8000 hits were 540 page faults a call)
_OPS_BUFFERS = BufferPool(keep=2)
#: instances from which the CIGARs are written on all threads: each takes
#: about 0.13 us, so a few thousand take less time on one thread than
#: waking the others twice (2 threads, 2-core Zen 5: 800 instances 0.10 ms
#: on one against 0.13-0.28 in parallel, 3200 0.41 against 0.41-0.43,
#: 8000 1.03 against 0.70)
_CIGARS_PARALLEL_FROM = 4000
#: bytes of pointers a block may hold at once; a larger block is aligned in
#: segments of rows (_align_batch_body): twice the forward pass, memory in
#: the square root of the read's length
POINTER_BUDGET = 64 << 20
#: bytes a block aligned in segments may take (pointers and checkpoints); past it each of
#: its instances is aligned on one lane (a 100 kb pattern, 200k rows: 4 GB on 16 lanes, 250 MB on one)
SEGMENTED_BUDGET = 8 * POINTER_BUDGET


def segmented_bytes(rows, width, lanes: int, cell_bytes: int = 4):
    """About the bytes of pointers and checkpoints of a block of ``lanes``
    aligned in segments (_align_batch_body): rows of a segment sqrt(2 x
    cell bytes x rows), as many bytes of pointers as of checkpoints."""
    return 2 * np.sqrt(2.0 * cell_bytes * np.asarray(rows, np.float64)) * (np.asarray(width) + 1) * lanes


#: patterns more than this many times a read's length take the score pass and a box (end_cells, _boxed_blocks)
_WINDOW_FROM = 4
#: and instances of at least this many cells (read x pattern) likewise: the score pass (no
#: pointers) and the band cost far less than a pointer pass over all of them (in segments of
#: rows, twice over, where large): 6 hits of 13 kb reads on a 48.5 kb pattern, 9.1 s -> 6.3 s
_BAND_FROM_CELLS = 1 << 22


def _most_ops(longest_read: int, longest_pattern: int, scoring: Scoring) -> int:
    """The most ops an alignment of a read of at most ``longest_read`` bases
    can have: its M, X and I ops take one read base each, and its D ops, each
    costing at least gap_extend, are fewer than match x read length /
    gap_extend (a score of at least 1), and no more than the pattern's
    bases. The row of ops each hit gets: read length + pattern length would
    be 10 kB a hit against a 10 kb pattern."""
    deletions = min(longest_pattern, scoring.match * longest_read // scoring.gap_extend)
    return longest_read + deletions


def _fits_int16(longest_read: int, longest_pattern: int, scoring: Scoring) -> bool:
    """Whether int16 cells hold every value of the forward pass exactly: the
    best score, the row and column numbers, and every E and F, with
    _NEG16 below them all (and _NEG16 minus the gap extension still an int16)."""
    return (scoring.match * min(longest_read, longest_pattern) <= _INT16_SCORE
            and max(longest_read, longest_pattern) < _INT16_SCORE
            and scoring.mismatch <= _INT16_COST and scoring.gap_open + scoring.gap_extend <= _INT16_COST)


def _fits_int8(longest_read: int, longest_pattern: int, scoring: Scoring) -> bool:
    """Whether the 64 int8 lanes of _forward8_body hold every value of the
    forward pass exactly: the best score (match x the shorter of read and
    pattern; every cell's H and every diagonal sum is a local alignment's
    score, so at most that), the column numbers (patterns of at most 127
    bases; rows are kept apart), and every E and F, with _NEG8 below them all
    (costs of at most _INT8_COST: every value at least _NEG8 - gap_extend)."""
    return (scoring.match * min(longest_read, longest_pattern) <= _INT8_SCORE and longest_pattern <= _INT8_SCORE
            and scoring.mismatch <= _INT8_COST and scoring.gap_open + scoring.gap_extend <= _INT8_COST)


def _pattern_blocks(chosen, read_lengths, ks, table, lanes):
    """Instances ``chosen`` (their read lengths and oriented patterns given)
    aligned against their whole pattern, in groups of ``lanes`` by pattern
    length, then pattern, then read length (little padding; lanes need not
    share a pattern: columns past a lane's pattern match nothing, so its
    cells there stay below its best and are never walked): (order, lane
    offsets, ends, group widths, group firsts, row skips: 0)."""
    pattern_lengths = table.lengths[ks].astype(np.int64)
    by_pattern = lexsort2(read_lengths, pattern_lengths * len(table) + ks)
    group_first = np.arange(0, len(chosen), lanes, dtype=np.int64)
    group_width = np.maximum.reduceat(pattern_lengths[by_pattern], group_first).astype(np.int64) if len(chosen) \
        else np.zeros(0, np.int64)
    ends = np.full((len(chosen), 2), -1, dtype=np.int64)
    return (chosen[by_pattern], np.zeros(len(chosen), np.int64), ends, group_width, group_first,
            np.zeros(len(chosen), np.int64))


def end_cells(codes, lengths, rows, table, ks, scoring: Scoring, fits: bool | None = None,
              parallel: bool | None = None) -> np.ndarray:
    """The end cell of each instance (rows[t], oriented pattern ks[t] of
    ``table``) by the traceback's tie rule (the first maximum in (read row,
    pattern column) order), without pointers: the int64 (k, 3) table of
    score, read end and pattern end. Blocks of any patterns, by pattern
    length then read length; int16 cells where the values fit, each
    instance's own (:func:`_fits_int16_score`; ``fits`` True or False: all
    int16, or all int32), in parallel where they are many or long."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    ks = np.ascontiguousarray(ks, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, np.int64)
    read_lengths = lengths[rows]
    pattern_lengths = table.lengths[ks].astype(np.int64)
    if fits is None:
        narrow = _fits_int16_score(read_lengths, pattern_lengths, scoring)
        if not narrow.all() and _block_cells(read_lengths, pattern_lengths, narrow) > \
                _block_cells(read_lengths, pattern_lengths, np.zeros(len(rows), bool)):
            narrow[:] = False  # a block more than all on int32 costs (6 reads of 6-19 kb: 2 blocks, not 1)
    else:
        narrow = np.full(len(rows), bool(fits))
    if parallel is None:
        parallel = len(rows) >= _PARALLEL_FROM
    parallel = parallel or len(rows) > 1 and float((read_lengths * pattern_lengths).sum()) >= _PARALLEL_CELLS
    threads = get_num_threads() if parallel else 1
    score_blocks = _score_blocks_parallel if parallel else _score_blocks_serial
    # int32 instances first, then int16 ones, each by pattern length then read length, in blocks
    by_length = np.lexsort((read_lengths, pattern_lengths, narrow))
    firsts, wide = [], []
    wide_count = int((~narrow).sum())
    for first, count, lanes, is_wide in ((0, wide_count, LANES, True), (wide_count, len(rows) - wide_count, LANES16,
                                                                         False)):
        if count:
            firsts.append(first + np.arange(0, count, lanes, dtype=np.int64))
            wide.append(np.full(len(firsts[-1]), is_wide, dtype=np.bool_))
    block_first = np.append(np.concatenate(firsts) if firsts else np.zeros(0, np.int64), len(rows)).astype(np.int64)
    block_wide = np.concatenate(wide) if wide else np.zeros(0, np.bool_)
    found = np.empty((len(rows), 3), np.int64)
    if not len(rows):
        return found
    block_width = np.maximum.reduceat(pattern_lengths[by_length], block_first[:-1]).astype(np.int64)
    skewed = _skewing_pays(read_lengths[by_length], pattern_lengths[by_length], block_first, block_width, block_wide)
    if skewed.any():  # instances of blocks that would leave lanes idle: each alone, a stripe of its rows a lane
        alone = np.repeat(skewed, np.diff(block_first))
        for int32 in (True, False):
            chosen = by_length[alone & (narrow[by_length] != int32)]
            if len(chosen):
                found[chosen] = _score_skewed_instances(codes, lengths, rows[chosen], table, ks[chosen], int32,
                                                        scoring, threads)
        rest = by_length[~alone]
        if len(rest):
            found[rest] = end_cells(codes, lengths, rows[rest], table, ks[rest], scoring, fits, parallel)
        return found
    if threads > 1 and len(block_first) - 1 < threads:
        # fewer blocks than threads (a few long instances): each block on all threads, in
        # stripes of rows (a wavefront), one after the other: their cells over the threads,
        # not the largest block's on one
        found[by_length] = _score_waves(codes, lengths, rows[by_length], table, ks[by_length], block_first,
                                        block_width, block_wide, scoring, threads)
        return found
    # the costliest blocks first (their longest read x their widest pattern): the last to end is a small one
    block_order = np.argsort(-np.maximum.reduceat(read_lengths[by_length], block_first[:-1]) * block_width,
                             kind="stable").astype(np.int64)
    found[by_length] = score_blocks(np.ascontiguousarray(codes, dtype=np.uint8), lengths, rows[by_length], table.masks,
                                    table.starts, ks[by_length], block_first, block_width, block_wide, block_order,
                                    scoring.match, scoring.mismatch, scoring.gap_open, scoring.gap_extend, threads)
    return found


def _block_cells(read_lengths, pattern_lengths, narrow) -> float:
    """The cells (a block's longest read x its widest pattern, summed)
    of end_cells' blocks where ``narrow`` instances take int16 lanes."""
    total = 0.0
    for group, lanes in ((~narrow, LANES), (narrow, LANES16)):
        order = np.lexsort((read_lengths[group], pattern_lengths[group]))
        if len(order):
            starts = np.arange(0, len(order), lanes)
            total += float((np.maximum.reduceat(read_lengths[group][order], starts)
                            * np.maximum.reduceat(pattern_lengths[group][order], starts)).sum())
    return total


#: the fewest rows of a stripe of the score pass run as a wavefront (_score_wave_body)
_STRIPE_ROWS = 256
#: the most bytes the stripes' edges (H and E of each stripe's last row) take: 16 stripes of a
#: block of 16 int32 lanes against a 100 kb pattern take 218 MB, so fewer stripes there
_EDGE_BUDGET = 64 << 20


def _score_waves(codes, lengths, rows, table, ks, block_first, block_width, block_wide, scoring: Scoring,
                 threads: int) -> np.ndarray:
    """end_cells' blocks (instances rows[t], oriented patterns ks[t]) one
    after the other, each on up to ``threads`` threads in stripes of at
    least _STRIPE_ROWS rows (_score_wave_body): the (k, 3) table."""
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    out = np.zeros((len(rows), 3), np.int64)
    offsets = np.zeros(len(rows), np.int64)
    for b in range(len(block_first) - 1):
        first, count = int(block_first[b]), int(block_first[b + 1] - block_first[b])
        lanes = LANES if block_wide[b] else LANES16
        n = int(lengths[rows[first:first + count]].max())
        block = np.zeros((n, lanes), np.uint8)
        _fill_block(codes, lengths, rows, offsets, first, count, n, block)
        bits = np.zeros((int(block_width[b]), lanes), np.uint8)
        _fill_patterns(table.masks, table.starts, ks, offsets, first, count, bits)
        best = np.zeros((lanes, 3), np.int64)
        # H and E of each stripe's last row, every column: at most _EDGE_BUDGET bytes
        edge_bytes = 2 * (int(block_width[b]) + 1) * lanes * (4 if block_wide[b] else 2)
        stripes = max(1, min(threads, n // _STRIPE_ROWS, _EDGE_BUDGET // edge_bytes - 1))
        (_score_wave if block_wide[b] else _score_wave16)(block, bits, scoring.match, scoring.mismatch,
                                                          scoring.gap_open, scoring.gap_extend, stripes, best)
        out[first:first + count] = best[:count]
    return out


#: the fewest rows a lane of the score pass over one instance (_score_skewed_body) runs in a stripe
_SKEWED_LANE_ROWS = 64
#: and the most rows a lane of it runs in a stripe: a stripe's columns of H and F, 256 kB, stay in a
#: core's L2 (one 1 Mb read against 10 kb on one thread: 14.1 GCUPS on int16 lanes against 13.1 in one
#: stripe, 7.0 on int32 against 6.4; 2-core EPYC)
_SKEWED_LANE_ROWS_MOST = 2048
#: a block's instances go alone (_score_skewed_body) where that takes at most this share of the block's steps
_SKEWED_SHARE = 0.8


def _skewing_pays(read_lengths, pattern_lengths, block_first, block_width, block_wide) -> np.ndarray:
    """For each of end_cells' blocks (instances block_first[b] to
    block_first[b + 1] of the lengths given, patterns up to block_width[b]),
    whether its instances each alone, a stripe of rows a lane
    (_score_skewed_body), take fewer vector steps than the block: a block
    steps through its longest read x its widest pattern whatever its lanes
    hold, an instance alone through rows / lanes x (columns + lanes). A few
    long instances (one long pair, a few windows, a few long hits) leave a
    block's lanes idle: 11 windows of 46 kb against 20 kb, 1.1 s as a block
    of 16 lanes on 2 threads, one of them 0.07 s alone (2-core AMD EPYC)."""
    lanes = np.where(block_wide, LANES, LANES16)
    longest = np.maximum.reduceat(read_lengths, block_first[:-1]) if len(read_lengths) else np.zeros(0, np.int64)
    block = longest.astype(np.float64) * block_width
    lane_of = np.repeat(lanes, np.diff(block_first))
    alone = -(-read_lengths // lane_of) * (pattern_lengths + lane_of).astype(np.float64)
    alone_steps = np.add.reduceat(alone, block_first[:-1]) if len(read_lengths) else np.zeros(0)
    return (alone_steps < _SKEWED_SHARE * block) & (longest >= lanes * _SKEWED_LANE_ROWS)


def _score_skewed_instances(codes, lengths, rows, table, ks, wide: bool, scoring: Scoring, threads: int) -> np.ndarray:
    """end_cells of instances (rows[t], oriented patterns ks[t]) each alone
    (_score_skewed_runs_body: 16 int32 lanes where ``wide``, else 32 int16
    lanes), the costliest first; on ``threads`` threads, a few long ones
    each in stripes of rows on all of them: the (k, 3) table. Where
    ``wide``, on int16 lanes first wherever a lane's rows and the costs
    fit: an instance whose best stays at most _INT16_SCORE - match there
    never passed int16 (a cell is at most its diagonal plus match), so its
    values are the int32 pass's; the others are scored again on int32
    lanes (a long pair's strand without a hit, or a hit under 32 k, in half
    the time)."""
    if wide and scoring.mismatch <= _INT16_COST and scoring.gap_open + scoring.gap_extend <= _INT16_COST \
            and -(-int(lengths[rows].max(initial=0)) // LANES16) < _INT16_SCORE:
        limit = _INT16_SCORE - scoring.match
        found = _score_skewed_runs(codes, lengths, rows, table, ks, False, scoring, threads, limit)
        again = np.flatnonzero(found[:, 0] > limit)
        if len(again):
            found[again] = _score_skewed_runs(codes, lengths, rows[again], table, ks[again], True, scoring, threads)
        return found
    return _score_skewed_runs(codes, lengths, rows, table, ks, wide, scoring, threads)


def _score_skewed_runs(codes, lengths, rows, table, ks, wide: bool, scoring: Scoring, threads: int,
                       limit: int | None = None) -> np.ndarray:
    """_score_skewed_instances on the lanes ``wide`` says; an instance with
    a cell above ``limit`` (default: none can be) stops there, its score
    limit + 1."""
    lanes = LANES if wide else LANES16
    read_lengths = lengths[rows].astype(np.int64)
    pattern_lengths = table.lengths[ks].astype(np.int64)
    order = np.argsort(-read_lengths * pattern_lengths, kind="stable")
    if len(rows) >= threads:
        stripes = np.ones(len(rows), np.int64)
    else:
        stripes = np.clip(read_lengths[order] // (lanes * _SKEWED_LANE_ROWS), 1, threads)
    # and stripes short enough for a thread's columns to stay in its caches, their edges within the budget
    edge_bytes = 2 * (pattern_lengths[order] + 1) * (4 if wide else 2)
    stripes = np.maximum(stripes, np.minimum(-(-read_lengths[order] // (lanes * _SKEWED_LANE_ROWS_MOST)),
                                             _EDGE_BUDGET // edge_bytes - 1))
    stripe_rows = -(-read_lengths[order] // (stripes * lanes)) * lanes
    read_first = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(stripes * stripe_rows, out=read_first[1:])
    read = np.zeros(int(read_first[-1]), np.uint8)
    _fill_reads(np.ascontiguousarray(codes, dtype=np.uint8), lengths, rows[order], read_first, read)
    starts, ends = table.starts[ks[order]], table.starts[ks[order] + 1]
    pattern_first = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(ends - starts, out=pattern_first[1:])
    pattern = np.concatenate([table.masks[a:b] for a, b in zip(starts, ends)]) if len(rows) else np.zeros(0, np.uint8)
    kernels = (_score_skewed_runs_parallel, _score_skewed_runs_serial) if wide else \
        (_score_skewed_runs_parallel16, _score_skewed_runs_serial16)
    found = np.zeros((len(rows), 3), np.int64)
    if limit is None:
        limit = (1 << 31) - 1 if wide else _INT16_SCORE
    kernels[threads <= 1](read, read_first, np.ascontiguousarray(pattern, dtype=np.uint8), pattern_first, stripes,
                          stripe_rows, scoring.match, scoring.mismatch, scoring.gap_open, scoring.gap_extend, limit,
                          found)
    out = np.empty_like(found)
    out[order] = found
    return out


def _fits_int16_score(read_lengths, pattern_lengths, scoring: Scoring) -> np.ndarray:
    """Whether the score pass (_score_body) holds each instance's values in
    int16 cells: its best score (match x the shorter of read and pattern),
    its row numbers, and every E and F above _NEG16 (the columns are kept
    in int64): the elementwise mask."""
    read_lengths = np.asarray(read_lengths, np.int64)
    return ((scoring.match * np.minimum(read_lengths, np.asarray(pattern_lengths, np.int64)) <= _INT16_SCORE)
            & (read_lengths < _INT16_SCORE) & (scoring.mismatch <= _INT16_COST)
            & (scoring.gap_open + scoring.gap_extend <= _INT16_COST))


def _fits_int16_start(widest: int, scoring: Scoring) -> bool:
    """Whether the start pass (_start_body) holds its values in int16 cells
    against patterns ending at most ``widest`` columns in: its bounds run
    from target - match x widest to match x widest, above _NEG16."""
    return (scoring.match * widest < 1 << 14 and scoring.mismatch <= _INT16_COST
            and scoring.gap_open + scoring.gap_extend <= _INT16_COST)


#: cells (rows x columns of the instances) from which a pass over a few long instances runs in parallel
_PARALLEL_CELLS = 1 << 24


def _spread(count: int, lanes: int, threads: int) -> int:
    """Lanes a block of a pass over ``count`` long instances: ``lanes``,
    or fewer where that leaves threads idle (a block costs its lanes'
    longest rows and widest columns whatever its lanes hold, so fewer lanes
    a block, on more threads, take less time: 6 hits of 5-18 kb against a
    48.5 kb pattern, one block of 16 lanes, ran on one of 2 threads)."""
    return max(1, min(lanes, -(-count // max(threads, 1))))
#: instances with known end cells are aligned in bands where they fit (_banded_batch_body); tests turn it off
BANDED = True


def start_boxes(codes, lengths, rows, table, ks, score, read_end, pattern_end, scoring: Scoring,
                parallel: bool | None = None) -> np.ndarray:
    """For each instance (rows[t], oriented pattern ks[t]) whose end cell is
    known (its score, read end and pattern end, exclusive, as
    :func:`end_cells` gives them; score > 0), how many rows and pattern
    columns up to the end cell hold every alignment of that score ending
    there (the int64 (k, 2) table): from the end cell a pass over the
    reversed sequences, anchored at it and stopped where no cell can still
    reach the score (_start_body). Every optimal alignment ending at the end
    cell starts in a cell it finds at the score, so the pointer pass over
    that box gives the whole DP's values on every cell of every such
    alignment, and so the same alignment."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    ks = np.ascontiguousarray(ks, dtype=np.int64)
    score, read_end, pattern_end = (np.ascontiguousarray(a, dtype=np.int64) for a in (score, read_end, pattern_end))
    if not len(rows):
        return np.zeros((0, 2), np.int64)
    fits = _fits_int16_start(int(pattern_end.max()), scoring)
    if parallel is None:
        parallel = len(rows) > 1 and float((read_end * pattern_end).sum()) >= _PARALLEL_CELLS
    lanes = _spread(len(rows), LANES16 if fits else LANES, get_num_threads() if parallel else 1)
    # blocks by rows, then columns: a block's pass runs its lanes' most rows (its cost: 58 lambda hits, 2 blocks
    # by pattern end then rows 1.85 thread-s, by rows then pattern end 1.22)
    by_size = lexsort2(pattern_end, read_end)
    block_first = np.unique(np.append(np.arange(0, len(rows), lanes), len(rows))).astype(np.int64)
    block_width = np.maximum.reduceat(pattern_end[by_size], block_first[:-1]).astype(np.int64)
    start_batch = ((_start_batch_parallel16 if parallel else _start_batch_serial16) if fits else
                   (_start_batch_parallel if parallel else _start_batch_serial))
    found = np.empty((len(rows), 2), np.int64)
    # the costliest blocks first (their most rows x their widest columns): the last to end is a small one
    block_order = np.argsort(-np.maximum.reduceat(read_end[by_size], block_first[:-1]) * block_width,
                             kind="stable").astype(np.int64)
    found[by_size] = start_batch(np.ascontiguousarray(codes, dtype=np.uint8), rows[by_size], table.masks, table.starts,
                                 ks[by_size], score[by_size], read_end[by_size], pattern_end[by_size], block_first,
                                 block_width, block_order, scoring.match, scoring.mismatch, scoring.gap_open,
                                 scoring.gap_extend, get_num_threads() if parallel else 1)
    if ((found[:, 0] == 0) | (found[:, 1] == 0)).any():
        from bpbc.errors import InternalError

        t = int(np.flatnonzero((found[:, 0] == 0) | (found[:, 1] == 0))[0])
        raise InternalError(f"no alignment of score {score[t]} ends at the end cell ({read_end[t]}, {pattern_end[t]})")
    return found


def _boxed_blocks(chosen, score, read_end, pattern_end, box, lanes: int):
    """Instances ``chosen`` whose end cells (score, read end and pattern
    end) and boxes (:func:`start_boxes`) are known, for the pointer pass in
    segments of rows where their bands are too wide (_banded_batch_body):
    it covers only the box (every alignment of that score ending there lies
    in it), so it gives the cells of the traced path, and every choice among
    their sources, the values of the whole DP: the same alignment. The boxes
    are right-aligned in a block (each lane ends at the block's last column,
    columns before its pattern's start match nothing), each lane's rows from
    its box's first (skips), blocks formed by box width, then rows (any
    patterns in a block). Returns what _pattern_blocks does (groups of equal
    width), and the skips."""
    box_rows, width = box[:, 0], box[:, 1]
    by_width = lexsort2(box_rows, width)
    chosen, score, read_end, pattern_end, width, box_rows = (chosen[by_width], score[by_width], read_end[by_width],
                                                             pattern_end[by_width], width[by_width], box_rows[by_width])
    # groups of `lanes` of increasing width, each as wide as its widest
    group_first = np.arange(0, len(chosen), lanes, dtype=np.int64)
    group_width = width[np.minimum(group_first + lanes, len(chosen)) - 1] if len(chosen) else np.zeros(0, np.int64)
    lane_width = np.repeat(group_width, np.diff(np.append(group_first, len(chosen))))
    ends = np.stack([score, box_rows], axis=1).astype(np.int64)
    skips = np.where(score > 0, read_end - box_rows, 0)
    return chosen, pattern_end - lane_width, ends, group_width.astype(np.int64), group_first, skips


def _banded(codes, rows, ks, table, chosen, score, read_end, pattern_end, box, scoring: Scoring, ops,
            parallel: bool, cell_bits: int | None = None, one_lane: bool = False):
    """Align instances ``chosen`` (end cells and boxes known, score > 0) in
    bands (_banded_batch_body), blocks by box width then rows, on int16
    cells where the values fit (or ``cell_bits`` says 16), else int32, and
    where they are no more than the threads (``cell_bits`` None) each on one
    int32 lane, a thread of its own (and with ``one_lane`` however many
    they are), blocks no larger than fill the threads (:func:`_spread`): the
    (k, 8) table of their rows (zero for the others) and whether each was
    aligned (not where a row of its block's band would take more than a
    thread's share of the scratch budget, at most POINTER_BUDGET: its band
    is aligned in segments of rows that fit)."""
    fits = cell_bits == 16 or cell_bits is None and _fits_int16(int(box[:, 0].max()), int(box[:, 1].max()), scoring) \
        and _fits_int16_start(int(box[:, 1].max()), scoring)
    threads = get_num_threads() if parallel else 1
    alone = one_lane or len(chosen) <= threads and cell_bits is None  # each on a lane (and a thread) of its own
    lanes = 1 if alone else _spread(len(chosen), LANES16 if fits else LANES, threads)
    by_size = lexsort2(box[:, 0], box[:, 1])
    block_first = np.unique(np.append(np.arange(0, len(chosen), lanes), len(chosen))).astype(np.int64)
    if alone:
        banded = _banded_batch_parallel1 if parallel and len(chosen) > 1 else _banded_batch_serial1
    elif parallel:
        banded = _banded_batch_parallel16 if fits else _banded_batch_parallel
    else:
        banded = _banded_batch_serial16 if fits else _banded_batch_serial
    picked = chosen[by_size]
    # a segment's pointers at most a thread's share of the mapped scratch (not below a few MB):
    # at POINTER_BUDGET (64 MB) 4 of 16 threads would hold the budget and the rest wait; more
    # segments cost no more passes (two at most)
    segment_budget = min(POINTER_BUDGET, max(scratch.BUDGET // threads, 4 * scratch.MAPPED_FROM))
    with scratch.counted() as (ledger, memory):
        table_rows, done = banded(codes, rows[picked], picked, table.masks, table.starts, ks[picked], score[by_size],
                                  read_end[by_size], pattern_end[by_size], box[by_size, 0], box[by_size, 1],
                                  block_first, scoring.match, scoring.mismatch, scoring.gap_open, scoring.gap_extend,
                                  ops, threads, segment_budget, ledger, memory)
    aligned = np.zeros(len(chosen), dtype=bool)
    aligned[by_size] = np.repeat(done.astype(bool), np.diff(block_first))
    again = np.flatnonzero(~aligned)
    if len(again) and not alone:
        # a block of which one row of the lanes' bands together passed the budget: each of its
        # instances in a band of its own, on one lane, a thread each, not the pass over the boxes
        more_rows, aligned[again] = _banded(codes, rows, ks, table, chosen[again], score[again], read_end[again],
                                            pattern_end[again], box[again], scoring, ops, parallel, cell_bits,
                                            one_lane=True)
        table_rows += more_rows
    return table_rows, aligned


def banded(read_lengths, pattern_lengths) -> np.ndarray:
    """Which instances are aligned from their end cell in the band where an
    alignment ending there can lie (_banded): patterns many times the read's
    length, and large instances. A score pass finds their end cells where
    the caller does not know them (``known_ends`` of :func:`align_hits`)."""
    read_lengths = np.asarray(read_lengths, np.int64)
    pattern_lengths = np.asarray(pattern_lengths, np.int64)
    return (pattern_lengths > _WINDOW_FROM * np.maximum(read_lengths, 1)) | \
        (read_lengths * pattern_lengths >= _BAND_FROM_CELLS)


def _run_batch(codes, lengths, rows, table, ks, scoring, eqx, reverse_cigar, cell_bits=None, known_ends=None):
    """Align (rows[t], oriented pattern ks[t] of ``table``) for every t:
    the (t, 8) result table and the CIGARs (read backwards where
    ``reverse_cigar[t]``). ``cell_bits``: the forward pass on int8 (8), int16
    (16) or int32 (32) cells; None: int8 where the scores fit (:func:`_fits_int8`)
    and a block's bytes stay within _INT16_POINTERS and POINTER_BUDGET, else
    int16 where the values fit (:func:`_fits_int16`). 8 where int8 cannot
    serve (the values, or a block past POINTER_BUDGET, which int8 blocks
    cannot be aligned in segments of) is taken as None.
    ``known_ends``: None, or (t, 3) score, read end and pattern end of the
    instances whose end cell is known (score -1 where it is not), as
    :func:`end_cells` gives them."""
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    ks = np.ascontiguousarray(ks, dtype=np.int64)
    if codes.ndim != 2:
        raise ValueError("codes must be 2-D (reads x positions)")
    if rows.size and (lengths[rows] > codes.shape[1]).any():
        raise ValueError("a read length exceeds the width of the code matrix")
    count = rows.shape[0]
    if count == 0:  # no hits (most chunks of a clean run): the kernels are not even loaded
        return np.zeros((0, 8), dtype=np.int64), Texts(np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64))
    longest = int(table.lengths.max()) if len(table) else 0
    width = max(_most_ops(codes.shape[1], longest, scoring), 1)
    ops = _OPS_BUFFERS.take(count * width).reshape(count, width)
    parallel = count >= _PARALLEL_FROM
    fits = _fits_int16(codes.shape[1], longest, scoring)
    fits8 = _fits_int8(codes.shape[1], longest, scoring) and cell_bits in (None, 8)
    if cell_bits == 8 and not fits8:
        cell_bits = None  # int8 asked for where the values do not fit: the cells that hold them
    # instances grouped in blocks of the lanes they will most likely take
    group_lanes = LANES8 if fits8 else LANES16 if fits and cell_bits != 32 else LANES
    read_lengths = lengths[rows]
    pattern_lengths = table.lengths[ks].astype(np.int64)
    windowed = banded(read_lengths, pattern_lengths)
    if known_ends is not None:
        known_ends = np.asarray(known_ends, dtype=np.int64)
        windowed &= known_ends[:, 0] < 0
    plain = np.flatnonzero(~windowed if known_ends is None else ~windowed & (known_ends[:, 0] < 0))
    parts = [_pattern_blocks(plain, read_lengths[plain], ks[plain], table, group_lanes)]
    # the instances whose end cells are known, or found by a score pass (int16 cells where they
    # fit, unless int32 cells are asked for): aligned in the box, and where they can in the band,
    # where every alignment of their score ending there lies
    ended = np.zeros((count, 3), dtype=np.int64)
    ended[:, 0] = -1
    if windowed.any():
        chosen = np.flatnonzero(windowed)
        ended[chosen] = end_cells(codes, lengths, rows[chosen], table, ks[chosen], scoring,
                                  False if cell_bits == 32 else None, parallel)
    if known_ends is not None:
        ended = np.where(known_ends[:, :1] >= 0, known_ends, ended)
    table_rows = np.zeros((count, 8), dtype=np.int64)
    chosen = np.flatnonzero(ended[:, 0] >= 0)
    if len(chosen):
        score, read_end, pattern_end = ended[chosen, 0], ended[chosen, 1], ended[chosen, 2]
        box = np.zeros((len(chosen), 2), np.int64)
        live = score > 0  # score 0: no alignment, nothing aligned
        aligned = np.zeros(len(chosen), dtype=bool)
        if live.any():
            box[live] = start_boxes(codes, lengths, rows[chosen[live]], table, ks[chosen[live]], score[live],
                                    read_end[live], pattern_end[live], scoring)
            banded_parallel = parallel or float((box[:, 0] * box[:, 1]).sum()) >= _PARALLEL_CELLS
            if BANDED:
                done_rows, aligned[live] = _banded(codes, rows, ks, table, chosen[live], score[live], read_end[live],
                                                   pattern_end[live], box[live], scoring, ops, banded_parallel,
                                                   cell_bits)
                table_rows += done_rows
        rest = ~aligned
        parts.append(_boxed_blocks(chosen[rest], score[rest], read_end[rest], pattern_end[rest], box[rest],
                                   group_lanes))
    order = np.concatenate([part[0] for part in parts])
    lane_offset = np.concatenate([part[1] for part in parts])
    ends = np.concatenate([part[2] for part in parts])
    skips = np.concatenate([part[5] for part in parts])
    widest = max(int(part[3].max(initial=0)) for part in parts)
    rows_needed = np.where(ends[:, 0] >= 0, ends[:, 1], lengths[rows[order]])
    total = len(order)
    if not parallel:  # a few long instances: as many cells as a batch
        parallel = float((rows_needed * (table.lengths[ks[order]] + 1)).sum()) >= _PARALLEL_CELLS
    pointer_bytes = (int(rows_needed.max()) + 1) * (widest + 1) * LANES16 if total else 0
    if cell_bits == 8 and pointer_bytes * 2 > POINTER_BUDGET:
        cell_bits = None  # int8 blocks are not aligned in segments of rows (_forward8_body)
    if not total:
        cell_bits = 32
    elif cell_bits is None:
        # int16 where the values fit, and where a block's pointers (twice the
        # reads, so twice the bytes) stay small: long reads against long
        # patterns keep the int32 blocks and the memory they took before;
        # int8 where the scores fit too, within the same bytes and in one segment
        cell_bits = 16 if fits and pointer_bytes <= _INT16_POINTERS else 32
        if fits8 and pointer_bytes * 2 <= min(_INT16_POINTERS, POINTER_BUDGET):
            cell_bits = 8
    if cell_bits == 8:
        align_batch = _align_batch_parallel8 if parallel else _align_batch_serial8
        lanes = LANES8
    elif cell_bits == 16:
        align_batch = _align_batch_parallel16 if parallel else _align_batch_serial16
        lanes = LANES16
    else:
        align_batch = _align_batch_parallel if parallel else _align_batch_serial
        lanes = LANES
    # each part's groups of instances (of one width) in blocks of `lanes`
    firsts, block_widths, offset = [], [], 0
    for part in parts:
        group_first, group_width = part[4], part[3]
        sizes = np.diff(np.append(group_first, len(part[0])))
        blocks = -(-sizes // lanes)
        block_of = np.repeat(np.arange(len(sizes)), blocks)
        rank = np.arange(len(block_of)) - np.repeat(np.cumsum(blocks) - blocks, blocks)
        firsts.append(offset + group_first[block_of] + rank * lanes)
        block_widths.append(group_width[block_of])
        offset += len(part[0])
    block_first = np.append(np.concatenate(firsts), total).astype(np.int64)
    block_width = np.concatenate(block_widths).astype(np.int64)
    # one lane for a lone instance whose pointers pass the budget (not a block of lanes mostly
    # empty), and for each instance of a block that even in segments would pass SEGMENTED_BUDGET
    sizes = np.diff(block_first)
    block_rows = np.maximum.reduceat(rows_needed, block_first[:-1]) if total else np.zeros(0, np.int64)
    pointers = (block_rows + 1) * (block_width + 1) * lanes
    alone = ((sizes == 1) & (pointers > POINTER_BUDGET)) | (segmented_bytes(block_rows, block_width, lanes)
                                                          > SEGMENTED_BUDGET)
    one_lane = _align_batch_parallel1 if parallel else _align_batch_serial1
    for kernel, chosen, width in ((align_batch, ~alone, lanes), (one_lane, alone, 1)):
        if not chosen.any():
            continue
        at = np.concatenate([np.arange(block_first[b], block_first[b + 1]) for b in np.flatnonzero(chosen)]) \
            if not chosen.all() else np.arange(total)
        firsts = np.append(0, np.cumsum(sizes[chosen])) if width > 1 else np.arange(len(at) + 1)
        widths = block_width[chosen] if width > 1 else np.repeat(block_width[chosen], sizes[chosen])
        table_rows += kernel(
            codes, lengths, rows[order[at]], skips[at], order[at], table.masks, table.starts, ks[order[at]],
            lane_offset[at],
            ends[at], firsts.astype(np.int64), widths.astype(np.int64), scoring.match, scoring.mismatch,
            scoring.gap_open, scoring.gap_extend, ops, get_num_threads() if parallel else 1, POINTER_BUDGET)
    cigars_of = _cigars_parallel if count >= _CIGARS_PARALLEL_FROM else _cigars_serial
    letters = _EQX_LETTERS if eqx else _M_LETTERS
    reverse = np.ascontiguousarray(np.broadcast_to(reverse_cigar, (count,)), dtype=np.bool_)
    buf, offsets = cigars_of(ops, np.ascontiguousarray(table_rows[:, _N_OPS]), letters, reverse)
    return table_rows, Texts(buf, offsets)


def align_hits(codes, lengths, reads, ks, table, strands: tuple[str, ...], scoring: Scoring = Scoring(),
               eqx: bool = False, known_ends=None) -> AlignmentTable:
    """Align every instance (reads[t], oriented pattern ks[t] of ``table``, a
    :class:`bpbc.patterns.PatternTable` whose strand indices refer to
    ``strands``), in parallel. Rows index ``codes``/``lengths`` as from
    :func:`bpbc.alphabet.encode_reads`.

    On strand '-' the read is aligned against the pattern's reverse
    complement, as the table holds it; pattern coordinates are then reported on
    the forward pattern and the CIGAR is reversed so that it reads along the
    forward pattern (PAF/SAM convention). Read coordinates are always on the
    read's forward strand. ``known_ends``: see :func:`_run_batch` (read ends
    in the rows of ``codes``).
    """
    reads = np.asarray(reads, dtype=np.int64)
    ks = np.asarray(ks, dtype=np.int64)
    strand = table.strand[ks]
    minus = np.array([sign == "-" for sign in strands], dtype=bool)[strand]
    out, cigars = _run_batch(codes, lengths, reads, table, ks, scoring, eqx, minus, known_ends=known_ends)
    m = table.lengths[ks]
    flip = minus & (out[:, _SCORE] > 0)
    pattern_start = np.where(flip, m - out[:, _PAT_END], out[:, _PAT_START])
    pattern_end = np.where(flip, m - out[:, _PAT_START], out[:, _PAT_END])
    return AlignmentTable(reads, table.pattern[ks], strand, out[:, _SCORE], out[:, _READ_START], out[:, _READ_END],
                          pattern_start, pattern_end, out[:, _NM], out[:, _MATCHES], out[:, _N_OPS], cigars,
                          tuple(strands))
