"""Paired-end reads: mates from two files, or from one interleaved file, in chunks of whole pairs.

A :class:`PairedChunk` holds pair i as record i of ``first`` (mate 1) and
record i of ``second`` (mate 2). The screen sees it as one batch of 2n reads,
mates interleaved (row 2i is mate 1 of pair i, row 2i + 1 its mate 2), so one
engine call covers both mates and hits come out pair by pair. Mates must
belong together: their names (the first word of the header) must be equal
once a trailing ``/1`` or ``/2`` is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from numba import njit

from .alphabet import INVALID, SequenceError
from .errors import InputError
from .result import Texts

_SLASH = 47
_ONE, _TWO = 49, 50


@njit(cache=True, nogil=True, inline="always")
def _pair_name_end(buf, start, stop):
    """End of a name without its trailing '/1' or '/2'."""
    if stop - start >= 2 and buf[stop - 2] == _SLASH and (buf[stop - 1] == _ONE or buf[stop - 1] == _TWO):
        return stop - 2
    return stop


@njit(cache=True, nogil=True)
def _first_mismatch(buf1, off1, buf2, off2):
    """Index of the first pair whose mate names differ (beyond '/1', '/2'), or -1."""
    for i in range(off1.shape[0] - 1):
        s1, s2 = off1[i], off2[i]
        e1 = _pair_name_end(buf1, s1, off1[i + 1])
        e2 = _pair_name_end(buf2, s2, off2[i + 1])
        if e1 - s1 != e2 - s2:
            return i
        for j in range(e1 - s1):
            if buf1[s1 + j] != buf2[s2 + j]:
                return i
    return -1


@njit(cache=True, nogil=True)
def _mate_names(buf1, off1, buf2, off2, mates):
    """Names with the mate appended ('/1' or '/2', replacing one already
    there): entry t is the next name of mate ``mates[t]``'s texts."""
    count = mates.shape[0]
    offsets = np.zeros(count + 1, np.int64)
    out = np.empty(buf1.shape[0] + buf2.shape[0] + 2 * count, np.uint8)
    at = 0
    next1 = next2 = 0
    for t in range(count):
        if mates[t] == 0:
            buf, start, stop = buf1, off1[next1], off1[next1 + 1]
            next1 += 1
        else:
            buf, start, stop = buf2, off2[next2], off2[next2 + 1]
            next2 += 1
        stop = _pair_name_end(buf, start, stop)
        for i in range(start, stop):
            out[at] = buf[i]
            at += 1
        out[at] = _SLASH
        out[at + 1] = _ONE + mates[t]
        at += 2
        offsets[t + 1] = at
    return out[:at], offsets


def _interleave(codes1: np.ndarray, lengths1: np.ndarray, codes2: np.ndarray, lengths2: np.ndarray):
    n = len(lengths1)
    codes = np.full((2 * n, max(codes1.shape[1], codes2.shape[1])), INVALID, np.uint8)
    codes[0::2, :codes1.shape[1]] = codes1
    codes[1::2, :codes2.shape[1]] = codes2
    lengths = np.empty(2 * n, np.int64)
    lengths[0::2], lengths[1::2] = lengths1, lengths2
    return codes, lengths


class PairedChunk:
    """Pairs ``(first[i], second[i])``; ``whole`` is the interleaved chunk they
    came from (None for two files). ``files`` names the mates' files."""

    def __init__(self, first, second, files: tuple[str, str], whole=None):
        self.first = first
        self.second = second
        self.files = files
        self.whole = whole

    def __len__(self) -> int:
        """Number of pairs."""
        return len(self.first)

    def encode(self) -> tuple[np.ndarray, np.ndarray]:
        """(codes, lengths) of the 2n reads, mates interleaved."""
        if self.whole is not None:
            return self._encoded(self.whole, self.files[0])
        return _interleave(*self._encoded(self.first, self.files[0]), *self._encoded(self.second, self.files[1]))

    @staticmethod
    def _encoded(chunk, file: str):
        try:
            return chunk.encode()
        except SequenceError as error:
            raise InputError(f"{file}: {error}") from None

    def read_names(self, rows: np.ndarray) -> Texts:
        """Names of reads ``rows`` (of the 2n): the pair's name, then /1 or /2."""
        mates = (rows & 1).astype(np.int64)
        pairs = rows >> 1
        names1 = self.first.read_names(pairs[mates == 0])
        names2 = self.second.read_names(pairs[mates == 1])
        return Texts(*_mate_names(names1.buffer, names1.offsets, names2.buffer, names2.offsets, mates))

    def write(self, outputs, pairs: np.ndarray) -> None:
        """Write pairs ``pairs`` (increasing): mate 1 to ``outputs[0]`` and
        mate 2 to ``outputs[1]``, or both, interleaved, to ``outputs[0]``
        when ``outputs[1]`` is None (interleaved input only)."""
        first, second = outputs
        if second is None:
            rows = np.empty(2 * len(pairs), np.int64)
            rows[0::2], rows[1::2] = 2 * pairs, 2 * pairs + 1
            self.whole.write(first, rows)
        else:
            self.first.write(first, pairs)
            self.second.write(second, pairs)

    def check_mates(self, pairs_before: int) -> None:
        """Raise InputError naming both records when some pair's names differ."""
        everything = np.arange(len(self))
        names1, names2 = self.first.read_names(everything), self.second.read_names(everything)
        i = int(_first_mismatch(names1.buffer, names1.offsets, names2.buffer, names2.offsets))
        if i < 0:
            return
        name1, name2 = self.first.read_id(i), self.second.read_id(i)
        pair = pairs_before + i + 1
        if self.whole is not None:
            where = f"{self.files[0]}: records {2 * pair - 1} and {2 * pair}"
        else:
            where = f"{self.files[0]} and {self.files[1]}: the records {pair}"
        raise InputError(f"{where} ({name1!r} and {name2!r}) are not mates "
                         "(mate names must be equal up to a trailing /1 or /2)")


def two_file_pairs(source1, source2, size: int | Callable[[], int], ramp: int = 1) -> Iterator[PairedChunk]:
    """Chunks of at most ``size`` pairs (a number, or a call as
    :meth:`bpbc.io.SequenceSource.chunks` takes) from two files read side by side."""
    files = (source1.name, source2.name)
    chunks1, chunks2 = source1.chunks(size, ramp), source2.chunks(size, ramp)
    left1 = left2 = None  # records of a chunk not yet paired
    done = 0
    while True:
        if left1 is None:
            left1 = next(chunks1, None)
        if left2 is None:
            left2 = next(chunks2, None)
        if left1 is None or left2 is None:
            if left1 is left2:
                return
            short, long_, extra = (files[0], files[1], left2) if left1 is None else (files[1], files[0], left1)
            assert extra is not None
            raise InputError(f"{short} ends after {done} reads but {long_} goes on (read {done + 1}, "
                             f"{extra.read_id(0)!r}); the two files must hold the same number of reads")
        # chunk boundaries agree unless one file changed reading route mid-chunk
        count = min(len(left1), len(left2))
        part1, left1 = _split(left1, count)
        part2, left2 = _split(left2, count)
        pairs = PairedChunk(part1, part2, files)
        pairs.check_mates(done)
        done += count
        yield pairs


def interleaved_pairs(source, size: int | Callable[[], int], ramp: int = 1) -> Iterator[PairedChunk]:
    """Chunks of at most ``size`` pairs (a number, or a call as
    :meth:`bpbc.io.SequenceSource.chunks` takes) from one file holding mate 1, mate 2, mate 1, ..."""
    files = (source.name, source.name)
    done = 0
    records = (lambda: 2 * size()) if callable(size) else 2 * size
    for chunk in source.chunks(records, ramp, multiple=2):
        if len(chunk) % 2:
            raise InputError(f"{source.name}: interleaved input holds an odd number of records; the last, "
                             f"record {2 * done + len(chunk)} ({chunk.read_id(len(chunk) - 1)!r}), has no mate")
        count = len(chunk) // 2
        rows = np.arange(count, dtype=np.int64)
        pairs = PairedChunk(chunk.subset(2 * rows), chunk.subset(2 * rows + 1), files, whole=chunk)
        pairs.check_mates(done)
        done += count
        yield pairs


def _split(chunk, count: int):
    """(the first ``count`` records, the rest or None)."""
    if count == len(chunk):
        return chunk, None
    return chunk.subset(np.arange(count)), chunk.subset(np.arange(count, len(chunk)))
