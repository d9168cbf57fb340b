"""One reads file cut into parts that Dask workers read on their own.

A part is a byte range of the file that starts where reading can start
afresh: any byte of an uncompressed file, the first byte of a gzip member
(every BGZF block is one). Nothing of the file is decompressed or parsed to
cut it (:func:`plan_parts`): a gzip member start is looked for in a window of
a few MiB around each cut point. A gzip file of one member is cut anywhere
in its data instead, through rapidgzip's index of it (made by decompressing
it once, :func:`write_gzip_index`): each part is read from the index's
checkpoint before it.

A part's records are those that start in its bytes: it reads from the first
record start at or after its first byte to the first record start at or after
the next part's first byte (:class:`PartStream`), so the parts one after the
other are the file's records, each once, in order. A record start is the byte
after a newline where, in FASTA, a line begins with '>'; in FASTQ, a line
begins with '@', the line two on begins with '+' and the line after that is as
long as the line after the '@' line. Both rules are exact for the records the
raw route reads (four lines each): a FASTQ quality line that begins with '@'
has two lines on a sequence line, and no sequence begins with '+'.

A gzip header found in the window but not really a member's (its magic bytes
inside deflate data) would be caught when the part before it is read: its
members do not end there (:class:`UnreadablePart`), and the run reads the
file whole instead.
"""

from __future__ import annotations

import io
import os
import stat
import zlib
from dataclasses import dataclass
from typing import Any

#: a part holds at least this many bytes of the file: below, a task's start costs more than it saves
MIN_PART_BYTES = 32 << 20
#: bytes on either side of a cut point searched for a gzip member's start (a BGZF block holds at most 64 KiB)
MEMBER_SEARCH_BYTES = 4 << 20
#: compressed bytes read at a time
READ_BYTES = 1 << 20
#: decompressed bytes made at a time from them (bounds what a highly compressed stretch takes)
PIECE_BYTES = 4 << 20
_GZIP_MAGIC = b"\x1f\x8b\x08"  # and deflate, the only method gzip has
_GZIP_RESERVED_FLAGS = 0xE0
_FORMATS = {b"@": "fastq", b">": "fasta"}


def _inflate():
    """zlib's interface at ISA-L's speed (xopen's dependency), else zlib's own."""
    try:
        from isal import isal_zlib

        return isal_zlib
    except ImportError:
        return zlib


class UnreadablePart(RuntimeError):
    """A gzip part that does not decompress to its end: a gzip header found
    when the file was cut was not a member's, or the file is damaged. Not an
    input error: the file is read whole instead, where damage is found and
    named as a run of one process names it."""


@dataclass(frozen=True)
class FilePart:
    """Bytes ``start`` to ``end`` of the file at ``path``: its records are
    those that start there (the module's docstring). ``os.fspath`` of a part
    is its file's path."""

    path: str
    #: where the part's bytes start and end: offsets in the file; with ``index``, in its decompressed data
    start: int
    end: int
    #: 'plain' (uncompressed), 'members' (gzip; ``start`` is a member's first byte) or 'indexed' (gzip, any
    #: offsets of its data, reached through rapidgzip's ``index`` of the file)
    kind: str
    #: 'fastq' or 'fasta'
    fileformat: str
    number: int
    count: int
    index: str | None = None

    def __fspath__(self) -> str:
        return self.path

    @property
    def last(self) -> bool:
        return self.number == self.count - 1

    def describe(self) -> str:
        """Which part this is, for messages."""
        where = " of the decompressed data" if self.kind == "indexed" else ""
        return f"part {self.number + 1} of {self.count}, from byte {self.start}{where}"

    def open(self, threads: int = 1) -> PartStream:
        """The part's records, decompressed on ``threads`` threads where that pays."""
        return PartStream(self, threads)


def _layout(path) -> tuple[int, bool, str | None]:
    """The size of a regular file, whether it is gzip, and its format (None: neither FASTA nor FASTQ)."""
    try:
        status = os.stat(path)
    except OSError:
        return 0, False, None
    if not stat.S_ISREG(status.st_mode):
        return 0, False, None
    with open(path, "rb") as handle:
        head = handle.read(READ_BYTES)
    gzip = head.startswith(_GZIP_MAGIC)
    return status.st_size, gzip, _FORMATS.get(_first_decompressed_byte(head) if gzip else head[:1])


def _part_count(size: int, count: int, min_bytes: int | None) -> int:
    return min(count, size // max(1, MIN_PART_BYTES if min_bytes is None else min_bytes))


def plan_parts(path, count: int, min_bytes: int | None = None, index: str | None = None) -> list[FilePart] | None:
    """``path`` cut into at most ``count`` parts of at least ``min_bytes``
    of the file (default :data:`MIN_PART_BYTES`), or None where it cannot be
    cut: not a regular file, not FASTA or FASTQ (uncompressed or gzip), too
    small, or gzip without another member start near any cut point (one
    member: it can only be decompressed from its start) and without
    ``index``, rapidgzip's index of the file (:func:`write_gzip_index`)."""
    path = os.fspath(path)
    size, gzip, fileformat = _layout(path)
    count = _part_count(size, count, min_bytes)
    if fileformat is None or count < 2:
        return None
    if gzip and index is not None:
        data = _indexed_size(path, index)
        starts = [data * number // count for number in range(count)]
        return _parts(path, starts, data, "indexed", fileformat, index)
    starts = [0]
    with open(path, "rb") as handle:
        for number in range(1, count):
            cut = size * number // count
            start = _member_start(handle, max(starts[-1] + 1, cut - MEMBER_SEARCH_BYTES), cut,
                                  min(size, cut + MEMBER_SEARCH_BYTES)) if gzip else cut
            if start is not None and start > starts[-1] and start < size:
                starts.append(start)
    return _parts(path, starts, size, "members" if gzip else "plain", fileformat) if len(starts) > 1 else None


def _parts(path: str, starts: list[int], size: int, kind: str, fileformat: str, index: str | None = None
           ) -> list[FilePart]:
    ends = starts[1:] + [size]
    return [FilePart(path, start, end, kind, fileformat, number, len(starts), index)
            for number, (start, end) in enumerate(zip(starts, ends))]


def indexable(path, count: int, min_bytes: int | None = None) -> bool:
    """Whether ``path`` is FASTA or FASTQ in gzip, large enough for parts:
    :func:`plan_parts` cuts it through an index where it cannot without."""
    size, gzip, fileformat = _layout(path)
    return gzip and fileformat is not None and _part_count(size, count, min_bytes) >= 2


def write_gzip_index(path, index_path, threads: int) -> None:
    """rapidgzip's index of the gzip file ``path`` written to ``index_path``:
    the whole file decompressed once, on ``threads`` threads."""
    import rapidgzip

    with rapidgzip.RapidgzipFile(os.fspath(path), parallelization=threads) as reader:
        reader.export_index(os.fspath(index_path))


def _indexed_size(path: str, index: str) -> int:
    import rapidgzip

    with rapidgzip.RapidgzipFile(path, parallelization=1) as reader:
        reader.import_index(index)
        return reader.size()


def _first_decompressed_byte(head: bytes) -> bytes:
    try:
        return zlib.decompressobj(31).decompress(head, 1)
    except zlib.error:
        return b""


def _member_start(handle, low: int, cut: int, high: int) -> int | None:
    """The gzip member start in [low, high) nearest to ``cut``: a gzip header
    whose data decompresses (a fresh member refers to nothing before it, so
    bytes that only look like a header fail within a few symbols)."""
    handle.seek(low)
    window = handle.read(high - low)
    candidates = []
    at = window.find(_GZIP_MAGIC)
    while at >= 0:
        if at + 3 < len(window) and not window[at + 3] & _GZIP_RESERVED_FLAGS:
            candidates.append(low + at)
        at = window.find(_GZIP_MAGIC, at + 1)
    for start in sorted(candidates, key=lambda start: abs(start - cut)):
        handle.seek(start)
        try:
            zlib.decompressobj(31).decompress(handle.read(1 << 16), 1 << 12)
            return start
        except zlib.error:
            pass
    return None


class _PlainBytes:
    """An uncompressed part's bytes, from its first on to the end of the file;
    :attr:`end_at`: where the part's last byte ends in them."""

    def __init__(self, part: FilePart, threads: int = 1):
        self._file = open(part.path, "rb", buffering=0)
        self._file.seek(part.start)
        self.end_at: int | None = part.end - part.start
        self.made = 0

    def readinto(self, view) -> int:
        """Bytes before :attr:`end_at` into ``view``; 0 where none is left."""
        assert self.end_at is not None
        got = self._file.readinto(view[:max(0, min(len(view), self.end_at - self.made))])
        self.made += got
        return got

    def read(self) -> bytes:
        piece = self._file.read(READ_BYTES)
        self.made += len(piece)
        return piece

    def close(self) -> None:
        self._file.close()


class _Members:
    """The gzip members from file offset ``start`` on, decompressed one after
    the other on this thread, to the end of the file; with ``end``, a member
    must start there (:attr:`end_at`: where, in the decompressed bytes)."""

    def __init__(self, path: str, start: int, end: int | None):
        self._file = open(path, "rb", buffering=0)
        self._file.seek(start)
        self._end = end
        self.end_at: int | None = None
        self.made = 0
        self._inflate = _inflate()
        self._decompressor: Any = None  # of the member under way; None between members
        self._input = b""  # compressed bytes not yet decompressed
        self._input_at = start  # their offset in the file

    def close(self) -> None:
        self._file.close()

    def read(self) -> bytes:
        """The next piece; b"" at the end of the file."""
        while True:
            if not self._input:
                self._input_at = self._file.tell()
                self._input = self._file.read(READ_BYTES)
            if self._decompressor is None:  # a member starts here, or the file ends
                self._at_member_start(self._input_at)
                if not self._input:
                    return b""
                self._decompressor = self._inflate.decompressobj(wbits=31)
            elif not self._input:
                raise UnreadablePart(f"the gzip member before byte {self._input_at} is cut short")
            try:
                piece = self._decompressor.decompress(self._input, PIECE_BYTES)
            except self._inflate.error as error:
                raise UnreadablePart(f"{error} (the gzip member from byte {self._input_at})") from None
            rest = self._decompressor.unused_data if self._decompressor.eof else self._decompressor.unconsumed_tail
            self._input_at += len(self._input) - len(rest)
            self._input = rest
            if self._decompressor.eof:
                self._decompressor = None
            self.made += len(piece)
            if piece:
                return piece

    def _at_member_start(self, offset: int) -> None:
        if self._end is not None and self.end_at is None:
            if offset == self._end:
                self.end_at = self.made
            elif offset > self._end:
                raise UnreadablePart(f"no gzip member starts at byte {self._end} (the member before ends at "
                                     f"{offset})")


def _piece(readinto) -> bytes:
    """Up to PIECE_BYTES bytes read by ``readinto`` (b"": none left)."""
    buffer = bytearray(PIECE_BYTES)
    return bytes(memoryview(buffer)[:readinto(memoryview(buffer))])


class _GzipBytes:
    """A gzip part's bytes, from its first on to the end of the file: its
    members decompressed by rapidgzip's threads where that pays (in a
    process of its own for a large part, as a whole file would be), else
    one after the other here; past its last byte the members after it, here
    (the record that runs over into them)."""

    def __init__(self, part: FilePart, threads: int):
        from .gzip_reader import parallel_gzip

        self._part = part
        self._parallel = parallel_gzip(part.path, threads, part.start, part.end)
        self._members = None if self._parallel is not None else _Members(part.path, part.start, part.end)
        self.end_at: int | None = None
        self.made = 0

    def readinto(self, view) -> int:
        """Bytes before :attr:`end_at` into ``view``; 0 where none is left."""
        if self._parallel is None:
            return 0  # the members are read by pieces (read)
        try:
            got = self._parallel.readinto(view)
        except (OSError, EOFError) as error:  # rapidgzip's errors, a cut that is not a member start among them
            raise UnreadablePart(str(error)) from None
        self.made += got
        if not got:
            self.end_at = self.made
            self._parallel.close()
            self._parallel = None
            self._members = _Members(self._part.path, self._part.end, None)
        return got

    def read(self) -> bytes:
        if self._parallel is not None and (piece := _piece(self.readinto)):
            return piece
        assert self._members is not None
        piece = self._members.read()
        if self.end_at is None:
            self.end_at = self._members.end_at
        self.made += len(piece)
        return piece

    def close(self) -> None:
        for reader in (self._parallel, self._members):
            if reader is not None:
                reader.close()


class _IndexedBytes:
    """The decompressed bytes of a gzip file from a part's first on, read by
    rapidgzip from the checkpoint of its index before them (in a process of
    its own for a large part, as a whole file would be read)."""

    def __init__(self, part: FilePart, threads: int):
        from .gzip_reader import open_indexed

        assert part.index is not None
        self._reader = open_indexed(part.path, threads, part.index, part.start, part.end)
        self.end_at: int | None = part.end - part.start
        self.made = 0

    def readinto(self, view) -> int:
        """Bytes before :attr:`end_at` into ``view``; 0 where none is left."""
        assert self.end_at is not None
        return self._read(view[:max(0, min(len(view), self.end_at - self.made))])

    def read(self) -> bytes:
        return _piece(self._read)

    def _read(self, view) -> int:
        try:
            got = self._reader.readinto(view) if len(view) else 0
        except (OSError, EOFError) as error:
            raise UnreadablePart(str(error)) from None
        self.made += got
        return got

    def close(self) -> None:
        self._reader.close()


class PartStream(io.RawIOBase):
    """A part's records as a stream (decompressed): the file's bytes from the
    first record start at or after the part's first byte to the first at or
    after its last (the module's docstring)."""

    def __init__(self, part: FilePart, threads: int = 1):
        self._part = part
        sources = {"plain": _PlainBytes, "members": _GzipBytes, "indexed": _IndexedBytes}
        self._source: Any = sources[part.kind](part, threads)
        self._data = bytearray()  # decompressed bytes not yet handed out or passed over
        self._data_at = 0  # the offset of its first byte in the decompressed part
        self._at_end = False  # the source is spent
        self._begin: int | None = None  # where the part's records begin, once found
        self._stop: int | None = None  # ... and where they end

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self._source.close()
        super().close()

    def readinto(self, buffer) -> int:
        if self._begin is None:
            self._begin = 0 if self._part.number == 0 else self._record_start(0)
            self._pass_over(self._begin)
        view = memoryview(buffer).cast("B")
        if not self._data and self._stop is None:  # within the part, nothing held: straight from the decompressor
            got = self._source.readinto(view)
            if got:
                self._data_at += got
                return got
        while True:
            limit = min(self._limit(), self._data_at + len(self._data))
            if limit > self._data_at:
                break
            if self._stop is not None and self._data_at >= self._stop:
                return 0
            if not self._more():  # the file ends before the part's records do: they end with it
                self._stop = self._data_at + len(self._data)
        count = min(len(view), limit - self._data_at)
        view[:count] = self._data[:count]
        self._pass_over(self._data_at + count)
        return count

    def _limit(self) -> int:
        """How far bytes may be handed out now: before the part's last byte is
        reached, every byte made (they all lie before it); then up to it, and
        past it to the first record start after it."""
        end_at = self._source.end_at
        if self._stop is not None or end_at is None or self._part.last:
            return self._stop if self._stop is not None else self._data_at + len(self._data)
        if self._data_at < end_at:
            return end_at
        # past the part's last byte: its records end at the next record start, which
        # is the first one the part has where that lies past its last byte (an empty part)
        self._stop = stop = self._data_at if self._data_at > end_at else self._record_start(end_at)
        return stop

    def _more(self) -> bool:
        if self._at_end:
            return False
        piece = self._source.read()
        if not piece:
            self._at_end = True
            return False
        self._data += piece
        return True

    def _pass_over(self, offset: int) -> None:
        """Drop the bytes before ``offset`` (read more where it lies beyond them)."""
        while offset > self._data_at + len(self._data) and self._more():
            pass
        drop = min(offset - self._data_at, len(self._data))
        del self._data[:drop]
        self._data_at += drop

    def _line_end(self, start: int) -> int:
        """The offset of the newline that ends the line from ``start``; the end
        of the file's bytes where none follows."""
        while True:
            at = self._data.find(b"\n", start - self._data_at)
            if at >= 0:
                return self._data_at + at
            if not self._more():
                return self._data_at + len(self._data)

    def _record_start(self, offset: int) -> int:
        """The first record start after a newline at or after ``offset``; the
        end of the file's bytes where there is none."""
        newline = self._line_end(offset)
        while newline < self._data_at + len(self._data):
            start = newline + 1
            if self._is_record_start(start):
                return start
            newline = self._line_end(start)
        return self._data_at + len(self._data)

    def _byte(self, offset: int) -> int | None:
        while offset >= self._data_at + len(self._data):
            if not self._more():
                return None
        return self._data[offset - self._data_at]

    def _is_record_start(self, start: int) -> bool:
        first = self._byte(start)
        if self._part.fileformat == "fasta":
            return first == ord(">")
        if first != ord("@"):
            return False
        ends = [self._line_end(start)]
        for _ in range(3):
            ends.append(self._line_end(ends[-1] + 1))
        sequence, quality = ends[1] - ends[0], ends[3] - ends[2]
        return self._byte(ends[1] + 1) == ord("+") and sequence == quality
