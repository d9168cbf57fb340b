"""Fuzzing of every input path of ``bpbc-screen``.

    python -m bench fuzz --inputs N [--workers K] [--seed S] [--out DIR] [--timeout S]
    python -m bench.fuzz --inputs N ...                      (the same)
    python -m bench fuzz --replay INDEX [--seed S]           (run one input again, print what happened)
    python -m bench fuzz --inputs N --start I --time-limit S  (cases I to I + N - 1; stop after S seconds)
    python -m bench fuzz --merge DIR1 DIR2 --out DIR          (add up runs of disjoint case ranges)

Each input is a *case*: a reads file and a pattern file built from a valid
seed (plain four-line FASTQ, FASTQ repeating the name on the '+' line, FASTA
with or without wrapped lines, Windows line ends, a large regular FASTQ, an
empty file) and then mutated: bytes flipped, inserted, deleted or duplicated,
the file truncated, NUL bytes, Windows line ends mixed in, enormous lines;
then compressed (gzip, bzip2, xz, zstd) or not, the compressed stream possibly
corrupted in turn (flipped, truncated, cut, with garbage or a second member
appended), under a file name whose suffix may or may not say the compression.
Options vary the chunk size (small ones put chunk boundaries everywhere), the
strand, the compression of every output, reading from stdin, and the size of
the blocks the raw FASTQ route reads (``bpbc.io.READ_BLOCK``), so that records
straddle block boundaries and the switch from the raw route
(:func:`bpbc.chunks.scan_fastq`) to dnaio happens mid-file.

Every case runs through :func:`bpbc.cli.main` in this process with
``--device cpu --threads 1 -q`` and all four outputs (``-o``, ``--matched``,
``--unmatched``, ``--json``) in a scratch directory, and must end

* in success: exit status 0, nothing on stderr, the four outputs present and
  consistent (JSON ``reads`` = matched + unmatched records, ``reads_passing``
  = matched records, ``alignments`` = PAF lines), no temporary file left,
  and, where the reads are small (ORACLE_RECORDS, ORACLE_LONGEST), the PAF,
  the matched and unmatched records and the ``--json`` counts those of the
  independent oracle of tests/oracle.py, from the reads and patterns as
  dnaio reads them ('wrong-answer' otherwise; also where bpbc read an input
  that dnaio and xopen reject); or
* in an expected error: exit status 1, exactly one line on stderr starting
  ``bpbc-screen: error: ``, and no file at all in the output directory;
  never for a valid case (valid seeds, not mutated, not corrupted, a name
  that does not say another compression, a reachable threshold:
  'valid-rejected');

never in a traceback (an exception escaping ``main`` or printed), another
exit status (3 is an internal error), a hang (``--timeout`` seconds, by a
SIGALRM watchdog in the worker and a harder one in the parent), a thread or
file descriptor left behind, a worker above ``--max-rss-gb``; and every
``--twice``-th case runs twice and must end the same way both times.
``--harness direct`` calls the command's function with the same values
instead of the whole command line: typer's option parsing (the same options
every case) and ``main``'s mapping of exceptions to exit statuses are left
out (an exception escaping is a 'traceback' finding either way); some 2.5 ms
a case, 15-20% of the rate, and the outcomes are the same. The same check drives the hypothesis tests in
``tests/bpbc/test_fuzz_inputs.py``: :func:`make_case` takes its decisions
from a *chooser*, a ``random.Random`` here (:class:`RandomChooser`) and
hypothesis's ``draw`` there (so that failures shrink).

The driver runs ``--workers`` processes, counts outcomes and error messages
(by kind: paths, numbers and quoted text blanked out) and writes
``DIR/fuzz_cpu.json`` (counts, rate, machine) and ``DIR/fuzz_cpu_messages.csv``,
every ``--report-every`` seconds and at the end; every finding is saved under
``DIR/raw/fuzz_findings/`` (files, command line, stderr), at most ``--keep`` per
kind and worker. Case INDEX of seed S is the same input on every run
(``--replay``). ``--time-limit`` stops the run after that many seconds (the
cases under way end, or are dropped after ``--stop-grace`` seconds) and
writes the count reached; runs of one seed over disjoint ranges (``--start``,
``--inputs``) cover distinct inputs, and ``--merge`` adds up their results.
"""

from __future__ import annotations

import argparse
import bz2
import contextlib
import csv
import functools
import gc
import gzip
import hashlib
import io
import json
import lzma
import multiprocessing
import os
import queue
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

RESULTS_DIR = Path(__file__).with_name("results")

#: outcomes that satisfy the property; every other kind is a finding
GOOD = ("ok", "error")
FINDINGS = ("traceback", "bad-status", "bad-message", "partial-output", "bad-result", "wrong-answer",
            "valid-rejected", "hang", "leaked-thread", "leaked-fd", "crash", "memory", "nondeterministic")
#: a successful run is compared with the oracle (tests/oracle.py) where its reads are at most this many
#: records, none longer than ORACLE_LONGEST bases (the oracle traces every hit in plain Python)
ORACLE_RECORDS, ORACLE_LONGEST = 200, 1000

BASES = b"ACGT"
IUPAC = b"RYSWKMBDHVN"
COMPLEMENT = bytes.maketrans(b"ACGTRYSWKMBDHVNacgtryswkmbdhvn", b"TGCAYRSWMKVHDBNtgcayrswmkvhdbn")
IUPAC_BASES = {ord(k): v for k, v in {"R": b"AG", "Y": b"CT", "S": b"CG", "W": b"AT", "K": b"GT", "M": b"AC",
                                      "B": b"CGT", "D": b"AGT", "H": b"ACT", "V": b"ACG", "N": b"ACGT"}.items()}
#: bytes that matter to the parsers: line structure, record starts, NUL, non-ASCII, control characters
SPECIAL = b"\n\r@+> \t\x00\x80\xff\x0b\x0c\x1bNnACGTU#~:-*0"
COMPRESSIONS = (None, "gz", "bz2", "xz", "zst")
SUFFIX = {None: "", "gz": ".gz", "bz2": ".bz2", "xz": ".xz", "zst": ".zst"}


# --- choosers ----------------------------------------------------------------

class RandomChooser:
    """Decisions from a ``random.Random``."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def integer(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return self.rng.randint(low, high)

    def choice(self, options):
        return options[self.rng.randrange(len(options))]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def blob(self, size: int) -> bytes:
        return self.rng.randbytes(size)


# --- seeds -------------------------------------------------------------------

_TO_BASES = bytes.maketrans(bytes(range(256)), BASES * 64)
_TO_QUALITIES = bytes.maketrans(bytes(range(256)), bytes(33 + i % 94 for i in range(256)))


def _sequence(rng: random.Random, length: int, odd: float = 0.0) -> bytes:
    """Read letters: ACGT, with N, lowercase, U and IUPAC codes at rate ``odd``."""
    letters = rng.randbytes(length).translate(_TO_BASES)
    if odd and length:
        letters = bytearray(letters)
        for _ in range(sum(rng.random() < odd for _ in range(min(length, 50))) * max(1, length // 50)):
            letters[rng.randrange(length)] = rng.choice(b"NnacgtUuRYKM")
        letters = bytes(letters)
    return letters


#: the letters each byte may stand for (itself, but for IUPAC codes)
_OPTIONS = [IUPAC_BASES.get(c, bytes([c])) for c in range(256)]


def _resolve(pattern: bytes, rng: random.Random) -> bytes:
    """A concrete read sequence matching an IUPAC pattern (upper case)."""
    upper = pattern.upper().replace(b"U", b"T")
    choice = rng.choice  # one draw per letter, as ever: the cases of a seed stay the same
    return bytes([choice(_OPTIONS[c]) for c in upper])


def _read_sequences(rng: random.Random, count: int, low: int, high: int, patterns: list[bytes],
                    plant: float, odd: float) -> list[bytes]:
    reads = []
    for _ in range(count):
        sequence = _sequence(rng, rng.randint(low, high), odd)
        if patterns and sequence and rng.random() < plant:
            insert = _resolve(rng.choice(patterns), rng)
            if rng.random() < 0.5:
                insert = insert.translate(COMPLEMENT)[::-1]
            if rng.random() < 0.3 and len(insert) > 2:  # one substitution
                i = rng.randrange(len(insert))
                insert = insert[:i] + bytes([rng.choice(BASES)]) + insert[i + 1:]
            at = rng.randint(0, len(sequence))
            sequence = (sequence[:at] + insert + sequence[at:])[:max(high, len(insert))]
        reads.append(sequence)
    return reads


def _header(rng: random.Random, index: int) -> bytes:
    name = b"r%d" % index
    kind = rng.random()
    if kind < 0.4:
        return name
    if kind < 0.8:
        return name + b" comment=%d len:%d" % (rng.randrange(1000), rng.randrange(300))
    return name + b"\t" + bytes(rng.choices(b"abcXYZ019 @+>:;|=_-/.", k=rng.randint(1, 20)))


def _qualities(rng: random.Random, length: int) -> bytes:
    if rng.random() < 0.5:
        return b"I" * length
    # the whole printable range: a quality line may start with '@' or '+'
    return rng.randbytes(length).translate(_TO_QUALITIES)


def fastq_seed(rng: random.Random, count: int, low: int, high: int, patterns: list[bytes], *,
               two_headers: bool = False, crlf: bool = False, plant: float = 0.4, odd: float = 0.02) -> bytes:
    """Plain FASTQ (every record four lines), or with the name repeated on the '+' line."""
    out = []
    for i, sequence in enumerate(_read_sequences(rng, count, low, high, patterns, plant, odd)):
        header = _header(rng, i)
        plus = b"+" + header if two_headers else b"+"
        out.append(b"@%s\n%s\n%s\n%s\n" % (header, sequence, plus, _qualities(rng, len(sequence))))
    data = b"".join(out)
    return data.replace(b"\n", b"\r\n") if crlf else data


def fasta_seed(rng: random.Random, count: int, low: int, high: int, patterns: list[bytes], *,
               width: int | None = None, crlf: bool = False, plant: float = 0.4, odd: float = 0.02) -> bytes:
    out = []
    for i, sequence in enumerate(_read_sequences(rng, count, low, high, patterns, plant, odd)):
        lines = [sequence] if not width else [sequence[j:j + width] for j in range(0, len(sequence), width)] or [b""]
        out.append(b">%s\n%s\n" % (_header(rng, i), b"\n".join(lines)))
    data = b"".join(out)
    return data.replace(b"\n", b"\r\n") if crlf else data


def pattern_seed(rng: random.Random, fastq: bool = False) -> tuple[bytes, list[bytes]]:
    """A pattern file of 1 to 4 patterns (IUPAC codes, lowercase, U) and the patterns."""
    patterns = []
    for _ in range(rng.randint(1, 4)):
        letters = bytearray(rng.choices(BASES, k=rng.randint(4, 40)))
        for i in range(len(letters)):
            roll = rng.random()
            if roll < 0.08:
                letters[i] = rng.choice(IUPAC)
            elif roll < 0.12:
                letters[i] = rng.choice(b"acgtuU")
        patterns.append(bytes(letters))
    if fastq:
        data = b"".join(b"@p%d\n%s\n+\n%s\n" % (i, p, b"I" * len(p)) for i, p in enumerate(patterns))
    else:
        data = b"".join(b">p%d adapter %d\n%s\n" % (i, i, p) for i, p in enumerate(patterns))
    return data, patterns


# --- mutations -----------------------------------------------------------------

def _position(ch, data: bytes, far: bool = False) -> int:
    """A position in ``data``: anywhere, at a line start, or (far) in its second half."""
    if not data:
        return 0
    low = len(data) // 2 if far else 0
    at = ch.integer(low, len(data))
    if ch.chance(0.3):  # snap to the start of the line: record boundaries matter
        start = data.rfind(b"\n", 0, at)
        at = start + 1 if start >= low else at
    return at


def _some_bytes(ch) -> bytes:
    if ch.chance(0.6):
        return bytes(ch.choice(SPECIAL) for _ in range(ch.integer(1, 4)))
    return ch.blob(ch.integer(1, 8))


def mutate(ch, data: bytes, steps: int, far: bool = False, longest_sequence: int = 1 << 16) -> tuple[bytes, list[str]]:
    """Apply ``steps`` random mutations; returns the bytes and what was done.
    Enormous lines of sequence letters are at most ``longest_sequence`` long."""
    done = []
    for _ in range(steps):
        op = ch.choice(("flip", "flip", "bitflip", "insert", "insert", "delete", "truncate", "duplicate",
                        "crlf", "enormous", "nul"))
        at = _position(ch, data, far)
        if op == "flip" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([ch.choice(SPECIAL)]) + data[at + 1:]
        elif op == "bitflip" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([data[at] ^ (1 << ch.integer(0, 7))]) + data[at + 1:]
        elif op == "insert":
            data = data[:at] + _some_bytes(ch) + data[at:]
        elif op == "delete":
            data = data[:at] + data[at + ch.integer(1, 40):]
        elif op == "truncate":
            data = data[:at]
        elif op == "duplicate":
            size = ch.integer(1, 400)
            data = data[:at + size] + data[at:at + size] + data[at + size:]
        elif op == "crlf":  # Windows line ends in a stretch of the file (or one line)
            size = ch.choice((1, 50, 5000))
            data = data[:at] + data[at:at + size].replace(b"\n", b"\r\n") + data[at + size:]
        elif op == "enormous":  # one enormous line, of sequence letters, qualities or anything
            unit = ch.choice((b"A", b"ACGT", b"N", b"I", b"x", b"@", b"\t"))
            # the engine's and the traceback's memory grow with the longest read
            # (docs/benchmarks.md, fuzz): lines of sequence letters stay at 64 kB
            if unit in (b"A", b"ACGT", b"N"):
                size = min(ch.choice((1 << 12, 1 << 14, 1 << 16)), longest_sequence)
            else:
                size = ch.choice((1 << 12, 1 << 16, 1 << 20, 3 << 20))
            line = (unit * (size // len(unit) + 1))[:size]
            data = data[:at] + (line if ch.chance(0.5) else line + b"\n") + data[at:]
        elif op == "nul":
            data = data[:at] + b"\x00" * ch.choice((1, 2, 100)) + data[at:]
        else:
            continue
        done.append(f"{op}@{at}")
    return data, done


# --- compression -----------------------------------------------------------------

@functools.cache
def _zstd_module():
    """The zstd module of this Python (None where there is none): looked up
    once, not at every case (a failed import searches sys.path each time)."""
    for module_name in ("compression.zstd", "backports.zstd"):
        try:
            return __import__(module_name, fromlist=["compress"])
        except ImportError:
            continue
    return None


def _zstd_compress(data: bytes) -> bytes | None:
    module = _zstd_module()
    return None if module is None else module.compress(data, 1)


def compress(data: bytes, fmt: str | None) -> bytes | None:
    """``data`` compressed as ``fmt`` (None where zstd is not available)."""
    if fmt is None:
        return data
    if fmt == "gz":
        return gzip.compress(data, compresslevel=1, mtime=0)
    if fmt == "bz2":
        return bz2.compress(data, 1)
    if fmt == "xz":
        return lzma.compress(data, preset=0)
    return _zstd_compress(data)


def corrupt_stream(ch, data: bytes, fmt: str) -> tuple[bytes, list[str]]:
    """Damage a compressed stream (one to three times)."""
    done = []
    for _ in range(ch.integer(1, 3)):
        op = ch.choice(("flip", "bitflip", "truncate", "truncate", "cut-head", "insert", "delete", "garbage",
                        "second-member", "zeros"))
        at = ch.integer(0, len(data))
        if op == "flip" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([ch.integer(0, 255)]) + data[at + 1:]
        elif op == "bitflip" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([data[at] ^ (1 << ch.integer(0, 7))]) + data[at + 1:]
        elif op == "truncate":
            data = data[:at]
        elif op == "cut-head":
            data = data[at:]
        elif op == "insert":
            data = data[:at] + ch.blob(ch.integer(1, 8)) + data[at:]
        elif op == "delete":
            data = data[:at] + data[at + ch.integer(1, 16):]
        elif op == "garbage":
            data = data + ch.blob(ch.integer(1, 64))
        elif op == "second-member":  # a valid second stream, as `cat a.gz b.gz` makes
            data = data + (compress(b"@extra\nACGT\n+\nIIII\n", fmt) or b"")
        elif op == "zeros":
            data = data + b"\x00" * ch.integer(1, 1024)
        else:
            continue
        done.append(f"{op}@{at}")
    return data, done


# --- cases -------------------------------------------------------------------------

@dataclass
class Case:
    """One input of the fuzzer: files, options and how they were made."""

    reads: bytes
    reads_name: str
    patterns: bytes
    patterns_name: str
    threshold: int = 20
    chunk_size: int | None = None
    strand: str = "both"
    eqx: bool = False
    outputs: dict[str, str] = field(default_factory=dict)  # option -> file name
    stdin: bool = False  # reads given as '-' on standard input
    patterns_stdin: bool = False  # or the patterns
    read_block: int | None = None  # bpbc.io.READ_BLOCK for the run (None: unchanged)
    notes: list[str] = field(default_factory=list)
    #: the files and options are valid: an error exit is a finding ('valid-rejected')
    valid: bool = False

    def argv(self, in_dir: Path, out_dir: Path) -> list[str]:
        """The command line (after ``bpbc-screen``)."""
        reads = "-" if self.stdin else str(in_dir / self.reads_name)
        patterns = "-" if self.patterns_stdin else str(in_dir / self.patterns_name)
        args = [reads, patterns, "--device", "cpu", "--threads", "1", "-q",
                "-t", str(self.threshold), "--strand", self.strand]
        if self.chunk_size is not None:
            args += ["--chunk-size", str(self.chunk_size)]
        if self.eqx:
            args.append("--eqx")
        for option, name in self.outputs.items():
            args += [option, str(out_dir / name)]
        return args

    def describe(self) -> dict:
        return {"reads_name": self.reads_name, "reads_bytes": len(self.reads), "patterns_name": self.patterns_name,
                "patterns_bytes": len(self.patterns), "threshold": self.threshold, "chunk_size": self.chunk_size,
                "strand": self.strand, "eqx": self.eqx, "outputs": self.outputs, "stdin": self.stdin,
                "patterns_stdin": self.patterns_stdin,
                "read_block": self.read_block, "notes": self.notes, "valid": self.valid}


#: what a case concentrates on: None mixes them all
PROFILES = ("reads", "compressed", "patterns", "switch", "valid")


def _reads_seed(ch, rng: random.Random, patterns: list[bytes], large: bool) -> tuple[bytes, str, str]:
    """(bytes, format extension, seed kind)."""
    if large:
        data = fastq_seed(rng, rng.randint(400, 1500), 50, 150, patterns, plant=0.2, odd=0.0)
        return data, ".fq", "large-fastq"
    kind = ch.choice(("fastq", "fastq", "fastq", "fastq-two-headers", "fastq-crlf", "fasta", "fasta-wrapped",
                      "fasta-crlf", "empty"))
    count, low, high = rng.randint(1, 40), rng.choice((0, 1, 20)), rng.choice((1, 40, 150, 300))
    high = max(low, high)
    if kind == "empty":
        return b"", ch.choice((".fq", ".fa")), kind
    if kind.startswith("fastq"):
        data = fastq_seed(rng, count, low, high, patterns, two_headers=kind.endswith("headers"),
                          crlf=kind.endswith("crlf"))
        return data, ".fq", kind
    data = fasta_seed(rng, count, low, high, patterns, width=rng.choice((1, 7, 60)) if "wrapped" in kind else None,
                      crlf=kind.endswith("crlf"))
    return data, ".fa", kind


def _file_name(ch, base: str, extension: str, fmt: str | None) -> str:
    """A file name whose suffix says the compression, mostly; else content decides."""
    if ch.chance(0.85):
        return base + extension + SUFFIX[fmt]
    return base + ch.choice(("", extension, ".gz", ".txt"))


def make_case(ch, profile: str | None = None) -> Case:
    """A case from the chooser's decisions (see the module docstring)."""
    profile = profile or ch.choice(("reads",) * 6 + ("compressed", "patterns", "valid") * 2 + ("switch",))
    rng = random.Random(ch.integer(0, 2**32 - 1))  # bulk content from one decision
    patterns_data, patterns = pattern_seed(rng, fastq=ch.chance(0.15))
    large = profile == "switch"
    reads_data, extension, kind = _reads_seed(ch, rng, patterns, large)
    notes = [f"profile={profile}", f"seed={kind}"]

    if profile in ("reads", "switch") or (profile == "compressed" and ch.chance(0.3)):
        steps = 1 if large else ch.choice((1, 1, 1, 2, 3, 6))
        reads_data, done = mutate(ch, reads_data, steps, far=large)
        notes += [f"reads:{d}" for d in done]
    if profile == "patterns" or (profile not in ("valid", "switch") and ch.chance(0.05)):
        # every batch pays a superblock of 1024 reads against each pattern: with one read
        # per chunk, a pattern of 4 kb took a minute on a busy machine
        patterns_data, done = mutate(ch, patterns_data, ch.choice((1, 1, 2, 4)), longest_sequence=1 << 10)
        notes += [f"patterns:{d}" for d in done]

    fmt = None
    if profile == "compressed" or ch.chance(0.2):
        fmt = ch.choice(COMPRESSIONS[1:]) if profile == "compressed" else ch.choice(COMPRESSIONS)
    packed = compress(reads_data, fmt)
    if packed is None:  # no zstd here
        fmt, packed = None, reads_data
    if fmt is not None and profile == "compressed":
        packed, done = corrupt_stream(ch, packed, fmt)
        notes += [f"stream:{d}" for d in done]
    notes.append(f"compression={fmt}")
    reads_name = _file_name(ch, "reads", extension, fmt)

    patterns_fmt = ch.choice(COMPRESSIONS) if ch.chance(0.1) else None
    patterns_packed = compress(patterns_data, patterns_fmt)
    if patterns_packed is None:
        patterns_fmt, patterns_packed = None, patterns_data
    patterns_name = "patterns" + (".fq" if patterns_data[:1] == b"@" else ".fa") + SUFFIX[patterns_fmt]

    longest = max(map(len, patterns))
    # mostly reachable thresholds; now and then the largest and one above it
    threshold = ch.choice((1, 8, 16, 20, 24, 30, min(40, 2 * longest), 2 * longest, 2 * longest + 1)
                          if ch.chance(0.2) else (8, 16, 20, 24, min(30, 2 * longest)))
    # small chunks put chunk boundaries everywhere, but every chunk costs the
    # engine's fixed price (some 10 ms on the CPU): a quarter of the cases
    if large:
        chunk_size = ch.choice((37, 250, 1000, None))
    else:
        chunk_size = ch.choice((1, 2, 3, 5, 8)) if ch.chance(0.25) else ch.choice((64, None, None))
    reads_extension = ".fa" if reads_data[:1] == b">" else ".fq"
    outputs = {
        "-o": "hits.paf" + SUFFIX[ch.choice(COMPRESSIONS) if ch.chance(0.2) else None],
        "--matched": "matched" + reads_extension + SUFFIX[ch.choice(COMPRESSIONS) if ch.chance(0.3) else None],
        "--unmatched": "unmatched" + reads_extension + SUFFIX[ch.choice(COMPRESSIONS) if ch.chance(0.3) else None],
        "--json": "summary.json",
    }
    if _zstd_compress(b"") is None:
        outputs = {option: name.removesuffix(".zst") for option, name in outputs.items()}
    read_block = None
    if large or ch.chance(0.3):
        read_block = ch.choice((64, 512, 4096, 65536) if large else (1, 3, 17, 64, 512))
        if any("enormous" in note for note in notes):
            # the raw route rescans a record until it is complete: with tiny
            # blocks a megabyte line takes a million reads (real blocks are 4 MiB)
            read_block = max(read_block, 4096)
    case = Case(reads=packed, reads_name=reads_name, patterns=patterns_packed, patterns_name=patterns_name,
                threshold=threshold, chunk_size=chunk_size, strand="forward" if ch.chance(0.25) else "both",
                eqx=ch.chance(0.1), outputs=outputs, stdin=ch.chance(0.08), read_block=read_block, notes=notes)
    case.patterns_stdin = not case.stdin and ch.chance(0.04)  # drawn last: earlier cases stay as they were
    # valid seeds, not mutated, not corrupted, under a threshold a pattern can reach (the default scoring: 2 a
    # match), in a file whose name says no compression or the right one (xopen believes a name)
    told = [fmt_ for fmt_ in COMPRESSIONS[1:] if reads_name.endswith(SUFFIX[fmt_])]
    case.valid = profile == "valid" and threshold <= 2 * longest and told in ([], [fmt])
    return case


# --- running a case ---------------------------------------------------------------------

class Hang(BaseException):
    """Raised by the watchdog: the case ran past its time (a BaseException, so
    that the command's own handlers do not take it for an error)."""


@contextlib.contextmanager
def watchdog(seconds: float | None):
    """Raise :class:`Hang` in the main thread after ``seconds`` (SIGALRM)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _patched(case: Case):
    """stdin (for '-') and bpbc.io.READ_BLOCK as the case says; stdout and
    stderr captured. Yields (stdout, stderr) buffers."""
    import bpbc.io

    saved = sys.stdin, sys.stdout, sys.stderr, bpbc.io.READ_BLOCK
    out, err = io.StringIO(), io.StringIO()
    try:
        if case.stdin or case.patterns_stdin:
            sys.stdin = io.TextIOWrapper(io.BytesIO(case.reads if case.stdin else case.patterns))
        if case.read_block is not None:
            bpbc.io.READ_BLOCK = case.read_block
        sys.stdout, sys.stderr = out, err
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr, bpbc.io.READ_BLOCK = saved


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


@dataclass
class Outcome:
    """How a case ended: ``kind`` is 'ok', 'error' or a finding (see FINDINGS)."""

    kind: str
    status: int | None
    stderr: str
    detail: str = ""
    seconds: float = 0.0

    @property
    def good(self) -> bool:
        return self.kind in GOOD

    def report(self, case: Case | None = None) -> str:
        lines = [f"{self.kind}: status {self.status}: {self.detail}", f"stderr: {self.stderr[-3000:]!r}"]
        if case is not None:
            lines.append(f"case: {json.dumps(case.describe())}")
        return "\n".join(lines)


def error_kind(stderr: str) -> str:
    """The message of a one-line error with the specifics blanked out (for counting)."""
    text = stderr.strip().removeprefix("bpbc-screen: error: ")
    text = re.sub(r"^(?:[^\s:]*/)?([^/\s:.]+)[^/\s:]*: ", r"\1: ", text)  # a file: its name's stem
    text = text.replace("n't", "nt")  # no quote
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "Q", text)
    text = re.sub(r"0x[0-9a-f]+", "0xH", text)
    text = re.sub(r"\d+", "N", text)
    return text[:160]


def _count_records(path: Path) -> int:
    """Records of an output, its format known from the content: the reads
    outputs take the input's format whatever their names say."""
    import dnaio
    from xopen import xopen

    with xopen(path, "rb", threads=0) as handle:
        data = handle.read()
    if not data:
        return 0
    with dnaio.open(io.BytesIO(data), fileformat="fastq" if data[:1] == b"@" else "fasta") as reader:
        return sum(1 for _ in reader)


def _check_success(case: Case, out_dir: Path) -> tuple[str, str]:
    """What is wrong with a successful run's outputs ('' when nothing), and a
    digest of what they say (to compare two runs of one case)."""
    from xopen import xopen

    names = sorted(p.name for p in out_dir.iterdir())
    if names != sorted(case.outputs.values()):
        return f"output files {names}, expected {sorted(case.outputs.values())}"
    summary = json.loads((out_dir / case.outputs["--json"]).read_text())
    matched = _count_records(out_dir / case.outputs["--matched"])
    unmatched = _count_records(out_dir / case.outputs["--unmatched"])
    # threads=0: decompressed in this process, not by an external program started for every case
    with xopen(out_dir / case.outputs["-o"], "rb", threads=0) as handle:
        paf = handle.read().decode("ascii").split("\n")[:-1]  # names may hold \r, \x0b, ...: PAF lines end in \n
    problems = []
    if summary["reads"] != matched + unmatched:
        problems.append(f"{summary['reads']} reads but {matched} + {unmatched} records written")
    if summary["reads_passing"] != matched:
        problems.append(f"{summary['reads_passing']} reads passing but {matched} matched records")
    if summary["alignments"] != len(paf):
        problems.append(f"{summary['alignments']} alignments but {len(paf)} PAF lines")
    if any(len(line.split("\t")) != 16 for line in paf):
        problems.append("a PAF line without 16 columns")
    digest = hashlib.sha1("\n".join(paf).encode()).hexdigest()[:16]
    return "; ".join(problems), f"{summary['reads']} reads, {matched} matched, PAF {digest}"


#: the oracle's answer for the last case: (what it depends on, the answer); the second run of a
#: case run twice (run_twice) is compared with the same answer, not a second computation of it
_ORACLE_LAST: list = [None, None]


def _oracle_expected(case: Case):
    """The oracle's ``Expected`` for ``case``; None where the reads are too
    large for it; a message (str) where dnaio cannot read the input. The
    last case's answer is kept: a function of the case's bytes and options only."""
    from tests import oracle

    key = (case.reads, case.patterns, case.threshold, case.strand, case.eqx)
    if _ORACLE_LAST[0] == key:
        return _ORACLE_LAST[1]
    try:
        reads, patterns = oracle.load(case.reads), oracle.load(case.patterns)
    except Exception as error:  # noqa: BLE001 - bpbc read what dnaio did not
        want = f"bpbc succeeded, dnaio cannot read the input: {type(error).__name__}: {error}"
    else:
        if len(reads) > ORACLE_RECORDS or max((len(r.sequence) for r in reads), default=0) > ORACLE_LONGEST:
            want = None
        else:
            want = oracle.expected(reads, patterns, oracle.Options(
                threshold=case.threshold, strands=("+", "-") if case.strand == "both" else ("+",), eqx=case.eqx))
    _ORACLE_LAST[:] = [key, want]
    return want


def _oracle_problem(case: Case, out_dir: Path) -> str:
    """What a successful run wrote that the oracle (tests/oracle.py) would
    not: its PAF, matched and unmatched reads and --json counts, from the
    reads and patterns as dnaio reads them ('' when they agree, or when the
    input is too large for the oracle)."""
    from xopen import xopen

    from tests import oracle

    want = _oracle_expected(case)
    if isinstance(want, str):
        return want
    if want is None:
        return ""
    with xopen(out_dir / case.outputs["-o"], "rb", threads=0) as handle:
        paf = handle.read().decode("ascii")
    problems = []
    if paf != want.paf:
        got, wanted = paf.splitlines(), want.paf.splitlines()
        first = next((k for k, (a, b) in enumerate(zip(got, wanted)) if a != b), min(len(got), len(wanted)))
        problems.append(f"PAF: {len(got)} lines, the oracle {len(wanted)}; first difference at line {first + 1}")
    for kind in ("matched", "unmatched"):
        records = oracle.load(out_dir / case.outputs[f"--{kind}"])
        if records != [unit[0] for unit in want.units[kind]]:
            problems.append(f"{kind}: {len(records)} records, the oracle {len(want.units[kind])}, or other records")
    summary = oracle.summary_of(out_dir / case.outputs["--json"])
    if summary != want.summary:
        keys = sorted(key for key in want.summary if summary.get(key) != want.summary[key])
        problems.append(f"--json differs from the oracle in {keys}")
    return "; ".join(problems)


def _clean(directory: Path) -> None:
    """An empty ``directory`` (the files of the last case removed)."""
    if directory.is_dir():
        for entry in os.scandir(directory):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    else:
        directory.mkdir(parents=True)


def _call_main(case: Case, in_dir: Path, out_dir: Path) -> int:
    from bpbc.cli import main

    return main(case.argv(in_dir, out_dir))


def _call_direct(case: Case, in_dir: Path, out_dir: Path) -> int:
    """The command's function with the values the command line would give it
    (the option parsing of typer, some 30 ms a call, left out)."""
    import typer

    from bpbc.cli import Device, Strand, screen_command

    reads, patterns, *_ = case.argv(in_dir, out_dir)
    outputs = {option: str(out_dir / name) for option, name in case.outputs.items()}
    try:
        # READS is variadic: a list (a plain string was taken for one file per character)
        screen_command([reads], patterns, threshold=case.threshold, output=outputs.get("-o"),
                       matched=outputs.get("--matched"), unmatched=outputs.get("--unmatched"),
                       json_path=outputs.get("--json"), strand=Strand(case.strand), device=Device.cpu, threads=1,
                       eqx=case.eqx, chunk_size=case.chunk_size, quiet=True)
    except typer.Exit as exit_:
        return exit_.exit_code
    return 0


#: how a case is run: the whole command line through bpbc.cli.main, or the command's function
HARNESSES = {"main": _call_main, "direct": _call_direct}


def run_case(case: Case, workdir: Path, timeout_s: float | None = 120.0, harness: str = "main") -> Outcome:
    """Run ``case`` in this process (through ``harness``, see HARNESSES) and judge the outcome."""
    call = HARNESSES[harness]
    in_dir, out_dir = Path(workdir) / "in", Path(workdir) / "out"
    _clean(in_dir)
    _clean(out_dir)
    (in_dir / case.reads_name).write_bytes(case.reads)
    (in_dir / case.patterns_name).write_bytes(case.patterns)
    threads_before, fds_before = threading.active_count(), _open_fds()
    status = None
    started = time.perf_counter()
    with _patched(case) as (out, err):
        try:
            with watchdog(timeout_s):
                status = call(case, in_dir, out_dir)
        except Hang as hang:
            kind, detail = "hang", str(hang)
        except BaseException as error:  # noqa: BLE001 - the finding
            kind, detail = "traceback", "".join(traceback.format_exception(error))[-4000:]
        else:
            kind, detail = None, ""
    seconds = time.perf_counter() - started
    stderr, stdout = err.getvalue(), out.getvalue()
    if kind is None:
        kind, detail = _judge(case, status, stdout, stderr, out_dir)
    if kind in GOOD:  # whatever ended must have ended
        deadline = time.monotonic() + 5
        while threading.active_count() > threads_before and time.monotonic() < deadline:
            time.sleep(0.002)
        if threading.active_count() > threads_before:
            kind, detail = "leaked-thread", ", ".join(t.name for t in threading.enumerate())
        elif _open_fds() > fds_before:
            kind, detail = "leaked-fd", f"{fds_before} open before, {_open_fds()} after"
    return Outcome(kind, status, stderr, detail, seconds)


def run_twice(case: Case, workdir: Path, timeout_s: float | None = 120.0, harness: str = "main") -> Outcome:
    """Run ``case`` twice: the second outcome must be the first one
    (status, message, what the outputs say), else 'nondeterministic'."""
    first = run_case(case, workdir, timeout_s, harness)
    if not first.good:
        return first
    second = run_case(case, workdir, timeout_s, harness)
    if (second.kind, second.status, second.stderr, second.detail) != (first.kind, first.status, first.stderr,
                                                                         first.detail):
        return Outcome("nondeterministic", second.status, second.stderr,
                       f"first {first.kind} {first.status} {first.stderr.strip()!r} {first.detail}; then "
                       f"{second.kind} {second.status} {second.stderr.strip()!r} {second.detail}",
                       first.seconds + second.seconds)
    second.seconds += first.seconds
    return second


def _judge(case: Case, status, stdout: str, stderr: str, out_dir: Path) -> tuple[str, str]:
    if "Traceback (most recent call last)" in stderr or "Exception ignored" in stderr:
        return "traceback", "a traceback on stderr"
    if status == 0:
        if stderr or stdout:
            return "bad-result", "output on stderr or stdout despite -q and -o"
        try:
            problem, digest = _check_success(case, out_dir)
        except Exception as error:  # noqa: BLE001 - an unreadable output is a finding
            problem = f"outputs unreadable: {type(error).__name__}: {error}"
        if problem:
            return "bad-result", problem
        wrong = _oracle_problem(case, out_dir)
        return ("wrong-answer", wrong) if wrong else ("ok", digest)
    if status != 1:
        return "bad-status", f"exit status {status}"
    lines = stderr.splitlines()
    if len(lines) != 1 or not stderr.endswith("\n") or not lines[0].startswith("bpbc-screen: error: "):
        return "bad-message", "not one line 'bpbc-screen: error: ...'"
    left = sorted(p.name for p in out_dir.iterdir())
    if left:
        return "partial-output", f"left behind: {left}"
    if case.valid:
        return "valid-rejected", stderr.strip()
    return "error", error_kind(stderr)


# --- the driver -------------------------------------------------------------------------

def case_for(seed: int, index: int, profile: str | None = None) -> Case:
    """Case ``index`` of run ``seed``: the same input every time."""
    return make_case(RandomChooser(random.Random(seed * 1_000_000_007 + index)), profile)


def save_finding(directory: Path, index: int, case: Case, outcome: Outcome) -> Path:
    target = directory / f"{outcome.kind}-{index}"
    target.mkdir(parents=True, exist_ok=True)
    (target / case.reads_name).write_bytes(case.reads)
    (target / case.patterns_name).write_bytes(case.patterns)
    (target / "case.json").write_text(json.dumps(
        {"index": index, **case.describe(), "argv": case.argv(Path("."), Path("out")),
         **asdict(outcome)}, indent=2) + "\n")
    return target


def warm_up(workdir: Path) -> None:
    """Run a few valid cases untimed, so that numba's compilation of the
    kernels (a minute on a busy machine, when its caches are empty) does not
    count as a hang."""
    rng = random.Random(0)
    patterns_data, patterns = pattern_seed(rng)
    fastq = fastq_seed(rng, 50, 20, 150, patterns)
    outputs = {"-o": "hits.paf", "--matched": "m.fq.gz", "--unmatched": "u.fq", "--json": "s.json"}
    for reads, name, chunk_size in ((fastq, "r.fq", None), (fastq.replace(b"\n", b"\r\n"), "r.fq", 7),
                                    (fasta_seed(rng, 20, 20, 150, patterns, width=60), "r.fa", 3)):
        for threshold in (8, 16, 24, 40):
            run_case(Case(reads=reads, reads_name=name, patterns=patterns_data, patterns_name="p.fa",
                          threshold=threshold, chunk_size=chunk_size, outputs=outputs), workdir, None)


#: set by --parallel-gzip and --blocks for the workers (they are fresh processes)
PARALLEL_GZIP_VARIABLE = "BPBC_FUZZ_PARALLEL_GZIP"
BLOCKS_VARIABLE = "BPBC_FUZZ_BLOCKS"


def _parallel_gzip_if_asked() -> None:
    """With --parallel-gzip: every gzip input through rapidgzip, however small,
    on one thread, in a process of its own (bpbc.gzip_reader.GzipProcess).
    With --blocks: single reads in plain FASTQ parsed in blocks
    (bpbc.fastq_blocks) on one thread too, blocks of 512 bytes with 4 KiB of
    room in front, so that the boundaries fall inside the small inputs."""
    import bpbc.gzip_reader

    if os.environ.get(PARALLEL_GZIP_VARIABLE):
        bpbc.gzip_reader.PARALLEL_GZIP_MIN_THREADS = 1
        bpbc.gzip_reader.PARALLEL_GZIP_MIN_BYTES = 0
        bpbc.gzip_reader.GZIP_PROCESS_MIN_BYTES = 0
    if os.environ.get(BLOCKS_VARIABLE):
        from bpbc import fastq_blocks

        bpbc.io.PARALLEL_PARSE_MIN_THREADS = 1
        fastq_blocks.MIN_BLOCK = fastq_blocks.MAX_BLOCK = 512
        fastq_blocks.ROOM = 4096


def _worker(worker: int, workers: int, start: int, stop: int, seed: int, timeout_s: float, scratch: str,
            findings: str, keep: int, harness: str, twice: int, results, current, stopping=None) -> None:
    """Run cases start, start + workers, ... below stop; report batches of
    outcomes to ``results``; ``current`` (shared) holds the case under way and
    since when, for the parent's watchdog. Ends after a hang (a fresh process
    goes on), or between two cases once ``stopping`` (an Event) is set."""
    # one case at a time on one thread (--threads 1): no numba thread pool of
    # a thread per core in each worker (on 16 cores, 15 idle OpenMP threads
    # each). Set here, in the fresh process, before numba reads it: numba
    # refuses a change once its threads run (so not in the parent's os.environ)
    if "numba" not in sys.modules:
        os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    import numba

    numba.set_num_threads(1)
    _parallel_gzip_if_asked()
    # stop between cases (during a case the command's own SIGTERM handling answers: status 143)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    workdir = Path(scratch) / f"worker{worker}"
    warm_up(workdir)
    # what the imports and the warm-up made lives as long as the worker: out of the
    # collector's full passes (some 3% of a case's time went to collecting)
    gc.freeze()
    saved: Counter = Counter()
    batch: list = []
    last_sent = time.monotonic()
    for index in range(start, stop, workers):
        if stopping is not None and stopping.is_set():  # the time limit: report what was done, end
            break
        current[2 * worker] = index
        current[2 * worker + 1] = time.time()
        case = case_for(seed, index)
        if twice and index % twice == 0:
            outcome = run_twice(case, workdir, timeout_s, harness)
        else:
            outcome = run_case(case, workdir, timeout_s, harness)
        if outcome.status == 143:  # this worker was terminated during the case
            break
        message = error_kind(outcome.stderr) if outcome.kind == "error" else ""
        batch.append((index, outcome.kind, message, outcome.seconds))
        if not outcome.good:
            # at most ``keep`` per kind and worker, and per kind in the directory (workers restart)
            if saved[outcome.kind] < keep and len(list(Path(findings).glob(f"{outcome.kind}-*"))) < 4 * keep:
                saved[outcome.kind] += 1
                save_finding(Path(findings), index, case, outcome)
            batch[-1] = (index, outcome.kind, outcome.detail[-400:], outcome.seconds)
        if outcome.kind == "hang" or time.monotonic() - last_sent > 1 or len(batch) >= 200:
            results.put(("batch", worker, batch))
            batch, last_sent = [], time.monotonic()
        if outcome.kind == "hang":
            current[2 * worker] = -1
            return
    current[2 * worker] = -1
    results.put(("batch", worker, batch))
    results.put(("finished", worker, stop))


@dataclass
class Tally:
    started: float = field(default_factory=time.time)
    inputs: int = 0
    kinds: Counter = field(default_factory=Counter)
    messages: Counter = field(default_factory=Counter)
    findings: list = field(default_factory=list)
    seconds_in_cases: float = 0.0

    def add(self, index: int, kind: str, text: str, seconds: float) -> None:
        self.inputs += 1
        self.kinds[kind] += 1
        self.seconds_in_cases += seconds
        if kind == "error":
            self.messages[text] += 1
        elif kind not in GOOD:
            self.findings.append({"index": index, "kind": kind, "detail": text})


def _write_results(out: Path, tally: Tally, args, finished: bool, stopped_by_time_limit: bool = False,
                   next_index: dict | None = None) -> Path:
    from .environment import environment

    elapsed = time.time() - tally.started
    figures = {
        "finished": finished,
        "environment": environment(None),
        "seed": args.seed,
        "workers": args.workers,
        "harness": args.harness,
        "run_twice_every": args.twice,
        "inputs_requested": args.inputs,
        # cases start, start + 1, ... below start + inputs_requested; each worker w runs
        # start + w, start + w + workers, ...: with a time limit, those below next_index[w]
        "start": args.start,
        "time_limit_s": args.time_limit,
        "stopped_by_time_limit": stopped_by_time_limit,
        "next_index": None if next_index is None else [next_index[w] for w in sorted(next_index)],
        "inputs": tally.inputs,
        "elapsed_s": round(elapsed, 1),
        "inputs_per_s": round(tally.inputs / elapsed, 2) if elapsed > 0 else 0.0,
        "mean_case_s": round(tally.seconds_in_cases / tally.inputs, 5) if tally.inputs else 0.0,
        "outcomes": {kind: tally.kinds.get(kind, 0) for kind in GOOD + FINDINGS},
        "findings": tally.findings[:1000],
        "error_messages": len(tally.messages),
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / "fuzz_cpu.json"
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(figures, indent=2) + "\n")
    os.replace(temporary, path)
    with open(out / "fuzz_cpu_messages.csv.tmp", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["count", "message"])
        writer.writerows((count, message) for message, count in tally.messages.most_common())
    os.replace(out / "fuzz_cpu_messages.csv.tmp", out / "fuzz_cpu_messages.csv")
    return path


def _rss_bytes(pid: int) -> int:
    """Resident set of a process (0 where unknown)."""
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def drive(args) -> int:
    """Run ``args.inputs`` cases on ``args.workers`` processes; write the results."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    current = context.Array("d", [-1.0] * (2 * args.workers), lock=False)
    # many small files written and removed: memory, where there is a tmpfs
    scratch = tempfile.mkdtemp(prefix="bpbc-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    findings = args.out / "raw" / "fuzz_findings"  # bench/results/raw is not versioned
    tally = Tally()
    stopping = context.Event()  # set at the time limit: the workers end after their case
    stop_deadline = None  # then, the time after which the workers still running are killed
    processes: dict[int, multiprocessing.Process] = {}
    # the next case of each worker's stride (where a restarted worker goes on)
    next_index = {w: args.start + w for w in range(args.workers)}
    done = set()
    stop = args.start + args.inputs
    failed_starts: Counter = Counter()  # a worker's deaths in a row before its first case
    given_up: set = set()  # workers that never started: a broken installation, not a finding of the fuzz

    def launch(worker: int) -> None:
        if stopping.is_set():  # no fresh worker after the time limit
            done.add(worker)
            return
        process = context.Process(target=_worker, daemon=True, args=(
            worker, args.workers, next_index[worker], stop, args.seed, args.timeout, scratch, str(findings),
            args.keep, args.harness, args.twice, results, current, stopping))
        process.start()
        processes[worker] = process

    def lost(worker: int, kind: str, detail: str) -> None:
        """A worker died or stuck on its current case: count it, save it, go on after it."""
        index = int(current[2 * worker])
        if index >= 0:
            tally.add(index, kind, detail, time.time() - current[2 * worker + 1])
            case = case_for(args.seed, index)
            save_finding(findings, index, case, Outcome(kind, None, "", detail))
            next_index[worker] = index + args.workers
            failed_starts[worker] = 0
        else:  # it ended before its first case (an import, the warm-up): relaunched, 3 times in a row at most
            failed_starts[worker] += 1
            if failed_starts[worker] >= 3:
                print(f"fuzz: worker {worker} ended {failed_starts[worker]} times before its first case "
                      f"({kind}: {detail}); given up", file=sys.stderr, flush=True)
                given_up.add(worker)
                done.add(worker)
                return
        current[2 * worker] = -1
        if next_index[worker] >= stop:
            done.add(worker)
        else:
            launch(worker)

    def take(message) -> None:
        if message[0] == "batch":
            _, worker, batch = message
            for index, kind, text, seconds in batch:
                tally.add(index, kind, text, seconds)
                next_index[worker] = index + args.workers
        else:
            done.add(message[1])

    def drain(wait: float) -> None:
        """Take every message that arrives within ``wait`` seconds, then those already there."""
        while True:
            try:
                take(results.get(timeout=wait))
            except queue.Empty:
                return
            wait = 0.01

    def terminate(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the cleanup must not be cut short
        raise KeyboardInterrupt  # the finally below stops the workers and writes the counts

    previous_handler = signal.signal(signal.SIGTERM, terminate)
    for worker in range(args.workers):
        launch(worker)
    last_report = time.time()
    interrupted = False
    try:
        while len(done) < args.workers:
            drain(1.0)
            now = time.time()
            if args.time_limit and not stopping.is_set() and now - tally.started > args.time_limit:
                # the workers end after their case; one still running a case after
                # --stop-grace seconds is killed (that case is not counted)
                stopping.set()
                stop_deadline = now + args.stop_grace
                print(f"fuzz: time limit ({args.time_limit:g} s): stopping after the cases under way",
                      file=sys.stderr, flush=True)
            if stop_deadline is not None and now > stop_deadline:
                break
            for worker, process in list(processes.items()):
                if worker in done:
                    continue
                since = current[2 * worker + 1]
                rss = _rss_bytes(process.pid)
                if current[2 * worker] >= 0 and now - since > args.timeout + 60:
                    process.kill()
                    process.join()
                    lost(worker, "hang", f"no answer for {now - since:.0f} s (killed)")
                elif rss > args.max_rss_gb * 2**30:  # the machine is shared: stop it before it swaps
                    process.kill()
                    process.join()
                    lost(worker, "memory", f"resident set {rss / 2**30:.1f} GB after {now - since:.0f} s (killed)")
                elif not process.is_alive():
                    process.join()
                    drain(0.5)  # what it reported before it ended
                    if worker in done:
                        continue
                    if process.exitcode == 0:  # ended after a hang it reported itself
                        current[2 * worker] = -1
                        if next_index[worker] >= stop:
                            done.add(worker)
                        else:
                            launch(worker)
                    else:
                        lost(worker, "crash", f"worker exit code {process.exitcode}")
            if now - last_report > args.report_every:
                last_report = now
                path = _write_results(args.out, tally, args, finished=False, next_index=next_index)
                print(f"fuzz: {tally.inputs} inputs, {dict(tally.kinds)} -> {path}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for process in processes.values():
            if process.is_alive():
                process.kill()
                process.join()
        if stopping.is_set():
            drain(0.1)  # the last batches of workers that ended at the time limit
        shutil.rmtree(scratch, ignore_errors=True)
        signal.signal(signal.SIGTERM, previous_handler)
    path = _write_results(args.out, tally, args, finished=tally.inputs >= args.inputs,
                          stopped_by_time_limit=stopping.is_set(), next_index=next_index)
    bad = sum(count for kind, count in tally.kinds.items() if kind not in GOOD)
    ended = " (interrupted)" if interrupted else " (time limit)" if stopping.is_set() else ""
    ended += f" (workers {sorted(given_up)} never started)" if given_up else ""
    print(f"fuzz: {tally.inputs} inputs in {time.time() - tally.started:.0f} s, {dict(tally.kinds)}, "
          f"{bad} findings{ended} -> {path}", file=sys.stderr)
    return 130 if interrupted else 2 if given_up else 1 if bad else 0


def merge(directories: list[Path], out: Path) -> int:
    """Add up the results of several runs (``DIR/fuzz_cpu.json`` and
    ``DIR/fuzz_cpu_messages.csv`` of each) into ``out``: the runs must have one
    seed and disjoint case ranges, so that their inputs are distinct."""
    runs = [json.loads((directory / "fuzz_cpu.json").read_text()) for directory in directories]
    if len({run["seed"] for run in runs}) != 1:
        raise SystemExit(f"fuzz --merge: runs of different seeds: {[run['seed'] for run in runs]}")
    ranges = sorted((run["start"], run["start"] + run["inputs_requested"]) for run in runs)
    if any(low < previous_high for (_, previous_high), (low, _) in zip(ranges, ranges[1:])):
        raise SystemExit(f"fuzz --merge: the case ranges overlap: {ranges}")
    messages: Counter = Counter()
    for directory in directories:
        with open(directory / "fuzz_cpu_messages.csv", newline="") as handle:
            for row in list(csv.reader(handle))[1:]:
                messages[row[1]] += int(row[0])
    outcomes = {kind: sum(run["outcomes"].get(kind, 0) for run in runs) for kind in GOOD + FINDINGS}
    figures = {
        "merged_from": [str(directory) for directory in directories],
        "environment": runs[0].get("environment", {}),  # the machine of the first run (date, CPU, versions)
        "finished": all(run["finished"] for run in runs),
        "seed": runs[0]["seed"],
        "ranges": [[low, high] for low, high in ranges],
        "inputs": sum(run["inputs"] for run in runs),
        "elapsed_s": round(sum(run["elapsed_s"] for run in runs), 1),
        "runs": [{key: run.get(key) for key in ("start", "inputs_requested", "inputs", "workers", "elapsed_s",
                                                  "inputs_per_s", "stopped_by_time_limit", "harness")}
                 | {"cpu_cores": run.get("environment", {}).get("cpu_cores")} for run in runs],
        "outcomes": outcomes,
        "findings": [finding for run in runs for finding in run["findings"]][:1000],
        "error_messages": len(messages),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "fuzz_cpu.json").write_text(json.dumps(figures, indent=2) + "\n")
    with open(out / "fuzz_cpu_messages.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["count", "message"])
        writer.writerows((count, message) for message, count in messages.most_common())
    bad = sum(count for kind, count in outcomes.items() if kind not in GOOD)
    print(f"fuzz: {figures['inputs']} inputs in {len(runs)} runs, {outcomes}, {bad} findings -> "
          f"{out / 'fuzz_cpu.json'}", file=sys.stderr)
    return 1 if bad else 0


def replay(args) -> int:
    case = case_for(args.seed, args.replay)
    _parallel_gzip_if_asked()  # as the workers do (before, a replay read every gzip input with ISA-L)
    with tempfile.TemporaryDirectory(prefix="bpbc-fuzz-") as workdir:
        outcome = run_case(case, Path(workdir), args.timeout, args.harness)
    print(outcome.report(case))
    return 0 if outcome.good else 1


def main(argv: list[str] | None = None, prog: str = "python -m bench.fuzz") -> int:
    arguments = argparse.ArgumentParser(prog=prog, description="Fuzz bpbc-screen's input paths (see bench/fuzz.py).")
    arguments.add_argument("--inputs", type=int, default=10_000, help="cases to run (default 10000)")
    arguments.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: cores)")
    arguments.add_argument("--seed", type=int, default=13, help="run seed: case i of seed s is always the same")
    arguments.add_argument("--start", type=int, default=0, help="first case index (to continue a run)")
    arguments.add_argument("--timeout", type=float, default=60.0, help="seconds a case may take (a hang after)")
    arguments.add_argument("--keep", type=int, default=10, help="findings saved per kind and worker")
    arguments.add_argument("--report-every", type=float, default=60.0, help="seconds between result files")
    arguments.add_argument("--harness", choices=sorted(HARNESSES), default="main",
                           help="main: the whole command line through bpbc.cli.main; direct: the command's "
                           "function, without typer's option parsing (faster)")
    arguments.add_argument("--twice", type=int, default=8, metavar="K",
                           help="every K-th case runs twice and must end the same way (0: never)")
    arguments.add_argument("--max-rss-gb", type=float, default=3.0,
                           help="a worker above this resident set is stopped (a 'memory' finding)")
    arguments.add_argument("--time-limit", type=float, default=None, metavar="S",
                           help="stop after S seconds (workers' start-up included): the cases under way end, "
                           "the results are written with the count reached")
    arguments.add_argument("--stop-grace", type=float, default=20.0, metavar="S",
                           help="at the time limit, seconds the cases under way may take before their workers are "
                           "killed (those cases are not counted; default 20)")
    arguments.add_argument("--merge", type=Path, nargs="+", default=None, metavar="DIR",
                           help="add up the results of runs (their --out directories, one seed, disjoint case "
                           "ranges) into --out")
    arguments.add_argument("--parallel-gzip", action="store_true",
                           help="decompress every gzip input with rapidgzip in a process of its own, small ones too")
    arguments.add_argument("--blocks", action="store_true",
                           help="parse single reads in plain FASTQ in blocks (bpbc.fastq_blocks), 512 bytes each")
    arguments.add_argument("--replay", type=int, default=None, metavar="INDEX", help="run case INDEX and report it")
    arguments.add_argument("--out", type=Path, default=RESULTS_DIR, help="output directory (default bench/results)")
    args = arguments.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out)
    if args.parallel_gzip:
        os.environ[PARALLEL_GZIP_VARIABLE] = "1"  # read by the workers
    if args.blocks:
        os.environ[BLOCKS_VARIABLE] = "1"
    return replay(args) if args.replay is not None else drive(args)


if __name__ == "__main__":
    raise SystemExit(main())
