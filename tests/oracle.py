"""An independent oracle for every output of ``bpbc-screen``: what the
command must write, computed from the reads and patterns alone.

Nothing here comes from the package: not its alphabet, not its aligners,
not its writers. The records are read by dnaio (the peer library the
command uses to read too, but not to screen or to write plain FASTQ); the
scores come from parasail and from a plain Gotoh DP here (each checks the
other); the alignment of a passing instance is traced back by the tie rule
that ``bpbc/traceback.py``'s docstring and docs/scoring.md state; the
partial adapters at a read's end come from the plain end-overlap DP of
docs/trimming.md; the PAF, the reads files (matched, unmatched, one per
pattern, trimmed, masked, both mates) and the ``--json`` counts are
written by this module's own code.

:class:`Options` holds what a run is asked (and gives its command line),
:func:`expected` what it must write; :func:`compare` lists the differences
between that and a run's output directory.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import re
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path

BASES = "ACGT"
#: letter -> the bases it stands for; a read letter of more than one base never matches
IUPAC_BASES = {
    "A": "A", "C": "C", "G": "G", "T": "T", "U": "T",
    "R": "AG", "Y": "CT", "S": "CG", "W": "AT", "K": "GT", "M": "AC",
    "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG", "N": "ACGT",
}
_COMPLEMENT_BASE = {"A": "T", "C": "G", "G": "C", "T": "A"}
NO_BASE = 4  #: a read letter that matches nothing (N, other IUPAC codes)
NEG = -(1 << 40)  #: minus infinity: E and F where no gap can end


# --- the alphabet ---------------------------------------------------------------

def read_codes(sequence: str) -> list[int]:
    """0..3 for A, C, G, T (U), NO_BASE for every other IUPAC letter; any case."""
    codes = []
    for letter in sequence.upper():
        bases = IUPAC_BASES[letter]
        codes.append(BASES.index(bases) if len(bases) == 1 else NO_BASE)
    return codes


def pattern_sets(sequence: str) -> list[frozenset[int]]:
    """Each pattern letter as the set of base codes it matches."""
    return [frozenset(BASES.index(b) for b in IUPAC_BASES[letter]) for letter in sequence.upper()]


def reverse_complement_sets(sets: list[frozenset[int]]) -> list[frozenset[int]]:
    complement = {BASES.index(b): BASES.index(c) for b, c in _COMPLEMENT_BASE.items()}
    return [frozenset(complement[b] for b in s) for s in reversed(sets)]


@dataclass(frozen=True)
class Scoring:
    match: int = 2
    mismatch: int = 3
    gap_open: int = 5
    gap_extend: int = 2

    def substitution(self, code: int, bases: frozenset[int]) -> int:
        return self.match if code in bases else -self.mismatch


# --- local alignment: the Gotoh DP and its traceback -------------------------------

@dataclass(frozen=True)
class Hit:
    """One passing (read, pattern, strand) instance, in forward coordinates."""

    pattern: int
    strand: str
    score: int
    read_start: int
    read_end: int
    pattern_start: int
    pattern_end: int
    ops: str  #: one letter per column, '=', 'X', 'I', 'D', along the forward pattern

    def cigar(self, eqx: bool) -> str:
        ops = self.ops if eqx else self.ops.replace("=", "M").replace("X", "M")
        return "".join(f"{len(run.group())}{run.group()[0]}" for run in re.finditer(r"(.)\1*", ops))


def _fill(read, profile, H, E, F, first: int, extend: int):
    """Fill the full matrices H, E, F (row and column 0 as given: H 0, E and F
    NEG) of the local alignment of ``read`` (codes) against the pattern
    whose substitution scores for read code c are ``profile[c]``; returns
    (best, best_i, best_j), the first maximum in (i, j) order. The one loop
    of the oracle's DP: run as it stands on lists (:data:`PLAIN`), or
    compiled by numba on arrays, the same source."""
    n, m = len(read), len(profile[0])
    best, best_i, best_j = 0, 0, 0
    for i in range(1, n + 1):
        scores, H_up, E_up, H_row, E_row, F_row = profile[read[i - 1]], H[i - 1], E[i - 1], H[i], E[i], F[i]
        f = NEG
        for j in range(1, m + 1):  # plain comparisons, not max(): this loop is the oracle's time
            e, opened = E_up[j] - extend, H_up[j] - first
            if opened > e:
                e = opened
            f, opened = f - extend, H_row[j - 1] - first
            if opened > f:
                f = opened
            h = H_up[j - 1] + scores[j - 1]
            if e > h:
                h = e
            if f > h:
                h = f
            if h < 0:
                h = 0
            E_row[j], F_row[j], H_row[j] = e, f, h
            if h > best:
                best, best_i, best_j = h, i, j
    return best, best_i, best_j


#: run :func:`_fill` as plain Python on lists (the reference), not compiled:
#: ``BPBC_ORACLE_PLAIN=1``, or where numba is missing
PLAIN = bool(os.environ.get("BPBC_ORACLE_PLAIN"))


@functools.cache
def _compiled_fill():
    """:func:`_fill` compiled by numba (None where numba is missing). The
    oracle's time is this loop: in plain Python some 2 ms an alignment, 40%
    of the fuzz (bench/fuzz.py) per input."""
    try:
        import numba
    except ImportError:
        return None
    return numba.njit(cache=True, nogil=True)(_fill)


def _matrices(read: list[int], pattern: list[frozenset[int]], scoring: Scoring):
    """(H, E, F, best, best_i, best_j): the filled matrices, as lists of
    lists (plain) or 2-D arrays (compiled), indexed [i][j] either way."""
    n, m = len(read), len(pattern)
    first, extend = scoring.gap_open + scoring.gap_extend, scoring.gap_extend
    profile = [[scoring.substitution(code, bases) for bases in pattern] for code in range(5)]
    compiled = None if PLAIN or m == 0 else _compiled_fill()
    if compiled is None:
        H = [[0] * (m + 1) for _ in range(n + 1)]
        E = [[NEG] * (m + 1) for _ in range(n + 1)]
        F = [[NEG] * (m + 1) for _ in range(n + 1)]
        best, best_i, best_j = _fill(read, profile, H, E, F, first, extend)
    else:
        import numpy as np

        H = np.zeros((n + 1, m + 1), dtype=np.int64)
        E = np.full((n + 1, m + 1), NEG, dtype=np.int64)
        F = np.full((n + 1, m + 1), NEG, dtype=np.int64)
        best, best_i, best_j = compiled(np.asarray(read, dtype=np.int64).reshape(n), np.asarray(profile, dtype=np.int64),
                                        H, E, F, first, extend)
    return H, E, F, int(best), int(best_i), int(best_j)


def local_alignment(read: list[int], pattern: list[frozenset[int]], scoring: Scoring):
    """(score, read start, read end, pattern start, pattern end, ops) of the
    alignment the tie rule picks, or None for score 0. Full matrices; H =
    max(0, diagonal, E, F); the end cell is the first maximum in (i, j)
    order; back from it, H prefers the diagonal, then E (I), then F (D); a
    gap state prefers the H cell it was opened from; the walk stops at H = 0."""
    first = scoring.gap_open + scoring.gap_extend
    H, E, F, best, best_i, best_j = _matrices(read, pattern, scoring)
    if best == 0:
        return None
    i, j, state, ops = best_i, best_j, "H", []
    while True:
        if state == "H":
            h = H[i][j]
            if h == 0:
                break
            s = scoring.substitution(read[i - 1], pattern[j - 1])
            if H[i - 1][j - 1] + s == h:
                ops.append("=" if s > 0 else "X")
                i, j = i - 1, j - 1
            elif E[i][j] == h:
                state = "E"
            else:
                assert F[i][j] == h
                state = "F"
        elif state == "E":
            opened = H[i - 1][j] - first == E[i][j]
            ops.append("I")
            i -= 1
            state = "H" if opened else "E"
        else:
            opened = H[i][j - 1] - first == F[i][j]
            ops.append("D")
            j -= 1
            state = "H" if opened else "F"
    return best, i, best_i, j, best_j, "".join(reversed(ops))


def instance(read: list[int], pattern: list[frozenset[int]], index: int, strand: str, scoring: Scoring) -> Hit | None:
    """The alignment of a read against pattern ``index`` on ``strand``
    (aligned against the reverse complement on '-', then mapped to the
    forward pattern: coordinates mirrored, columns reversed)."""
    oriented = pattern if strand == "+" else reverse_complement_sets(pattern)
    found = local_alignment(read, oriented, scoring)
    if found is None:
        return None
    score, rs, re_, ps, pe, ops = found
    if strand == "-":
        m = len(pattern)
        ps, pe, ops = m - pe, m - ps, ops[::-1]
    return Hit(index, strand, score, rs, re_, ps, pe, ops)


def parasail_score(read: list[int], pattern: list[frozenset[int]], scoring: Scoring) -> int:
    """parasail's SW score: read codes as digits, pattern sets as letters, a
    symmetric matrix over the two disjoint alphabets."""
    if not read or not pattern:
        return 0
    return _parasail_sw(_read_text(read), _pattern_text(pattern), scoring)


def _read_text(read: list[int]) -> str:
    """A read's codes as parasail's query: one digit each."""
    return "".join(str(c) for c in read)


def _pattern_text(pattern: list[frozenset[int]]) -> str:
    """A pattern's sets as parasail's target: one letter each, 'A' + the set's bit mask."""
    return "".join(chr(ord("A") + sum(1 << b for b in s)) for s in pattern)


def _parasail_sw(text: str, target: str, scoring: Scoring) -> int:
    """parasail's SW score of the texts of :func:`_read_text` and :func:`_pattern_text` (both not empty)."""
    import parasail

    alphabet = "".join(chr(ord("A") + mask) for mask in range(1, 16)) + "01234"
    key = (scoring, "matrix")
    matrix = _PARASAIL_MATRICES.get(key)
    if matrix is None:
        matrix = parasail.matrix_create(alphabet, scoring.match, -scoring.mismatch)
        for mask in range(1, 16):
            for code in range(5):
                value = scoring.match if code < 4 and (mask >> code) & 1 else -scoring.mismatch
                row, col = alphabet.index(chr(ord("A") + mask)), alphabet.index(str(code))
                matrix[row, col] = matrix[col, row] = value
        _PARASAIL_MATRICES[key] = matrix
    result = parasail.sw_striped_32(target, text, scoring.gap_open + scoring.gap_extend, scoring.gap_extend, matrix)
    return int(result.score)


_PARASAIL_MATRICES: dict = {}


# --- partial adapters at a read's end ------------------------------------------------

def end_overlap_scores(read: list[int], pattern: list[frozenset[int]], scoring: Scoring) -> tuple[list, list]:
    """The end-overlap DP of docs/trimming.md for a 3' adapter (``pattern``
    already without its last base): (H[n][L], the read row its alignment
    starts at) for L = 0..len(pattern). H[i][0] = 0, no zero floor, the
    diagonal first, then E, then F; a gap state takes opening over
    extending."""
    n, m = len(read), len(pattern)
    first, extend = scoring.gap_open + scoring.gap_extend, scoring.gap_extend
    H_up, E_up, SH_up, SE_up = [0] + [NEG] * m, [NEG] * (m + 1), [0] * (m + 1), [0] * (m + 1)
    for i in range(n + 1):
        H, E, F = [0] + [NEG] * m, [NEG] * (m + 1), NEG
        SH, SE, SF = [i] + [0] * m, [0] * (m + 1), 0
        for j in range(1, m + 1):
            if i > 0:
                opened, extended = H_up[j] - first, E_up[j] - extend
                E[j], SE[j] = (opened, SH_up[j]) if opened >= extended else (extended, SE_up[j])
            opened, extended = H[j - 1] - first, F - extend
            F, SF = (opened, SH[j - 1]) if opened >= extended else (extended, SF)
            gap, gap_start = (E[j], SE[j]) if E[j] >= F else (F, SF)
            if i > 0:
                diagonal = H_up[j - 1] + scoring.substitution(read[i - 1], pattern[j - 1])
                if diagonal >= gap:
                    H[j], SH[j] = diagonal, SH_up[j - 1]
                    continue
            H[j], SH[j] = gap, gap_start
        H_up, E_up, SH_up, SE_up = H, E, SH, SE
    return H_up, SH_up


def end_overlap(read: list[int], pattern: list[frozenset[int]], five: bool, needed: list[int], min_overlap: int,
                scoring: Scoring) -> int | None:
    """Where a partial adapter at the read's end (3': its first bases at the
    read's last; ``five``: a 5' adapter's last bases at the read's first) is
    cut, or None: of the overlaps of min_overlap..m-1 bases scoring at least
    ``needed[L]``, the highest score, then the longest cut, then the
    shortest overlap. A 3' cut is where the kept part ends, a 5' cut where it
    starts."""
    if five:
        read, pattern = read[::-1], pattern[::-1]
    scores, starts = end_overlap_scores(read, pattern[:-1], scoring)
    best = None
    for length in range(min_overlap, len(pattern)):
        value, start = scores[length], starts[length]
        if value >= needed[length] and (best is None or (-value, start) < best):
            best = (-value, start)
    if best is None:
        return None
    return len(read) - best[1] if five else best[1]


# --- what a run is asked --------------------------------------------------------------

@dataclass(frozen=True)
class Options:
    """The options of a run that decide its output (see :meth:`args`)."""

    threshold: int = 40
    min_score_fraction: str | None = None  #: the decimal as written
    scoring: Scoring = Scoring()
    strands: tuple[str, ...] = ("+", "-")
    eqx: bool = False
    pair_filter: str = "any"
    action: str = "none"
    adapter_kind: str = "3prime"
    min_overlap: int = 3
    trim_strand: str = "forward"
    min_length: int | None = None
    ends: int | None = None  #: --ends N: only each read's first and last N bases are screened

    def args(self) -> list[str]:
        s = self.scoring
        args = ["--min-score-fraction", self.min_score_fraction] if self.min_score_fraction else [
            "-t", str(self.threshold)]
        args += ["--match", str(s.match), "--mismatch", str(s.mismatch), "--gap-open", str(s.gap_open),
                 "--gap-extend", str(s.gap_extend), "--strand", "both" if "-" in self.strands else "forward",
                 "--pair-filter", self.pair_filter]
        if self.eqx:
            args.append("--eqx")
        if self.action != "none":
            args += ["--action", self.action, "--adapter-kind", self.adapter_kind, "--min-overlap",
                     str(self.min_overlap), "--trim-strand", self.trim_strand]
            if self.min_length is not None:
                args += ["--min-length", str(self.min_length)]
        if self.ends is not None:
            args += ["--ends", str(self.ends)]
        return args

    def with_(self, **changes) -> Options:
        return replace(self, **changes)


@dataclass(frozen=True)
class Record:
    """A reads file's record: the header line's text (after '@' or '>'),
    the sequence, the qualities (None in FASTA)."""

    header: str
    sequence: str
    qualities: str | None = None

    @property
    def id(self) -> str:
        """A read's name: its header up to the first space, tab or NUL, as
        dnaio's ``id`` (which ends at a NUL too, as C strings do)."""
        return re.split("[ \t\0]", self.header, maxsplit=1)[0]

    def text(self) -> str:
        """The record as the command writes it: FASTQ with a bare '+' line, FASTA on one line."""
        if self.qualities is None:
            return f">{self.header}\n{self.sequence}\n"
        return f"@{self.header}\n{self.sequence}\n+\n{self.qualities}\n"


def load(path_or_bytes) -> list[Record]:
    """The records of a reads or patterns file (any compression, by content), through dnaio."""
    import dnaio
    from xopen import xopen

    if isinstance(path_or_bytes, (bytes, bytearray)):
        data = bytes(path_or_bytes)
        if data[:2] in (b"\x1f\x8b", b"BZ") or data[:6] == b"\xfd7zXZ\x00" or data[:4] == b"\x28\xb5\x2f\xfd":
            # zstd in this process, as bpbc reads it: the zstd program (1.5.4 here)
            # decoded a damaged frame without a checksum to other bytes than the
            # library bpbc uses (1.5.7; fuzz seed 281, case 22699). The others through
            # their programs, which bpbc holds itself to (xz -d takes stream padding,
            # Python's lzma does not)
            zstd = data[:4] == b"\x28\xb5\x2f\xfd"
            with xopen(io.BytesIO(data), "rb", **({"threads": 0} if zstd else {})) as handle:
                data = handle.read()
    else:
        with xopen(path_or_bytes, "rb", threads=0) as handle:
            data = handle.read()
    if not data:
        return []
    fmt = "fastq" if data.lstrip()[:1] == b"@" else "fasta"
    with dnaio.open(io.BytesIO(data), fileformat=fmt) as reader:
        return [Record(r.name, r.sequence, r.qualities if fmt == "fastq" else None) for r in reader]


def pattern_name(record: Record, index: int) -> str:
    """A pattern's name: the first word of its header (split at any
    whitespace), or pattern1, pattern2, ... where it has none."""
    words = record.header.split(maxsplit=1)
    return words[0] if words else f"pattern{index + 1}"


def header_value(header: str, key: str) -> str | None:
    for word in header.split()[1:]:
        if word.startswith(key):
            return word[len(key):]
    return None


def thresholds(patterns: list[Record], options: Options) -> list[int]:
    """Per pattern: ``threshold=N`` in its header, else ceil(F x match x
    length) on the decimal F as written, else -t."""
    result = []
    for p in patterns:
        value = header_value(p.header, "threshold=")
        if value is not None:
            result.append(int(value))
        elif options.min_score_fraction is not None:
            result.append(math.ceil(Fraction(options.min_score_fraction) * options.scoring.match * len(p.sequence)))
        else:
            result.append(options.threshold)
    return result


def fractions(patterns: list[Record], limits: list[int], options: Options) -> list[Fraction]:
    """Each pattern's F for its partial adapters: --min-score-fraction where
    that set its threshold, else its threshold over its best score."""
    return [Fraction(options.min_score_fraction)
            if options.min_score_fraction is not None and header_value(p.header, "threshold=") is None
            else Fraction(limit, options.scoring.match * len(p.sequence)) for p, limit in zip(patterns, limits)]


# --- what a run writes ----------------------------------------------------------------

@dataclass
class Edit:
    """What trimming or masking does to one read."""

    record: Record  #: the read as written where it is edited
    edited: bool
    pattern: int  #: the pattern that decided the edit, -1: none
    #: per pattern: (reads, bases) it trimmed or masked
    credit: dict[int, tuple[int, int]] = field(default_factory=dict)
    bases: int = 0


def pair_name(record: Record) -> str:
    """A mate's pair name: its name without a trailing /1 or /2."""
    name = record.id
    return name[:-2] if name.endswith(("/1", "/2")) else name


def _spans(codes: list[int], hits: list[Hit], sets: list[list[frozenset[int]]], kinds: list[str],
           needed: list[list[int]], options: Options) -> list[tuple[int, int, int, bool]]:
    """Every adapter of a read: (pattern, start, end, is 5'). The hits on the
    trimmed strands, extended by the pattern bases the alignment left out;
    then the partial adapters at either end."""
    n = len(codes)
    trimmed = ("+",) if options.trim_strand == "forward" else ("+", "-")
    spans = []
    for hit in hits:
        if hit.strand not in trimmed:
            continue
        m = len(sets[hit.pattern])
        # on '-' the read holds the reverse complement: the pattern's end lies to the read's left
        left, right = (hit.pattern_start, m - hit.pattern_end) if hit.strand == "+" else (
            m - hit.pattern_end, hit.pattern_start)
        start, end = max(0, hit.read_start - left), min(n, hit.read_end + right)
        kind = kinds[hit.pattern]
        spans.append((hit.pattern, start, end, kind == "5prime" or (kind == "anywhere" and start == 0)))
    for p, kind in enumerate(kinds):
        for strand in trimmed:
            oriented = sets[p] if strand == "+" else reverse_complement_sets(sets[p])
            for five in {"3prime": (False,), "5prime": (True,), "anywhere": (False, True)}[kind]:
                cut = end_overlap(codes, oriented, five, needed[p], options.min_overlap, options.scoring)
                if cut is not None:
                    spans.append((p, 0, cut, True) if five else (p, cut, n, False))
    return spans


def _trim(record: Record, spans) -> Edit:
    """Keep what lies after every 5' adapter and before every 3' one; each
    side's bases to the pattern whose cut decided it (the first listed of
    equal cuts)."""
    n = len(record.sequence)
    keep_start, keep_end, by_five, by_three = 0, n, -1, -1
    for p, start, end, five in spans:
        if five:
            if end > keep_start or (end == keep_start and (by_five < 0 or p < by_five)):
                keep_start, by_five = end, p
        elif start < keep_end or (start == keep_end and (by_three < 0 or p < by_three)):
            keep_end, by_three = start, p
    keep_end = max(keep_start, keep_end)
    before, after = keep_start, n - keep_end
    credit: dict[int, tuple[int, int]] = {}
    if before:
        credit[by_five] = (1, before)
    if after:
        credit[by_three] = (1, credit.get(by_three, (0, 0))[1] + after)
    quality = None if record.qualities is None else record.qualities[keep_start:keep_end]
    decided = by_five if before else by_three if after else -1
    return Edit(Record(record.header, record.sequence[keep_start:keep_end], quality), bool(before or after), decided,
                credit, before + after)


def _mask(record: Record, spans) -> Edit:
    """Every adapter's bases set to N; each pattern credited with the union
    of its spans, the read with the union of all."""
    letters = list(record.sequence)
    covered: dict[int, set[int]] = {}
    for p, start, end, _ in spans:
        covered.setdefault(p, set()).update(range(start, end))
    every = set().union(*covered.values()) if covered else set()
    for i in every:
        letters[i] = "N"
    credit = {p: (1, len(bases)) for p, bases in covered.items()}
    return Edit(Record(record.header, "".join(letters), record.qualities), bool(spans),
                min(covered) if covered else -1, credit, len(every))


@dataclass
class Expected:
    """A run's outputs and its ``--json`` counts. Reads files hold units: a
    tuple of one record, or of the two mates of a pair."""

    paf: str
    #: 'matched', 'unmatched', 'trimmed' -> units, in input order
    units: dict[str, list[tuple[Record, ...]]]
    #: demultiplexing: pattern name -> its units, for the patterns that have some
    demux: dict[str, list[tuple[Record, ...]]]
    summary: dict

    def text(self, kind: str, mate: int | None = None, name: str | None = None) -> str:
        """A reads file's text: ``kind`` ('matched', ...; for a pattern's own
        file ``name``), mate 1 or 2 of each unit, or (None) every record of
        each unit in turn (single reads; interleaved pairs)."""
        units = self.units[kind] if name is None else self.demux[name]
        return "".join(r.text() for unit in units for r in (unit if mate is None else unit[mate - 1:mate]))


def expected(reads: list[Record], patterns: list[Record], options: Options, reads2: list[Record] | None = None,
             interleaved: bool = False) -> Expected:
    """The outputs of ``bpbc-screen READS PATTERNS`` with ``options``: single
    reads, or pairs (``reads2``: the second mates; ``interleaved``: the pairs
    are ``reads`` taken two at a time)."""
    scoring = options.scoring
    if options.ends is not None and options.action != "none":
        raise NotImplementedError("the oracle has no --ends with --action")
    limits = thresholds(patterns, options)
    sets = [pattern_sets(p.sequence) for p in patterns]
    names = [pattern_name(p, k) for k, p in enumerate(patterns)]
    if interleaved:
        reads, reads2 = reads[0::2], reads[1::2]
    mates = 1 if reads2 is None else 2
    units = [(r,) for r in reads] if reads2 is None else list(zip(reads, reads2))
    kinds = [header_value(p.header, "adapter=") or options.adapter_kind for p in patterns]
    needed = [[math.ceil(f * scoring.match * length) for length in range(len(p.sequence))]
              for f, p in zip(fractions(patterns, limits, options), patterns)]
    judge = all if options.pair_filter == "both" else any
    # parasail's target of each pattern on each strand, once a run (parasail_score's, as it would make it)
    targets = {(p, strand): _pattern_text(pattern if strand == "+" else reverse_complement_sets(pattern))
               for p, pattern in enumerate(sets) for strand in options.strands}

    paf = []
    counts = {(p, s, mate): 0 for p in range(len(patterns)) for s in options.strands for mate in range(mates)}
    reads_passing = screen_units_passing = 0
    out: dict[str, list[tuple[Record, ...]]] = {"matched": [], "unmatched": [], "trimmed": []}
    files: dict[str, list[tuple[Record, ...]]] = {}
    edited_reads = edited_bases = too_short = 0
    credit = [[0, 0] for _ in patterns]
    for unit in units:
        unit_hits, edits, screened, passing = [], [], [], []
        for mate, record in enumerate(unit):
            codes = read_codes(record.sequence)
            hits = []
            # --ends N: a read of more than 2N bases is screened as its first and its last N bases, each as a
            # read of its own; its hit is the better of theirs (the first where they tie), in the read's coordinates
            parts = [(codes, 0)] if options.ends is None or len(codes) <= 2 * options.ends else [
                (codes[:options.ends], 0), (codes[-options.ends:], len(codes) - options.ends)]
            texts = [_read_text(part) for part, _ in parts]  # parasail's query, once a read
            for p, pattern in enumerate(sets):
                for strand in options.strands:
                    target = targets[p, strand]
                    best_hit = None
                    for (part, shift), text in zip(parts, texts):
                        score = _parasail_sw(text, target, scoring) if text and target else 0
                        if score < limits[p] or (best_hit is not None and score <= best_hit.score):
                            continue
                        hit = instance(part, pattern, p, strand, scoring)
                        assert hit is not None and hit.score == score, (record, p, strand, hit, score)
                        best_hit = replace(hit, read_start=hit.read_start + shift, read_end=hit.read_end + shift)
                    if best_hit is not None:
                        hits.append(best_hit)
                        counts[p, strand, mate] += 1
            query = record.id if mates == 1 else f"{pair_name(record)}/{mate + 1}"
            for hit in hits:
                ops = hit.ops
                paf.append("\t".join(map(str, (
                    query, len(codes), hit.read_start, hit.read_end, hit.strand, names[hit.pattern],
                    len(sets[hit.pattern]), hit.pattern_start, hit.pattern_end, ops.count("="), len(ops), 255,
                    "tp:A:P", f"AS:i:{hit.score}", f"NM:i:{len(ops) - ops.count('=')}",
                    f"cg:Z:{hit.cigar(options.eqx)}"))) + "\n")
            reads_passing += bool(hits)
            unit_hits += hits
            screened.append(bool(hits))
            edit = None
            if options.action != "none":
                spans = _spans(codes, hits, sets, kinds, needed, options)
                edit = (_trim if options.action == "trim" else _mask)(record, spans)
                edited_reads += edit.edited
                edited_bases += edit.bases
                for p, (r, b) in edit.credit.items():
                    credit[p][0] += r
                    credit[p][1] += b
            edits.append(edit)
            passing.append(bool(hits) or (edit is not None and edit.edited))
        screen_units_passing += judge(screened)
        written = tuple(r if e is None else e.record for e, r in zip(edits, unit))
        if options.action != "none" and options.min_length and any(
                len(r.sequence) < options.min_length for r in written):
            too_short += 1
            continue
        passes = judge(passing)
        if options.action != "none":
            out["trimmed"].append(written)
        out["matched" if passes else "unmatched"].append(written if passes else unit)
        if passes:
            best = None
            for hit in unit_hits:
                if best is None or (-hit.score, hit.pattern) < best:
                    best = (-hit.score, hit.pattern)
            # a unit passing with a partial adapter only: that adapter's pattern (of two mates, the later listed)
            pattern = best[1] if best is not None else max(e.pattern for e in edits if e is not None)
            files.setdefault(names[pattern], []).append(written)

    summary = {
        "threshold": limits[0] if len(set(limits)) == 1 else None,
        "scoring": {"match": scoring.match, "mismatch": scoring.mismatch, "gap_open": scoring.gap_open,
                    "gap_extend": scoring.gap_extend},
        "strands": list(options.strands),
        "min_score_fraction": None if options.min_score_fraction is None else float(options.min_score_fraction),
        "paired": mates == 2,
        "reads": len(units) * mates,
        "reads_passing": reads_passing,
        "reads_not_passing": len(units) * mates - reads_passing,
        "alignments": len(paf),
        "patterns": [],
    }
    if mates == 2:
        summary.update(pair_filter=options.pair_filter, pairs=len(units), pairs_passing=screen_units_passing,
                       pairs_not_passing=len(units) - screen_units_passing)
    for p, record in enumerate(patterns):
        entry = {"name": names[p], "length": len(record.sequence), "threshold": limits[p],
                 "reads_passing": {s: sum(counts[p, s, m] for m in range(mates)) for s in options.strands}}
        if mates == 2:
            entry["mates"] = {str(m + 1): {s: counts[p, s, m] for s in options.strands} for m in range(mates)}
        if options.action != "none":
            entry["trimmed_reads"], entry["trimmed_bases"] = credit[p]
        summary["patterns"].append(entry)
    if options.action != "none":
        summary.update(action=options.action, reads_trimmed=edited_reads, bases_trimmed=edited_bases,
                       too_short=too_short)
    return Expected("".join(paf), out, files, summary)


#: the --json keys that depend on the inputs' content, not on the machine or the files' names
SUMMARY_KEYS = ("threshold", "scoring", "strands", "min_score_fraction", "paired", "reads", "reads_passing",
                "reads_not_passing", "alignments", "patterns", "pair_filter", "pairs", "pairs_passing",
                "pairs_not_passing", "action", "reads_trimmed", "bases_trimmed", "too_short")


def summary_of(path) -> dict:
    """A ``--json`` file's keys of :data:`SUMMARY_KEYS`."""
    figures = json.loads(Path(path).read_text())
    return {key: figures[key] for key in SUMMARY_KEYS if key in figures}
