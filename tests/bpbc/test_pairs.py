"""Paired-end reads: pairing two files or one interleaved file chunk by chunk,
mate checks, the paired CLI against golden files, the pair filters.

Golden files: tests/data/reads_1.fq holds the reads of reads.fq named r01/1,
..., and reads_2.fq as mate 2 of pair i the reverse complement of read i + 7
(cyclic) of reads.fq, named r01/2, ...; reads_interleaved.fq holds the same
pairs interleaved. expected_paired.paf was written from tests/data by::

    python -m bpbc reads_1.fq patterns.fa -2 reads_2.fq -t 20 -q > expected_paired.paf

tests/bpbc/test_outputs.py checks it, both mates, against the independent oracle of tests/oracle.py.
"""

from __future__ import annotations

from pathlib import Path

import dnaio
import numpy as np
import pytest

import bpbc.io
from bpbc.alphabet import encode_reads
from bpbc.cli import main
from bpbc.io import InputError, SequenceSource
from bpbc.pairs import interleaved_pairs, two_file_pairs
from tests.bpbc.test_chunks import random_fastq

DATA = Path(__file__).resolve().parents[1] / "data"
PATTERNS = DATA / "patterns.fa"
MATES = (DATA / "reads_1.fq", DATA / "reads_2.fq")
INTERLEAVED = DATA / "reads_interleaved.fq"


def run_cli(capsys, *args):
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def records(path) -> list:
    with dnaio.open(path) as reader:
        return list(reader)


def mate_files(tmp_path, n, damage_at=None, rename=None, seed=0):
    """Two FASTQ files of n pairs named r<i>/1 and r<i>/2; ``damage_at``
    (file index, record) puts a Windows line end from that record on (the
    reader switches to dnaio there); ``rename`` (record, name) renames mate 2."""
    rng = np.random.default_rng(seed)
    paths = []
    for mate in (1, 2):
        data = random_fastq(rng, n).decode()
        lines = data.splitlines(keepends=True)
        for i in range(n):
            name = f"r{i}/{mate}" if rename is None or mate == 1 or rename[0] != i else rename[1]
            lines[4 * i] = f"@{name} comment\n"
        if damage_at is not None and damage_at[0] == mate - 1:
            lines[4 * damage_at[1]:] = [line.replace("\n", "\r\n") for line in lines[4 * damage_at[1]:]]
        path = tmp_path / f"m{mate}.fq"
        path.write_text("".join(lines))
        paths.append(path)
    return paths


def interleave(paths, out: Path) -> Path:
    with dnaio.open(out, mode="w") as writer:
        for first, second in zip(*map(records, paths)):
            writer.write(first)
            writer.write(second)
    return out


@pytest.mark.parametrize("damage_at", [None, (0, 5), (1, 12)])
@pytest.mark.parametrize("size, block", [(4, 64), (7, 1 << 20)])
def test_pairs_from_two_files_are_the_records_side_by_side(tmp_path, monkeypatch, damage_at, size, block):
    monkeypatch.setattr(bpbc.io, "READ_BLOCK", block)
    paths = mate_files(tmp_path, 30, damage_at)
    with SequenceSource(paths[0], raw_fastq=True) as one, SequenceSource(paths[1], raw_fastq=True) as two:
        chunks = list(two_file_pairs(one, two, size, ramp=2))
    assert all(len(chunk) <= size for chunk in chunks) and sum(map(len, chunks)) == 30
    mates = [records(path) for path in paths]
    expected = [record for pair in zip(*mates) for record in pair]
    start = 0
    for chunk in chunks:
        codes, lengths = chunk.encode()
        want_codes, want_lengths = encode_reads(expected[2 * start:2 * (start + len(chunk))])
        assert np.array_equal(lengths, want_lengths)
        assert np.array_equal(codes[:, :want_codes.shape[1]], want_codes)
        rows = np.arange(2 * len(chunk))
        assert chunk.read_names(rows).strings() == [f"r{start + r // 2}/{r % 2 + 1}" for r in rows]
        start += len(chunk)


@pytest.mark.parametrize("damage_at", [None, 5, 6])
def test_interleaved_chunks_hold_whole_pairs(tmp_path, monkeypatch, damage_at):
    monkeypatch.setattr(bpbc.io, "READ_BLOCK", 64)
    paths = mate_files(tmp_path, 20)
    data = interleave(paths, tmp_path / "i.fq").read_text()
    if damage_at is not None:  # from record damage_at on (odd: inside a pair) the reader is dnaio
        lines = data.splitlines(keepends=True)
        data = "".join(lines[:4 * damage_at] + [line.replace("\n", "\r\n") for line in lines[4 * damage_at:]])
    path = tmp_path / "damaged.fq"
    path.write_text(data)
    with SequenceSource(path, raw_fastq=True) as source:
        chunks = list(interleaved_pairs(source, 3, ramp=1))
    names = [name for chunk in chunks for name in chunk.read_names(np.arange(2 * len(chunk))).strings()]
    assert names == [f"r{i}/{mate}" for i in range(20) for mate in (1, 2)]


def test_mismatched_mates_name_both_files_and_the_record(tmp_path):
    paths = mate_files(tmp_path, 10, rename=(6, "x6/2"))
    with SequenceSource(paths[0]) as one, SequenceSource(paths[1]) as two:
        with pytest.raises(InputError) as error:
            list(two_file_pairs(one, two, 4))
    assert str(error.value) == (f"{paths[0]} and {paths[1]}: the records 7 ('r6/1' and 'x6/2') are not mates "
                                "(mate names must be equal up to a trailing /1 or /2)")


@pytest.mark.parametrize("short", [0, 1])
def test_unequal_pair_counts_name_both_files(tmp_path, short):
    paths = mate_files(tmp_path, 9)
    lines = paths[short].read_text().splitlines(keepends=True)
    paths[short].write_text("".join(lines[:4 * 7]))
    with SequenceSource(paths[0]) as one, SequenceSource(paths[1]) as two:
        with pytest.raises(InputError) as error:
            list(two_file_pairs(one, two, 4))
    assert str(error.value) == (f"{paths[short]} ends after 7 reads but {paths[1 - short]} goes on (read 8, "
                                f"'r7/{2 - short}'); the two files must hold the same number of reads")


def test_interleaved_odd_count_names_the_last_record(tmp_path):
    path = interleave(mate_files(tmp_path, 5), tmp_path / "i.fq")
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:4 * 9]))
    with SequenceSource(path) as source, pytest.raises(InputError) as error:
        list(interleaved_pairs(source, 2))
    assert str(error.value) == (f"{path}: interleaved input holds an odd number of records; the last, record 9 "
                                "('r4/1'), has no mate")


def test_mate_names_without_suffix_are_given_one(tmp_path):
    one, two = tmp_path / "a.fq", tmp_path / "b.fq"
    one.write_text("@p1 x\nACGT\n+\nIIII\n@p2/1\nAC\n+\nII\n")
    two.write_text("@p1 y\nTT\n+\nII\n@p2/2\nGG\n+\nII\n")
    with SequenceSource(one) as a, SequenceSource(two) as b:
        (chunk,) = list(two_file_pairs(a, b, 10))
    assert chunk.read_names(np.array([0, 1, 2, 3])).strings() == ["p1/1", "p1/2", "p2/1", "p2/2"]
    assert chunk.read_names(np.array([3, 0])).strings() == ["p2/2", "p1/1"]


# ------------------------------------------------------------ the CLI


def strip_mate(line: str) -> str:
    name, rest = line.split("\t", 1)
    return f"{name[:-2]}\t{rest}"


@pytest.mark.parametrize("chunk_size", [None, 3])
@pytest.mark.parametrize("layout", ["two files", "interleaved"])
def test_paired_paf_matches_golden_file(capsys, layout, chunk_size):
    inputs = [*MATES[:1], "-2", MATES[1]] if layout == "two files" else [INTERLEAVED, "--interleaved"]
    extra = [] if chunk_size is None else ["--chunk-size", chunk_size]
    status, out, err = run_cli(capsys, *inputs, PATTERNS, "-t", "20", "-q", *extra)
    assert (status, err) == (0, "")
    assert out == (DATA / "expected_paired.paf").read_text()


def test_mate_1_lines_are_the_single_end_lines(capsys):
    """Independent of the golden file: mate 1 of every pair is a read of reads.fq."""
    paired = (DATA / "expected_paired.paf").read_text().splitlines()
    single = (DATA / "expected.paf").read_text().splitlines()
    assert [strip_mate(line) for line in paired if line.split("\t")[0].endswith("/1")] == single


@pytest.mark.parametrize("pair_filter", ["any", "both"])
@pytest.mark.parametrize("layout", ["two files", "interleaved", "interleaved split", "interleaved FASTA"])
def test_matched_and_unmatched_partition_the_pairs(capsys, tmp_path, pair_filter, layout):
    """Interleaved FASTA: records, not raw FASTQ bytes, written pair by pair."""
    inputs = [*MATES[:1], "-2", MATES[1]] if layout == "two files" else [INTERLEAVED, "--interleaved"]
    fq = "fq"
    if layout == "interleaved FASTA":
        fq = "fa"
        inputs[0] = tmp_path / "interleaved.fa"
        inputs[0].write_text("".join(f">{record.name}\n{record.sequence}\n" for record in records(INTERLEAVED)))
    split = layout in ("two files", "interleaved split")
    outputs = ["--matched", tmp_path / f"m1.{fq}", "--unmatched", tmp_path / f"u1.{fq}"]
    if split:
        outputs += ["--matched2", tmp_path / "m2.fq", "--unmatched2", tmp_path / "u2.fq"]
    status, out, err = run_cli(capsys, *inputs, PATTERNS, "-t", "30", "-q", "--pair-filter", pair_filter,
                               "--chunk-size", 4, *outputs)
    assert status == 0, err
    passing = {}
    for line in out.splitlines():
        name = line.split("\t")[0]
        passing.setdefault(name[:-2], set()).add(name[-1])
    keep = (lambda mates: bool(mates)) if pair_filter == "any" else (lambda mates: mates == {"1", "2"})
    pairs = list(zip(*map(records, MATES)))
    names = [first.id[:-2] for first, _ in pairs]
    expected_matched = [pair for pair, name in zip(pairs, names) if keep(passing.get(name, set()))]
    expected_unmatched = [pair for pair, name in zip(pairs, names) if not keep(passing.get(name, set()))]
    assert expected_matched and (expected_unmatched or pair_filter == "any")
    for kind, expected in (("m", expected_matched), ("u", expected_unmatched)):
        if split:
            got = list(zip(records(tmp_path / f"{kind}1.fq"), records(tmp_path / f"{kind}2.fq")))
        else:
            interleaved = iter(records(tmp_path / f"{kind}1.{fq}"))
            got = list(zip(interleaved, interleaved))
        if fq == "fa":
            assert [tuple((r.name, r.sequence) for r in pair) for pair in got] == [
                tuple((r.name, r.sequence) for r in pair) for pair in expected]
            continue
        assert [tuple(map(str, pair)) for pair in got] == [tuple(map(str, pair)) for pair in expected]
    # byte for byte: the pairs' records as they are in the input files
    if split:
        assert sum(len((tmp_path / f"{k}{m}.fq").read_bytes()) for k in "mu" for m in "12") == sum(
            len(path.read_bytes()) for path in MATES)


def test_paired_summary_and_json_count_pairs_and_mates(capsys, tmp_path):
    import json

    status, out, err = run_cli(capsys, *MATES[:1], "-2", MATES[1], PATTERNS, "-t", "20", "--pair-filter", "both",
                               "--json", tmp_path / "s.json")
    assert status == 0
    figures = json.loads((tmp_path / "s.json").read_text())
    lines = out.splitlines()
    assert figures["paired"] is True and figures["pairs"] == 20 and figures["reads"] == 40
    assert figures["alignments"] == len(lines) == 34
    names = {line.split("\t")[0] for line in lines}
    assert figures["reads_passing"] == len(names)
    both = {name[:-2] for name in names if name.endswith("/1")} & {name[:-2] for name in names if name.endswith("/2")}
    assert figures["pairs_passing"] == len(both) and figures["pairs_not_passing"] == 20 - len(both)
    for pattern in figures["patterns"]:
        for mate in "12":
            for strand in "+-":
                count = sum(1 for line in lines if line.split("\t")[0].endswith(f"/{mate}")
                            and line.split("\t")[5] == pattern["name"] and line.split("\t")[4] == strand)
                assert pattern["mates"][mate][strand] == count
    assert err.startswith("bpbc-screen: 20 pairs (40 reads) screened in ")
    assert f"; {len(both)} pairs passed, pair filter both ({len(names)} reads passed; threshold 20" in err


@pytest.mark.parametrize("args, message", [
    (["--matched2", "x.fq"], "--matched2 needs paired reads (--reads2 or --interleaved)"),
    (["-2", MATES[1], "--interleaved"], "give --reads2 or --interleaved, not both"),
    (["-2", MATES[1], "--matched", "x.fq"], "with --reads2, give --matched and --matched2 together"),
    (["--interleaved", "--unmatched2", "x.fq"], "--unmatched2 needs --unmatched (mate 1 file)"),
    (["-2", MATES[1], "--unmatched", "{name}.fq", "--unmatched2", "y.fq"],
     "{name} can only be used in --matched and --matched2"),
    (["-2", MATES[1], "--matched", "{name}.fq", "--matched2", "y.fq"],
     "use {name} in both --matched and --matched2, or in neither"),
])
def test_paired_option_errors(capsys, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    status, out, err = run_cli(capsys, MATES[0], PATTERNS, *args)
    assert status == 1 and out == ""
    assert err.startswith("bpbc-screen: error: ") and message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case", ["unequal", "names"])
def test_bad_pairs_exit_1_and_leave_no_output(capsys, tmp_path, case):
    paths = mate_files(tmp_path, 30, rename=(25, "other/2") if case == "names" else None)
    if case == "unequal":
        paths[1].write_text("".join(paths[1].read_text().splitlines(keepends=True)[:4 * 29]))
    outputs = [tmp_path / name for name in ("o.paf", "o_m1.fq", "o_m2.fq", "o_u1.fq", "o_u2.fq")]
    status, _, err = run_cli(capsys, paths[0], "-2", paths[1], PATTERNS, "-t", "20", "--chunk-size", 4,
                             "-o", outputs[0], "--matched", outputs[1], "--matched2", outputs[2],
                             "--unmatched", outputs[3], "--unmatched2", outputs[4])
    assert status == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert str(paths[0]) in err and str(paths[1]) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m1.fq", "m2.fq"]  # the inputs only


@pytest.mark.parametrize("at", [0, 6])
def test_mismatched_interleaved_mates_name_the_file_and_both_records(tmp_path, at):
    """Pair ``at`` + 1 is records 2at + 1 and 2at + 2 of the interleaved file;
    the very first pair is checked too."""
    path = interleave(mate_files(tmp_path, 10, rename=(at, f"x{at}/2")), tmp_path / "i.fq")
    with SequenceSource(path) as source, pytest.raises(InputError) as error:
        list(interleaved_pairs(source, 4))
    assert str(error.value) == (f"{path}: records {2 * at + 1} and {2 * at + 2} ('r{at}/1' and 'x{at}/2') are not "
                                "mates (mate names must be equal up to a trailing /1 or /2)")
    paths = mate_files(tmp_path, 10, rename=(at, f"x{at}/2"))
    with SequenceSource(paths[0]) as one, SequenceSource(paths[1]) as two, pytest.raises(InputError) as error:
        list(two_file_pairs(one, two, 4))
    assert str(error.value).startswith(f"{paths[0]} and {paths[1]}: the records {at + 1} ('r{at}/1' and 'x{at}/2')")


@pytest.mark.parametrize("mate", [0, 1])
def test_a_bad_base_names_the_mates_file(tmp_path, mate):
    paths = mate_files(tmp_path, 6)
    lines = paths[mate].read_text().splitlines(keepends=True)
    lines[4 * 3 + 1] = "Z" + lines[4 * 3 + 1][1:]
    paths[mate].write_text("".join(lines))
    with SequenceSource(paths[0]) as one, SequenceSource(paths[1]) as two, pytest.raises(InputError) as error:
        for chunk in two_file_pairs(one, two, 4):
            chunk.encode()
    assert str(error.value) == (f"{paths[mate]}: read r3/{mate + 1}: character 'Z' at position 1 is not an IUPAC "
                                "nucleotide code")


def test_pairs_encode_as_the_mates_interleaved(tmp_path):
    """Codes and lengths of a two-file chunk: those of the records mate 1,
    mate 2, mate 1, ... encoded as single reads (lengths as int64, as every
    engine takes them)."""
    paths = mate_files(tmp_path, 9, seed=4)
    expected = encode_reads([record.sequence for pair in zip(*map(records, paths)) for record in pair])
    with SequenceSource(paths[0]) as one, SequenceSource(paths[1]) as two:
        (chunk,) = list(two_file_pairs(one, two, 20))
    codes, lengths = chunk.encode()
    assert lengths.dtype == expected[1].dtype == np.int64 and lengths.tolist() == expected[1].tolist()
    width = expected[0].shape[1]
    assert codes.shape[0] == 18 and (codes[:, width:] == 4).all()
    assert codes[:, :width].tolist() == expected[0].tolist()


@pytest.mark.parametrize("layout", ["two files", "interleaved"])
def test_chunks_of_pairs_ramp_up_as_asked(tmp_path, layout):
    """ramp k: the first chunk holds size/k pairs and each next one twice as
    many, up to size, for both mates alike; by default (k = 1) every chunk
    holds size pairs."""
    paths = mate_files(tmp_path, 40)

    def sizes(size, **ramp) -> list[int]:
        if layout == "interleaved":
            with SequenceSource(interleave(paths, tmp_path / "i.fq")) as source:
                chunks = list(interleaved_pairs(source, size, **ramp))
        else:
            with SequenceSource(paths[0]) as one, SequenceSource(paths[1]) as two:
                chunks = list(two_file_pairs(one, two, size, **ramp))
        names = [name for chunk in chunks for name in chunk.read_names(np.arange(2 * len(chunk))).strings()]
        assert names == [f"r{i}/{mate}" for i in range(40) for mate in (1, 2)]
        return [len(chunk) for chunk in chunks]

    assert sizes(8, ramp=4) == [2, 4, 8, 8, 8, 8, 2]
    assert sizes(16) == [16, 16, 8]
