"""bpbc.gzip_reader: rapidgzip in a child process, read through a pipe.

Its records and errors are checked through SequenceSource in test_io.py
(the ``gzip_reader`` fixture runs each gzip test with ISA-L and with this
reader); here, what is its own: the child's life and its lean imports."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys

import pytest

from bpbc.gzip_reader import GzipPipe, ParallelGzip

RECORDS = b"".join(b"@r%d\n%s\n+\n%s\n" % (i, b"ACGT" * 40, b"F" * 160) for i in range(20_000))


@pytest.fixture
def packed(tmp_path):
    pytest.importorskip("rapidgzip")
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(RECORDS, compresslevel=1))
    return path


def test_the_pipe_gives_the_whole_file_and_the_child_ends(packed):
    pipe = GzipPipe(packed, 2)
    with io.BufferedReader(pipe) as stream:
        assert stream.read() == RECORDS and stream.read() == b""
        assert pipe.tell() == len(RECORDS)
    assert pipe._process.returncode == 0


def test_closing_early_stops_the_child(packed):
    """A run stopped early (an error, Ctrl-C) must not leave the child
    decompressing: it is killed on close, and waited for."""
    pipe = GzipPipe(packed, 2)
    assert len(pipe.read(1000)) == 1000
    pipe.close()
    assert pipe._process.returncode is not None


def _error_of(stream) -> tuple[str, str]:
    try:
        while stream.read(1 << 16):
            pass
    except (EOFError, OSError) as error:
        assert getattr(error, "errno", None) is None  # a decompressor's error, not a file system one
        return type(error).__name__, str(error)
    return "", ""


@pytest.mark.parametrize("damage", ["cut 20", "cut 4", "crc"])
def test_the_childs_errors_are_those_of_the_reader_in_this_process(tmp_path, damage):
    """The error (EOFError for a truncation, GzipError for corrupt data) and
    its message are those ParallelGzip raises in this process, after the
    data before it."""
    pytest.importorskip("rapidgzip")
    data = bytearray(gzip.compress(RECORDS, compresslevel=1))
    if damage == "crc":
        data[-8] ^= 0xFF
    else:
        data = data[:-int(damage.split()[1])]
    path = tmp_path / "bad.fq.gz"
    path.write_bytes(bytes(data))
    with io.BufferedReader(GzipPipe(path, 2)) as piped, ParallelGzip(path, 2) as here:
        expected = _error_of(here)
        assert expected[0] and _error_of(piped) == expected


def test_the_child_imports_no_numerical_packages():
    """The child must start fast: nothing of numpy, numba or dnaio."""
    code = "import sys, bpbc.gzip_reader; print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'numba', 'dnaio')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_parallel_gzip_seeks_back_after_its_end(tmp_path):
    pytest.importorskip("rapidgzip")
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(RECORDS))
    stream = ParallelGzip(path, 2)
    try:
        whole = stream.read()
        assert whole == RECORDS and stream.read() == b"" and stream.tell() == len(RECORDS)
        assert stream.seek(0, io.SEEK_END) == len(RECORDS) and stream.read() == b""
        stream.seek(10)
        assert stream.read() == RECORDS[10:]
        assert stream.seek(-90, io.SEEK_CUR) == len(RECORDS) - 90  # relative to the end it reached
        assert stream.read() == RECORDS[-90:]
    finally:
        stream.close()
