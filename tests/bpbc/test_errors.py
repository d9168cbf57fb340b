"""bpbc.errors: the exception classes, and where the package raises them."""

from __future__ import annotations

import subprocess
import sys

import pytest

import bpbc.errors
import bpbc.io
from bpbc.errors import InputError, InternalError, one_line
from bpbc.screener import Screener


def test_input_error_is_re_exported_by_io_and_is_one_line():
    assert bpbc.io.InputError is InputError
    error = InputError("r.fq: line 3:\n  expected '+'\r\nfound 'x'\n")
    assert str(error) == "r.fq: line 3: expected '+' found 'x'"
    assert one_line("a\n\nb  \r\n  c") == "a b c"


def test_internal_error_is_a_runtime_error_and_not_an_input_error():
    assert issubclass(InternalError, RuntimeError)
    assert not issubclass(InternalError, InputError) and not issubclass(InputError, InternalError)


def test_the_package_exports_the_error_classes():
    import bpbc

    assert bpbc.InputError is InputError and bpbc.InternalError is InternalError
    assert {"InputError", "InternalError"} <= set(bpbc.__all__)


def test_importing_bpbc_errors_imports_nothing_heavy():
    code = ("import sys, bpbc, bpbc.errors; bpbc.InternalError; "
            "print(sorted(m for m in ('numpy', 'numba', 'dnaio', 'cupy', 'typer') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]" and done.stderr == ""


def test_traceback_disagreeing_with_the_screen_raises_internal_error(monkeypatch):
    import bpbc.traceback

    real = bpbc.traceback.align_hits

    def off_by_one(*args, **kwargs):
        found = real(*args, **kwargs)
        found.score[-1] -= 1  # as if the traceback had lost a point
        return found

    screener = Screener({"p": "ACGTACGTACGT"}, threshold=20, strand="forward", device="cpu")
    batch = screener.prepare(["TTACGTACGTACGTTT", "GGGG", "ACGTACGTACGT"])
    hits = screener.hits(batch)
    assert len(hits.read) == 2
    screener.align(batch, hits)  # consistent: no error
    monkeypatch.setattr(bpbc.traceback, "align_hits", off_by_one)
    with pytest.raises(InternalError, match=r"^traceback score 23 disagrees with screen score 24 \(read 2, "
                                            r"pattern 0, strand \+\)$"):
        screener.align(batch, hits)


def test_make_screener_keeps_internal_errors_apart_from_bad_settings(monkeypatch):
    """Bad settings become InputError (exit 1), an InternalError stays one (exit 3)."""
    import bpbc.screener
    from bpbc.pipeline import ScreenSettings, make_screener

    with pytest.raises(InputError, match="threshold"):
        make_screener(ScreenSettings(threshold=0, device="cpu"), {"p": "ACGT"})

    def broken(*args, **kwargs):
        raise InternalError("kernel does not compile")

    monkeypatch.setattr(bpbc.screener, "select_engine", broken)
    with pytest.raises(InternalError, match="kernel does not compile"):
        make_screener(ScreenSettings(threshold=4, device="cpu"), {"p": "ACGT"})


def test_control_characters_in_messages_are_escaped():
    """Found by the fuzzer: dnaio quotes the damaged line, and a vertical tab
    in it split the one-line message in two (as a form feed would; ESC would
    start a terminal escape sequence)."""
    message = str(InputError("p.fa: line 1: but got 'G@\x0bC\x0c\x1b[31m\x00\x85\u2028\x7f\tx'.\n"))
    assert message == "p.fa: line 1: but got 'G@\\x0bC\\x0c\\x1b[31m\\x00\\x85\\u2028\\x7f\tx'."
    assert len(message.splitlines()) == 1


def test_a_pattern_file_quoting_a_vertical_tab_gives_a_one_line_error(tmp_path):
    from bpbc.io import read_patterns

    path = tmp_path / "p.fa"
    path.write_bytes(b"G@\x0bC>p0 adapter 0\nACGT\n")
    with pytest.raises(InputError) as caught:
        read_patterns(path)
    assert "line 1" in str(caught.value) and "\\x0b" in str(caught.value)
    assert len(str(caught.value).splitlines()) == 1


def test_a_message_quoting_an_enormous_line_is_built_at_once_and_cut():
    """Found by fuzzing: an error quoting a damaged line of three million tabs
    never ended (the regular expression for the blanks around line breaks
    backtracked quadratically); and a message must not be megabytes long."""
    import time

    from bpbc.errors import MAX_MESSAGE

    started = time.perf_counter()
    message = one_line("r.fq: line 2: bad record 'x" + "\t" * 3_000_000 + "y'\n  (after record 1)")
    assert time.perf_counter() - started < 5
    assert message.startswith("r.fq: line 2: bad record 'x\t") and message.endswith(" more characters)")
    assert len(message) < MAX_MESSAGE + 100 and len(message.splitlines()) == 1
    # line breaks and the blanks around them still become one space
    assert one_line(" a \t\n\n \t b\r\n c \n") == "a b c"
    assert one_line("a\n \nb") == "a b" and one_line("\t x \t") == "x"


def test_cli_error_quoting_a_line_of_tabs_ends(capsys, tmp_path):
    from bpbc.cli import main

    reads = tmp_path / "r.fq"
    reads.write_bytes(b"@r1\nACGT\n+\nIIII\n@r2\nACGT\n+r2" + b"\t" * 1_000_000 + b"\nIIII\n")
    patterns = tmp_path / "p.fa"
    patterns.write_bytes(b">p\nACGTACGT\n")
    status = main([str(reads), str(patterns), "-t", "8", "--device", "cpu", "-q", "-o", str(tmp_path / "o.paf")])
    err = capsys.readouterr().err
    assert status == 1 and err.startswith(f"bpbc-screen: error: {reads}: line 7: ") and err.count("\n") == 1
    assert len(err) < 2200 and sorted(p.name for p in tmp_path.iterdir()) == ["p.fa", "r.fq"]
