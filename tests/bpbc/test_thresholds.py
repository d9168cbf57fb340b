"""Per-pattern thresholds: header values, score fractions, precedence, errors,
and the screen's hits against an independent oracle."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from bpbc.cli import main
from bpbc.io import InputError
from bpbc.scoring import Scoring
from bpbc.thresholds import header_threshold, pattern_thresholds
from tests.bpbc.conftest import parasail_sw, random_pattern, random_read


class Record:
    def __init__(self, name, sequence):
        self.name, self.sequence = name, sequence
        self.id = name.split()[0]


def run_cli(capsys, *args):
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_header_threshold_is_read_from_the_comment_only():
    assert header_threshold("p1 threshold=25") == "25"
    assert header_threshold("p1 primer threshold=7 other=1") == "7"
    assert header_threshold("threshold=25") is None  # that is the name
    assert header_threshold("p1 thresholds=3") is None
    assert header_threshold("p1") is None


def test_precedence_header_then_fraction_then_threshold():
    patterns = [Record("a threshold=11", "A" * 20), Record("b", "A" * 25), Record("c x", "A" * 33)]
    scoring = Scoring()
    assert pattern_thresholds(patterns[1:], "p.fa", scoring, 30) == 30  # one for all: stays an int
    assert pattern_thresholds(patterns, "p.fa", scoring, 30) == [11, 30, 30]
    # exact arithmetic: 0.8 x 2 x 25 is 40, not 40.000000000000004 rounded up to 41
    assert pattern_thresholds(patterns, "p.fa", scoring, 30, 0.8) == [11, 40, 53]
    assert pattern_thresholds(patterns, "p.fa", Scoring(match=3), 30, 0.7) == [11, 53, 70]


@pytest.mark.parametrize("value", ["0", "-3", "2.5", "x", "", "07"])
def test_header_threshold_must_be_a_positive_integer(value):
    patterns = [Record("a", "ACGT"), Record(f"b threshold={value}", "ACGT")]
    with pytest.raises(InputError, match=rf"^p\.fa: pattern 'b' \(record 2\): threshold={value} in the header is "
                                         r"not a positive integer$"):
        pattern_thresholds(patterns, "p.fa", Scoring(), 4)


@pytest.mark.parametrize("fraction", ["0", "-0.5", "1.01", "nan"])
def test_fraction_outside_0_1_is_an_error(capsys, tmp_path, fraction):
    reads, patterns = tmp_path / "r.fa", tmp_path / "p.fa"
    reads.write_text(">r\nACGT\n")
    patterns.write_text(">p\nACGT\n")
    status, out, err = run_cli(capsys, reads, patterns, "--min-score-fraction", fraction, "-o", tmp_path / "o.paf")
    assert status == 1 and out == ""
    assert err == f"bpbc-screen: error: --min-score-fraction must be in (0, 1], got {float(fraction)}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.fa", "r.fa"]


def test_threshold_and_fraction_together_is_an_error(capsys, tmp_path):
    status, _, err = run_cli(capsys, tmp_path / "r.fa", tmp_path / "p.fa", "-t", "5", "--min-score-fraction", "0.5")
    assert status == 1 and err == "bpbc-screen: error: give --threshold or --min-score-fraction, not both\n"


def test_unreachable_header_threshold_names_the_pattern(capsys, tmp_path):
    reads, patterns = tmp_path / "r.fa", tmp_path / "p.fa"
    reads.write_text(">r\nACGT\n")
    patterns.write_text(">long\nACGTACGTACGT\n>short threshold=9\nACGT\n")
    status, _, err = run_cli(capsys, reads, patterns, "-t", "20")
    assert status == 1
    assert err.startswith("bpbc-screen: error: pattern short: threshold 9 is above the best score")


def test_bad_header_threshold_exits_1_naming_file_and_record(capsys, tmp_path):
    reads, patterns = tmp_path / "r.fa", tmp_path / "p.fa"
    reads.write_text(">r\nACGT\n")
    patterns.write_text(">a\nACGT\n>b threshold=high\nACGT\n")
    status, _, err = run_cli(capsys, reads, patterns)
    assert status == 1
    assert err == (f"bpbc-screen: error: {patterns}: pattern 'b' (record 2): threshold=high in the header is not a "
                   "positive integer\n")


def test_per_pattern_thresholds_against_an_oracle(capsys, tmp_path):
    """Lengths 12-40, a fraction for most patterns and a header value for
    some: every (read, pattern, strand) whose parasail score reaches that
    pattern's threshold, computed here from the definition, is in the PAF,
    and nothing else."""
    rng = np.random.default_rng(11)
    patterns = [random_pattern(rng, int(length)) for length in rng.integers(12, 41, size=6)]
    headers = {1: 9, 4: 30}
    reads = []
    for k in range(120):
        read = random_read(rng, 70)
        if k % 3 == 0:  # a piece of some pattern, mutated, so scores spread around the thresholds
            pattern = patterns[k // 3 % len(patterns)]
            piece = list(pattern[: int(rng.integers(6, len(pattern) + 1))])
            for position in rng.choice(len(piece), size=int(rng.integers(0, 4)), replace=True):
                piece[position] = "ACGT"[int(rng.integers(0, 4))]
            at = int(rng.integers(0, 70 - len(piece)))
            read = read[:at] + "".join(piece) + read[at + len(piece):]
        reads.append(read)
    reads_path, patterns_path = tmp_path / "r.fa", tmp_path / "p.fa"
    reads_path.write_text("".join(f">r{k}\n{read}\n" for k, read in enumerate(reads)))
    patterns_path.write_text("".join(
        f">p{i}{'' if i not in headers else f' threshold={headers[i]}'}\n{pattern}\n" for i, pattern in enumerate(patterns)))
    fraction = "0.6"
    status, out, err = run_cli(capsys, reads_path, patterns_path, "--min-score-fraction", fraction, "-q",
                               "--json", tmp_path / "s.json")
    assert status == 0, err
    thresholds = [headers.get(i, -(-Fraction(fraction) * 2 * len(p) // 1)) for i, p in enumerate(patterns)]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert [p["threshold"] for p in summary["patterns"]] == thresholds and summary["threshold"] is None
    complement = str.maketrans("ACGT", "TGCA")
    expected = set()
    for k, read in enumerate(reads):
        for i, pattern in enumerate(patterns):
            for strand, text in (("+", pattern), ("-", pattern.translate(complement)[::-1])):
                if parasail_sw(read, text, Scoring()) >= thresholds[i]:
                    expected.add((f"r{k}", f"p{i}", strand))
    got = {(fields[0], fields[5], fields[4]) for fields in (line.split("\t") for line in out.splitlines())}
    assert got == expected
    assert len({pattern for _, pattern, _ in expected}) >= 4  # the thresholds matter for several patterns


def test_plain_sequences_have_no_header_and_a_fraction_of_one_is_the_best_score():
    """Patterns given as str or bytes (the Python API) have no header to read
    a threshold from; --min-score-fraction 1 is the whole best score."""
    patterns = ["ACGTACGTAC", b"ACGT"]
    assert pattern_thresholds(patterns, "p.fa", Scoring(), 30) == 30
    assert pattern_thresholds(patterns, "p.fa", Scoring(), 30, 0.5) == [10, 4]
    assert pattern_thresholds(patterns, "p.fa", Scoring(), 30, 1) == [20, 8]
    assert pattern_thresholds(patterns, "p.fa", Scoring(match=3), 30, 1.0) == [30, 12]
