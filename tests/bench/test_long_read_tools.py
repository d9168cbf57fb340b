"""bench.long_read_tools: the planted truth of its reads, how it reads a
trimmed file back, and bpbc's trimming row on a few reads."""

from __future__ import annotations

import numpy as np

from bench.environment import read_csv
from bench.long_read_tools import NEAR, Y_BOTTOM, Y_TOP, adapter_reads, main, trimmed_spans


def test_adapter_reads_hold_the_adapters_around_their_inserts(tmp_path):
    reads_path, truth = adapter_reads(tmp_path, 60)
    sequences = reads_path.read_text().split("\n")[1::4][:60]
    for sequence, (start, end) in zip(sequences, truth):
        assert 5000 <= end - start <= 10_000
        # an adapter copy (about 5 % errors) or nothing on each side of the insert
        assert start == 0 or 20 <= start <= len(Y_TOP) + 15
        assert end == len(sequence) or 15 <= len(sequence) - end <= len(Y_BOTTOM) + 15
    assert 0.6 <= np.mean(truth[:, 0] > 0) <= 0.95


def test_trimmed_spans_find_each_piece_in_its_read(tmp_path):
    reads = tmp_path / "r.fq"
    reads.write_text("@a0\nACGTTGCAAC\n+\nIIIIIIIIII\n@a1 x\nGGGTTTCCCAAA\n+\nIIIIIIIIIIII\n@a2\nACGT\n+\nIIII\n")
    trimmed = tmp_path / "t.fq"
    # a0 cut at both ends; a1 split in two pieces (Porechop's names); a2 trimmed to nothing: left out
    trimmed.write_text("@a0\nGTTGCA\n+\nIIIIII\n@a1_1 x\nGGGT\n+\nIIII\n@a1_2\nCCAAA\n+\nIIIII\n@a2\n\n+\n\n")
    assert trimmed_spans(reads, trimmed) == {0: (2, 8), 1: (0, 12)}


def test_bpbc_trims_the_planted_adapters(tmp_path):
    assert main(["--cases", "porechop", "--porechop-reads", "40", "--repeats", "1", "--porechop", "/nowhere/porechop",
                 "--work", str(tmp_path / "work"), "--out", str(tmp_path)]) == 0
    rows = read_csv(tmp_path / "long_read_tools_cpu.csv")
    assert [row["what"] for row in rows] == ["bpbc-screen --device cpu --action trim",
                                             "bpbc-screen --device cpu --action trim --ends 150"]
    for row in rows:
        assert row["exit"] == "0" and row["left_out"] == "0"
        # half a perfect copy's score finds nearly every adapter with 5 % errors; a few cuts land a base off
        assert float(row[f"both_ends_within_{NEAR}"]) >= 0.9
        assert float(row["both_ends_within_0"]) <= float(row[f"both_ends_within_{NEAR}"])
