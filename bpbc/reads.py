"""Reads in one buffer: the form every in-memory input of a screen takes.

:func:`bpbc.screen` and :class:`bpbc.Screener` turn reads given as Python
strings, bytes or records into a :class:`Reads` first (their text copied
out on every core, :mod:`bpbc.pyobjects`); reads that are in a buffer
already go in as one, built with :meth:`Reads.from_buffer`, and no Python
object per read ever exists. The engines encode and pack straight from the
buffer; the host encodes only the reads it needs again (the hits).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .alphabet import joined_bytes, record_name
from .chunks import _encode_sequences
from .engines import set_up_process


class Reads:
    """Reads as one buffer of sequence bytes: read i is
    ``data[offsets[i]:offsets[i + 1]]``, as in an Arrow string column, the
    lines of a file mapped into memory, or sequences written one after the
    other into a ``bytearray``.

    Make one with :meth:`from_buffer` (data and offsets as they are) or
    :meth:`of` (str, bytes or records such as dnaio's, any mix). A sequence
    follows the rules of every input: IUPAC letters in either case (A, C,
    G, T, U match; N and the other IUPAC codes match nothing), empty reads
    allowed; a byte outside the alphabet raises :class:`bpbc.SequenceError`
    when the reads are screened, naming the read: by ``names[i]`` where
    names were given, a record by its name, else ``read<i + 1>``.

    Attributes: ``data`` (uint8 array; the caller's buffer, not copied),
    ``seq_start`` and ``lengths`` (int64 arrays: read i is
    ``data[seq_start[i]:][:lengths[i]]``).
    """

    def __init__(self, data: np.ndarray, seq_start: np.ndarray, lengths: np.ndarray,
                 names: Sequence | None = None, records: Sequence | None = None, rows: np.ndarray | None = None):
        self.data = data
        self.seq_start = seq_start
        self.lengths = lengths
        self._names = names  # one per row, or None
        self._records = records  # the items the reads came from (names looked up only for an error), or None
        #: the row, in the reads as made, of each read (None: read i is row i, and
        #: no array of n rows is made for reads never subset): a subset keeps its reads' names
        self._rows = rows

    @classmethod
    def from_buffer(cls, data, offsets, names: Sequence[str] | None = None) -> Reads:
        """Reads whose sequences lie back to back in ``data`` (bytes,
        bytearray, memoryview, mmap, or a 1-D numpy array of uint8 or int8;
        kept, not copied): read i is ``data[offsets[i]:offsets[i + 1]]``.
        ``offsets``: n + 1 non-decreasing integers within ``data`` (n = 0:
        ``[0]``); ``names``: one per read, for error messages. Raises
        ValueError or TypeError where they do not fit together."""
        if isinstance(data, np.ndarray):
            if data.ndim != 1 or data.dtype not in (np.uint8, np.int8):
                raise TypeError(f"data must be a 1-D uint8 array, got a {data.ndim}-D {data.dtype} array")
            buffer = np.ascontiguousarray(data).view(np.uint8)
        else:
            try:
                buffer = np.frombuffer(data, np.uint8)
            except (TypeError, ValueError) as error:
                raise TypeError(f"data must be bytes-like or a uint8 array, got {type(data).__name__}: {error}") \
                    from None
        bounds = np.asarray(offsets)
        if bounds.ndim != 1 or len(bounds) == 0 or not np.issubdtype(bounds.dtype, np.integer):
            raise ValueError("offsets must be a 1-D array of integers, one more than there are reads")
        bounds = bounds.astype(np.int64, copy=False)
        lengths = np.diff(bounds)
        if bounds[0] < 0 or bounds[-1] > len(buffer) or (lengths < 0).any():
            raise ValueError(f"offsets must rise from 0 or more to at most the data's size ({len(buffer)} bytes)")
        if names is not None and len(names) != len(lengths):
            raise ValueError(f"{len(names)} names given for {len(lengths)} reads")
        return cls(buffer, bounds[:-1], lengths, names=names)

    @classmethod
    def of(cls, reads) -> Reads:
        """``reads`` as :class:`Reads`: a :class:`Reads` as it is, else an
        iterable of str, bytes or records with ``.sequence`` (and ``.name``),
        their text copied into one buffer."""
        if isinstance(reads, Reads):
            return reads
        set_up_process()  # before the copy's kernels may first load numba's OpenMP runtime (see the Screener)
        items = reads if type(reads) is list else list(reads)
        data, offsets, lengths = joined_bytes(items)
        return cls(data, offsets[:-1], lengths, records=items)

    def __len__(self) -> int:
        return len(self.lengths)

    def __repr__(self) -> str:
        return f"Reads({len(self)} reads, {int(self.lengths.sum())} bases)"

    def name(self, index: int) -> str:
        """The name of read ``index``, as errors give it."""
        row = index if self._rows is None else int(self._rows[index])
        if self._names is not None:
            return str(self._names[row])
        if self._records is not None:
            return record_name(self._records[row], row, "read")
        return f"read{row + 1}"

    def subset(self, rows: np.ndarray) -> Reads:
        """The reads ``rows`` (indices), in that order, sharing this buffer."""
        return Reads(self.data, self.seq_start[rows], self.lengths[rows], self._names, self._records,
                     np.asarray(rows) if self._rows is None else self._rows[rows])

    def encode(self) -> tuple[np.ndarray, np.ndarray]:
        """(codes, lengths) as :func:`bpbc.alphabet.encode_reads` gives them;
        a byte outside the alphabet raises SequenceError naming the read."""
        return _encode_sequences(self.data, self.seq_start, self.lengths, self.name)
