"""A gzip file of several members cut into byte ranges that decompress on their own.

A gzip file may hold many members back to back: BGZF (bgzip, BAM's
blocks), files joined with ``cat``, the output of writers that start a new
member now and then. Each range of whole members is a gzip file of its own,
so several decompressors can read one file at once, each its own range.

A member is found by its header: the magic bytes, a plausible header, and
deflate data after it that decompresses (its first 64 KiB). That makes a
false start in the middle of compressed data unlikely; it does not prove it.
The proof comes later: the range before a split point must decompress to
its very end, ending in a complete member (:class:`bpbc.io._ParallelGzip`
raises EOFError otherwise), and the reader that takes these ranges falls
back to one stream from the start when it does not.
"""

from __future__ import annotations

import io
import os
import zlib

_MAGIC = b"\x1f\x8b\x08"
#: header flags: FTEXT, FHCRC, FEXTRA, FNAME, FCOMMENT; the other bits are reserved (zero)
_FHCRC, _FEXTRA, _FNAME, _FCOMMENT = 2, 4, 8, 16
#: bytes read at a time while looking for a member start
_WINDOW = 1 << 20
#: compressed bytes decompressed to check a member start
_PROBE = 1 << 16


def _header_size(data: bytes) -> int | None:
    """Size of the gzip header at the start of ``data``, None when it is not a plausible one."""
    if len(data) < 10 or data[:3] != _MAGIC or data[3] & 0xE0 or data[8] not in (0, 2, 4):
        return None
    flags, at = data[3], 10
    if flags & _FEXTRA:
        if len(data) < at + 2:
            return None
        at += 2 + int.from_bytes(data[at:at + 2], "little")
    for flag in (_FNAME, _FCOMMENT):
        if flags & flag:
            end = data.find(b"\0", at)
            if end < 0:
                return None
            at = end + 1
    if flags & _FHCRC:
        at += 2
    return at if at < len(data) else None


def is_member_start(data: bytes) -> bool:
    """Whether ``data`` begins with a gzip header followed by deflate data that decompresses."""
    size = _header_size(data)
    if size is None:
        return False
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        inflater.decompress(data[size:], 1 << 20)
    except zlib.error:
        return False
    return True


def next_member_start(handle, start: int, stop: int) -> int | None:
    """Offset of the first member start in ``handle`` at or after ``start`` and before ``stop``, or None."""
    at = start
    while at < stop:
        handle.seek(at)
        window = handle.read(min(_WINDOW, stop - at) + 2)
        found = window.find(_MAGIC)
        while 0 <= found < len(window) - 2:
            handle.seek(at + found)
            if is_member_start(handle.read(_PROBE)):
                return at + found
            found = window.find(_MAGIC, found + 1)
        at += _WINDOW
    return None


def member_ranges(path, range_bytes: int, search_bytes: int) -> list[tuple[int, int]]:
    """``path`` (a gzip file) cut into byte ranges of whole members, each
    about ``range_bytes`` long: a range ends where a member starts within
    ``search_bytes`` after its target end. One range, the whole file, where
    no member start is found (a file of one member)."""
    size = os.path.getsize(path)
    starts = [0]
    with open(path, "rb") as handle:
        target = range_bytes
        while target < size:
            found = next_member_start(handle, target, min(size, target + search_bytes))
            if found is None:
                if len(starts) == 1:
                    break  # nothing near the first target: most likely one member
                target += range_bytes
                continue
            starts.append(found)
            target = found + range_bytes
    return list(zip(starts, starts[1:] + [size]))


class RangeFile(io.RawIOBase):
    """Bytes ``start`` to ``end`` of the file at ``path``, read-only and seekable,
    as a file of their own (read with pread: the GIL is released while reading)."""

    def __init__(self, path, start: int, end: int):
        self._fd = os.open(path, os.O_RDONLY)
        self._start, self._end, self._at = start, end, start

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        size = min(len(buffer), self._end - self._at)
        if size <= 0:
            return 0
        got = os.preadv(self._fd, [memoryview(buffer)[:size]], self._at)
        self._at += got
        return got

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: self._start, io.SEEK_CUR: self._at, io.SEEK_END: self._end}[whence]
        self._at = min(max(self._start, base + offset), self._end)
        return self._at - self._start

    def tell(self) -> int:
        return self._at - self._start

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()
