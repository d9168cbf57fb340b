"""bench.trimming on a few thousand reads: the figures exist and the exactness targets hold."""

from __future__ import annotations

import csv

from bench.trimming import main, planted_reads


def test_planted_reads_hold_the_adapter_where_they_say():
    data, overlap, substituted = planted_reads(200, 150, 20, seed=1)
    lines = data.decode().split("\n")
    for r in range(200):
        sequence = lines[4 * r + 1]
        assert len(sequence) == 150 and f"overlap={overlap[r]}" in lines[4 * r]
        if overlap[r] and not substituted[r]:
            part = "AGATCGGAAGAGCACACGTCTGAACTCCAGTCA"[:overlap[r]]
            assert sequence[150 - overlap[r]:150 - overlap[r] + len(part)] == part


def test_quick_run_writes_the_figures(tmp_path, capsys):
    assert main(["--reads", "3000", "--repeats", "1", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "trimming_cpu.csv") as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    figures = {row["figure"]: row for row in rows}
    for name in ("whole adapter, no errors", "partial 3-19 bp, no errors", "one substitution"):
        assert figures[f"cut exactly: {name}"]["met"] == "True"
    assert figures["same trimmed length as cutadapt -e 0.1 -O 3"]["met"] == "True"
    assert "trim / screen, run wall time (--json)" in figures
