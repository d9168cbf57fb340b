"""Bit-sliced Smith-Waterman on the CPU (numba), 64 instances per uint64 word.

Instances are grouped into superblocks of ``words`` words (8 on AVX-512: 512 lanes);
the innermost loop of the kernel runs over those words, so LLVM turns every
bit-plane operation into vector instructions over all of them (AVX-512,
AVX2, NEON, whatever numba compiles for). On AVX-512 the kernel is written
with explicit 512-bit vectors instead, its cell a synthesised network of
3-input LUTs, one vpternlogq each (the 'lut3' shape, bpbc/cpu_vector.py); on
AVX2 with explicit 256-bit vectors and the 2-input cell.

The kernel is generated per plane count b and scoring: straight-line code per
bit plane keeps every plane in a register, and the scoring constants are
folded into the logic at generation time (a constant bit turns an adder or
subtractor stage into a cheaper one; with the constants as run-time masks the
kernel needs about 1.5x the time). Its layout, the :class:`KernelShape`
(words per superblock, pattern rows per pass of the word loop, the form of
the gate list), is chosen per target (:func:`cpu_target`, read from numba's
configuration at first use, never at import), and the generated source and
its cache file are keyed by the target. Kernels are serial and release the
GIL; a pool of threads kept between calls runs them, each thread taking the
next task from a count they share. numba caches them on disk.

The cell update, in saturation-free form (see docs/exactness.md):

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
import py_compile
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
from numba import njit, prange
from transpose.cpu import _byte_words, _code_words, _transpose_rows

from .cpu_vector import LANES as VECTOR_WORDS
from .cpu_vector import base_masks64
from .cpu_vector import VERSION as VECTOR_VERSION
from .buffers import BufferPool
from .order import in_input_order
from .scoring import Scoring

WORD_BITS = 64
#: IUPAC base sets are 4-bit masks (bpbc.alphabet); a column's match words are
#: tabulated for all 16 so a pattern row finds its own with one load
MASK_CODES = 16


# ---------------------------------------------------------------- targets and kernel shapes

#: LLVM CPU names whose default features include AVX-512 (F and VL): 32 vector
#: registers and vpternlogq, unless the features say -avx512f
_AVX512_CPUS = frozenset((
    "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client", "icelake-server", "tigerlake",
    "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d", "diamondrapids",
    "znver4", "znver5", "x86-64-v4",
))


@dataclass(frozen=True)
class CpuTarget:
    """The machine numba compiles for: LLVM's CPU name and feature string as
    numba passes them (``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES``, else the
    host's), and the machine architecture."""

    name: str
    features: str
    arch: str

    def _feature(self, feature: str) -> bool | None:
        """True/False where the feature string says +feature/-feature, else None."""
        flags = {item[1:]: item[0] == "+" for item in self.features.split(",") if item and item[0] in "+-"}
        return flags.get(feature)

    @property
    def isa(self) -> str:
        """'avx512' (32 registers, 3-input logic), 'avx2' (16 registers of 256
        bits), 'neon' (aarch64: 32 registers of 128 bits, bit select), or
        'generic' (anything else: assume 16 registers of 128 bits)."""
        if self.arch in ("x86_64", "amd64", "i386", "i686"):
            avx512 = self._feature("avx512f")
            if avx512 is None:
                avx512 = self.name in _AVX512_CPUS
            if avx512 and self._feature("avx512vl") is not False:
                return "avx512"
            avx2 = self._feature("avx2")
            if avx2 or (avx2 is None and (self.name in _AVX2_CPUS or self.name in _AVX512_CPUS)):
                return "avx2"
            return "generic"
        if self.arch in ("aarch64", "arm64"):
            return "neon"
        return "generic"

    @property
    def key(self) -> str:
        """Short name for cache files: architecture, CPU and a digest of the features."""
        digest = hashlib.sha1(self.features.encode()).hexdigest()[:8]
        return f"{self.arch}-{self.name}-{digest}".replace("/", "_")

    @property
    def label(self) -> str:
        return f"{self.name} ({self.arch}, {self.isa})"


#: LLVM CPU names with AVX2 by default (besides the AVX-512 ones)
_AVX2_CPUS = frozenset((
    "haswell", "broadwell", "skylake", "kabylake", "coffeelake", "cometlake", "alderlake", "raptorlake",
    "meteorlake", "arrowlake", "arrowlake-s", "lunarlake", "pantherlake", "gracemont", "sierraforest",
    "grandridge", "clearwaterforest", "bdver4", "znver1", "znver2", "znver3", "x86-64-v3",
))


@cache
def cpu_target() -> CpuTarget:
    """The target numba compiles this process's kernels for (read once)."""
    import llvmlite.binding as ll
    from numba.core import config
    from numba.core.codegen import get_host_cpu_features

    # numba's config sets these from the environment at import
    name = config.CPU_NAME or ll.get_host_cpu_name()  # type: ignore[attr-defined]
    features = (config.CPU_FEATURES if config.CPU_FEATURES is not None  # type: ignore[attr-defined]
                else get_host_cpu_features())
    arch = ll.get_process_triple().split("-")[0].lower()
    return CpuTarget(name, features or "", arch)


@dataclass(frozen=True)
class KernelShape:
    """How the generated kernel is laid out for a target.

    * ``words``: 64-bit words per superblock, the trip count of the loop that
      LLVM vectorises (``words * 64`` instances per superblock);
    * ``rows``: pattern rows computed per pass of that loop (F goes from one
      row to the next in registers, the flag and best are loaded and stored
      once per pass; 'lut3' keeps all three in registers across passes, the
      rows only unroll; a pattern whose length is not a multiple goes below
      rows that match nothing, which change nothing);
    * ``gates``: 'lut3' (AVX-512 only) runs the synthesised LUT3 network of
      the cell (bpbc/sw_cell_circuits.py, the GPU's) on explicit 512-bit
      vectors, every LUT one vpternlogq (bpbc/cpu_vector.py; ``words`` a
      multiple of 8; for a scoring with no network, and on a target without
      AVX-512, the kernel falls back to 'binary'); 'ternary' writes every gate
      as one 3-input function with no shared inner node, so LLVM fuses each
      into one vpternlogq (AVX-512); 'binary' shares the XORs of a comparator
      with its select and keeps NOTs out, for machines with 2-input logic only
      (AVX2, NEON, ...);
    * ``loads``: 'early' loads all of a cell's inputs first, 'late' loads each
      just before its first use (shorter live ranges for 16 registers; not
      used by 'lut3');
    * ``stripe_bytes``: 'lut3' only: the pattern's rows go in stripes, each
      over all columns, of as many rows (a multiple of ``rows``) as keep the
      state one vector loads and stores within this many bytes, so that it
      stays in L1 (see _VECTOR_MAJOR_LOOPS); 0: the whole pattern at once;
    * ``vector``: 0 leaves the word loop to LLVM's vectoriser; 4 writes the
      'binary' or 'ternary' cell on explicit vectors of 4 words (256 bits,
      bpbc/cpu_vector.py: the loop steps one vector at a time, one register
      per signal; ``words`` a multiple of 4). 'lut3' always takes vectors of
      8 words.
    """

    words: int = 16
    rows: int = 1
    gates: str = "ternary"
    loads: str = "early"
    vector: int = 0
    stripe_bytes: int = 0

    def __post_init__(self):
        if self.words < 1 or self.rows < 1 or self.gates not in ("ternary", "binary", "lut3") \
                or self.loads not in ("early", "late") or self.vector not in (0, 4) \
                or (self.vector and self.words % self.vector) or self.stripe_bytes < 0:
            raise ValueError(f"bad kernel shape {self}")

    @property
    def lanes(self) -> int:
        return self.words * WORD_BITS

    def __str__(self) -> str:
        text = f"words={self.words} rows={self.rows} gates={self.gates} loads={self.loads}"
        text += f" vector={self.vector}" if self.vector else ""
        return text + (f" stripe_bytes={self.stripe_bytes}" if self.stripe_bytes else "")


#: the shape per instruction set (docs/cpu.md). Measured on a
#: 2-core Skylake-SP (AVX-512) with numba 0.68, compiled for the machine and
#: for haswell (AVX2):
#:
#: * 'binary' gates: fewer vector instructions in the inner loop than the
#:   3-input list of before on both targets (AVX2, 5 planes flag only: 230 ->
#:   216, 18 -> 12 spill accesses; 6 planes with best: 352 -> 335; AVX-512:
#:   157 -> 150 and 228 -> 214): LLVM fuses only a gate of the form
#:   a op (b op c) into one vpternlogq, so a majority or a select takes two
#:   instructions either way, and the shared XORs save more than they cost;
#: * 2 rows per pass: -3 to +7 % in the kernel, but each kernel took 2.5
#:   times as long to compile (12-16 s instead of 5-6.5 s, with a second,
#:   one-row pass for the pattern's last rows then), so one row; 3 rows
#:   gained nothing more, 4 with best spill (4x slower on AVX2);
#: * 8 words or fewer are not vectorised at all (LLVM's loop vectoriser wants
#:   16 iterations when it must check the arrays for overlap at run time), 32
#:   words gave nothing;
#: * loads late or early: the same spills.
#:
#: The best shape measured was the same for both targets, so the entries but
#: AVX-512's and AVX2's (below) hold it; NEON and other targets were not measured and get it too
#: (every shape is exact on any target: the tests run several).
#:
#: AVX-512 since: 'lut3', 2 rows per pass (bench/cpu_cell_ab.py on the same
#: Skylake-SP, one thread, 32768 reads of 150 vs 128, kernel ratios from one
#: run, the machine shared and noisy: 1.6-1.9x at 6 planes with best, 1.8-2.2x
#: at 5 flag only; per cell-word 21-22 instructions instead of 54 and 38,
#: bench/cpu_asm_count.py). LLVM's vectoriser had picked 256-bit vectors (the
#: target prefers them) and two instructions for many 3-input gates; the
#: network of 96 LUTs (6 planes) becomes 91 vpternlogq per 512 cells. 2 rows:
#: 1.0-1.2x of one row; 4 rows no faster than 2 and twice the compile time
#: (18 s); interleaving two vectors or the next row's first half with a row's
#: second half in the source: spills, slower.
#:
#: Zen 4 (2-core AMD EPYC, AVX-512, numba 0.68.1), tenth session: the
#: 'lut3' kernel's loops turned vector-major (_VECTOR_MAJOR_LOOPS): one
#: thread, 32768 reads of 150 vs 128, best of 4 alternating runs, 6 planes
#: with best 20.2 -> 22.0 GCUPS per core, 5 flag only 31-32 -> 32-33. Per
#: 512 cells at 6 planes with best: 90 vpternlogq, 13 loads, 12 stores
#: (H, E), 12 spill accesses, where the column-major loops had 19 loads,
#: 18.5 stores and 9 spill accesses (bench/cpu_asm_count.py). Tried on top and not kept, no faster: the best
#: planes raised in a loop of their own over the column's stored H (6 loads
#: a cell, no best registers during the cell: spills 12 -> 2.5 a cell, but
#: 12 LUTs more; with the select skipped where no lane rose, 20.9 against
#: 22.3 GCUPS); each state word loaded just before its first LUT; the
#: LUTs reordered by a greedy scheduler for fewer live values (ABC's order
#: peaks at 39 live values at 6 planes with best, the reordered one at 36);
#: rows 1 and 4; words 8.
#:
#: Emerald Rapids (2-core Xeon, AVX-512, 48 KB L1, numba 0.68.1), eleventh
#: session: the vector-major kernel ran 17.8 GCUPS per core at 6 planes with
#: best, 26 when its H and E stores went to a scratch line instead of the
#: state, and 26 for a 32-row pattern whose state fits L1 once rows are one
#: vector apart (without that, 3 KB rows fall into half the L1 sets). So the
#: pattern's rows now go in stripes of at most 24 KB of state
#: (``stripe_bytes``, 20 rows at 6 planes; 16, 24, 32 or 48 KB within 2 %
#: here). Three pairs alternating with the kernel before
#: (python -m bench cpu-kernel): 6 planes with best 13.7-17.3 -> 25.1-25.9
#: GCUPS per core, 5 flag only 18.9-24.2 -> 33.8-38.0. 1, 2 or 4 rows a pass
#: and 8 or 16 words all within 2 % of each other now; the table of match
#: words for only the codes the pattern uses, no faster. (The Skylake-SP's
#: bands of 8 or 16 rows, above, had the column-major loops, which stored
#: best and flag every pass, and rows in half the sets.)
#:
#: AVX2 since (issue 14): the 'binary' cell on explicit 256-bit vectors
#: (``vector=4``), compiled for haswell on the same machine, one thread,
#: bench/cpu_cell_ab.py alternating with the auto-vectorised shape, kernel
#: ratios 1.03-1.17x at 5 planes flag only (the command's pass over all
#: reads), 1.05-1.10x at 5 with best (the library's), 0.91-1.20x at 6 with
#: best (noise on the shared machine); the library row 2.71-2.75x parasail
#: per core against 1.37-1.89x before. The instructions per
#: cell-word are the same (84 with best, 54.5 flag only: LLVM's vectoriser
#: had already put one vector per signal); gone are the loop's run-time
#: overlap checks and remainder, and the kernel no longer depends on the
#: vectoriser's choices. Compile time 10 % below the scalar shape's. Not
#: kept: 'late' loads (same spills: LLVM's scheduler reorders the loads
#: anyway); E and F loaded again for their updates (stack accesses 10.25 ->
#: 5.5 per cell-word with best, 0.91-1.07x); 2 rows per pass (0.95-1.1x,
#: 2-3x the compile time); a 2-input network synthesised by ABC onto AVX2's
#: one-instruction gates (AND, OR, XOR, ANDN, NOT; genlib, ``map -a``,
#: ``&nf``, with ``dch``/``dc2``/``mfs2``, from the GPU's cell or this one):
#: 181-192 gates at 5 planes flag only and 251-282 at 6 with best, against
#: 165 and 235 for the hand 'binary' cell, whose comparators share their
#: XORs with the selects. The cell is bound by its 2-input logic (165
#: operations per 256 cells flag only, on 3 ports), so AVX2 stays well
#: behind the 3-input AVX-512 cell.
#:
#: AVX-512 superblocks of 8 words (one vector, 512 instances): the
#: vector-major kernel runs a superblock's vectors one after the other
#: anyway, so 8 words cost nothing per cell (2-core Zen 5, one thread: the
#: flag-only pass over 200k reads 68.6-69.5 ms against 69.4-70.2, 6 planes
#: with best over 100k 50.9-51.6 against 50.4-51.8) and make twice the tasks:
#: 40k reads are 79 superblocks, enough for 16 threads, and the second pass
#: of a few hundred instances runs on two threads, not one.
SHAPES = {
    "avx512": KernelShape(8, 2, "lut3", "early", stripe_bytes=24576),
    "avx2": KernelShape(16, 1, "binary", "early", vector=4),
    "neon": KernelShape(16, 1, "binary", "early"),
    "generic": KernelShape(16, 1, "binary", "early"),
}


def kernel_shape(target: CpuTarget | None = None) -> KernelShape:
    """The kernel shape for ``target`` (default: this process's)."""
    return SHAPES[(target or cpu_target()).isa]


# ---------------------------------------------------------------- the generated kernel

def _state_offset(planes: int, words: int, parity: int, row: int, kind: str, k: int, row_above: bool = False) -> int:
    """Offset of plane ``k`` of ``kind`` (h: H of this column, h_left: H of
    the column before, e, f) of pass row ``row`` (or the row above it) in
    ``rows``, the view of rows r0-1 .. r0+R-1 of the state (the layout of
    :func:`_cell_statements`): constant offsets, no signs."""
    slot = {"h": parity * planes, "h_left": (1 - parity) * planes, "e": 2 * planes, "f": 3 * planes}[kind]
    return (slot + k) * words + (row + (0 if row_above else 1)) * _row_words(planes, words)


def _row_words(planes: int, words: int) -> int:
    """Words of one row of the state: 4 slots of ``planes`` planes of
    ``words`` words, and one vector (64 bytes) more, so that consecutive rows
    start on different cache sets: at 4 x 6 x 16 words (3 KB) without it the
    rows of a pass fall into half the L1 sets, and the state of a 32-row
    stripe does not stay in a 48 KB L1 (1.5x slower, Emerald Rapids)."""
    return 4 * planes * words + VECTOR_WORDS


def _cell_statements(planes: int, scoring: Scoring, parity: int, track_best: bool = True,
                     shape: KernelShape = KernelShape(), row: int = 0, rows: int = 1) -> list[str]:
    """Straight-line code of one cell (pattern row ``row`` of a pass, word
    w), every plane unrolled, the scoring constants folded in. Without
    ``track_best`` the cell keeps only the overflow flag (a first screening
    pass needs nothing else). The flag goes into ``fl`` (stored by the pass,
    ``_pass_statements``); the best planes ``bs0..`` are loaded by the pass's
    first cell just before their first use and stored by its last cell right
    after their last update (``rows`` cells per pass), so they hold no
    registers during the rest of the cell.

    State lives in one flat array ``st``, read through the view ``rows`` of
    the rows of a pass and the row above, so every access is
    ``rows[CONSTANT + w]``: LLVM then proves the words independent and
    vectorises the ``w`` loop. Row r (row 0 is a zero row above the pattern)
    holds 4b slots of ``words`` words: H of even columns, H of odd columns, E
    of this column, F of this column. ``parity`` is the column's parity:
    H[r][j-1] sits in the other H slot and H[r][j] overwrites it, so the
    diagonal H[r-1][j-1] is still there one row up. F of the row above was
    stored by the previous cell of the pass (LLVM forwards it in a register).
    """
    b = planes
    ks = range(b)
    limit = 1 << b
    words = shape.words
    ternary = shape.gates == "ternary"
    lines: list[str] = []
    emit = lines.append

    def slot(kind, k, row_above=False):
        return _state_offset(planes, words, parity, row, kind, k, row_above)

    read, write, zero = _word_access(shape)
    loaded = set()

    def load(name, kind, k, row_above=False):
        if shape.loads == "late" and (name, k) not in loaded:
            loaded.add((name, k))
            emit(f"{name}{k} = {read('rows', slot(kind, k, row_above))}")

    def greater(x, y, out, load_x=None, load_y=None):
        # out = all-ones in lanes where x > y, from the lowest plane up
        for k in ks:
            if load_x:
                load_x(k)
            if load_y:
                load_y(k)
            if not ternary:
                emit(f"{x}x{y}{k} = {x}{k} ^ {y}{k}")
            if k == 0:
                emit(f"{out} = {x}0 & ~{y}0")
            elif ternary:  # majority(x, ~y, out): one 3-input gate, no inner node shared
                emit(f"{out} = ({x}{k} & ~{y}{k}) | ({out} & ({x}{k} | ~{y}{k}))")
            else:  # x where the bits differ, else the lower planes' verdict
                emit(f"{out} = {out} ^ (({out} ^ {x}{k}) & {x}x{y}{k})")

    def select(dst, x, y, mask):
        # dst = mask ? x : y
        for k in ks:
            xor = f"({x}{k} ^ {y}{k})" if ternary else f"{x}x{y}{k}"
            emit(f"{dst}{k} = {y}{k} ^ ({xor} & {mask})")

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

    emit(f"m = {read(f'm{row}', 0)}")
    if shape.loads == "early":
        for k in ks:
            emit(f"hd{k} = {read('rows', slot('h_left', k, row_above=True))}")
            emit(f"e{k} = {read('rows', slot('e', k))}")
            emit(f"f{k} = {read('rows', slot('f', k, row_above=True))}")
    # diag = hd + s, s = m ? ma : 2**b - mi (mod 2**b): per plane the addend
    # is a constant or m or ~m, so each stage is at most two 3-input gates
    add_match, add_mismatch = scoring.match % limit, (limit - scoring.mismatch) % limit
    addends = [{(1, 1): "ones", (1, 0): "m", (0, 1): "~m", (0, 0): None}[
        ((add_match >> k) & 1, (add_mismatch >> k) & 1)] for k in ks]
    if not ternary and "~m" in addends:
        emit("nm = ~m")
        addends = ["nm" if a == "~m" else a for a in addends]
    carry = None  # None: known zero
    for k in ks:
        load("hd", "h_left", k, row_above=True)
        addend = addends[k]
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
        elif ternary:
            emit(f"d{k} = hd{k} ^ {addend} ^ c")
            emit(f"c = (hd{k} & {addend}) | (c & (hd{k} | {addend}))")
        else:
            emit(f"p = hd{k} ^ {addend}")
            emit(f"d{k} = p ^ c")
            emit(f"c = (hd{k} & {addend}) | (c & p)")
    carry_out = carry or zero
    # a match that carries out: true score >= 2**b, the lane passes
    over = "m" if scoring.match >= limit else f"m & {carry_out}"
    emit(f"fl = {over}" if row == 0 else f"fl |= {over}")
    # a mismatch that went below 0 is dropped
    emit(f"dok = m | {carry_out}" if scoring.mismatch < limit else "dok = m")
    greater("d", "e", "g", load_y=lambda k: load("e", "e", k))
    emit("g &= dok")
    select("t", "d", "e", "g")
    greater("t", "f", "g", load_y=lambda k: load("f", "f", k, row_above=True))
    select("h", "t", "f", "g")
    for k in ks:
        emit(write("rows", slot("h", k), f"h{k}"))
    if track_best:
        if row == 0:
            for k in ks:
                emit(f"bs{k} = {read('best', k * words)}")
        greater("h", "bs", "g")
        select("bs", "h", "bs", "g")
        if row == rows - 1:
            for k in ks:
                emit(write("best", k * words, f"bs{k}"))
    # Hoe = H - (open + ext), floored at 0 (always 0 when open + ext >= 2**b)
    if scoring.first_gap >= limit:
        for k in ks:
            emit(f"ho{k} = {zero}")
    elif subtract("ho", "h", scoring.first_gap, "bo"):
        for k in ks:
            emit(f"ho{k} &= ~bo")
    for gap in ("e", "f"):  # E' = max(E - ext, Hoe), F' likewise
        if scoring.gap_extend >= limit:  # E - ext < 0 always
            for k in ks:
                emit(write("rows", slot(gap, k), f"ho{k}"))
            continue
        borrowed = subtract("y", gap, scoring.gap_extend, "by")
        greater("y", "ho", "g")
        if borrowed:
            emit("g &= ~by")
        select("n", "y", "ho", "g")
        for k in ks:
            emit(write("rows", slot(gap, k), f"n{k}"))
    return lines


def _word_access(shape: KernelShape):
    """(read, write, zero) for the cell's code: ``read(array, offset)`` is
    the expression of the word (or vector) at ``offset + w``, ``write(array,
    offset, value)`` the statement that stores one there, ``zero`` the
    expression of a zero word (vector)."""
    if not shape.vector:
        return (lambda array, offset: f"{array}[{offset} + w]",
                lambda array, offset, value: f"{array}[{offset} + w] = {value}", "z")
    return (lambda array, offset: f"vload({array}, {offset} + w)",
            lambda array, offset, value: f"vstore({array}, {offset} + w, {value})", "vzero()")


def _pass_statements(planes: int, scoring: Scoring, parity: int, track_best: bool, shape: KernelShape,
                     rows: int) -> list[str]:
    """One pass of ``rows`` pattern rows over word w: the best planes and the
    flag are loaded once, carried through the rows' cells and stored once."""
    lines = []
    for row in range(rows):
        lines += _cell_statements(planes, scoring, parity, track_best, shape, row, rows)
    read, write, _ = _word_access(shape)
    lines.append(write("flag", 0, f"{read('flag', 0)} | fl"))
    return lines


def _circuit(planes: int, scoring: Scoring) -> str | None:
    """The synthesised LUT3 network of the cell (bpbc/sw_cell_circuits.py), if there is one."""
    from .sw_cell_circuits import CIRCUITS

    return CIRCUITS.get((planes, scoring.match, scoring.mismatch, scoring.gap_open, scoring.gap_extend))


def _depends(table: int, position: int) -> bool:
    """Whether the 3-input function ``table`` depends on input ``position`` (0: a, 1: b, 2: c)."""
    bit = 4 >> position
    return any((table >> i & 1) != (table >> (i ^ bit) & 1) for i in range(8))


def _lut3_cell_statements(circuit: str, planes: int, parity: int, track_best: bool, words: int,
                          row: int) -> list[str]:
    """One cell of the 'lut3' shape (pattern row ``row`` of a pass, the
    vector of words w..w+7): the synthesised network ``circuit``, every LUT
    one ``lut3`` (one vpternlogq), H and E in the state layout of
    :func:`_cell_statements`. F from the row above (``f<k>``), the best
    planes (``bs<k>``) and the flag (``fl``) come in and go out as
    variables: the kernel carries them in registers down the whole column
    (F) and through the whole task (best, flag), so no cell loads or stores
    them. Without ``track_best`` only the LUTs that H, E, F and the flag
    need are kept."""
    from .sw_cells import parse_gates

    b = planes
    luts, outputs = parse_gates(circuit)

    def slot(kind, k, row_above=False):
        return _state_offset(planes, words, parity, row, kind, k, row_above)

    wanted = {name: source for name, source in outputs.items() if track_best or not name.startswith("BS")}
    needed = set(wanted.values())
    for name, _, ins in reversed(luts):
        if name in needed:
            needed.update(ins)
    lines = [f"m = vload(m{row}, w)"]
    for k in range(b):
        lines.append(f"hd{k} = vload(rows, {slot('h_left', k, row_above=True)} + w)")
        lines.append(f"e{k} = vload(rows, {slot('e', k)} + w)")
    for name, table, ins in luts:
        if name not in needed:
            continue
        if any(_depends(table, i) for i in range(len(ins), 3)) or any(i in ("0", "1") for i in ins):
            raise ValueError(f"LUT {name} needs a constant input")
        args = ins + [ins[0]] * (3 - len(ins))  # padding the function ignores
        lines.append(f"{name} = lut3(0x{table:02x}, {', '.join(args)})")
    for name, source in wanted.items():
        prefix = name.rstrip("0123456789")
        if prefix in ("H", "E"):
            lines.append(f"vstore(rows, {slot(prefix.lower(), int(name[len(prefix):]))} + w, {source})")
    # the next cell's inputs, assigned after every LUT of this one ran
    carried = {f"f{k}": wanted[f"F{k}"] for k in range(b)} | {"fl": wanted["FL"]}
    if track_best:
        carried |= {f"bs{k}": wanted[f"BS{k}"] for k in range(b)}
    lines += [f"n_{name} = {source}" for name, source in carried.items()]
    lines += [f"{name} = n_{name}" for name in carried]
    return lines


def _lut3_pass_statements(circuit: str, planes: int, parity: int, track_best: bool, words: int,
                          rows: int) -> list[str]:
    """One pass of ``rows`` pattern rows over the vector at word w (F, best
    and flag in and out as variables, see :func:`_lut3_cell_statements`)."""
    lines = []
    for row in range(rows):
        lines += _lut3_cell_statements(circuit, planes, parity, track_best, words, row)
    return lines


def _match_table_statements(words: int, vector: bool = False) -> list[str]:
    """Per column and word (or vector of words, ``vector``): the match word
    of each of the 16 base-set masks."""
    if vector:
        lines = [f"{name} = vload(cols[s, j, {p}], w)" for p, name in enumerate(("lo", "hi", "va"))]
        zero, store = "vzero()", lambda at, value: f"vstore(match_table, {at} + w, {value})"
    else:
        lines = [f"{name} = cols[s, j, {p}, w]" for p, name in enumerate(("lo", "hi", "va"))]
        zero, store = "z", lambda at, value: f"match_table[{at} + w] = {value}"
    lines += [
        "base0 = va & ~hi & ~lo",
        "base1 = va & ~hi & lo",
        "base2 = va & hi & ~lo",
        "base3 = va & hi & lo",
    ]
    for mask in range(MASK_CODES):
        terms = " | ".join(f"base{base}" for base in range(4) if mask >> base & 1) or zero
        lines.append(store(mask * words, terms))
    return lines


#: the task's loops of the generic kernel: per column, the pattern rows in
#: passes of ROWS, each pass over all words of the superblock
_COLUMN_MAJOR_LOOPS = """\
st[:(padded + 1) * ROW] = 0
for j in range(block_length[s]):
    for w in range(WORDS):
{match_table}
    even = j % 2 == 0
    for r in range(1, padded + 1, ROWS):
        rows = st[(r - 1) * ROW:(r + ROWS) * ROW]
{pass_views}
        if even:
            for w in range({word_range}):
{even_pass}
        else:
            for w in range({word_range}):
{odd_pass}"""

#: the task's loops of the 'lut3' kernel: one vector of words at a time
#: through the whole task, so that the best planes and the flag stay in
#: registers from the first cell to the last, and F down each column. The
#: column-major loops stored and loaded them again every pass (6.5 stores a
#: cell at 6 planes with best), and stores are what the cell waits on: on
#: Zen 4 a 512-bit store takes 2 cycles and does not overlap the logic (8
#: vpternlogq alone 4.6 cycles, with 2 stores 7.5-8.0: bench/probes/cpu_store.c),
#: so the 12 stores of H and E a cell cost about as much as its 96 LUTs (see
#: SHAPES).
#:
#: The pattern's rows go in stripes of STRIPE rows, each over all columns, so
#: that the state the cells load and store (the stripe's rows of H and E, a
#: few KB a row) stays in L1: a cell's stores that miss L1 cost more than its
#: logic. Between stripes go the stripe's bottom row, H(bottom, j) and F
#: (bottom, j) of every column j (``hb``, ``fb``): the next stripe's first row
#: takes its F from ``fb[j]`` and finds its diagonal H(top, j-1) in its row
#: 0, which column j-1 filled from ``hb[j-1]``. The first stripe starts from
#: zeros and the last leaves nothing, so a pattern of one stripe moves no
#: boundary at all.
_VECTOR_MAJOR_LOOPS = """\
for w in range(0, WORDS, LANES):
{zero_carried}
    for top in range(0, padded, STRIPE):
        bottom = min(top + STRIPE, padded)
        for q in range(0, (bottom - top + 1) * ROW, ROW):
            for k in range(0, 3 * {planes} * WORDS, WORDS):
                vstore(st, q + k + w, vzero())
        for j in range(block_length[s]):
{match_table}
            at = j * BOUNDARY
            if top > 0:
{load_f}
            else:
{zero_f}
            if j % 2 == 0:
{even_passes}
            else:
{odd_passes}
            if bottom < padded:
{store_f}
{store_carried}"""


#: the passes of one column of a stripe, for the column's parity (the
#: parity is folded into the state offsets, so each parity has its own copy)
_STRIPE_COLUMN_PASSES = """\
if top > 0:
{pass_top}
for r in range(top + 1, bottom + 1, ROWS):
    rows = st[(r - top - 1) * ROW:(r - top + ROWS) * ROW]
{pass_views}
{passes}
if bottom < padded:
{pass_bottom}"""


#: rows per stripe that stand for "the whole pattern in one stripe"
WHOLE_PATTERN = 1 << 30


def _stripe_rows(shape: KernelShape, planes: int) -> int:
    """Pattern rows per stripe of the 'lut3' kernel: the state of a row that
    one vector touches is 3 slots (H of even and odd columns, E) of
    ``planes`` vectors of 64 bytes."""
    if not shape.stripe_bytes:
        return WHOLE_PATTERN
    fitting = shape.stripe_bytes // (3 * planes * VECTOR_WORDS * 8)
    return max(1, fitting // shape.rows) * shape.rows


def _stripe_boundary_statements(planes: int, words: int, parity: int) -> tuple[list[str], list[str]]:
    """(before, after) the passes of column j of parity ``parity``: before,
    H(top, j) from ``hb`` into the stripe's row 0, in the slot where column
    j + 1 reads its diagonal; after, H(bottom, j) from the stripe's last row
    into ``hb`` for the next stripe (in that order: column j + 1 needs the
    old ``hb[j]``)."""
    before = [f"vstore(st, {(parity * planes + k) * words} + w, vload(hb, at + {k * VECTOR_WORDS}))"
              for k in range(planes)]
    after = [f"vstore(hb, at + {k * VECTOR_WORDS}, vload(st, (bottom - top) * ROW + {(parity * planes + k) * words} + w))"
             for k in range(planes)]
    return before, after


_KERNEL_TEMPLATE = """\
# generated by bpbc.cpu_engine for {planes} bit planes, {scoring}, track_best={track_best},
# target {target}, shape {shape}; do not edit
import numpy as np
from numba import njit
from bpbc.cpu_vector import take_next  # bpbc.cpu_vector version {vector_version}
{imports}
WORDS = {words}
ROW = {row}
ROWS = {rows}
ALIGN = 8  # words: 64 bytes
STRIPE = {stripe}  # pattern rows at a time
{constants}

@njit(cache=True, nogil=True)
def aligned_empty(n):
    raw = np.empty(n + ALIGN, np.uint64)
    at = (-(raw.ctypes.data // 8)) % ALIGN
    return raw[at:at + n]


@njit(cache=True, nogil=True)
def sw_kernel(cols, block_length, pattern_codes, pattern_start, task_block, task_pattern,
              out_best, out_flag, taken):
    # each task is run by the first thread to ask for it (taken: the count
    # of tasks handed out, shared by the threads running this kernel)
    z = np.uint64(0)
    longest = 0
    for p in range(pattern_start.shape[0] - 1):
        longest = max(longest, pattern_start[p + 1] - pattern_start[p])
    # every array on a 64-byte boundary: a vector never straddles two cache
    # lines, and a vector stored is forwarded to the load that reads it back
    st = aligned_empty((min(longest, STRIPE) + ROWS) * ROW)
    best = aligned_empty({planes} * WORDS)
    flag = aligned_empty(WORDS)
    match_table = aligned_empty({mask_codes} * WORDS)
{allocations}    while True:
        t = take_next(taken)
        if t >= task_block.shape[0]:
            break
        s = task_block[t]
        first = pattern_start[task_pattern[t]]
        m_rows = pattern_start[task_pattern[t] + 1] - first
        # whole passes: the pattern goes below ``pad`` rows that match nothing
        # (mask 0); like the zero row above them, their H, E and F stay 0 in
        # every lane, so the pattern's rows compute what they would without
        pad = (-m_rows) % ROWS
        padded = m_rows + pad
        best[:] = 0
        flag[:] = 0
{task_body}
        for k in range(out_best.shape[1]):
            for w in range(WORDS):
                out_best[t, k, w] = best[k * WORDS + w]
        for w in range(WORDS):
            out_flag[t, w] = flag[w]
"""

def _generate_kernel_source(planes: int, scoring: Scoring, track_best: bool = True,
                            shape: KernelShape = KernelShape(), target: str = "") -> str:
    """Python source of the numba kernel for ``planes`` bit planes and ``scoring``, laid out by ``shape``."""
    def indented(lines, depth):
        return "\n".join(" " * depth + line for line in lines)

    def views(count, depth):
        lines = []
        for i in range(count):
            if count == 1:
                lines.append(f"o{i} = pattern_codes[first + r - 1] * WORDS")
            else:
                lines.append(f"o{i} = (pattern_codes[first + r - 1 + {i} - pad] if r + {i} > pad else 0) * WORDS")
            lines.append(f"m{i} = match_table[o{i}:o{i} + WORDS]")
        return indented(lines, depth)

    circuit = _circuit(planes, scoring) if shape.gates == "lut3" else None
    if shape.gates == "lut3" and (circuit is None or shape.words % VECTOR_WORDS):
        # no network for this scoring (or words not whole vectors): 2-input
        # gates, one row per pass (two rows: 2.5 times the compile time, for
        # -3 to +7 % in the kernel; see SHAPES)
        shape, circuit = replace(shape, gates="binary", rows=1), None

    version = f"  # bpbc.cpu_vector version {VECTOR_VERSION}\n"
    if circuit is not None:
        imports = "from bpbc.cpu_vector import LANES, lut3, vload, vstore, vzero8 as vzero" + version
        carried = [f"f{k}" for k in range(planes)]
        zero_carried = ["fl = vzero()"] + ([f"bs{k} = vzero()" for k in range(planes)] if track_best else [])
        store_carried = ["vstore(flag, w, fl)"] + (
            [f"vstore(best, {k * shape.words} + w, bs{k})" for k in range(planes)] if track_best else [])
        column_passes = {}
        for name, parity in (("even", 0), ("odd", 1)):
            before, after = _stripe_boundary_statements(planes, shape.words, parity)
            passes = _STRIPE_COLUMN_PASSES.format(
                pass_top=indented(before, 4), pass_views=views(shape.rows, 4), pass_bottom=indented(after, 4),
                passes=indented(_lut3_pass_statements(circuit, planes, parity, track_best, shape.words, shape.rows), 4))
            column_passes[f"{name}_passes"] = indented(passes.split("\n"), 16)
        loops = _VECTOR_MAJOR_LOOPS.format(
            planes=planes, zero_carried=indented(zero_carried, 4), store_carried=indented(store_carried, 4),
            match_table=indented(_match_table_statements(shape.words, vector=True), 12),
            load_f=indented([f"{name} = vload(fb, at + {k * VECTOR_WORDS})" for k, name in enumerate(carried)], 16),
            zero_f=indented([f"{name} = vzero()" for name in carried], 16),
            store_f=indented([f"vstore(fb, at + {k * VECTOR_WORDS}, {name})" for k, name in enumerate(carried)], 16),
            **column_passes)
        stripe = _stripe_rows(shape, planes)
        constants = f"BOUNDARY = {planes} * LANES  # words per column of hb and fb\n"
        allocations = "    hb = aligned_empty(cols.shape[1] * BOUNDARY)\n    fb = aligned_empty(cols.shape[1] * BOUNDARY)\n"
    else:
        stripe, constants, allocations = WHOLE_PATTERN, "", ""  # the column-major loops have no stripes
        if shape.vector:
            imports = f"from bpbc.cpu_vector import vload{shape.vector} as vload, vstore, " \
                f"vzero{shape.vector} as vzero" + version
            word_range = f"0, WORDS, {shape.vector}"
        else:
            imports, word_range = "", "WORDS"
        loops = _COLUMN_MAJOR_LOOPS.format(
            match_table=indented(_match_table_statements(shape.words), 8), word_range=word_range,
            pass_views=views(shape.rows, 8),
            **{f"{name}_pass": indented(_pass_statements(planes, scoring, parity, track_best, shape, shape.rows), 16)
               for name, parity in (("even", 0), ("odd", 1))})
    return _KERNEL_TEMPLATE.format(
        planes=planes, scoring=scoring, track_best=track_best, target=target, shape=shape, imports=imports,
        words=shape.words, row=_row_words(planes, shape.words), rows=shape.rows, mask_codes=MASK_CODES,
        task_body=indented(loops.split("\n"), 8), stripe=stripe, constants=constants, allocations=allocations,
        vector_version=VECTOR_VERSION,
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


def _write_bytecode(path: str) -> None:
    """The bytecode of a generated kernel module beside it, where Python has
    not written it (PYTHONDONTWRITEBYTECODE): part of the kernel's cache, it
    saves every later process compiling the source (a few milliseconds each)."""
    cached = importlib.util.cache_from_source(path)
    if not os.path.exists(cached):
        try:
            py_compile.compile(path, cfile=cached, doraise=True)
        except (OSError, py_compile.PyCompileError):
            pass  # then Python compiles the source at each import, as it would anyway


@cache
def kernel(planes: int, scoring: Scoring, track_best: bool = True, shape: KernelShape | None = None):
    """The compiled kernel for ``planes`` bit planes and ``scoring``, laid
    out by ``shape`` (default: the one for this process's target), generated
    on first use. The source and its cache file are keyed by the target."""
    target = cpu_target()
    shape = shape or kernel_shape(target)
    if shape.gates == "lut3" and target.isa != "avx512":
        # vpternlogq is AVX-512 only: the same layout with 2-input gates
        shape = replace(shape, gates="binary")
    source = _generate_kernel_source(planes, scoring, track_best, shape, target.label)
    return generated_module(f"bpbc_sw_cpu_b{planes}", source).sw_kernel


def generated_module(prefix: str, source: str):
    """The generated kernel ``source`` as a module: written to the cache
    directory as ``prefix_<digest of target and source>.py`` on first use,
    then imported (numba compiles its kernels, or loads them from its cache)."""
    target = cpu_target()
    digest = hashlib.sha1(f"{target.key}\n{source}".encode()).hexdigest()[:12]
    name = f"{prefix}_{digest}"
    path = os.path.join(_cache_dir(), name + ".py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            fh.write(source)
        os.replace(tmp, path)  # atomic: concurrent processes never see half a file
    _write_bytecode(path)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@njit(parallel=True, cache=True, nogil=True)
def _to_superblocks(planes, cols):
    """cols[s, j, p, w] = planes[s * words + w, j, p] (zero past the last
    group; words = cols.shape[3]): one superblock column becomes contiguous
    for the kernel's vector loads."""
    groups = planes.shape[0]
    words = cols.shape[3]
    for s in prange(cols.shape[0]):
        for j in range(cols.shape[1]):
            for p in range(3):
                for w in range(words):
                    g = s * words + w
                    if g < groups:
                        cols[s, j, p, w] = planes[g, j, p]
                    else:
                        cols[s, j, p, w] = 0


@njit(cache=True, nogil=True, inline="always")
def _pack_lane_group(codes, lane_rows, g, cols):
    """Word group g of the lanes (lanes g * 64 ..; lane i holds read
    ``codes[lane_rows[i]]``, -1 an empty read) into word g % words of
    superblock g // words, as transpose.pack_codes of the gathered codes
    and _to_superblocks would put it."""
    length = codes.shape[1]
    n = lane_rows.shape[0]
    words = cols.shape[3]
    rows = np.zeros((3, 64), np.uint64)
    first = g * 64
    count = min(64, n - first)
    for start in range(0, length, 64):
        stop = min(start + 64, length)
        for r in range(64):
            row = lane_rows[first + r] if r < count else -1
            if row < 0:
                rows[0, r] = 0
                rows[1, r] = 0
                rows[2, r] = 0
            else:
                low, high, valid = _code_words(codes, row, start, stop)
                rows[0, r] = low
                rows[1, r] = high
                rows[2, r] = valid
        _transpose_rows(rows, 64)
        for p in range(stop - start):
            for k in range(3):
                cols[g // words, start + p, k, g % words] = rows[k, p]


@njit(parallel=True, cache=True, nogil=True)
def _pack_lanes(codes, lane_rows, groups, cols):
    """Pack the word groups ``groups`` of lanes into superblock columns
    (_pack_lane_group), in parallel."""
    for t in prange(groups.shape[0]):
        _pack_lane_group(codes, lane_rows, groups[t], cols)


@njit(cache=True, nogil=True)
def _pack_lanes_serial(codes, lane_rows, groups, cols):
    """:func:`_pack_lanes` on the calling thread."""
    for t in range(groups.shape[0]):
        _pack_lane_group(codes, lane_rows, groups[t], cols)


#: the superblock columns of the reads packed from their bytes, used again
#: from batch to batch: fresh memory is faulted in page by page, by all the
#: packing threads at once (400k reads x 150 bp, 22.5 MB, 2-core Zen 5: the
#: packing took 19.5-21 ms on one thread and 11.2 on two, reused 18.4-19 and 10.3-10.6).
#: A batch keeps its columns while it is screened; a few wait here
_COLUMN_BUFFERS = BufferPool(keep=4, largest=512 << 20)

#: word groups from which _pack_lanes runs in parallel: a parallel region
#: wakes the other threads, about 50 us each time on a VM after a pause
#: (2-core Zen 5; the few groups of a second pass take about that to pack)
PARALLEL_GROUPS = 64


@njit(inline="always")
def _lane_read(order, lane):
    """The read in ``lane``: ``order[lane]``, or ``lane`` where ``order`` is
    empty (the identity, never materialised: see PreparedReads)."""
    return order[lane] if order.shape[0] else lane


@njit(parallel=True, cache=True, nogil=True)
def _pack_superblocks(data, starts, lengths, order, table, cols):
    """Encode and pack reads into superblock columns in one pass: lane i
    holds read ``order[i]`` (read i where ``order`` is empty: the identity),
    ``data[starts[r]:][:lengths[r]]``, each byte
    coded by ``table`` (bpbc.alphabet.READ_CODE: 0-3 a base, 4 none, 255
    not allowed); word group g (lanes g * 64 ..) goes to word g % words of
    superblock g // words, every position up to the columns' width, zero
    past a read and past the last lane (what pack_bytes and
    _to_superblocks gave, without the planes between them). Returns whether
    a byte of some read is coded 255 (the columns are then not to be used).

    64 bytes of a read at a time as vector compares (base_masks64), where
    64 bytes of the buffer lie from there on, the few other letters (N and
    the IUPAC codes) looked up in the table; else byte by byte."""
    n = lengths.shape[0]
    width = cols.shape[1]
    words = cols.shape[3]
    end = data.shape[0]
    all_ones = ~np.uint64(0)
    bad = np.zeros(cols.shape[0] * words, np.bool_)
    for g in prange(cols.shape[0] * words):
        s, w = g // words, g % words
        rows = np.zeros((3, 64), np.uint64)
        count = max(0, min(64, n - g * 64))
        for start in range(0, width, 64):
            stop = min(start + 64, width)
            for r in range(count):
                read = _lane_read(order, g * 64 + r)
                at = starts[read] + start
                left = lengths[read] - start  # bases of the read from ``start`` on
                if left <= 0:
                    low = high = valid = np.uint64(0)
                elif at + 64 <= end:
                    in_read = all_ones if left >= 64 else (np.uint64(1) << np.uint64(left)) - np.uint64(1)
                    low, high, valid = base_masks64(data, at)
                    low &= in_read
                    high &= in_read
                    valid &= in_read
                    other = in_read & ~valid
                    if other:  # N, another IUPAC code, or a byte outside the alphabet
                        for q in range(min(left, 64)):
                            if (other >> np.uint64(q)) & np.uint64(1) and table[data[at + q]] == 255:
                                bad[g] = True
                else:
                    low, high, valid, seen = _byte_words(data, starts[read], lengths[read], table, start, stop)
                    bad[g] |= seen
                rows[0, r] = low
                rows[1, r] = high
                rows[2, r] = valid
            if count:
                for r in range(count, 64):  # the transpose before left its bits here
                    rows[0, r] = rows[1, r] = rows[2, r] = 0
                _transpose_rows(rows, 64)
            for p in range(stop - start):
                for k in range(3):
                    cols[s, start + p, k, w] = rows[k, p]
    return bad.any()


class PreparedReads:
    """Reads in a given order (by default sorted by length), bit-transposed
    into superblock columns of ``words`` words. Lane ``i`` of the layout is
    read ``order[i]``. ``padding``: the index that ``order`` repeats to fill
    superblocks with an empty read (every code >= 4): an empty read's row,
    or no row at all (``len(codes)``); groups of WORD_BITS lanes holding
    only it are not gathered and packed, they are zero words (as
    ``pack_codes`` packs codes >= 4 and missing lanes)."""

    def __init__(self, codes: np.ndarray, lengths: np.ndarray, order: np.ndarray | None = None, words: int = 16,
                 padding: int | None = None):
        from transpose import pack_codes

        self._order = _length_order(lengths) if order is None else order
        self.n = len(lengths) if self._order is None else len(self._order)
        if padding is None:
            ordered_codes = codes if self._order is None else codes[self._order]
            ordered_lengths = lengths if self._order is None else lengths[self._order]
            planes = pack_codes(ordered_codes, word_bits=WORD_BITS)  # (G, L, 3)
        else:
            # a few reads in superblocks of their own (the second pass) are
            # mostly padding: only the groups of WORD_BITS lanes that hold a
            # read are packed, each straight from its reads' rows of codes
            # into the superblock columns (no gathered copy of the codes)
            is_real = self.order != padding
            ordered_lengths = np.zeros(self.n, dtype=np.int64)
            ordered_lengths[is_real] = lengths[self.order[is_real]]
            groups = -(-self.n // WORD_BITS)
            real_lane = np.zeros(groups * WORD_BITS, dtype=bool)
            real_lane[:self.n] = is_real
            real = np.flatnonzero(real_lane.reshape(groups, WORD_BITS).any(axis=1))
            blocks = -(-groups // words)
            cols = np.zeros((blocks, codes.shape[1], 3, words), dtype=np.uint64)
            if len(real):
                lane_rows = np.where(is_real, self.order, -1)
                pack = _pack_lanes if len(real) >= PARALLEL_GROUPS else _pack_lanes_serial
                pack(np.ascontiguousarray(codes, dtype=np.uint8), lane_rows, real, cols)
            self._set_layout(cols, ordered_lengths, words)
            return
        self._lay_out(planes, ordered_lengths, words)

    @property
    def order(self) -> np.ndarray:
        """int64: lane i holds read ``order[i]`` (made here where it is the
        identity, which the kernels take as an empty array: :attr:`lane_order`)."""
        if self._order is None:
            self._order = np.arange(self.n, dtype=np.int64)
        return self._order

    @property
    def lane_order(self) -> np.ndarray:
        """:attr:`order` as the kernels take it: empty for the identity, an
        order never made (400k reads: 3.2 MB, 1.4 ms of fresh pages on one
        thread, on the 16-core host as on one core)."""
        return _IDENTITY if self._order is None else np.ascontiguousarray(self._order, dtype=np.int64)

    @classmethod
    def from_bytes(cls, data, seq_start: np.ndarray, lengths: np.ndarray, words: int = 16) -> PreparedReads | None:
        """The reads sorted by length, from sequences as they lie in a buffer
        (``data``, bytes or uint8: read i is ``data[seq_start[i]:][:lengths[i]]``),
        encoded and packed in one pass. None when a byte lies outside the
        alphabet (the caller encodes for the error message)."""
        from .alphabet import READ_CODE

        self = cls.__new__(cls)
        self._order = _length_order(lengths)
        self.n = len(lengths)
        width = int(lengths[self.n - 1 if self._order is None else self._order[-1]]) if self.n else 0
        shape = (-(-self.n // (words * WORD_BITS)), width, 3, words)
        cols = _COLUMN_BUFFERS.take(8 * int(np.prod(shape))).view(np.uint64).reshape(shape)
        lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        if _pack_superblocks(np.frombuffer(data, np.uint8), np.ascontiguousarray(seq_start, dtype=np.int64),
                             lengths, self.lane_order, READ_CODE, cols):
            return None
        self._set_layout(cols, lengths, words, ascending=True)
        return self

    def _lay_out(self, planes: np.ndarray, ordered_lengths: np.ndarray, words: int) -> None:
        """Superblock columns of the planes (G, L, 3) and each superblock's length."""
        groups, width = planes.shape[0], planes.shape[1]
        blocks = -(-groups // words)
        cols = np.empty((blocks, width, 3, words), dtype=np.uint64)
        _to_superblocks(planes, cols)
        self._set_layout(cols, ordered_lengths, words)

    def _set_layout(self, cols: np.ndarray, lengths: np.ndarray, words: int, ascending: bool = False) -> None:
        """The superblock columns and each superblock's length, from the
        reads' ``lengths`` in lane order (``ascending``: in input order,
        the reads laid out by length, so that a superblock's last read is
        its longest: no copy of every length in lane order, 1 ms for 400k
        reads on one thread)."""
        blocks = cols.shape[0]
        self.words = words
        self.cols = cols
        lanes = words * WORD_BITS
        if ascending and self.n:
            last = np.minimum(np.arange(1, blocks + 1, dtype=np.int64) * lanes, self.n) - 1
            self.block_length = lengths[last if self._order is None else self._order[last]].astype(np.int64)
            return
        padded = np.zeros(blocks * lanes, dtype=np.int64)
        padded[:self.n] = lengths
        self.block_length = padded.reshape(blocks, lanes).max(axis=1) if blocks else np.zeros(0, np.int64)

    @property
    def blocks(self) -> int:
        return self.cols.shape[0]


@njit(cache=True, nogil=True)
def stable_order(keys, n_keys):
    """np.argsort(keys, kind='stable') for integer keys in [0, n_keys), by
    counting: linear in len(keys) + n_keys (a comparison sort of 500k int64
    keys takes 20-26 ms on a Zen 5 core, this a few)."""
    start = np.zeros(n_keys + 1, np.int64)
    for i in range(keys.shape[0]):
        start[keys[i] + 1] += 1
    for key in range(n_keys):
        start[key + 1] += start[key]
    out = np.empty(keys.shape[0], np.int64)
    for i in range(keys.shape[0]):
        key = keys[i]
        out[start[key]] = i
        start[key] += 1
    return out


@njit(cache=True, nogil=True)
def _pairs_ascending(minor, major):
    """Whether the pairs (major[i], minor[i]) never fall (minor empty: the majors alone)."""
    for i in range(1, major.shape[0]):
        if major[i] < major[i - 1] or (minor.shape[0] and major[i] == major[i - 1] and minor[i] < minor[i - 1]):
            return False
    return True


#: values per piece of _ascending's parallel check
_ASCENDING_PIECE = 1 << 16


@njit(parallel=True, cache=True, nogil=True)
def _ascending_parallel(values):
    """Whether ``values`` never fall, a piece per thread at a time."""
    n = values.shape[0]
    falls = 0
    for p in prange((n + _ASCENDING_PIECE - 1) // _ASCENDING_PIECE):
        piece = values[max(0, p * _ASCENDING_PIECE - 1):min(n, (p + 1) * _ASCENDING_PIECE)]
        if not _pairs_ascending(piece[:0], piece):
            falls += 1
    return falls == 0


def _ascending(lengths: np.ndarray) -> bool:
    """Whether ``lengths`` never fall: on every thread from two pieces on
    (sorted lengths are read to the end, and 1.6M of them, cold in this
    core's caches, took 3.7 ms on the 16-core host's calling thread)."""
    if len(lengths) >= 2 * _ASCENDING_PIECE:
        return bool(_ascending_parallel(lengths))
    return bool(_pairs_ascending(lengths[:0], lengths))


#: the identity order, as the kernels take it (PreparedReads.lane_order)
_IDENTITY = np.zeros(0, np.int64)


def _length_order(lengths: np.ndarray) -> np.ndarray | None:
    """:func:`by_length`, or None where that is the identity (the reads in
    length order already: all of one length, say)."""
    lengths = np.asarray(lengths)
    return None if _ascending(lengths) else by_length(lengths)


def by_length(lengths: np.ndarray) -> np.ndarray:
    """:func:`bpbc.order.length_order` (numpy's stable argsort of the
    lengths), as int64, by counting (400k reads of 30-150 bp: 1.1 ms against 15 ms for the
    argsort, on one core before the parallel packing; 2-core Zen 5). Reads
    in length order already (all of one length, say) never come here
    (:func:`_length_order`)."""
    lengths = np.asarray(lengths)
    longest = int(lengths.max(initial=0))
    if longest > 4 * len(lengths) + (1 << 20):  # a counting array far larger than the reads
        return np.argsort(lengths, kind="stable").astype(np.int64)
    return stable_order(np.ascontiguousarray(lengths, dtype=np.int64), longest + 1)


def lexsort2(minor: np.ndarray, major: np.ndarray) -> np.ndarray:
    """np.lexsort((minor, major)) for non-negative integer keys: two stable
    counting passes, minor first (the same order, ties in input order)."""
    if len(major) == 0:
        return np.zeros(0, np.int64)
    if _pairs_ascending(minor, major):  # one pattern, reads of one length: in order already
        return np.arange(len(major), dtype=np.int64)
    by_minor = stable_order(minor, int(minor.max()) + 1)
    return by_minor[stable_order(major[by_minor], int(major.max()) + 1)]


#: a de Bruijn sequence for 64 bits: (x * it) >> 58 differs for every power of two x
_DE_BRUIJN = np.uint64(0x03F79D71B4CB0A89)
_BIT_OF = np.zeros(64, np.int64)
_BIT_OF[(np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64)) * _DE_BRUIJN) >> np.uint64(58)] = np.arange(64)


#: _flagged_instances sorts the instances' keys where there are fewer than
#: the reads over this (else it counts per read): 8000 of 400k reads took
#: 0.6 ms on one thread by counting, most of it passes over the 400k reads
SPARSE_FLAGS = 16


@njit(inline="always")
def _lowest_bit(x):
    """The index of the lowest set bit of ``x`` (not 0), by De Bruijn multiplication."""
    return _BIT_OF[((x & (~x + np.uint64(1))) * _DE_BRUIJN) >> np.uint64(58)]


@njit(cache=True, nogil=True)
def _flagged_instances(flag, order, count, words, n=-1):
    """(read, k) of every set bit of ``flag`` (tasks x words; task t =
    superblock t // count against oriented pattern t % count; bit b of word w
    is lane (superblock * words + w) * 64 + b, read order[lane]; of ``n``
    reads, default len(order); read lane where ``order`` is empty), sorted by
    read, then k. The bits are read off in task order, which is k order for
    each read; then a few among many reads are sorted by their keys read *
    count + k (each one once), else counted per read and placed (a stable
    counting sort, not a pass over every read's keys)."""
    n = order.shape[0] if n < 0 else n
    one = np.uint64(1)
    m = 0
    for t in range(flag.shape[0]):
        for w in range(words):
            x = flag[t, w]
            while x:
                x &= x - one
                m += 1
    found = np.empty(m, np.int64)
    ks = np.empty(m, np.int64)
    at = 0
    for t in range(flag.shape[0]):
        base = t // count * words * 64
        for w in range(words):
            x = flag[t, w]
            while x:
                found[at] = _lane_read(order, base + w * 64 + _lowest_bit(x))
                ks[at] = t % count
                at += 1
                x &= x - one
    if m * SPARSE_FLAGS < n:
        keys = found * count + ks
        keys.sort()
        return keys // count, keys % count
    first = np.zeros(n + 1, np.int64)
    for i in range(m):
        first[found[i] + 1] += 1
    for r in range(n):
        first[r + 1] += first[r]
    reads = np.empty(m, np.int64)
    sorted_ks = np.empty(m, np.int64)
    for i in range(m):
        read = found[i]
        reads[first[read]] = read
        sorted_ks[first[read]] = ks[i]
        first[read] += 1
    return reads, sorted_ks


@njit(cache=True, nogil=True)
def _second_pass_layout(counts, lanes):
    """First lane of each pattern's instances in the second pass (``counts``
    instances each, in order): a pattern follows the one before in the same
    superblock, unless starting on the next superblock spans fewer
    superblocks (each superblock a pattern touches is one task of the
    kernel). So no pattern runs more tasks than its own superblocks would
    take, and many patterns with a few instances each share superblocks
    instead of each packing one of its own, mostly padding (2000 oriented
    patterns of 50 instances: 2000 superblocks of 1024 lanes before, 98
    now)."""
    start = np.empty(counts.shape[0], dtype=np.int64)
    at = 0
    for p in range(counts.shape[0]):
        count = counts[p]
        here = (at + count - 1) // lanes - at // lanes + 1
        aligned = (count + lanes - 1) // lanes
        if aligned < here:
            at = (at + lanes - 1) // lanes * lanes
        start[p] = at
        at += count
    return start


_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads are not there, and its
    lock may have been held at the fork."""
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _kernel_pool(threads: int) -> ThreadPoolExecutor:
    """A pool of at least ``threads`` threads that run kernel slices, kept
    between calls: starting a pool per call cost 0.16-0.18 ms on 2 threads
    and 1-13 ms on 16 (2-core Zen 5), twice a screen. A pool too small for a
    call is replaced and dropped, not shut down: another call may still be
    submitting to it (its threads end once it is collected)."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < threads:
            _pool, _pool_size = ThreadPoolExecutor(threads, thread_name_prefix="bpbc-cpu"), threads
        return _pool


@njit(cache=True, nogil=True)
def _lane_scores(best, flag, task, lane, into, scores, overflow):
    """scores[into[i]] and overflow[into[i]]: the score (its bit planes
    best[task[i], :, w]) and flag of lane ``lane[i]`` (bit b of word w) of
    task ``task[i]``; only the lanes asked for, on this thread, where
    unpacking every lane of every task took two parallel regions."""
    one = np.uint64(1)
    for i in range(task.shape[0]):
        t, w, b = task[i], lane[i] // 64, np.uint64(lane[i] % 64)
        value = 0
        for k in range(best.shape[1]):
            value |= int((best[t, k, w] >> b) & one) << k
        scores[into[i]] = value
        overflow[into[i]] = (flag[t, w] >> b) & one


class CpuEngine:
    """The numba bit-sliced engine. ``threads`` caps the threads it runs on
    (default: numba's thread count, every core).

    Every call takes a :class:`~bpbc.patterns.PatternTable` and runs all its
    oriented patterns against all superblocks of reads as one list of
    (superblock, pattern) tasks, spread over a thread pool.

    ``shape`` lays the kernel out (default: ``kernel_shape()``, the shape for
    the CPU numba compiles for, looked up on first use, not at import).
    """

    name = "cpu"
    word_bits = WORD_BITS
    #: the screen pays off running a pass one plane short first (see Screener)
    two_pass = True
    #: what running out of memory raises (the Screener then splits the batch)
    out_of_memory = (MemoryError,)

    def __init__(self, threads: int | None = None, shape: KernelShape | None = None):
        self.threads = threads
        self._shape = shape

    @property
    def shape(self) -> KernelShape:
        if self._shape is None:
            self._shape = kernel_shape()
        return self._shape

    @property
    def words(self) -> int:
        """64-bit words per superblock."""
        return self.shape.words

    @property
    def lanes(self) -> int:
        """Instances per superblock."""
        return self.shape.lanes

    def release_memory(self) -> None:
        """Nothing to hand back: numpy frees arrays as they die."""

    def compile_kernel(self, planes: int, scoring: Scoring, track_best: bool = True) -> None:
        """Have numba compile (or load) the kernel for ``planes`` and
        ``scoring`` now, as a screen would call it (:func:`bpbc.prepare`):
        one task on one superblock of empty reads, with no reads packed."""
        from .patterns import PatternTable

        prepared = PreparedReads.__new__(PreparedReads)
        prepared._order, prepared.n, prepared.words = None, 0, self.words
        prepared.cols = np.zeros((1, 1, 3, self.words), dtype=np.uint64)
        prepared.block_length = np.zeros(1, dtype=np.int64)
        one = np.zeros(1, dtype=np.int64)
        self._run(prepared, PatternTable.of([np.ones(1, np.uint8)]), scoring, planes, one, one, track_best)

    def prepare(self, codes: np.ndarray, lengths: np.ndarray) -> PreparedReads:
        return PreparedReads(codes, lengths, words=self.words)

    def prepare_bytes(self, data, seq_start: np.ndarray, lengths: np.ndarray) -> PreparedReads | None:
        """:meth:`prepare` for sequences still in their buffer (encoded and
        packed in one pass); None when a byte lies outside the alphabet."""
        return PreparedReads.from_bytes(data, seq_start, lengths, self.words)

    def _run(self, prepared: PreparedReads, table, scoring: Scoring, planes: int, task_block, task_pattern,
             track_best: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Best planes (T, planes or 0, words) and flags (T, words) of every task."""
        from numba import get_num_threads

        if prepared.words != self.words:
            raise ValueError(f"reads prepared in superblocks of {prepared.words} words, the kernel takes {self.words}")
        tasks = len(task_block)
        best = np.zeros((tasks, planes if track_best else 0, self.words), dtype=np.uint64)
        flag = np.zeros((tasks, self.words), dtype=np.uint64)
        if tasks == 0:
            return best, flag
        run = kernel(planes, scoring, track_best, self.shape)
        codes = table.masks.astype(np.int64)
        threads = min(self.threads or get_num_threads(), get_num_threads(), tasks)
        taken = np.zeros(1, np.int64)

        def take_tasks() -> None:
            # each thread takes the next task as it gets done with one, inside
            # the kernel: the GIL once per thread, not once per slice of tasks
            # (on 16 threads the last slices of 4 a thread, and the handing
            # out, left pass1 at 13x one thread's rate, the second pass at 3x)
            run(prepared.cols, prepared.block_length, codes, table.starts, task_block, task_pattern, best, flag,
                taken)

        # the calling thread takes tasks too, beside threads - 1 of the pool's
        helpers = [] if threads == 1 else [_kernel_pool(threads - 1).submit(take_tasks) for _ in range(threads - 1)]
        try:
            take_tasks()
        finally:
            for helper in helpers:  # every task done (or failed) before the arrays are handed back
                helper.exception()
        for helper in helpers:
            helper.result()
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
        lanes = prepared.blocks * self.lanes
        # (S, K, b, W) -> (K, S * W, b): word groups of each pattern in lane order
        word_planes = best.reshape(prepared.blocks, k, planes, self.words).transpose(1, 0, 3, 2).reshape(-1, planes)
        values = unpack_planes(word_planes, k * lanes).reshape(k, lanes)[:, :prepared.n]
        word_flags = flag.reshape(prepared.blocks, k, self.words).transpose(1, 0, 2).reshape(-1)
        flags = unpack_flags(word_flags, k * lanes).reshape(k, lanes)[:, :prepared.n]
        return in_input_order(prepared.order, values, flags)

    def flagged(self, prepared: PreparedReads, table, scoring: Scoring, planes: int) -> tuple[np.ndarray, np.ndarray]:
        """(read, oriented pattern) of every instance whose score reaches
        2**planes, sorted; scores are not kept (a cheaper kernel)."""
        _, flag = self._run(prepared, table, scoring, planes, *self._all_tasks(prepared, table), track_best=False)
        return _flagged_instances(flag, prepared.lane_order, len(table), self.words, prepared.n)

    def pair_scores(self, codes: np.ndarray, lengths: np.ndarray, reads: np.ndarray, ks: np.ndarray, table,
                    scoring: Scoring, planes: int) -> tuple[np.ndarray, np.ndarray]:
        """Scores and overflow flags of the instances (reads[i], ks[i]) only:
        the reads of each oriented pattern take consecutive lanes, and a
        superblock holds the lanes of several patterns where that runs no
        more tasks (:func:`_second_pass_layout`): each task runs one pattern
        over one superblock, and only its pattern's lanes are read back."""
        if len(reads) == 0:
            return np.zeros(0, np.int32), np.zeros(0, bool)

        lanes = self.lanes
        by_pattern = lexsort2(lengths[reads], ks)
        ks_sorted = ks[by_pattern]
        counts = np.bincount(ks_sorted)
        patterns = np.flatnonzero(counts)
        counts = counts[patterns]
        first = np.zeros(len(patterns), dtype=np.int64)
        np.cumsum(counts[:-1], out=first[1:])
        start = _second_pass_layout(counts, lanes)
        # lane of each instance: its pattern's start, then its rank in the pattern
        segment = np.repeat(np.arange(len(patterns)), counts)
        lane = start[segment] + np.arange(len(ks_sorted)) - first[segment]
        # the tasks: each pattern over every superblock its lanes touch
        first_block = start // lanes
        spans = (start + counts - 1) // lanes - first_block + 1
        task_start = np.zeros(len(patterns) + 1, dtype=np.int64)
        np.cumsum(spans, out=task_start[1:])
        task_pattern = np.repeat(patterns, spans)
        task_block = np.repeat(first_block - task_start[:-1], spans) + np.arange(task_start[-1])
        # only the instances' reads are gathered (not a copy of the whole batch), then an empty read for padding
        picked = reads[by_pattern]
        blocks = int(first_block[-1] + spans[-1])
        order = np.full(blocks * lanes, len(codes), dtype=np.int64)
        order[lane] = picked
        prepared = PreparedReads(codes, lengths, order, self.words, padding=len(codes))
        best, flag = self._run(prepared, table, scoring, planes, task_block, task_pattern)
        # instance i is lane lane[i] % lanes of its pattern's task on superblock lane[i] // lanes
        task = task_start[segment] + lane // lanes - first_block[segment]
        scores = np.empty(len(reads), dtype=np.int32)
        overflow = np.empty(len(reads), dtype=bool)
        _lane_scores(best, flag, task, lane % lanes, by_pattern, scores, overflow)
        return scores, overflow

    def hits(self, prepared: PreparedReads, table, scoring: Scoring, planes: int, thresholds: np.ndarray,
             exact_planes: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(read, oriented pattern, score, overflow) of every instance that
        reaches its pattern's threshold or overflows, sorted by read then
        pattern (one pass: ``exact_planes`` is not used)."""
        scores, overflow = self.scores(prepared, table, scoring, planes)
        reads, ks = np.nonzero(overflow | (scores >= thresholds))
        return reads, ks, scores[reads, ks], overflow[reads, ks]
