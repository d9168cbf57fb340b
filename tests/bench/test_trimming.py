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
    # the trimming is exact and every planted adapter is one it must find (docs/trimming.md): all cut
    # exactly, the classes without a target of bench/trimming.py too, not merely 95 % or more
    for name in ("whole adapter, no errors", "partial 3-19 bp, no errors", "partial 20-32 bp, no errors",
                 "one substitution"):
        assert float(figures[f"cut exactly: {name}"]["value"]) == 1.0, name
    # a read without an adapter is cut where it ends in the adapter's first 3 bases or more: 1 in 48 of them
    left_whole = figures["cut exactly: no adapter, left whole"]
    assert abs(float(left_whole["value"]) - (1 - 1 / 48)) <= 4 * (1 / 48 / int(left_whole["reads"])) ** 0.5
    # cutadapt (edit distance) and bpbc (affine SW) differ on a few reads in 10^4 (docs/trimming.md): not 5 %
    assert float(figures["same trimmed length as cutadapt -e 0.1 -O 3"]["value"]) >= 0.998
    assert "trim / screen, run wall time (--json)" in figures
