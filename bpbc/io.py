"""Sequence file input and atomic output files for ``bpbc-screen``.

Reading goes through dnaio (and xopen through it): FASTA or FASTQ as dnaio
detects them, plain or compressed (gz, bz2, xz, zst), ``-`` for stdin. Every
problem a user can cause (a missing file, a truncated record, a corrupt
compressed stream, ...) is turned into :class:`bpbc.errors.InputError`
(importable from here too), whose message is
one line naming the file and the line or record.

Output files are written under a temporary name in their destination's
directory and renamed into place by :meth:`AtomicOutput.commit`, so a failed
or interrupted run never leaves a file that looks complete.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import queue
import re
import secrets
import stat
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import dnaio
import numpy as np
from dnaio.exceptions import FileFormatError, UnknownFileFormat
from xopen import xopen

from bpbc.alphabet import SequenceError, encode_pattern, encode_patterns
from bpbc.buffers import BufferPool
from bpbc.errors import InputError
from bpbc.file_parts import FilePart
from bpbc.gzip_reader import parallel_gzip

STDIN = "-"
_NON_ASCII = re.compile(rb"[\x80-\xff]")

#: bytes per block handed to a compression thread: ISA-L's default 1 MiB meant
#: a few thousand thread handovers (each waiting for the GIL) per GB written
COMPRESSION_BLOCK = 4 << 20
#: bytes per write into a compressor in the writing thread (demultiplexed
#: files, many open at once: each holds up to this many bytes pending)
STREAM_BLOCK = 64 << 10
#: a zstd frame holding no data (zstd.compress(b""))
EMPTY_ZSTD_FRAME = bytes.fromhex("28b52ffd2000010000")
#: output compression by file name suffix, as xopen names the formats
COMPRESSION_SUFFIXES = {".gz": "gz", ".bz2": "bz2", ".xz": "xz", ".zst": "zst"}


def _igzip_threaded():
    """python-isal's threaded gzip module (xopen's own choice), or None where it is missing."""
    try:
        from isal import igzip_threaded
    except ImportError:
        return None
    return igzip_threaded


class FixedBlocks(io.BufferedIOBase):
    """A compressed file fed writes of exactly ``block_size`` bytes (the last
    one shorter), whatever the writes it is given, by ``write`` (by default
    the file's own). ISA-L's compressors give other bytes for the same data
    cut into other writes: its threaded writer compresses each block it is
    handed on its own (the previous block as dictionary) and its buffer hands
    over whatever a write leaves it; its one-thread stream differs too. The
    compressed bytes followed the sizes of the run's chunks: the same run gave
    another ``--unmatched`` .gz each time on a GPU host, the data identical.
    Here they follow the data alone, the same for any number of threads.
    :meth:`flush` hands over whole blocks only; the rest goes at :meth:`close`,
    which closes the file."""

    def __init__(self, file, block_size: int, write: Callable | None = None):
        super().__init__()
        self._file, self._block_size = file, block_size
        self._write = write or file.write
        self._pending = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        size = len(view)
        if self._pending:
            room = self._block_size - len(self._pending)
            self._pending += view[:room]
            view = view[room:]
            if len(self._pending) < self._block_size:
                return size
            self._write(self._pending)  # compressed or copied before it returns: the buffer is reused
            del self._pending[:]
        whole = len(view) - len(view) % self._block_size
        for start in range(0, whole, self._block_size):
            self._write(view[start:start + self._block_size])
        self._pending += view[whole:]
        return size

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._pending:
                self._write(self._pending)
                self._pending = bytearray()
        finally:
            self._file.close()
            super().close()


def display_name(path) -> str:
    """How a path appears in messages and summaries."""
    return "<stdin>" if path == STDIN else os.fspath(path)


def _decompression_errors() -> tuple[type[BaseException], ...]:
    """Exception types the decompressors behind xopen raise on corrupt data.

    Only modules already imported are consulted: the one that raised was.
    """
    errors: list[type[BaseException]] = [EOFError, OSError, zlib.error, lzma.LZMAError]  # OSError: GzipError too
    optional = [
        ("isal.igzip_lib", "IsalError"),
        ("isal.isal_zlib", "error"),
        ("zlib_ng.zlib_ng", "error"),
        ("backports.zstd", "ZstdError"),
        ("compression.zstd", "ZstdError"),
        ("zstandard", "ZstdError"),
    ]
    for module_name, attribute in optional:
        error = getattr(sys.modules.get(module_name), attribute, None)
        if isinstance(error, type) and issubclass(error, BaseException):
            errors.append(error)
    return tuple(errors)


def _format_errors() -> tuple[type[BaseException], ...]:
    """Everything reading a damaged sequence file can raise (dnaio's
    NotImplementedError: a BAM file of aligned or paired reads)."""
    return (FileFormatError, UnicodeDecodeError, NotImplementedError) + _decompression_errors()


def _find_non_ascii(path, block_size: int = 1 << 20) -> tuple[int, int] | None:
    """(1-based line, byte) of the first non-ASCII byte of a (possibly
    compressed) file, or None; only used to explain an error. Not of a pipe
    (a named one would be opened again, and wait for a writer for good)."""
    line = 1
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with xopen(path, "rb", threads=0) as stream:
            while block := stream.read(block_size):
                if not block.isascii():
                    position = _NON_ASCII.search(block).start()  # type: ignore[union-attr]  # not ASCII: found
                    return line + block.count(b"\n", 0, position), block[position]
                line += block.count(b"\n")
    except Exception:  # noqa: BLE001 - best effort: the caller has a fallback message
        return None
    return None


#: the magic bytes that start an .xz stream
_XZ_MAGIC = b"\xfd7zXZ\x00"
#: bytes of a legacy .lzma header: the properties byte, the dictionary size, the uncompressed size
_LZMA_HEADER = 13


def _lzma_header_recognised(header: bytes) -> bool:
    """Whether ``xz -d`` (5.4, ``is_format_lzma`` in src/xz/coder.c) takes
    the first 13 bytes of ``header`` for the header of a legacy .lzma file: a
    properties byte that liblzma decodes (pb at most 4, lc + lp at most 4), a
    dictionary size of 2^n or 2^n + 2^(n-1) but not 0, or 2^32 - 1, and an
    uncompressed size unknown (all ones) or at most 256 GiB. Python's own
    decoder takes more: a dictionary size of 0, so 13 null bytes and more
    are an empty .lzma stream to it and a file ``xz -d`` does not recognise."""
    pb, lc_lp = divmod(header[0], 9 * 5)
    lp, lc = divmod(lc_lp, 9)
    if pb > 4 or lc + lp > 4:
        return False
    dictionary = int.from_bytes(header[1:5], "little")
    if dictionary != 0xFFFF_FFFF:
        rounded = (dictionary - 1) & 0xFFFF_FFFF
        for shift in (2, 3, 4, 8, 16):  # xz's own rounding: 2^n and 2^n + 2^(n-1) are left as they are
            rounded |= rounded >> shift
        if (rounded + 1) & 0xFFFF_FFFF != dictionary or dictionary == 0:
            return False
    size = int.from_bytes(header[5:13], "little")
    return size == (1 << 64) - 1 or size <= 1 << 38


class _FirstXzStream:
    """The decompressor of an xz file's first stream, held to what ``xz -d``
    recognises there: an .xz stream (its magic bytes), or a legacy .lzma
    stream whose header :func:`_lzma_header_recognised` (after which the file
    must end, :class:`_AfterLzmaStream`). Python's reader detects the format
    (``FORMAT_AUTO``) and took null bytes for an empty .lzma stream, then
    read the .xz streams after them: a file of 938 null bytes and an .xz
    stream ran as the reads of that stream, where ``xz -d`` does not
    recognise the file and dnaio reads no record (found by the fuzz's
    oracle, seed 71 case 2301). Same interface as ``lzma.LZMADecompressor``."""

    def __init__(self, memlimit: int | None = None) -> None:
        self._memlimit = memlimit
        self._head = b""  # the first bytes, until the format is known
        self._stream: lzma.LZMADecompressor | None = None
        self.legacy = False  # a legacy .lzma stream: nothing may follow it
        self.eof = False
        self.unused_data = b""
        self.needs_input = True

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        if self._stream is None:
            head = self._head + bytes(data)
            if head.startswith(_XZ_MAGIC):
                self._stream = lzma.LZMADecompressor(lzma.FORMAT_XZ, self._memlimit)
            elif len(head) < _LZMA_HEADER:
                self._head = head  # maybe .xz or .lzma: wait for the whole magic or header
                return b""
            elif _lzma_header_recognised(head):
                self._stream = lzma.LZMADecompressor(lzma.FORMAT_ALONE, self._memlimit)
                self.legacy = True
            else:
                raise lzma.LZMAError("Input format not supported by decoder: neither an .xz stream nor a legacy "
                                     ".lzma one that xz -d recognises")
            self._head, data = b"", head
        out = self._stream.decompress(data, max_length)
        self.eof, self.unused_data, self.needs_input = (self._stream.eof, self._stream.unused_data,
                                                        self._stream.needs_input)
        return out


class _AfterLzmaStream:
    """What an xz file's reader decompresses after a legacy .lzma stream:
    nothing, as ``xz -d`` (a .lzma file holds one stream, no padding). The
    reader asks for it only where bytes follow, and hands it those."""

    eof = False
    unused_data = b""
    needs_input = True

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        raise lzma.LZMAError("Corrupt input data: bytes after a legacy .lzma stream (an .lzma file holds one stream)")


class _NextXzStream:
    """What an xz file's reader (``lzma.LZMAFile``) decompresses after a
    finished stream, held to what ``xz -d`` accepts there: stream padding
    (null bytes, a multiple of four), then another .xz stream or the file's
    end. Python's own next decompressor detects the format, and takes bytes
    that parse as a legacy .lzma header for more (empty) streams: 846 null
    bytes after the stream passed as 65 of them plus a byte, where ``xz -d``
    calls the file corrupt (found by the fuzz's oracle). Same interface as
    ``lzma.LZMADecompressor``; the reader is read forward only (no seek)."""

    def __init__(self, **args) -> None:
        self._memlimit = args.get("memlimit")
        self._stream: lzma.LZMADecompressor | None = None
        self._padding = 0
        self.eof = False
        self.unused_data = b""
        self.needs_input = True

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        if self._stream is None:
            rest = data.lstrip(b"\0")
            self._padding += len(data) - len(rest)
            if not rest:  # padding so far: the file may end here where it is whole words
                self.eof = self._padding % 4 == 0
                self.needs_input = not self.eof
                return b""
            if self._padding % 4:
                raise lzma.LZMAError("Corrupt input data: stream padding that is not a multiple of four bytes")
            self._stream = lzma.LZMADecompressor(lzma.FORMAT_XZ, self._memlimit)
            data = rest
        out = self._stream.decompress(data, max_length)
        self.eof, self.unused_data, self.needs_input = (self._stream.eof, self._stream.unused_data,
                                                        self._stream.needs_input)
        return out


def _strict(stream):
    """``stream`` (what xopen opened), made to raise on data after an xz or
    bzip2 stream that is not another stream: Python's LZMAFile and BZ2File
    take it for trailing garbage and end there without an error, so the
    reads of a damaged second stream (``cat a.xz b.xz``) were lost unnoticed
    (found by the fuzz's oracle). gzip and ``xz -d`` report it too. Their
    reader (``_compression.DecompressReader``) ignores the errors named in
    its ``_trailing_error``; other streams are left as they are. An xz file
    is held to what ``xz -d`` reads, stream by stream: its first stream to
    :class:`_FirstXzStream`'s rules (the decompressor the reader made
    already, nothing read yet, is replaced), what follows an .xz stream to
    :class:`_NextXzStream`'s, and nothing may follow a legacy .lzma one.
    The reader is read forward only (no seek back: dnaio peeks)."""
    reader = getattr(getattr(stream, "_buffer", None), "raw", None)
    if isinstance(stream, (lzma.LZMAFile, bz2.BZ2File)) and hasattr(reader, "_trailing_error"):
        reader._trailing_error = ()
        if isinstance(stream, lzma.LZMAFile) and hasattr(reader, "_decomp_factory") and reader._pos == 0:
            first = _FirstXzStream()  # LZMAFile sets no memory limit

            def next_stream(**args):
                return _AfterLzmaStream() if first.legacy else _NextXzStream(**args)

            reader._decompressor, reader._decomp_factory = first, next_stream
    return stream


def _describe_os_error(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


class _Replay(io.RawIOBase):
    """A binary stream that serves ``head`` first, then the rest of ``stream``."""

    def __init__(self, head: bytes, stream):
        self._head = memoryview(head)
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if len(self._head):
            size = min(len(buffer), len(self._head))
            buffer[:size] = self._head[:size]
            self._head = self._head[size:]
            return size
        data = self._stream.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


class _Failed(io.RawIOBase):
    """``stream`` after it failed: the next read raises ``error`` (the parsing
    in blocks read up to it and left the data before it to the serial route)."""

    def __init__(self, stream, error: BaseException):
        self._stream, self._error = stream, error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        raise self._error

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            super().close()


class _ReadAhead(io.RawIOBase):
    """``stream`` read (and so decompressed) by a thread of its own, up to
    READ_AHEAD_BLOCKS blocks of ``block_size`` ahead of the reader.

    The reader's thread then only copies and parses: xopen's own threads
    decompress gzip only two 1 MiB blocks ahead, and a read of rapidgzip,
    waiting for its threads and copying out of them, took as long as the
    parsing after it. xz and zstd in an external program report a damaged
    stream only when the file is closed (found by fuzzing): here every format
    is decompressed in this process, and an error is raised to the reader
    where the damage is, after the data before it. The blocks are used again
    (fresh ones were new memory, faulted in page by page) and copied out with
    the GIL released. The thread closes ``stream`` when it ends."""

    def __init__(self, stream, block_size: int):
        self._stream = stream
        self._free: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(READ_AHEAD_BLOCKS + 1):  # one more: the block being copied out
            self._free.put(np.empty(block_size, np.uint8))
        self._blocks: queue.SimpleQueue = queue.SimpleQueue()  # (block, size); an error; None at the end
        self._current: np.ndarray | None = None
        self._start = self._stop = 0  # what is left of the current block
        self._error: BaseException | None = None  # raised at the next read: data came before it
        self._at_end = False
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._read_ahead, name="bpbc-read-ahead", daemon=True)
        self._thread.start()

    def _read_ahead(self) -> None:
        try:
            while True:
                block = self._wait(self._free)
                if block is None:
                    return
                size = 0
                try:
                    while size < len(block):
                        got = self._stream.readinto(memoryview(block)[size:])
                        if not got:
                            break
                        size += got
                except BaseException as error:  # noqa: BLE001 - raised in the reader, at its place
                    if size:
                        self._blocks.put((block, size))
                    self._blocks.put(error)
                    return
                if size:
                    self._blocks.put((block, size))
                if size < len(block):
                    self._blocks.put(None)
                    return
        finally:
            try:
                self._stream.close()
            except Exception:  # noqa: BLE001 - a damaged stream: its error was handed over, or nobody reads on
                pass

    def _wait(self, items: queue.SimpleQueue):
        """The next of ``items``, or None once the reader stopped."""
        while not self._stopping.is_set():
            try:
                return items.get(timeout=0.1)
            except queue.Empty:
                continue
        return None

    def readable(self) -> bool:
        return True

    def _advance(self) -> bool:
        """Make the next block current; False at the end of the stream or
        before an error (kept in _error)."""
        if self._current is not None:
            self._free.put(self._current)
            self._current = None
        if self._at_end or self._error is not None:
            return False
        item = self._wait(self._blocks)
        if item is None:
            if self._stopping.is_set():
                raise ValueError("read of closed file")
            self._at_end = True
            return False
        if isinstance(item, BaseException):
            self._error = item
            return False
        self._current, self._stop = item
        self._start = 0
        return True

    def readinto(self, buffer) -> int:
        if self.closed:
            raise ValueError("read of closed file")
        target = np.frombuffer(buffer, np.uint8)
        done = 0
        while done < len(target):
            if self._start == self._stop and not self._advance():
                break
            size = min(len(target) - done, self._stop - self._start)
            target[done:done + size] = self._current[self._start:self._start + size]  # type: ignore[index]  # set by _advance
            self._start += size
            done += size
        if not done and self._error is not None:
            self._at_end = True
            error, self._error = self._error, None
            raise error
        return done

    def close(self) -> None:
        """Stop the thread; it closes the stream once its read returns
        (at once for a file; a pipe whose writer is idle may keep it)."""
        self._stopping.set()
        self._thread.join(0.5)
        super().close()


def _plain_fastq(path):
    """``path`` opened unbuffered when it is a regular file whose first byte
    is '@' (plain FASTQ: compressed formats start otherwise), else None. The
    raw route reads such a file straight into its chunk buffers, in the
    thread that parses (a read from the page cache needs no thread ahead:
    one copy at memory speed, the GIL released). A named pipe is not opened
    here: closed and opened again, it had no reader for a moment, and a
    writer writing then got EPIPE (a test's FIFO did, once in 4 CI runs)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        return None
    handle = open(path, "rb", buffering=0)
    if handle.read(1) == b"@":
        handle.seek(0)
        return handle
    handle.close()
    return None


#: bytes read from the input at a time on the raw FASTQ route
READ_BLOCK = 4 << 20
#: streams the raw route reads in the parsing thread, straight into the batch
#: buffers: a plain file is in the page cache (one copy at memory speed, the GIL
#: released); any other stream, rapidgzip's too, gets a thread ahead (_ReadAhead)
_READ_IN_PLACE: tuple[type, ...] = (io.FileIO,)
#: the raw route scans a batch on this many threads or more (bpbc.fastq_scan);
#: on 2 busy cores one thread scanned 348 MB in 0.16-0.27 s, two in 0.53-1.15 s
PARALLEL_SCAN_MIN_THREADS = 4
#: plain FASTQ is parsed in blocks by several threads (bpbc.fastq_blocks)
#: with this many threads or more to read with, by at most
#: PARSE_BLOCKS_MAX_THREADS threads (one scans 2-4 GB/s, faster than one
#: stream decompresses)
PARALLEL_PARSE_MIN_THREADS = 8
PARSE_BLOCKS_MAX_THREADS = 8
#: the raw route sizes a batch's buffer by the records so far, up to this: a
#: few enormous records (a fuzzed file) made 77 GiB of 100k records' worth;
#: a batch whose records need more grows its buffer as it reads
MAX_CHUNK_ESTIMATE = 256 << 20
#: blocks read ahead of the parsing (see _ReadAhead): 48 MiB, more than a
#: chunk of 100k short reads, so decompressing goes on while the parsing
#: thread waits for the stages after it
READ_AHEAD_BLOCKS = 12


class SequenceSource:
    """Records of one FASTA/FASTQ file, read sequentially.

    ``fileformat`` is ``"fasta"`` or ``"fastq"`` (the format in which the
    records can be written back unchanged). Use as a context manager. With
    ``raw_fastq``, :meth:`chunks` hands out plain FASTQ as raw bytes
    (:class:`bpbc.chunks.RawFastqChunk`) and everything else as dnaio records;
    without it, records only. With ``in_blocks`` as well, plain FASTQ is
    parsed by several threads at once (:mod:`bpbc.fastq_blocks`) where
    ``threads`` allows, its chunks then sized by bytes (their record counts
    vary): single reads only, not mates that must pair up chunk by chunk.
    """

    def __init__(self, path, kind: str = "reads", raw_fastq: bool = False, threads: int | None = None,
                 in_blocks: bool = False):
        self.path = path
        self.name = display_name(path)
        self.kind = kind
        self.records_read = 0
        self._last_id: str | None = None
        self._last_chunk: Any = None  # raw route: the last chunk handed out (its last name is found for errors only)
        self._line_offset = 0  # lines read on the raw route before dnaio took over
        self._stream: Any = None  # a plain file, a (process's) ParallelGzip, an xopen stream or a _ReadAhead over one
        self._reader = None
        self._pending: bytes | np.ndarray = b""  # raw route: bytes read but not yet handed out
        self._buffers = BufferPool()  # raw route: of the chunks
        self._bytes_per_record = 0.0  # raw route: in the chunks so far
        self._threads = threads  # raw route: of the parallel scan (None: every usable core)
        self._in_blocks = False  # raw route: plain FASTQ parsed in blocks on several threads (bpbc.fastq_blocks)
        self._blocks: Any = None  # the BlockChunks doing that
        self._reading = 0  # reads of the stream under way (in the reader thread)
        self._close_when_read = False  # close() came during a read: the read closes when done
        try:
            # decompressed in this process: a large gzip file by rapidgzip's
            # threads (parallel_gzip), anything else by xopen's threads=0; read
            # by a thread of its own on the raw route (_ReadAhead), else by the reading thread
            if path == STDIN:
                # xopen detects compression from the stream's first bytes;
                # sys.stdin.buffer works where the fd is replaced (tests)
                self._stream = _strict(xopen(sys.stdin.buffer, "rb", threads=0))
            else:
                if os.path.isdir(path):
                    raise InputError(f"{self.name}: is a directory, not a {kind} file")
                if isinstance(path, FilePart):  # a part of a file (bpbc.file_parts): decompressed on its own
                    self.name = f"{self.name} ({path.describe()})"
                    self._stream = path.open(threads or 1)
                elif raw_fastq:
                    self._stream = _plain_fastq(path)
                self._stream = self._stream or parallel_gzip(path, threads) or _strict(xopen(path, "rb", threads=0))
            head = self._stream.read(READ_BLOCK) if raw_fastq else b""
            self._in_blocks = in_blocks and head[:1] == b"@" and self._parse_threads() >= PARALLEL_PARSE_MIN_THREADS
            if raw_fastq and threads != 1 and not self._in_blocks and not isinstance(self._stream, _READ_IN_PLACE):
                self._stream = _ReadAhead(self._stream, READ_BLOCK)
            if head[:1] == b"@":
                self.fileformat = "fastq"
                self._pending = head
            else:
                # dnaio reads the first FASTQ record here already
                self._reader = dnaio.open(io.BufferedReader(_Replay(head, self._stream)) if raw_fastq else self._stream)
                reader_class = type(self._reader).__name__
                self.fileformat = "fasta" if reader_class == "FastaReader" else "fastq"
        except InputError:
            self.close()
            raise
        except UnknownFileFormat:
            self.close()
            raise InputError(
                f"{self.name}: not a FASTA or FASTQ file (the first character is neither '>' nor '@')"
            ) from None
        except OSError as error:
            self.close()
            if error.errno is None:  # a decompressor's error, not a file system one
                raise self._translate(error) from None
            raise InputError(f"{self.name}: cannot open {kind} file: {_describe_os_error(error)}") from None
        except Exception as error:
            self.close()
            if isinstance(error, _format_errors()):
                raise self._translate(error) from None
            raise
        self._iterator = None if self._reader is None else iter(self._reader)

    @property
    def two_headers(self) -> bool:
        """Whether the FASTQ input repeats the name on its '+' lines (known
        once the first record has been read; the first record decides)."""
        if self._reader is None or self._line_offset:
            return False  # plain FASTQ came first
        return bool(getattr(self._reader, "two_headers", False))

    def _where(self) -> str:
        """Position for errors that carry no line number. dnaio parses in
        blocks, so the problem is in the record after the last one delivered
        or a later one."""
        if self._last_chunk is not None:
            self._last_id = self._last_chunk.read_id(len(self._last_chunk) - 1)
            self._last_chunk = None
        if self._last_id is None:
            return "in the first records"
        return f"after record {self.records_read}, {self._last_id!r}"

    def _translate(self, error: BaseException) -> InputError:
        if isinstance(error, FileFormatError) and error.line is not None:
            return InputError(f"{self.name}: line {error.line + 1 + self._line_offset}: {error.message}")
        non_ascii = isinstance(error, UnicodeDecodeError) or (
            isinstance(error, FileFormatError) and "ASCII" in error.message
        )
        if non_ascii:
            found = None if self.path == STDIN else _find_non_ascii(self.path)
            if found is not None:
                line, byte = found
                return InputError(f"{self.name}: line {line}: non-ASCII byte 0x{byte:02x}; sequence files must be ASCII")
            return InputError(f"{self.name}: non-ASCII characters ({self._where()}); sequence files must be ASCII")
        if isinstance(error, FileFormatError):
            return InputError(f"{self.name}: {error.message} ({self._where()})")
        if isinstance(error, NotImplementedError):  # dnaio reads BAM of unaligned single reads only
            bam = "aligned.bam" if self.path == STDIN else self.name
            return InputError(f"{self.name}: a BAM file of aligned (or paired) reads: only unaligned single reads are "
                              f"read from BAM; convert it first, e.g. samtools fastq {bam} > reads.fq")
        if isinstance(error, EOFError):
            return InputError(f"{self.name}: the compressed file is truncated: {error} ({self._where()})")
        if isinstance(error, OSError) and error.errno is not None:
            return InputError(f"{self.name}: read error: {_describe_os_error(error)} ({self._where()})")
        return InputError(f"{self.name}: corrupt compressed data: {error} ({self._where()})")

    def _take_over_with_dnaio(self) -> None:
        """Read the rest (from the pending bytes on) with dnaio, records only."""
        self._line_offset = 4 * self.records_read
        stream = io.BufferedReader(_Replay(bytes(self._pending), self._stream))
        self._pending = b""
        try:
            self._reader = dnaio.open(stream, fileformat="fastq")
        except Exception as error:
            if isinstance(error, _format_errors()):
                raise self._translate(error) from None
            raise
        self._iterator = iter(self._reader)

    def records(self) -> Iterator[Any]:
        """Yield dnaio SequenceRecords; format problems raise InputError."""
        if self._reader is None:
            self._take_over_with_dnaio()
        while True:
            try:
                with self._read_under_way():
                    record = next(self._iterator)  # type: ignore[arg-type]  # set by _take_over_with_dnaio
            except StopIteration:
                return
            except Exception as error:
                if isinstance(error, _format_errors()):
                    raise self._translate(error) from None
                raise
            self.records_read += 1
            self._last_id, self._last_chunk = record.id, None
            if record.name.endswith("\r") or (record.qualities or "").endswith("\r"):
                # '\r\r\n': dnaio takes one '\r' as part of the line end and keeps the
                # other, which a record written back ('...\r\n') would lose
                what = "header" if record.name.endswith("\r") else "quality"
                raise InputError(f"{self.name}: record {self.records_read} ({record.id!r}): its {what} line ends "
                                 "in a carriage return that is not part of the line end ('\\r\\r\\n')")
            yield record

    def _parse_threads(self) -> int:
        """Threads the raw route reads with (the parallel scan, the parsing in blocks)."""
        from bpbc.resources import usable_cores

        return usable_cores() if self._threads is None else self._threads

    def _block_chunks(self, most: Callable[[], int], target: int, max_bases: int | None,
                      large_live: int | None = None) -> Iterator:
        """The raw route's chunks parsed in blocks (:class:`bpbc.fastq_blocks.BlockChunks`)
        as far as it goes; what it read and did not hand out is left pending
        for the serial route, and a read error to be raised after it. With
        ``max_bases``, blocks hold at most twice as many bytes (a FASTQ record
        holds two bytes a base): a chunk about that many bases at most."""
        from bpbc.chunks import scan_fastq
        from bpbc.fastq_blocks import BlockChunks

        # a writable copy: scan_fastq's kernel for the read-only view of bytes would be another
        # (numba compiles one per array type; bpbc.prepare compiles the writable one)
        head = np.frombuffer(self._pending, np.uint8).copy()
        starts = np.empty(1000, np.int64)
        found, stop, _ = scan_fastq(head, 0, len(head), len(starts), starts, np.empty_like(starts),
                                    np.empty_like(starts))
        workers = min(PARSE_BLOCKS_MAX_THREADS, max(2, self._parse_threads() // 8))
        self._blocks = blocks = BlockChunks(self._stream, self._pending, workers,
                                            stop / found if found else float(len(head)),
                                            None if max_bases is None else 2 * max_bases, large_live)
        self._pending = b""
        for chunk in blocks.chunks(most, target):
            self.records_read += len(chunk)
            self._last_chunk = chunk
            yield chunk
        self._bytes_per_record = blocks.bytes_per_record
        self._pending = np.concatenate(blocks.leftover) if blocks.leftover else b""
        if blocks.error is not None:
            self._stream = _Failed(self._stream, blocks.error)
        blocks.close()
        self._blocks = None

    def _raw_chunk(self, size: int, multiple: int, max_bases: int | None = None):
        """Up to ``size`` plain FASTQ records as a RawFastqChunk, or None when
        the raw route ends here (end of input, or a record dnaio must read).
        Unless the input ends, the count is a multiple of ``multiple``; with
        ``max_bases``, the chunk ends once its records hold that many bases."""
        from bpbc.chunks import RawFastqChunk, scan_fastq
        from bpbc.engines import limit_numba_threads

        scan: Any = scan_fastq
        if self._parse_threads() >= PARALLEL_SCAN_MIN_THREADS:
            from bpbc.fastq_scan import scan_fastq_parallel as scan

            limit_numba_threads(self._threads)  # numba's thread count is the calling thread's setting
        rec_start = np.empty(size, np.int64)
        seq_start = np.empty(size, np.int64)
        seq_len = np.empty(size, np.int64)
        pending = self._pending
        # the stream is read straight into one buffer sized for the chunk by
        # the records read so far (grown when too small), scanned as it fills
        estimate = min(int(1.05 * self._bytes_per_record * size), MAX_CHUNK_ESTIMATE,
                       MAX_CHUNK_ESTIMATE if max_bases is None else 2 * max_bases)
        capacity = max(2 * len(pending), estimate + READ_BLOCK)
        buffer = self._buffers.take(capacity)
        buffer[:len(pending)] = np.frombuffer(pending, np.uint8)  # the one copy of what the last chunk read past its end
        filled = len(pending)
        count = position = bases = 0
        while count < size:
            found, position, irregular = scan(buffer, position, filled, size - count,
                                              rec_start[count:], seq_start[count:], seq_len[count:])
            count += found
            if max_bases is not None and found:  # the chunk ends with the group that reaches max_bases
                total = bases + np.cumsum(seq_len[count - found:count])
                keep = count - found + int(np.searchsorted(total, max_bases)) + 1
                keep += -keep % multiple
                if keep <= count:
                    if keep < count:
                        count, position, irregular = keep, int(rec_start[keep]), False
                    break
                bases = int(total[-1])
            if irregular:
                if count % multiple:  # dnaio goes on from the records that make up a whole group
                    count -= count % multiple
                    position = int(rec_start[count]) if count else 0
                break
            if count == size:
                break
            # at least as much again as the incomplete record holds before the
            # next scan: a record longer than a block is scanned a few times,
            # not once per block (quadratic)
            want = filled + max(1, filled - position)
            if want > capacity:
                capacity = max(2 * capacity, want)
                grown = self._buffers.take(capacity)
                grown[:filled] = buffer[:filled]
                buffer = grown
            before = filled
            # up to the chunk's estimated end first, a block at a time after
            # that: what is read past the chunk's last record is copied into
            # the next chunk's buffer
            end = min(capacity, max(want, estimate, filled + READ_BLOCK))
            try:
                with self._read_under_way():
                    while filled < want:
                        got = self._stream.readinto(memoryview(buffer)[filled:end])  # type: ignore[arg-type]  # ndarray is a buffer
                        if not got:
                            break
                        filled += got
            except Exception as error:
                if isinstance(error, _format_errors()):
                    raise self._translate(error) from None
                raise
            if filled == before:
                break
        self._pending = buffer[position:filled]  # a view: copied once, into the next chunk's buffer
        if count == 0:
            return None
        self._bytes_per_record = position / count
        # the chunk keeps the buffer (no copy); its records end at position
        rec_end = np.append(rec_start[1:count], position)
        chunk = RawFastqChunk(buffer[:position], rec_start[:count], rec_end, seq_start[:count], seq_len[:count])
        self.records_read += count
        self._last_chunk = chunk
        return chunk

    def chunks(self, size: int | Callable[[], int], ramp: int = 1, multiple: int = 1,
               max_bases: int | None = None, large_live: int | None = None) -> Iterator:
        """Yield chunks of at most ``size`` records (see :mod:`bpbc.chunks`),
        in file order, and with ``max_bases`` ending once they hold that many
        bases (long reads). ``size`` may be a call, asked before each chunk: a run
        that learns how many devices it has lowers it.

        With ``ramp`` k > 1 the first chunk holds size/k records and each next
        one twice as many, up to ``size``: a consumer working on chunk i while
        chunk i+1 is read starts sooner. Every chunk but the last holds a
        multiple of ``multiple`` records (2: interleaved pairs stay whole).
        ``large_live``: plain FASTQ read in blocks waits while this many
        blocks of SLOT_BYTES or more are still held by chunks handed out
        (:class:`bpbc.fastq_blocks.BlockChunks`; None: it does not wait).
        """
        from bpbc.chunks import RecordChunk

        def most() -> int:
            limit = size() if callable(size) else size
            if limit < 1:
                raise ValueError(f"chunk size must be positive, got {limit}")
            return max(multiple, limit - limit % multiple)

        if ramp < 1 or multiple < 1:
            raise ValueError(f"ramp and multiple must be positive, got {ramp} and {multiple}")
        target = max(multiple, most() // ramp // multiple * multiple)
        if self._in_blocks and multiple == 1 and not self.records_read:
            yield from self._block_chunks(most, target, max_bases, large_live)
            target = most()
        while self._reader is None:
            chunk = self._raw_chunk(target, multiple, max_bases)
            if chunk is None:
                if not len(self._pending):
                    return  # the whole input was plain FASTQ
                break
            yield chunk
            target = min(most(), 2 * target)
        records: list = []
        bases = 0
        for record in self.records():
            records.append(record)
            bases += len(record.sequence)
            if len(records) == target or (max_bases is not None and bases >= max_bases
                                          and len(records) % multiple == 0):
                yield RecordChunk(records)
                records, bases = [], 0
                target = min(most(), 2 * target)
        if records:
            yield RecordChunk(records)

    @contextmanager
    def _read_under_way(self) -> Iterator[None]:
        self._reading += 1
        try:
            yield
        finally:
            self._reading -= 1
            if self._close_when_read and not self._reading:
                self.close()

    def close(self) -> None:
        if self._reading:
            # an interrupted run: another thread is still reading (maybe
            # blocked on a pipe whose writer is idle), and closing the stream
            # would wait for that read, maybe forever: the read closes it when
            # it returns (or the end of the process does)
            self._close_when_read = True
            return
        if self._blocks is not None and not self._blocks.close():
            return  # its thread still reads the stream (a pipe): the end of the process closes it
        for closable in (self._reader, self._stream):
            if closable is None:
                continue
            try:
                closable.close()
            except _decompression_errors():
                pass  # closing a reader of a corrupt stream: the error was reported

    def __enter__(self) -> SequenceSource:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def read_patterns(path) -> list:
    """All records of a pattern file, validated.

    Raises InputError when the file holds no records, or a pattern is empty,
    holds a character outside the IUPAC alphabet, has no name, or shares its
    name (first word of the header) with another pattern.
    """
    with SequenceSource(path, kind="pattern") as source:
        patterns = list(source.records())
    name = source.name
    if not patterns:
        raise InputError(f"{name}: the pattern file holds no sequences")
    # the whole panel in one table lookup; only where it holds an unusable
    # pattern is each record encoded on its own below, so that the first
    # problem in record order is the one reported
    try:
        encode_patterns([record.sequence for record in patterns], [record.id for record in patterns])
        encodable = True
    except SequenceError:
        encodable = False
    first_record: dict[str, int] = {}
    for number, record in enumerate(patterns, start=1):
        pattern_id = record.id
        if not pattern_id:
            raise InputError(f"{name}: pattern record {number} has no name")
        if pattern_id in first_record:
            raise InputError(
                f"{name}: duplicate pattern name {pattern_id!r} (records {first_record[pattern_id]} and {number}); "
                "pattern names must be unique"
            )
        first_record[pattern_id] = number
        if not record.sequence:
            raise InputError(f"{name}: pattern {pattern_id!r} (record {number}) has an empty sequence")
        if not encodable:
            try:
                encode_pattern(record.sequence, name=pattern_id)
            except SequenceError as error:
                raise InputError(f"{name}: record {number}: {error}") from None
    return patterns


def compression_for(path) -> str | None:
    """xopen compression format implied by an output file name, or None."""
    _, suffix = os.path.splitext(os.fspath(path).lower())
    return COMPRESSION_SUFFIXES.get(suffix)


class AtomicOutput:
    """An output file written under a temporary name, renamed into place by
    :meth:`commit`; :meth:`discard` (or leaving a ``with`` block through an
    exception) removes the temporary file.

    The temporary file is created at construction, so an unwritable
    destination is reported before any work is done. An existing
    destination that is not a regular file (``/dev/null``, a named pipe,
    ``/dev/stdout``) is written in place: a file renamed over it would
    replace the device or the pipe itself.
    """

    def __init__(self, path, what: str = "output", compression_threads: int | None = None):
        self.path = os.fspath(path)
        self.what = what
        #: threads compressing the file (CorePlan.compress); None: as the cores allow
        self.compression_threads = compression_threads
        if os.path.isdir(self.path):
            raise InputError(f"{self.path}: is a directory; cannot write the {what} file there")
        self._handles: list = []
        self.done = False
        self.in_place = os.path.exists(self.path) and not stat.S_ISREG(os.stat(self.path).st_mode)
        if self.in_place:
            if not os.access(self.path, os.W_OK):  # opening a pipe here would wait for its reader
                raise InputError(f"{self.path}: cannot write the {what} file: permission denied")
            self.temp_path = self.path
            return
        directory, base = os.path.split(os.path.abspath(self.path))
        self.temp_path = os.path.join(directory, f".{base}.{secrets.token_hex(4)}.bpbc-tmp")
        try:
            descriptor = os.open(self.temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as error:
            raise InputError(f"{self.path}: cannot write the {what} file: {_describe_os_error(error)}") from None
        os.close(descriptor)

    def open_binary(self, append: bool = False, threads: int | None = None):
        """A binary file on the temporary path, compressed as the final name
        says (by default by background threads, so compressing overlaps the
        run; ``threads=0`` compresses in the calling thread). ``append`` adds
        to what earlier handles wrote (compressed files get a further member
        or frame, which every reader reads on)."""
        compression = compression_for(self.path)
        if not compression:
            threads = 0
        elif threads is None:
            if self.compression_threads is None:
                from .resources import plan_run

                threads = plan_run().compress
            else:
                threads = self.compression_threads
        mode = "ab" if append else "wb"
        if compression == "gz" and threads > 0 and _igzip_threaded() is not None:
            # ISA-L's threaded gzip writer at level 1, as xopen runs it with one
            # thread; with several it compresses several times faster. Its blocks
            # go straight to the threads: its buffered layer stays empty
            file = _igzip_threaded().open(self.temp_path, mode, compresslevel=1, threads=threads,
                                          block_size=COMPRESSION_BLOCK)
            handle = FixedBlocks(file, COMPRESSION_BLOCK, file.raw.write)
        else:
            handle = xopen(self.temp_path, mode, compresslevel=1, threads=threads, format=compression)  # type: ignore[call-overload]
            if compression:
                handle = FixedBlocks(handle, COMPRESSION_BLOCK if threads else STREAM_BLOCK)
        self._handles.append(handle)
        return handle

    def open_records(self, fileformat: str, two_headers: bool = False, handle=None):
        """A dnaio writer in ``fileformat`` ('fasta' or 'fastq') on ``handle``
        (by default a new :meth:`open_binary` file)."""
        handle = handle or self.open_binary()
        if fileformat == "fastq":
            writer = dnaio.FastqWriter(handle, two_headers=two_headers)
        elif fileformat == "fasta":
            writer = dnaio.FastaWriter(handle)  # type: ignore[assignment]
        else:
            raise ValueError(f"unknown sequence format {fileformat!r}")
        self._handles.insert(self._handles.index(handle), writer)  # close the writer before its file
        return writer

    def close_handles(self) -> None:
        """Close every writer and file opened so far (more may be opened later)."""
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.close()

    def commit(self) -> None:
        """Finish writing and move the file to its final name."""
        try:
            self.close_handles()
            if self.in_place:
                self.done = True
                return
            if compression_for(self.path) == "zst" and os.path.getsize(self.temp_path) == 0:
                # zstd written in this process leaves nothing for no data,
                # which readers reject: an empty frame instead (the other
                # formats write their header and trailer anyway)
                with open(self.temp_path, "wb") as handle:
                    handle.write(EMPTY_ZSTD_FRAME)
            os.replace(self.temp_path, self.path)
        except OSError as error:
            self.discard()
            raise InputError(f"{self.path}: cannot write the {self.what} file: {_describe_os_error(error)}") from None
        self.done = True

    def discard(self) -> None:
        """Drop what was written; the destination is left untouched."""
        try:
            self.close_handles()
        except Exception:  # noqa: BLE001 - the file is being thrown away anyway
            pass
        if not self.in_place:  # what went to a device or a pipe is gone already
            try:
                os.unlink(self.temp_path)
            except FileNotFoundError:
                pass
        self.done = True

    def __enter__(self) -> AtomicOutput:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self.done:
            self.discard()


#: buffers per os.writev call (POSIX's IOV_MAX is at least 16; Linux allows 1024)
IOV_MAX = min(1024, os.sysconf("SC_IOV_MAX")) if "SC_IOV_MAX" in getattr(os, "sysconf_names", {}) else 16


def _write_all(fd: int, data: memoryview, starts: list[int], stops: list[int]) -> None:
    """data[starts[r]:stops[r]] for every r, in order, to the descriptor,
    IOV_MAX buffers an os.writev call (a short write finished with os.write)."""
    for k in range(0, len(starts), IOV_MAX):
        views = [data[a:b] for a, b in zip(starts[k:k + IOV_MAX], stops[k:k + IOV_MAX])]
        done = os.writev(fd, views)
        for view in views:
            if done >= len(view):
                done -= len(view)
                continue
            rest = view[done:]
            while len(rest):
                rest = rest[os.write(fd, rest):]
            done = 0


class ReadsOutput:
    """A matched/unmatched reads file: raw bytes of plain FASTQ chunks, and
    dnaio records in the input's format (see :mod:`bpbc.chunks`).

    With ``lazy`` the file is opened at the first write, by the thread that
    writes, compressing in that thread; :meth:`suspend` closes it until the
    next write, which appends (many such files can exist, few open at once).
    """

    def __init__(self, output: AtomicOutput, source: SequenceSource, lazy: bool = False):
        self._output = output
        self._source = source
        self._lazy = lazy
        self._opened = False
        # opened here, in the thread that will close it: ISA-L's threaded
        # writer stops its threads once the thread that opened it has ended
        self._handle = None if lazy else self._open()
        self._writer = None
        self._scratch = np.empty(0, np.uint8)

    def _open(self):
        handle = self._output.open_binary(append=self._opened, threads=0 if self._lazy else None)
        self._opened = True
        return handle

    @property
    def is_open(self) -> bool:
        return self._handle is not None

    def scratch(self, size: int) -> np.ndarray:
        """A byte buffer of at least ``size`` to gather records in, reused from
        write to write (see :meth:`bpbc.chunks.RawFastqChunk.write`)."""
        if len(self._scratch) < size:
            self._scratch = np.empty(max(size, 2 * len(self._scratch)), np.uint8)
        return self._scratch

    def write_bytes(self, data) -> None:
        if self._handle is None:
            self._handle = self._open()
        self._handle.write(data)

    def write_runs(self, data: memoryview, first: np.ndarray, last: np.ndarray) -> bool:
        """Write ``data[first[r]:last[r]]`` for every r, in order, straight
        from ``data`` where this is an uncompressed file (os.writev, no
        gathering into a buffer: about 14 ms of copying per 400,000 reads of
        150 bp when trimming splits --unmatched into 8,000 runs); False, and
        nothing written, where it is not."""
        if self._handle is None:
            self._handle = self._open()
        handle = self._handle
        if not hasattr(os, "writev") or type(handle) is not io.BufferedWriter or type(handle.raw) is not io.FileIO:
            return False
        handle.flush()  # what was written through the buffer goes first
        _write_all(handle.fileno(), data, first.tolist(), last.tolist())
        return True

    def write_records(self, records) -> None:
        if self._handle is None:
            self._handle = self._open()
        if self._writer is None:
            # created late: FASTQ two_headers is known after the first record
            source = self._source
            self._writer = self._output.open_records(source.fileformat, source.two_headers, self._handle)
        try:
            for record in records:
                self._writer.write(record)  # type: ignore[attr-defined]
        except ValueError:
            if record.qualities is not None:
                raise
            # dnaio reads a BAM record without base qualities (QUAL '*') with qualities None
            raise InputError(f"{self._source.name}: read {record.id!r} has no base qualities, which a FASTQ reads "
                             "file needs (the PAF alone can be written)") from None

    def suspend(self) -> None:
        """Close the file until the next write (lazy outputs only)."""
        self._output.close_handles()
        self._handle = self._writer = None
        self._scratch = np.empty(0, np.uint8)  # many such files may exist: keep no buffer
