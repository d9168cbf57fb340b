"""bench.long_exact: its inputs, and a few trials against parasail."""

from __future__ import annotations

import numpy as np

from bench.environment import read_csv
from bench.long_exact import main, random_text, scorings, trial_inputs
from bench.long_reads import nanopore_copy


def test_inputs_hold_what_the_trials_promise():
    rng = np.random.default_rng(3)
    text = random_text(rng, 20_000, "ACGT", "N", 0.01)
    assert set(text) == set("ACGTN") and 0.005 < text.count("N") / len(text) < 0.015
    copy = nanopore_copy(rng, np.frombuffer(text.replace("N", "A")[:5000].encode(), np.uint8), 0.12).tobytes()
    assert copy != text[:5000].encode() and 4500 < len(copy) < 5500
    pattern, reads, threshold = trial_inputs(rng, scorings()[0], 4000)
    assert 100 <= len(pattern) <= 20_000 and 2 <= len(reads) <= 5 and 1 <= threshold <= 2 * len(pattern)
    assert set(pattern) <= set("ACGTRYKMSWBDHVN")


def test_a_few_trials_agree_with_parasail(tmp_path):
    assert main(["--trials", "3", "--longest-read", "3000", "--seed", "7", "--out", str(tmp_path)]) == 0
    rows = read_csv(tmp_path / "long_exact_cpu.csv")
    assert len(rows) == 3 and all(row["wrong"] == "0" for row in rows)
    assert sum(int(row["hits"]) for row in rows) > 0
