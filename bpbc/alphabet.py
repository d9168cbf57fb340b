"""Nucleotide alphabet: read codes, IUPAC pattern sets, reverse complements.

Reads are encoded base by base as codes 0..3 (A, C, G, T; U counts as T).
Any other IUPAC letter in a read (N, R, ...) becomes INVALID: it is a valid
input but never matches anything. Padding uses INVALID too, so padding and N
behave identically in every engine.

Patterns are encoded as IUPAC sets: a 4-bit mask with bit 0 = A, 1 = C, 2 = G,
3 = T. A read base with code c matches pattern position p when
``read_code != INVALID and (pattern_mask[p] >> read_code) & 1``.

Everything is case-insensitive. Bytes outside the IUPAC alphabet raise
:class:`SequenceError`, which names the record.
"""

from __future__ import annotations

from operator import attrgetter

import numpy as np

INVALID = 4  #: read code of N, other IUPAC codes, and padding

IUPAC_SETS = {
    "A": "A", "C": "C", "G": "G", "T": "T", "U": "T",
    "R": "AG", "Y": "CT", "S": "CG", "W": "AT", "K": "GT", "M": "AC",
    "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG", "N": "ACGT",
}
_BASE_BIT = {"A": 1, "C": 2, "G": 4, "T": 8}

#: byte -> read code (0..3, INVALID) or 255 for bytes outside the alphabet
READ_CODE = np.full(256, 255, dtype=np.uint8)
#: byte -> 4-bit IUPAC set mask, 0 for bytes outside the alphabet
PATTERN_MASK = np.zeros(256, dtype=np.uint8)
for _letter, _bases in IUPAC_SETS.items():
    _mask = sum(_BASE_BIT[b] for b in _bases)
    for _byte in (ord(_letter), ord(_letter.lower())):
        PATTERN_MASK[_byte] = _mask
        READ_CODE[_byte] = "ACGT".index(_bases) if len(_bases) == 1 else INVALID

#: complement of a 4-bit IUPAC mask (A<->T, C<->G): reverse the four bits
COMPLEMENT_MASK = np.array(
    [int(f"{m:04b}"[::-1], 2) for m in range(16)], dtype=np.uint8
)


class SequenceError(ValueError):
    """A sequence holds a character outside the IUPAC nucleotide alphabet,
    or is otherwise unusable (for example an empty pattern)."""


def as_bytes(seq) -> bytes:
    """Sequence text of a str, bytes, or dnaio record as bytes."""
    if isinstance(seq, bytes):
        return seq
    if isinstance(seq, str):
        return seq.encode("utf-8", "surrogateescape")
    if isinstance(seq, (bytearray, memoryview)):
        return bytes(seq)
    sequence = getattr(seq, "sequence", None)  # dnaio.SequenceRecord
    if sequence is not None:
        return as_bytes(sequence)
    raise TypeError(f"expected a sequence (str, bytes or a record with .sequence), got {type(seq).__name__}")


def describe_bad_byte(data: bytes, position: int) -> str:
    byte = data[position]
    if byte >= 128:
        return f"non-ASCII byte 0x{byte:02x} at position {position + 1}"
    return f"character {chr(byte)!r} at position {position + 1} is not an IUPAC nucleotide code"


def record_name(item, index: int, kind: str) -> str:
    """A record's name (first word of its header), or kind + 1-based index."""
    name = getattr(item, "name", None)
    return name.split(maxsplit=1)[0] if name else f"{kind}{index + 1}"


#: sequences from which :func:`joined_bytes` copies str and bytes out on numba's
#: threads (:mod:`bpbc.pyobjects`); fewer are joined in Python, where a
#: parallel kernel would cost more to start and, the first time, to load
GATHER_FROM = 1024


def joined_bytes(seqs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All sequences (str, bytes or records with ``.sequence``, any mix) back
    to back in one uint8 array, their offsets and lengths: sequence i is
    ``data[offsets[i]:offsets[i + 1]]``. Text outside ASCII is kept as its
    UTF-8 bytes (unpaired surrogates escaped), so that the encoder can name it."""
    seqs = seqs if type(seqs) is list else list(seqs)
    if seqs and len(seqs) >= GATHER_FROM:
        from .pyobjects import gather

        gathered = gather(seqs)
        first = seqs[0]
        if gathered is None and not isinstance(first, (str, bytes, bytearray, memoryview)) and hasattr(
                first, "sequence"):
            try:  # records of a type gather cannot read: their sequences, in one C-level pass
                gathered = gather(list(map(attrgetter("sequence"), seqs)))
            except AttributeError:  # a mixed list
                pass
        if gathered is not None:
            return gathered
    return _joined_in_python(seqs)


def _joined_in_python(seqs: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`joined_bytes` by Python's own joins: ASCII text in one
    ``"".join(...).encode()``, anything else sequence by sequence."""
    first = seqs[0] if seqs else None
    texts = None
    if isinstance(first, str):
        texts = seqs
    elif first is not None and not isinstance(first, (bytes, bytearray, memoryview)) and isinstance(
            getattr(first, "sequence", None), str):
        try:
            texts = [record.sequence for record in seqs]
        except AttributeError:  # a mixed list
            texts = None
    joined = None
    if texts is not None and all(isinstance(t, str) for t in (texts[0], texts[-1])):
        try:
            joined = "".join(texts).encode("ascii")
            lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        except (UnicodeEncodeError, TypeError):
            pass  # non-ASCII text, or a mixed list: the general path finds the culprit
    if joined is None:
        data = [as_bytes(s) for s in seqs]
        joined = b"".join(data)
        lengths = np.fromiter(map(len, data), dtype=np.int64, count=len(data))
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return np.frombuffer(joined, np.uint8), offsets, lengths


def _fill_codes(flat_codes, starts, lengths, codes):
    """codes[i, :lengths[i]] = flat_codes[starts[i]:starts[i] + lengths[i]]."""
    for i in range(lengths.shape[0]):
        start = starts[i]
        for j in range(lengths[i]):
            codes[i, j] = flat_codes[start + j]


_fill_codes_compiled = None


def encode_reads(seqs, names=None) -> tuple[np.ndarray, np.ndarray]:
    """Encode reads into a padded code matrix.

    Returns ``(codes, lengths)``: ``codes`` is uint8 of shape
    ``(len(seqs), max_length)`` holding 0..3 or INVALID (padding is INVALID),
    ``lengths`` is int64. ``names`` names the records in errors: a sequence,
    or a function of the read's index (called only when there is an error).
    """
    global _fill_codes_compiled
    joined, offsets, lengths = joined_bytes(seqs)
    n = len(lengths)
    width = int(lengths.max()) if n else 0
    flat_codes = READ_CODE[joined]
    if flat_codes.size and flat_codes.max() == 255:
        bad = int(np.flatnonzero(flat_codes == 255)[0])
        index = int(np.searchsorted(offsets, bad, side="right")) - 1  # the last read starting at or before it
        start = int(offsets[index])
        if names is None:
            name = f"#{index + 1}"
        else:
            name = names(index) if callable(names) else names[index]
        raise SequenceError(f"read {name}: {describe_bad_byte(joined[start:offsets[index + 1]].tobytes(), bad - start)}")
    if n and lengths.min() == width:  # all reads of one length: no padding
        return flat_codes.reshape(n, width), lengths
    codes = np.full((n, width), INVALID, dtype=np.uint8)
    if n:
        if _fill_codes_compiled is None:
            from numba import njit

            _fill_codes_compiled = njit(cache=True, nogil=True)(_fill_codes)
        _fill_codes_compiled(flat_codes, offsets[:-1], lengths, codes)
    return codes, lengths


def encode_pattern(seq, name=None) -> np.ndarray:
    """Encode one pattern as an array of 4-bit IUPAC set masks (uint8)."""
    data = as_bytes(seq)
    label = name if name is not None else "pattern"
    if not data:
        raise SequenceError(f"pattern {label}: sequence is empty")
    masks = PATTERN_MASK[np.frombuffer(data, dtype=np.uint8)]
    if masks.min() == 0:
        bad = int(np.flatnonzero(masks == 0)[0])
        raise SequenceError(f"pattern {label}: {describe_bad_byte(data, bad)}")
    return masks


def encode_patterns(seqs, names) -> list[np.ndarray]:
    """:func:`encode_pattern` of every sequence of ``seqs`` (``names`` name
    them in errors), in one table lookup: a panel of 10^4 patterns took one
    numpy call per pattern. The first unusable pattern raises the error that
    encoding one pattern at a time would have raised."""
    data = [as_bytes(seq) for seq in seqs]
    lengths = np.fromiter(map(len, data), np.int64, len(data))
    masks = PATTERN_MASK[np.frombuffer(b"".join(data), dtype=np.uint8)]
    if (lengths == 0).any() or (masks.size and masks.min() == 0):
        for seq, name in zip(data, names):
            encode_pattern(seq, name)  # raises at the first unusable one
    return np.split(masks, np.cumsum(lengths)[:-1]) if data else []


def matches(read_code: int, pattern_mask: int) -> bool:
    """Whether one read code matches one pattern mask (the scoring rule)."""
    return read_code != INVALID and bool((pattern_mask >> read_code) & 1)
