"""Error paths and edges that mutation testing (scripts/mutation.py) found
unchecked: each test asserts what a user sees (the message, the records
named, the files) where the code was changed and every other test passed."""

from __future__ import annotations

import io
import lzma
import os
import re
import sys
import threading

import numpy as np
import pytest

import bpbc.io
import bpbc.sinks
from bpbc.alphabet import SequenceError, encode_reads
from bpbc.cli import main
from bpbc.io import InputError, SequenceSource
from bpbc.pairs import interleaved_pairs
from bpbc.reads import Reads
from tests.bpbc.test_outputs import check_run, generated_reads, patterns_file
from tests.bpbc.test_pairs import interleave, mate_files
from tests.oracle import Options, Record


def _read_all(path, raw_fastq: bool = True) -> int:
    with SequenceSource(path, raw_fastq=raw_fastq) as source:
        return sum(len(chunk) for chunk in source.chunks(50))


# --- xz: what follows a stream ------------------------------------------------

def test_xz_padding_that_is_not_whole_words_is_named(tmp_path):
    stream = lzma.compress(b"@r\nACGT\n+\nIIII\n")
    path = tmp_path / "r.fq.xz"
    path.write_bytes(stream + b"\0" * 3 + stream)
    with pytest.raises(InputError, match=r"corrupt compressed data: Corrupt input data: stream padding that is not "
                                         r"a multiple of four bytes \(in the first records\)$"):
        _read_all(path)


@pytest.mark.parametrize("extra", range(4))
def test_xz_padding_across_read_blocks_is_counted_whole(tmp_path, extra):
    """Python's xz reader hands over the file in blocks of 8 KiB: padding
    that straddles two of them, in parts that are not whole words, still
    adds up to a multiple of four (and a later stream larger than a read's
    buffer is read whole)."""
    first = lzma.compress(b"@r\nACGT\n+\nIIII\n" * (1 + extra))
    second = b"".join(b"@s%d\n%s\n+\n%s\n" % (i, b"ACGT" * 30, b"I" * 120) for i in range(2000))
    padding = 8192 - len(first) + 6  # 2 of them in the first block's rest and 4 after it, or so
    padding += (4 - padding % 4) % 4
    path = tmp_path / "r.fq.xz"
    path.write_bytes(first + b"\0" * padding + lzma.compress(second))
    assert _read_all(path) == 1 + extra + 2000
    assert _read_all(path, raw_fastq=False) == 1 + extra + 2000


# --- the messages of a reads file's errors --------------------------------------

def test_non_ascii_on_stdin_says_where_in_records(monkeypatch):
    data = b"@r1\nACGT\n+\nIIII\n@r2\nAC\xc3\xa9T\n+\nIIII\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    with pytest.raises(InputError) as caught:
        _read_all("-", raw_fastq=False)
    assert str(caught.value).startswith("<stdin>: non-ASCII characters (")
    assert str(caught.value).endswith("); sequence files must be ASCII")


def test_a_format_error_without_a_line_names_where_it_is(tmp_path):
    from dnaio.exceptions import FileFormatError

    path = tmp_path / "r.fq"
    path.write_bytes(b"@r1\nACGT\n+\nIIII\n")
    with SequenceSource(path) as source:
        error = source._translate(FileFormatError("a record that is not one", line=None))
    assert str(error) == f"{path}: a record that is not one (in the first records)"


def test_aligned_bam_on_stdin_says_to_convert_it(monkeypatch):
    import bpbc.io as bio

    def aligned(*args, **kwargs):
        raise NotImplementedError("The BAM parser has been implemented with unmapped single reads in mind")

    monkeypatch.setattr(bio.dnaio, "open", aligned)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"BAM\x01")))
    with pytest.raises(InputError) as caught:
        SequenceSource("-")
    assert str(caught.value) == ("<stdin>: a BAM file of aligned (or paired) reads: only unaligned single reads are "
                                 "read from BAM; convert it first, e.g. samtools fastq aligned.bam > reads.fq")


def test_a_read_error_of_the_system_is_named(tmp_path):
    path = tmp_path / "r.fq"
    path.write_bytes(b"@r1\nACGT\n+\nIIII\n")
    source = SequenceSource(path)
    try:
        error = source._translate(OSError(5, "Input/output error"))
    finally:
        source.close()
    assert str(error) == f"{path}: read error: Input/output error (in the first records)"


# --- demultiplexing -------------------------------------------------------------

@pytest.mark.parametrize("name", ["a/b", ".", ".."])
def test_a_pattern_name_that_is_no_file_name_is_refused(capsys, tmp_path, name):
    patterns = tmp_path / "p.fa"
    patterns.write_text(f">ok\nACGTACGTAC\n>{name}\nTTTTGGGGCC\n")
    out = tmp_path / "out"
    out.mkdir()
    status = main([str(_reads(tmp_path)), str(patterns), "-t", "10", "--matched", str(out / "{name}.fq")])
    err = capsys.readouterr().err
    assert status == 1 and f"pattern name {name!r} cannot be part of a file name" in err
    assert list(out.iterdir()) == []


def _reads(tmp_path):
    path = tmp_path / "r.fq"
    path.write_text("@r1\nACGTACGTACGG\n+\nIIIIIIIIIIII\n")
    return path


@pytest.mark.parametrize("limit, budget", [(100, 50), (3, 2), (10_000, bpbc.sinks.MAX_OPEN_FILES)])
def test_the_open_file_budget_is_half_the_descriptor_limit(monkeypatch, limit, budget):
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda kind: (limit, 1 << 20) if kind == resource.RLIMIT_NOFILE
                        else (0, 0))
    assert bpbc.sinks.open_file_budget() == budget


def test_the_open_file_budget_without_limits(monkeypatch):
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda kind: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert bpbc.sinks.open_file_budget() == bpbc.sinks.MAX_OPEN_FILES
    monkeypatch.setitem(sys.modules, "resource", None)  # not POSIX: no import
    assert bpbc.sinks.open_file_budget() == 64


def test_interleaved_pairs_demultiplexed_into_one_file_a_pattern_are_the_oracles(tmp_path):
    """--interleaved with --matched '{name}' and no --matched2: each pattern's
    pairs, both mates, one after the other in one file."""
    first, second = generated_reads(10, 50, prefix="i"), generated_reads(11, 50, prefix="i")
    second = [Record(f"{a.id}/2 x", b.sequence, b.qualities) for a, b in zip(first, second)]
    mixed = [record for pair in zip(first, second) for record in pair]
    check_run(tmp_path, mixed, patterns_file(tmp_path / "p.fa"), Options(threshold=24), interleaved=True,
              split=False, demux=True)


# --- pairs ------------------------------------------------------------------------

def test_interleaved_chunks_are_of_the_size_asked_for(tmp_path):
    path = interleave(mate_files(tmp_path, 10), tmp_path / "i.fq")
    with SequenceSource(path) as source:
        assert [len(chunk) for chunk in interleaved_pairs(source, 3)] == [3, 3, 3, 1]
    with SequenceSource(path) as source:
        assert [len(chunk) for chunk in interleaved_pairs(source, lambda: 4)] == [4, 4, 2]


def test_interleaved_odd_count_names_the_last_record_of_a_longer_chunk(tmp_path):
    path = interleave(mate_files(tmp_path, 5), tmp_path / "i.fq")
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:4 * 7]))
    with SequenceSource(path) as source, pytest.raises(InputError) as error:
        list(interleaved_pairs(source, 2))
    assert str(error.value) == (f"{path}: interleaved input holds an odd number of records; the last, record 7 "
                                "('r3/1'), has no mate")


def test_interleaved_mates_that_differ_in_a_later_chunk_are_named(tmp_path):
    path = interleave(mate_files(tmp_path, 10, rename=(6, "x6/2")), tmp_path / "i.fq")
    with SequenceSource(path) as source, pytest.raises(InputError) as error:
        list(interleaved_pairs(source, 4))
    assert str(error.value) == (f"{path}: records 13 and 14 ('r6/1' and 'x6/2') are not mates "
                                "(mate names must be equal up to a trailing /1 or /2)")


# --- reads given to the library ------------------------------------------------

def test_reads_from_a_buffer_say_what_does_not_fit():
    with pytest.raises(TypeError, match=r"^data must be bytes-like or a uint8 array, got int: "):
        Reads.from_buffer(5, [0])
    with pytest.raises(ValueError, match=r"^offsets must be a 1-D array of integers, one more than there are "
                                         r"reads$"):
        Reads.from_buffer(b"ACGT", [0.0, 4.0])


def test_a_byte_from_128_on_is_named_non_ascii():
    for byte, message in ((0x80, "read #1: non-ASCII byte 0x80 at position 3"),
                          (0x7F, "read #1: character '\\x7f' at position 3 is not an IUPAC nucleotide code")):
        with pytest.raises(SequenceError, match=re.escape(message)):
            encode_reads([bytes([65, 67, byte, 71])])
    assert np.all(encode_reads([b"ACGT"])[1] == 4)


# --- more found by mutation testing -----------------------------------------------

def test_a_fraction_of_one_is_accepted_and_above_one_refused(capsys, tmp_path):
    from tests.bpbc.test_cli import PATTERNS, READS

    assert main([str(READS), str(PATTERNS), "--min-score-fraction", "1", "-q", "-o", str(tmp_path / "o.paf")]) == 0
    assert main([str(READS), str(PATTERNS), "--min-score-fraction", "1.01", "-q"]) == 1
    assert capsys.readouterr().err == "bpbc-screen: error: --min-score-fraction must be in (0, 1], got 1.01\n"


@pytest.mark.parametrize("layout", ["two files", "interleaved"])
@pytest.mark.parametrize("mate", [0, 1])
def test_a_bad_byte_in_a_mate_names_that_mates_file(capsys, tmp_path, layout, mate):
    paths = mate_files(tmp_path, 6)
    damaged = paths[mate].read_text().splitlines(keepends=True)
    damaged[4 * 3 + 1] = "AC!" + damaged[4 * 3 + 1][3:]
    paths[mate].write_text("".join(damaged))
    if layout == "two files":
        args, named = [str(paths[0]), "-2", str(paths[1])], paths[mate]
    else:
        named = interleave(paths, tmp_path / "i.fq")
        args = [str(named), "--interleaved"]
    patterns = tmp_path / "p.fa"
    patterns.write_text(">p\nACGTACGTACGT\n")
    assert main([*args[:1], str(patterns), *args[1:], "-t", "10", "-q", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"bpbc-screen: error: {named}: ") and "'!'" in err and err.count("\n") == 1, err


# --- survivors of the mutation run killed since (issue 43) ------------------------

def test_non_ascii_on_a_stdin_pipe_names_no_line_of_what_follows(monkeypatch):
    """Standard input cannot be read again to find the first non-ASCII
    byte's line: the message says where in the records, and nothing reads
    on (what follows the parser's position would give a later byte, on a
    line counted from the wrong place: here the 0xff at the end). The bad
    byte comes after the first megabyte, past what dnaio reads on opening."""
    def fastq(start: int, count: int) -> bytes:
        return b"".join(b"@f%d\n%s\n+\n%s\n" % (k, b"ACGT" * 25, b"I" * 100) for k in range(start, start + count))

    data = fastq(0, 5000) + b"@bad\nAC\xc3\xa9T\n+\nIIII\n" + fastq(5000, 20_000) + b"@r2\nAC\xffT\n+\nIIII\n"
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with open(write_fd, "wb") as pipe:
            try:
                pipe.write(data)
            except BrokenPipeError:  # the reader stopped at the error and closed its end
                pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    stdin = open(read_fd, "rb")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin))
    try:
        with pytest.raises(InputError) as caught:
            _read_all("-", raw_fastq=False)
    finally:
        stdin.close()
        writer.join(10)
    assert re.fullmatch(r"<stdin>: non-ASCII characters \(after record \d+, 'f\d+'\); sequence files must be ASCII",
                        str(caught.value)), caught.value


def test_stdin_has_no_stem_so_output_paths_stay_as_written(capsys, tmp_path, monkeypatch):
    """{stem} is a reads file's name; standard input has none, so a path
    holding it is written as given (a reads file fills it in: test_cli)."""
    from tests.bpbc.test_cli import PATTERNS, READS, golden

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(READS.read_bytes())))
    status = main(["-", str(PATTERNS), "-t", "20", "-q", "-o", "{stem}.paf", "--json", "{stem}.json"])
    assert (status, capsys.readouterr().err) == (0, "")
    assert sorted(os.listdir(tmp_path)) == ["{stem}.json", "{stem}.paf"]
    assert (tmp_path / "{stem}.paf").read_text() == golden("expected.paf")


def test_an_exit_with_a_message_prints_it_and_exits_1(capsys, monkeypatch):
    """main() as Python ends ``SystemExit("text")``: the text on stderr, status 1."""
    import bpbc.cli

    class Command:
        def main(self, **kwargs):
            raise SystemExit("bpbc-screen: a message")

    monkeypatch.setattr(bpbc.cli, "_command", lambda: Command())
    assert main(["reads.fq", "patterns.fa"]) == 1
    assert capsys.readouterr() == ("", "bpbc-screen: a message\n")


def test_a_demultiplexed_file_that_cannot_be_written_is_named_with_its_pattern(capsys, tmp_path):
    """A pattern's file whose name is a directory's: one line naming it and
    its pattern, exit 1, no other output left."""
    from tests.bpbc.test_cli import PATTERNS, READS

    out = tmp_path / "out"
    out.mkdir()
    (out / "adapter_A.fq").mkdir()
    status = main([str(READS), str(PATTERNS), "-t", "20", "-q", "-o", str(out / "o.paf"), "--matched",
                   str(out / "{name}.fq"), "--unmatched", str(out / "none.fq")])
    assert status == 1
    assert capsys.readouterr().err == (f"bpbc-screen: error: {out / 'adapter_A.fq'}: is a directory; cannot write the "
                                       "reads of pattern adapter_A file there\n")
    assert os.listdir(out) == ["adapter_A.fq"]


def test_demultiplexed_reads_keep_their_order_in_a_large_chunk(tmp_path):
    """The whole input one chunk: each pattern's file holds its reads in
    input order, as the oracle's, where a chunk holds many of them (numpy's
    default sort is not stable, and on this CPU it reordered 16 of them)."""
    check_run(tmp_path, generated_reads(12, 200, prefix="o"), patterns_file(tmp_path / "p.fa"), Options(threshold=24),
              demux=True, chunk_size=100_000)


@pytest.mark.parametrize("options", [["--matched", "{out}/same.fq", "--unmatched", "{out}/same.fq"],
                                     ["-o", "{reads}"], ["-o", "{out}/x", "--json", "{out}/x"],
                                     ["--unmatched", "{patterns}"]])
def test_an_output_that_is_an_input_or_another_output_is_refused(tmp_path, capsys, options):
    """One line, exit 1, nothing written and the inputs untouched (before,
    the run overwrote its reads, or one output the other)."""
    from bpbc.cli import main

    reads, patterns, out = tmp_path / "reads.fq", tmp_path / "p.fa", tmp_path / "out"
    out.mkdir()
    reads.write_text("@r1\nACGTACGTTTGACCAGGTACAGTACGT\n+\nIIIIIIIIIIIIIIIIIIIIIIIIIII\n")
    patterns.write_text(">a\nTTGACCAGGTACAGT\n")
    before = reads.read_bytes(), patterns.read_bytes()
    argv = [option.format(out=out, reads=reads, patterns=patterns) for option in options]
    assert main([str(reads), str(patterns), "-t", "20", "--device", "cpu", "-q", *argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "are the same file" in err
    assert (reads.read_bytes(), patterns.read_bytes()) == before and os.listdir(out) == []
    # outputs that are not regular files are written in place, and may be shared
    assert main([str(reads), str(patterns), "-t", "20", "--device", "cpu", "-q", "-o", os.devnull, "--matched",
                 os.devnull, "--unmatched", os.devnull]) == 0
