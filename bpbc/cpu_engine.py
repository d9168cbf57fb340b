"""Bit-sliced Smith-Waterman on the CPU (numba), 64 instances per uint64 word.

Instances are grouped into superblocks of ``WORDS`` words (1024 lanes); the
innermost loop of the kernel runs over those words, so LLVM turns every
bit-plane operation into AVX-512 (or AVX2) instructions over all of them and
fuses 3-input logic into ``vpternlogq``, the CPU's LOP3.

The kernel is generated per plane count b and scoring: straight-line code per
bit plane keeps every plane in a register, and the scoring constants are
folded into the logic at generation time (a constant bit turns an adder or
subtractor stage into a cheaper one; with the constants as run-time masks the
kernel needs about 1.5x the time). Every statement has at most three inputs,
so each becomes one ``vpternlogq``. Kernels are serial and release the GIL;
a thread pool runs them over slices of superblocks. numba caches them on disk.

The cell update, in saturation-free form (see README, "Exactness of the
screen"):

    diag = Hdiag + (match ? +ma : -mi)   b-bit adder, per-lane addend
    overflow |= match & carry_out        true score >= 2**b: lane passes
    diag_ok = match | no_borrow          mismatch below 0 is dropped
    H  = max(diag if diag_ok, E, F)      E, F >= 0, so H >= 0
    best = max(best, H)
    Hoe = max(H - (open+ext), 0)
    E' = max(E - ext, Hoe) ; F' = max(F - ext, Hoe)
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numpy as np
from numba import njit, prange

from .engines import in_input_order, length_order
from .scoring import Scoring

WORD_BITS = 64
WORDS = 16  #: words per superblock: two 512-bit vectors
LANES = WORD_BITS * WORDS
#: IUPAC base sets are 4-bit masks (bpbc.alphabet); a column's match words are
#: tabulated for all 16 so a pattern row finds its own with one load
MASK_CODES = 16


def _cell_statements(planes: int, scoring: Scoring, parity: int, track_best: bool = True) -> list[str]:
    """Straight-line code of one cell (row r, word w), every plane unrolled,
    the scoring constants folded in. Without ``track_best`` the cell keeps
    only the overflow flag (a first screening pass needs nothing else).

    State lives in one flat array ``st``, read through the view ``rows`` of
    rows r-1 and r, so every access is ``rows[CONSTANT + w]``: LLVM then
    proves the words independent and vectorises the ``w`` loop with no
    run-time alias checks (which a trip count this short would forbid). Row r
    (row 0 is a zero row above the pattern) holds 4b slots of WORDS words: H
    of even columns, H of odd columns, E of this column, F of this column.
    ``parity`` is the column's parity: H[r][j-1] sits in the other H slot and
    H[r][j] overwrites it, so the diagonal H[r-1][j-1] is still there one row
    up.
    """
    b = planes
    ks = range(b)
    limit = 1 << b
    lines = []
    emit = lines.append
    slots = {"h": parity * b, "h_left": (1 - parity) * b, "e": 2 * b, "f": 3 * b}

    def slot(kind, k, row_above=False):
        # ``rows`` is the view of rows r-1 and r: constant offsets, no signs
        offset = (slots[kind] + k) * WORDS + (0 if row_above else 4 * b * WORDS)
        return f"rows[{offset} + w]"

    def greater(x, y, out):
        # out = all-ones in lanes where x > y, from the lowest plane up
        emit(f"{out} = {x}0 & ~{y}0")
        for k in range(1, b):
            emit(f"{out} = ({x}{k} & ~{y}{k}) | (~({x}{k} ^ {y}{k}) & {out})")

    def select(dst, x, y, mask):
        # dst = mask ? x : y
        for k in ks:
            emit(f"{dst}{k} = {y}{k} ^ (({x}{k} ^ {y}{k}) & {mask})")

    def subtract(dst, x, const, borrow) -> bool:
        """dst = x - const (mod 2**b), 0 < const < 2**b; ``borrow`` becomes
        all-ones where x < const. Known-zero borrows emit no code."""
        live = False
        for k in ks:
            bit = (const >> k) & 1
            if not live:
                emit(f"{dst}{k} = ~{x}{k}" if bit else f"{dst}{k} = {x}{k}")
                if bit:
                    emit(f"{borrow} = ~{x}{k}")
                    live = True
            elif bit:
                emit(f"{dst}{k} = ~({x}{k} ^ {borrow})")
                emit(f"{borrow} = ~{x}{k} | {borrow}")
            else:
                emit(f"{dst}{k} = {x}{k} ^ {borrow}")
                emit(f"{borrow} = ~{x}{k} & {borrow}")
        return live

    emit("m = row_match[w]")
    for k in ks:
        emit(f"hd{k} = {slot('h_left', k, row_above=True)}")
        emit(f"e{k} = {slot('e', k)}")
        emit(f"f{k} = {slot('f', k, row_above=True)}")
    # diag = hd + s, s = m ? ma : 2**b - mi (mod 2**b): per plane the addend
    # is a constant or m or ~m, so each stage is at most two 3-input gates
    add_match, add_mismatch = scoring.match % limit, (limit - scoring.mismatch) % limit
    carry = None  # None: known zero
    for k in ks:
        addend = {(1, 1): "ones", (1, 0): "m", (0, 1): "~m", (0, 0): None}[
            ((add_match >> k) & 1, (add_mismatch >> k) & 1)]
        if addend is None:
            emit(f"d{k} = hd{k}" if carry is None else f"d{k} = hd{k} ^ c")
            if carry is not None:
                emit(f"c = hd{k} & c")
        elif carry is None:
            emit(f"d{k} = ~hd{k}" if addend == "ones" else f"d{k} = hd{k} ^ {addend}")
            emit(f"c = hd{k}" if addend == "ones" else f"c = hd{k} & {addend}")
            carry = "c"
        elif addend == "ones":
            emit(f"d{k} = ~(hd{k} ^ c)")
            emit(f"c = hd{k} | c")
        else:
            emit(f"d{k} = hd{k} ^ {addend} ^ c")
            emit(f"c = (hd{k} & {addend}) | (c & (hd{k} ^ {addend}))")
    carry_out = carry or "z"
    # a match that carries out: true score >= 2**b, the lane passes
    emit("flag[w] |= m" if scoring.match >= limit else f"flag[w] |= m & {carry_out}")
    # a mismatch that went below 0 is dropped
    emit(f"dok = m | {carry_out}" if scoring.mismatch < limit else "dok = m")
    greater("d", "e", "g")
    emit("g &= dok")
    select("t", "d", "e", "g")
    greater("t", "f", "g")
    select("h", "t", "f", "g")
    for k in ks:
        emit(f"{slot('h', k)} = h{k}")
    if track_best:
        for k in ks:
            emit(f"bs{k} = best[{k * WORDS} + w]")
        greater("h", "bs", "g")
        select("bs", "h", "bs", "g")
        for k in ks:
            emit(f"best[{k * WORDS} + w] = bs{k}")
    # Hoe = H - (open + ext), floored at 0 (always 0 when open + ext >= 2**b)
    if scoring.first_gap >= limit:
        for k in ks:
            emit(f"ho{k} = z")
    elif subtract("ho", "h", scoring.first_gap, "bo"):
        for k in ks:
            emit(f"ho{k} &= ~bo")
    for gap in ("e", "f"):  # E' = max(E - ext, Hoe), F' likewise
        if scoring.gap_extend >= limit:  # E - ext < 0 always
            for k in ks:
                emit(f"{slot(gap, k)} = ho{k}")
            continue
        borrowed = subtract("y", gap, scoring.gap_extend, "by")
        greater("y", "ho", "g")
        if borrowed:
            emit("g &= ~by")
        select("n", "y", "ho", "g")
        for k in ks:
            emit(f"{slot(gap, k)} = n{k}")
    return lines


def _match_table_statements() -> list[str]:
    """Per column and word: the match word of each of the 16 base-set masks."""
    lines = [
        "lo = cols[s, j, 0, w]",
        "hi = cols[s, j, 1, w]",
        "va = cols[s, j, 2, w]",
        "base0 = va & ~hi & ~lo",
        "base1 = va & ~hi & lo",
        "base2 = va & hi & ~lo",
        "base3 = va & hi & lo",
    ]
    for mask in range(MASK_CODES):
        terms = " | ".join(f"base{base}" for base in range(4) if mask >> base & 1) or "z"
        lines.append(f"match_table[{mask * WORDS} + w] = {terms}")
    return lines


_KERNEL_TEMPLATE = """\
# generated by bpbc.cpu_engine for {planes} bit planes, {scoring}, track_best={track_best}; do not edit
import numpy as np
from numba import njit

WORDS = {words}
ROW = {row}


@njit(cache=True, nogil=True)
def sw_kernel(cols, block_length, pattern_codes, pattern_start, task_block, task_pattern,
              out_best, out_flag, start, stop):
    z = np.uint64(0)
    longest = 0
    for p in range(pattern_start.shape[0] - 1):
        longest = max(longest, pattern_start[p + 1] - pattern_start[p])
    st = np.empty((longest + 1) * ROW, np.uint64)
    best = np.empty({planes} * WORDS, np.uint64)
    flag = np.empty(WORDS, np.uint64)
    match_table = np.empty({mask_codes} * WORDS, np.uint64)
    for t in range(start, stop):
        s = task_block[t]
        first = pattern_start[task_pattern[t]]
        m_rows = pattern_start[task_pattern[t] + 1] - first
        st[:(m_rows + 1) * ROW] = 0
        best[:] = 0
        flag[:] = 0
        for j in range(block_length[s]):
            for w in range(WORDS):
{match_table}
            even = j % 2 == 0
            for r in range(1, m_rows + 1):
                rows = st[(r - 1) * ROW:(r + 1) * ROW]
                offset = pattern_codes[first + r - 1] * WORDS
                row_match = match_table[offset:offset + WORDS]
                if even:
                    for w in range(WORDS):
{even_cell}
                else:
                    for w in range(WORDS):
{odd_cell}
        for k in range(out_best.shape[1]):
            for w in range(WORDS):
                out_best[t, k, w] = best[k * WORDS + w]
        for w in range(WORDS):
            out_flag[t, w] = flag[w]
"""


def _generate_kernel_source(planes: int, scoring: Scoring, track_best: bool = True) -> str:
    """Python source of the numba kernel for ``planes`` bit planes and ``scoring``."""
    def indented(lines, depth):
        return "\n".join(" " * depth + line for line in lines)

    return _KERNEL_TEMPLATE.format(
        planes=planes, scoring=scoring, track_best=track_best, words=WORDS, row=4 * planes * WORDS,
        mask_codes=MASK_CODES,
        match_table=indented(_match_table_statements(), 16),
        even_cell=indented(_cell_statements(planes, scoring, 0, track_best), 24),
        odd_cell=indented(_cell_statements(planes, scoring, 1, track_best), 24),
    )


def _cache_dir() -> str:
    base = os.environ.get("BPBC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "bpbc"
    )
    try:
        os.makedirs(base, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=base, delete=True)
        probe.close()
        return base
    except OSError:
        fallback = os.path.join(tempfile.gettempdir(), f"bpbc-cache-{os.getuid()}")
        os.makedirs(fallback, exist_ok=True)
        return fallback


@cache
def kernel(planes: int, scoring: Scoring, track_best: bool = True):
    """The compiled kernel for ``planes`` bit planes and ``scoring`` (generated on first use)."""
    source = _generate_kernel_source(planes, scoring, track_best)
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    name = f"bpbc_sw_cpu_b{planes}_{digest}"
    path = os.path.join(_cache_dir(), name + ".py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            fh.write(source)
        os.replace(tmp, path)  # atomic: concurrent processes never see half a file
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.sw_kernel


@njit(parallel=True, cache=True, nogil=True)
def _to_superblocks(planes, cols):
    """cols[s, j, p, w] = planes[s * WORDS + w, j, p] (zero past the last group):
    one superblock column becomes contiguous for the kernel's vector loads."""
    groups = planes.shape[0]
    for s in prange(cols.shape[0]):
        for j in range(cols.shape[1]):
            for p in range(3):
                for w in range(WORDS):
                    g = s * WORDS + w
                    if g < groups:
                        cols[s, j, p, w] = planes[g, j, p]
                    else:
                        cols[s, j, p, w] = 0


class PreparedReads:
    """Reads in a given order (by default sorted by length), bit-transposed
    into superblock columns. Lane ``i`` of the layout is read ``order[i]``."""

    def __init__(self, codes: np.ndarray, lengths: np.ndarray, order: np.ndarray | None = None):
        from transpose import pack_codes

        self.order = length_order(lengths) if order is None else order
        self.n = len(self.order)
        ordered_lengths = lengths[self.order]
        # reads of one length: the stable order is the identity, skip the copy
        same = order is None and self.n and ordered_lengths[0] == ordered_lengths[-1]
        ordered_codes = codes if same else codes[self.order]
        planes = pack_codes(ordered_codes, word_bits=WORD_BITS)  # (G, L, 3)
        groups, width = planes.shape[0], planes.shape[1]
        blocks = -(-groups // WORDS)
        self.cols = np.empty((blocks, width, 3, WORDS), dtype=np.uint64)
        _to_superblocks(planes, self.cols)
        padded = np.zeros(blocks * LANES, dtype=np.int64)
        padded[:self.n] = ordered_lengths
        self.block_length = padded.reshape(blocks, LANES).max(axis=1) if blocks else np.zeros(0, np.int64)

    @property
    def blocks(self) -> int:
        return self.cols.shape[0]


def _set_lanes(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(word index, bit) of every set bit of a flat uint64 array, in order."""
    hot = np.flatnonzero(words)
    bits = np.unpackbits(words[hot].astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    word_of, bit = np.nonzero(bits)
    return hot[word_of], bit.astype(np.int64)


class CpuEngine:
    """The numba bit-sliced engine. ``threads`` caps the threads it runs on
    (default: numba's thread count, every core).

    Every call takes a :class:`~bpbc.patterns.PatternTable` and runs all its
    oriented patterns against all superblocks of reads as one list of
    (superblock, pattern) tasks, spread over a thread pool.
    """

    name = "cpu"
    word_bits = WORD_BITS
    #: the screen pays off running a pass one plane short first (see Screener)
    two_pass = True
    #: slices of tasks per thread: blocks are sorted by read length, so
    #: several slices each even out the threads' work
    SLICES_PER_THREAD = 4
    #: what running out of memory raises (the Screener then splits the batch)
    out_of_memory = (MemoryError,)

    def __init__(self, threads: int | None = None):
        self.threads = threads

    def release_memory(self) -> None:
        """Nothing to hand back: numpy frees arrays as they die."""

    def prepare(self, codes: np.ndarray, lengths: np.ndarray) -> PreparedReads:
        return PreparedReads(codes, lengths)

    def _run(self, prepared: PreparedReads, table, scoring: Scoring, planes: int, task_block, task_pattern,
             track_best: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Best planes (T, planes or 0, WORDS) and flags (T, WORDS) of every task."""
        from numba import get_num_threads

        tasks = len(task_block)
        best = np.zeros((tasks, planes if track_best else 0, WORDS), dtype=np.uint64)
        flag = np.zeros((tasks, WORDS), dtype=np.uint64)
        if tasks == 0:
            return best, flag
        run = kernel(planes, scoring, track_best)
        codes = table.masks.astype(np.int64)
        threads = min(self.threads or get_num_threads(), get_num_threads(), tasks)
        bounds = np.linspace(0, tasks, min(tasks, threads * self.SLICES_PER_THREAD) + 1).astype(np.int64)

        def run_slice(k: int) -> None:
            run(prepared.cols, prepared.block_length, codes, table.starts, task_block, task_pattern,
                best, flag, bounds[k], bounds[k + 1])

        if threads == 1:
            for k in range(len(bounds) - 1):
                run_slice(k)
        else:
            with ThreadPoolExecutor(threads, thread_name_prefix="bpbc-cpu") as pool:
                list(pool.map(run_slice, range(len(bounds) - 1)))
        return best, flag

    @staticmethod
    def _all_tasks(prepared: PreparedReads, table) -> tuple[np.ndarray, np.ndarray]:
        """Every (superblock, pattern), superblock-major: task t = s * K + k."""
        k = len(table)
        return np.repeat(np.arange(prepared.blocks), k), np.tile(np.arange(k), prepared.blocks)

    def scores(self, prepared: PreparedReads, table, scoring: Scoring, planes: int) -> tuple[np.ndarray, np.ndarray]:
        """Screen scores (int32) and overflow flags (bool), both (n, K) in input
        order, of every read against every oriented pattern of ``table``."""
        from transpose import unpack_flags, unpack_planes

        k = len(table)
        best, flag = self._run(prepared, table, scoring, planes, *self._all_tasks(prepared, table))
        lanes = prepared.blocks * LANES
        # (S, K, b, W) -> (K, S * W, b): word groups of each pattern in lane order
        word_planes = best.reshape(prepared.blocks, k, planes, WORDS).transpose(1, 0, 3, 2).reshape(-1, planes)
        values = unpack_planes(word_planes, k * lanes).reshape(k, lanes)[:, :prepared.n]
        word_flags = flag.reshape(prepared.blocks, k, WORDS).transpose(1, 0, 2).reshape(-1)
        flags = unpack_flags(word_flags, k * lanes).reshape(k, lanes)[:, :prepared.n]
        return in_input_order(prepared.order, values, flags)

    def flagged(self, prepared: PreparedReads, table, scoring: Scoring, planes: int) -> tuple[np.ndarray, np.ndarray]:
        """(read, oriented pattern) of every instance whose score reaches
        2**planes, sorted; scores are not kept (a cheaper kernel)."""
        _, flag = self._run(prepared, table, scoring, planes, *self._all_tasks(prepared, table), track_best=False)
        word, bit = _set_lanes(flag.reshape(-1))
        task, w = np.divmod(word, WORDS)
        block, k = np.divmod(task, len(table))
        reads = prepared.order[(block * WORDS + w) * WORD_BITS + bit]
        order = np.lexsort((k, reads))
        return reads[order], k[order]

    def pair_scores(self, codes: np.ndarray, lengths: np.ndarray, reads: np.ndarray, ks: np.ndarray, table,
                    scoring: Scoring, planes: int) -> tuple[np.ndarray, np.ndarray]:
        """Scores and overflow flags of the instances (reads[i], ks[i]) only:
        the reads of each oriented pattern fill superblocks of their own."""
        if len(reads) == 0:
            return np.zeros(0, np.int32), np.zeros(0, bool)
        from transpose import unpack_flags, unpack_planes

        by_pattern = np.lexsort((lengths[reads], ks))
        ks_sorted = ks[by_pattern]
        patterns, first, counts = np.unique(ks_sorted, return_index=True, return_counts=True)
        padded = -(-counts // LANES) * LANES
        segment = np.zeros(len(patterns) + 1, dtype=np.int64)
        np.cumsum(padded, out=segment[1:])
        # lane of each instance: its pattern's segment, then its rank in it
        lane = segment[np.repeat(np.arange(len(patterns)), counts)] + np.arange(len(ks_sorted)) - np.repeat(first, counts)
        order = np.full(segment[-1], len(lengths), dtype=np.int64)  # padding: an empty read appended below
        order[lane] = reads[by_pattern]
        padded_codes = np.concatenate([codes, np.full((1, codes.shape[1]), 4, codes.dtype)])
        padded_lengths = np.concatenate([lengths, [0]])
        prepared = PreparedReads(padded_codes, padded_lengths, order)
        task_block = np.arange(prepared.blocks)
        task_pattern = np.repeat(patterns, padded // LANES)
        best, flag = self._run(prepared, table, scoring, planes, task_block, task_pattern)
        lanes = prepared.blocks * LANES
        values = unpack_planes(best.transpose(0, 2, 1).reshape(-1, planes), lanes)
        flags = unpack_flags(flag.reshape(-1), lanes)
        scores = np.empty(len(reads), dtype=np.int32)
        overflow = np.empty(len(reads), dtype=bool)
        scores[by_pattern] = values[lane]
        overflow[by_pattern] = flags[lane]
        return scores, overflow

    def hits(self, prepared: PreparedReads, table, scoring: Scoring, planes: int,
             thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(read, oriented pattern, score, overflow) of every instance that
        reaches its pattern's threshold or overflows, sorted by read then pattern."""
        scores, overflow = self.scores(prepared, table, scoring, planes)
        reads, ks = np.nonzero(overflow | (scores >= thresholds))
        return reads, ks, scores[reads, ks], overflow[reads, ks]
