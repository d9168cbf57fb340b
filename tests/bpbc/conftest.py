"""Shared test helpers for bpbc: hypothesis strategies, random sequence
generators, and parasail as a second oracle.

Import them in a test module with ``from tests.bpbc.conftest import ...``
(pytest's importlib mode registers this conftest under that name).

The parasail helpers carry their own IUPAC table on purpose, so that they do
not share code with :mod:`bpbc.alphabet` and can catch its mistakes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
from hypothesis import strategies as st

from bpbc.alphabet import COMPLEMENT_MASK
from bpbc.scoring import Scoring

#: scorings every comparison runs under: the default (2, 3, 5, 2) plus unusual ratios
SCORINGS = [
    Scoring(),
    Scoring(1, 1, 1, 1),
    Scoring(3, 2, 4, 1),
    Scoring(5, 4, 8, 3),
    Scoring(4, 1, 2, 3),
]


def scoring_id(scoring: Scoring) -> str:
    """Short pytest id: match-mismatch-open-extend."""
    return f"{scoring.match}-{scoring.mismatch}-{scoring.gap_open}-{scoring.gap_extend}"

#: lengths around word and block boundaries
EDGE_LENGTHS = [0, 1, 2, 31, 32, 33, 63, 64, 65]

BASES = "ACGT"
IUPAC_CODES = "RYSWKMBDHVN"
#: independent of bpbc.alphabet: letter -> set of bases it stands for
IUPAC_BASES = {
    "A": "A", "C": "C", "G": "G", "T": "T", "U": "T",
    "R": "AG", "Y": "CT", "S": "CG", "W": "AT", "K": "GT", "M": "AC",
    "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG", "N": "ACGT",
}


# --- hypothesis strategies -------------------------------------------------

def read_texts(min_size: int = 0, max_size: int = 80):
    """Read text: mostly ACGT, with N, U, other IUPAC letters (which a read
    treats as N) and lowercase."""
    letter = st.one_of(
        st.sampled_from(BASES),
        st.sampled_from(BASES.lower()),
        st.sampled_from("NnUu" + IUPAC_CODES),
    )
    return st.lists(letter, min_size=min_size, max_size=max_size).map("".join)


def pattern_texts(min_size: int = 1, max_size: int = 60):
    """Pattern text: mostly ACGT, with IUPAC codes, U and lowercase."""
    letter = st.one_of(
        st.sampled_from(BASES),
        st.sampled_from(BASES.lower()),
        st.sampled_from("U" + IUPAC_CODES + IUPAC_CODES.lower()),
    )
    return st.lists(letter, min_size=min_size, max_size=max_size).map("".join)


def scorings():
    """Any valid Scoring, small values."""
    positive = st.integers(min_value=1, max_value=8)
    return st.builds(Scoring, match=positive, mismatch=positive, gap_open=positive, gap_extend=positive)


# --- seeded random generators (numpy Generator) ----------------------------

def random_read(rng: np.random.Generator, length: int, n_rate: float = 0.0, lower_rate: float = 0.0) -> str:
    """Random read text with N at ``n_rate`` and lowercase at ``lower_rate``."""
    letters = rng.choice(list(BASES), size=length)
    letters[rng.random(length) < n_rate] = "N"
    lower = rng.random(length) < lower_rate
    letters[lower] = np.char.lower(letters[lower])
    return "".join(letters)


def random_pattern(rng: np.random.Generator, length: int, iupac_rate: float = 0.0, lower_rate: float = 0.0) -> str:
    """Random pattern text with IUPAC codes at ``iupac_rate``."""
    letters = rng.choice(list(BASES), size=length)
    iupac = rng.random(length) < iupac_rate
    letters[iupac] = rng.choice(list(IUPAC_CODES), size=int(iupac.sum()))
    lower = rng.random(length) < lower_rate
    letters[lower] = np.char.lower(letters[lower])
    return "".join(letters)


def mutate(rng: np.random.Generator, seq: str, rate: float) -> str:
    """Copy of ``seq`` with substitutions, insertions and deletions of
    1..4 bases, each at about ``rate / 3`` per base."""
    out = []
    i = 0
    while i < len(seq):
        r = rng.random()
        if r < rate / 3:
            out.append(str(rng.choice(list(BASES))))
            i += 1
        elif r < 2 * rate / 3:
            out.extend(rng.choice(list(BASES), size=int(rng.integers(1, 5))))
        elif r < rate:
            i += int(rng.integers(1, 5))
        else:
            out.append(seq[i])
            i += 1
    return "".join(out)


def related_pair(rng: np.random.Generator, read_length: int, pattern_length: int, rate: float = 0.1,
                 iupac_rate: float = 0.0, n_rate: float = 0.0) -> tuple[str, str]:
    """A pattern and a read that holds a mutated copy of (part of) it, so
    the optimal alignment has matches, mismatches and gaps."""
    pattern = random_pattern(rng, pattern_length, iupac_rate)
    # resolve IUPAC codes to one of their bases before planting into the read
    concrete = "".join(str(rng.choice(list(IUPAC_BASES[c.upper()]))) for c in pattern)
    start = int(rng.integers(0, max(1, pattern_length // 4)))
    stop = pattern_length - int(rng.integers(0, max(1, pattern_length // 4)))
    insert = mutate(rng, concrete[start:stop], rate)
    if rng.random() < 0.5:
        insert = "".join({"A": "T", "C": "G", "G": "C", "T": "A"}[b] for b in reversed(insert))
    flank = max(0, read_length - len(insert))
    left = int(rng.integers(0, flank + 1))
    read = random_read(rng, left, n_rate) + insert + random_read(rng, flank - left, n_rate)
    return read, pattern


# --- parasail as a second oracle -------------------------------------------

# read letters become digits 0..4 (4 = never matches); pattern IUPAC sets
# become letters 'A' + mask (B..P). Disjoint alphabets make the substitution
# matrix symmetric, so parasail's row/column convention (which differs between
# its scalar and striped functions for asymmetric matrices) cannot matter.
_PARASAIL_ALPHABET = "".join(chr(ord("A") + mask) for mask in range(1, 16)) + "01234"
_matrices: dict = {}


def _parasail_matrix(scoring: Scoring):
    import parasail

    matrix = _matrices.get(scoring)
    if matrix is None:
        matrix = parasail.matrix_create(_PARASAIL_ALPHABET, scoring.match, -scoring.mismatch)
        for mask in range(1, 16):
            for code in range(5):
                value = scoring.match if code < 4 and (mask >> code) & 1 else -scoring.mismatch
                row = _PARASAIL_ALPHABET.index(chr(ord("A") + mask))
                col = _PARASAIL_ALPHABET.index(str(code))
                matrix[row, col] = value
                matrix[col, row] = value
        _matrices[scoring] = matrix
    return matrix


def parasail_read_text(read: str) -> str:
    """Read text in the parasail alphabet (own table, not bpbc.alphabet)."""
    return "".join(str(BASES.index(IUPAC_BASES[c.upper()])) if len(IUPAC_BASES[c.upper()]) == 1 else "4"
                   for c in read)


def parasail_pattern_text(pattern: str) -> str:
    """Pattern text in the parasail alphabet (own table, not bpbc.alphabet)."""
    return "".join(chr(ord("A") + sum(1 << BASES.index(b) for b in IUPAC_BASES[c.upper()])) for c in pattern)


def parasail_sw_mapped(read: str, pattern: str, scoring: Scoring) -> int:
    """parasail's SW score of texts already in the parasail alphabet."""
    import parasail

    if not read or not pattern:
        return 0  # parasail rejects empty sequences
    result = parasail.sw_striped_16(pattern, read, scoring.gap_open + scoring.gap_extend,
                                    scoring.gap_extend, _parasail_matrix(scoring))
    assert not result.saturated
    return int(result.score)


def parasail_sw(read: str, pattern: str, scoring: Scoring) -> int:
    """parasail's SW score of read text vs IUPAC pattern text (bpbc rule:
    read N and other read IUPAC letters never match; a pattern IUPAC letter
    matches each base of its set)."""
    return parasail_sw_mapped(parasail_read_text(read), parasail_pattern_text(pattern), scoring)


def parasail_sw_codes(read_codes, pattern_masks, scoring: Scoring) -> int:
    """parasail's SW score of encoded arrays (read codes 0..4, masks 1..15)."""
    read = "".join(str(int(c)) for c in read_codes)
    pattern = "".join(chr(ord("A") + int(p)) for p in pattern_masks)
    return parasail_sw_mapped(read, pattern, scoring)


# --- compressed test inputs ----------------------------------------------

def zstd_compress(data: bytes) -> bytes | None:
    """zstd bytes via xopen (the same route reading takes), or None where
    xopen has no zstd support (it needs the zstd program, backports.zstd,
    Python 3.14, or zstandard, depending on its version)."""
    import io

    from xopen import xopen

    buffer = io.BytesIO()
    try:
        with xopen(buffer, "wb", format="zst") as f:
            f.write(data)
    except (ImportError, ValueError, OSError, RuntimeError):
        return None
    return buffer.getvalue()


def raw_fastq_chunk(reads: list[str]):
    """The reads as the fast reader hands them on: a RawFastqChunk over
    plain FASTQ bytes (names r0, r1, ...), scanned by :func:`bpbc.chunks.scan_fastq`."""
    from bpbc.chunks import RawFastqChunk, scan_fastq

    data = b"".join(b"@r%d x\n%s\n+\n%s\n" % (i, read.encode(), b"I" * len(read)) for i, read in enumerate(reads))
    buf = np.frombuffer(data, np.uint8)
    n = len(reads)
    rec_start, seq_start, seq_len = (np.zeros(n, np.int64) for _ in range(3))
    count, stop, irregular = scan_fastq(buf, 0, len(buf), n, rec_start, seq_start, seq_len)
    assert (count, stop, irregular) == (n, len(buf), False)
    rec_end = np.append(rec_start[1:], stop)
    return RawFastqChunk(data, rec_start, rec_end, seq_start, seq_len)


# --- file modes, as root too ------------------------------------------------

#: CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: how root reads and writes any file whatever its mode
_FILE_ACCESS_CAPABILITIES = (1, 2)
_PR_CAPBSET_DROP = 24


def _drop_root_file_access() -> None:
    """preexec_fn of a subprocess: where this process is root (CI runs as
    root), drop the capabilities by which root passes file modes from the
    bounding set, so that the program it runs (root still, but without
    them after exec) meets file modes as any user does."""
    import ctypes

    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in _FILE_ACCESS_CAPABILITIES:
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def run_without_root_file_access(args: list, cwd) -> subprocess.CompletedProcess:
    """``python ARGS`` in a fresh process (bpbc from this checkout) that
    file modes bind, root or not (see :func:`_drop_root_file_access`)."""
    from pathlib import Path

    import bpbc

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(bpbc.__file__).resolve().parents[1]),
                                                      env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, preexec_fn=_drop_root_file_access)


def planted_fastq(rng, count: int, patterns: list[str], prefix: str) -> str:
    """FASTQ text of ``count`` random reads of 100-150 bases, every fifth with one of ``patterns`` planted."""
    lines = []
    for k in range(count):
        read = random_read(rng, int(rng.integers(100, 151)))
        if k % 5 == 0:
            planted = patterns[k // 5 % len(patterns)]
            at = int(rng.integers(0, len(read) - len(planted)))
            read = read[:at] + planted + read[at + len(planted):]
        lines.append(f"@{prefix}{k} some comment\n{read}\n+\n{'I' * len(read)}\n")
    return "".join(lines)


def write_three_reads_files(work, seed: int, first: int) -> None:
    """In ``work``: patterns ``p.fa`` (one with its own threshold) and three reads files with
    them planted: ``one.fq.gz`` (``first`` reads), ``two.fastq`` (700) and ``three.fa`` (500;
    FASTA goes through dnaio records, not raw bytes)."""
    import gzip

    rng = np.random.default_rng(seed)
    patterns = [random_read(rng, 30), random_read(rng, 24), random_read(rng, 28)]
    (work / "p.fa").write_text(f">a\n{patterns[0]}\n>b threshold=30\n{patterns[1]}\n>c\n{patterns[2]}\n")
    with gzip.open(work / "one.fq.gz", "wt", compresslevel=1) as fh:
        fh.write(planted_fastq(rng, first, patterns, "x"))
    (work / "two.fastq").write_text(planted_fastq(rng, 700, patterns, "y"))
    fasta = planted_fastq(rng, 500, patterns, "z").splitlines()
    (work / "three.fa").write_text("".join(f">{fasta[i][1:]}\n{fasta[i + 1]}\n" for i in range(0, len(fasta), 4)))


def reverse_complement_masks(masks) -> np.ndarray:
    """One encoded IUPAC pattern's reverse complement, pattern by pattern (the
    package builds a whole panel's in one lookup: bpbc.patterns.PatternTable.build)."""
    return COMPLEMENT_MASK[np.asarray(masks, dtype=np.uint8)[::-1]]
