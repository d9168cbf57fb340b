"""python -m bench several-gpus --quick: the runs, the comparison of outputs and the table."""

from __future__ import annotations

from bench.__main__ import main
from bench.environment import read_csv


def test_several_gpus_quick(tmp_path):
    assert main(["several-gpus", "--quick", "--out", str(tmp_path), "--work", str(tmp_path / "work")]) == 0
    rows = read_csv(tmp_path / "several_gpus_quick_cpu.csv")
    assert [(r["gpus"], r["exit"]) for r in rows] == [("1", "0"), ("2", "0")]
    assert rows[1]["identical_to_one"] == "True"
    # the speedup is the one-GPU run's --json wall time over this one's (rounded to 3 decimals)
    assert abs(float(rows[1]["speedup"]) - float(rows[0]["json_wall_s"]) / float(rows[1]["json_wall_s"])) <= 6e-4
    assert all(int(r["cells"]) == 2000 * 150 * 240 * 2 for r in rows)


def test_panels_are_made_once_and_seeded(tmp_path):
    from bench.several_gpus import LONG_PANEL, panel_file, pattern_bases

    short = panel_file(tmp_path, "3x24")
    assert short.read_text().count(">") == 3 and pattern_bases(short) == 72
    long_ = panel_file(tmp_path, LONG_PANEL)
    lengths = [len(line) for line in long_.read_text().splitlines() if not line.startswith(">")]
    assert len(lengths) == 2000 and 100 <= min(lengths) and max(lengths) <= 10_000
    assert panel_file(tmp_path, LONG_PANEL).read_text() == long_.read_text()
