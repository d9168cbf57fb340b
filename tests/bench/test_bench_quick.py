"""The CI benchmark commands (--quick, CPU only) run and write sane tables."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("parasail")

from bench.__main__ import main  # noqa: E402
from bench.environment import read_csv  # noqa: E402


def assert_printed(printed: str, value: float) -> None:
    """``printed`` is ``value`` to the digits printed (a small ratio printed
    as 0.0044 is 0.00445 rounded: half a unit of its last digit)."""
    decimals = len(printed.partition(".")[2].partition("e")[0]) if "e" not in printed.lower() else 0
    assert math.isclose(float(printed), value, rel_tol=2e-3, abs_tol=0.5 * 10.0 ** -decimals if decimals else 0.0), (
        printed, value)


def assert_rate(rate: str, work: float, seconds: str) -> None:
    """A rate column is its row's work over its seconds column (to the
    digits printed), not merely a positive number."""
    assert_printed(rate, work / float(seconds))


def test_transpose_quick(tmp_path):
    assert main(["transpose", "--quick", "--out", str(tmp_path), "--sizes", "1024", "4096"]) == 0
    rows = read_csv(tmp_path / "transpose_quick_cpu.csv")
    assert {"direction", "method", "instances", "seconds", "bases_per_s", "fraction_of_copy",
            "ratio_to_reference", "gpu", "date"} <= set(rows[0])
    assert {r["method"] for r in rows} == {"cpu_pack_codes", "cpu_streams_to_planes", "cpu_unpack_planes"}
    assert {int(r["instances"]) for r in rows} == {1024, 4096}
    reference = {(r["direction"], r["instances"]): r["seconds"] for r in rows
                 if r["method"] in ("cpu_streams_to_planes", "cpu_unpack_planes")}
    for r in rows:
        assert_rate(r["bases_per_s"], int(r["instances"]) * int(r["read_length"]), r["seconds"])
        assert_rate(r["bytes_per_s"], int(r["bytes_moved"]), r["seconds"])
        assert_printed(r["ratio_to_reference"], float(r["seconds"]) / float(reference[r["direction"], r["instances"]]))
    assert "# numba:" in (tmp_path / "transpose_quick_cpu.csv").read_text()


def test_sw_quick(tmp_path):
    assert main(["sw", "--quick", "--out", str(tmp_path)]) == 0
    rows = read_csv(tmp_path / "sw_quick_cpu.csv")
    assert {"case", "method", "read_length", "instances", "seconds", "basis", "ratio_to_reference"} <= set(rows[0])
    table2 = [r for r in rows if r["case"] == "table2"]
    assert {r["method"] for r in table2} == {"bpbc_cpu", "parasail_sat"}
    seconds = {(r["method"], r["read_length"]): float(r["seconds"]) for r in table2}
    for row in table2:
        assert row["basis"] != "error", row
        cells = int(row["instances_measured"]) * int(row["read_length"]) * int(row["pattern_length"])
        assert_rate(row["gcups"], cells / 1e9, row["seconds_measured"])
        assert_printed(row["ratio_to_reference"],
                       seconds[row["method"], row["read_length"]] / seconds["bpbc_cpu", row["read_length"]])
    for row in [r for r in rows if r["case"].startswith("screen_")]:
        assert row["basis"] != "error", row
        assert_rate(row["reads_per_s"], int(row["instances"]), row["seconds"])
    end_to_end = [r for r in rows if r["case"].startswith("end_to_end")]
    assert end_to_end
    for row in end_to_end:
        # one pattern planted in every 50th read, a panel's in every 3rd: each gives a PAF line at least
        every = 50 if row["case"] == "end_to_end_single_128" else 3
        assert int(row["paf_lines"]) >= int(row["instances"]) // every
        assert_rate(row["reads_per_s"], int(row["instances"]), row["seconds"])


def test_result_files_are_named_by_benchmark_and_device():
    from bench.__main__ import result_stem

    assert result_stem("sw", "h100") == "sw_h100"
    assert result_stem("sw", "cpu", only=["e2e"]) == "sw_e2e_cpu"
    assert result_stem("sw", "cpu", quick=True) == "sw_quick_cpu"
    assert result_stem("dask", "h200", serve=True) == "dask_serve_h200"
    assert result_stem("transpose", "h100", only=["e2e"], serve=True) == "transpose_h100"


def test_csv_header_holds_every_column_of_every_row(tmp_path):
    """Rows of different kinds carry different columns: the header is their
    union, and every row parses back with its own values."""
    from bench.environment import read_csv, write_csv

    rows = [{"case": "table2", "seconds": "1"}, {"case": "end_to_end", "read_s": "2", "write_s": "3"}]
    path = write_csv(tmp_path / "x.csv", rows, {"gpu": "none", "date": "today"})
    back = read_csv(path)
    assert [row["case"] for row in back] == ["table2", "end_to_end"]
    assert back[1]["read_s"] == "2" and back[1]["write_s"] == "3" and back[0]["read_s"] == ""
    assert back[0]["gpu"] == "none"


def test_cpu_cell_ab_times_the_kernel_and_the_two_pass_screen(tmp_path):
    assert main(["cpu-kernel", "--reads", "1024", "--planes", "6", "--repeats", "1", "--screen", "40",
                 "--out", str(tmp_path)]) == 0
    rows = read_csv(tmp_path / "cpu_cell_ab_cpu.csv")
    assert "# numba:" in (tmp_path / "cpu_cell_ab_cpu.csv").read_text()
    kernel, unplanted, planted = rows
    assert kernel["track_best"] == "True" and unplanted["track_best"] == planted["track_best"] == "two passes"
    # every 16th read carries the whole pattern: those 64 hit, and random reads of 150 bp do not
    assert (unplanted["planted"], unplanted["hits"]) == ("none", "0")
    assert (planted["planted"], planted["hits"]) == ("1/16", "64")


def test_startup_quick(tmp_path):
    """The one-read run of a fresh process, where its imports go, the modules
    it compiles from source and the numba kernels it loads."""
    assert main(["startup", "--quick", "--out", str(tmp_path)]) == 0
    rows = {row["step"]: row for row in read_csv(tmp_path / "startup_quick_cpu.csv")}
    assert {"one-read file, CPU", "import bpbc.cli", "one-read run, CPU: imports (self time, all)",
            "one-read run, CPU: modules compiled from source", "  of them numba"} <= set(rows)
    loads = rows["one-read run, CPU: numba kernels loaded"]
    # the screen's kernels come from the cache: the read, the first pass and the engine's kernel at least
    assert int(loads["count"]) >= 3 and "sw_kernel" in loads["note"] and "scan_fastq" in loads["note"]
    # the process outside its run, and the phases of the process, which add up to about its wall
    phases = [float(rows[f"one-read run, CPU: {name}"]["seconds"]) for name in (
        "start to the pipeline imported", "then to the run", "the run", "after the run", "the exit")]
    assert 0 < float(rows["one-read run, CPU: wall minus run"]["seconds"]) < sum(phases)
    assert min(phases) >= 0 and float(rows["one-read run, CPU:   of it the exit handlers"]["seconds"]) <= phases[3]


def test_startup_trees(tmp_path):
    """--trees: each measure per tree, and the base's ratio to each other tree."""
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    assert main(["startup", "--trees", f"a={root}", f"b={root}", "--rounds", "1", "--out", str(tmp_path)]) == 0
    rows = {row["step"]: row for row in read_csv(tmp_path / "startup_trees_cpu.csv")}
    for measure in ("import bpbc.cli", "one-read file, CPU: process wall", "one-read file, CPU: wall minus run"):
        assert float(rows[f"{measure}: a"]["seconds"]) > 0 and float(rows[f"{measure}: b"]["seconds"]) > 0
        assert float(rows[f"{measure}: a/b"]["ratio"]) > 0


def test_panel_rate_quick(tmp_path):
    """Library, end-to-end and traceback rows, each panel's rate against the
    one-pattern row's; the traceback on reads with planted pattern copies
    finds them (5 a read of 150 bp: 5 x 24 bp fit) and says its hits/s."""
    assert main(["panel-rate", "--quick", "--panels", "1x64", "8x24", "--out", str(tmp_path)]) == 0
    path = tmp_path / "panel_rate_quick_cpu.csv"
    rows = read_csv(path)
    assert "# cpu:" in path.read_text() and "# command:" in path.read_text()
    by_kind = {kind: [row for row in rows if row["kind"] == kind] for kind in ("library", "e2e", "traceback")}
    assert [row["panel"] for row in by_kind["library"]] == [row["panel"] for row in by_kind["e2e"]] == ["1x64", "8x24"]
    assert by_kind["library"][0]["ratio_to_one"] == "1.000"
    for row in by_kind["e2e"]:
        assert_rate(row["gcups"], int(row["cells"]) / 1e9, row["seconds"])
        assert_rate(row["device_gcups"], int(row["cells"]) / 1e9, row["device_s"])
    hits = {row["threads"]: row for row in by_kind["traceback"]}
    assert "1" in hits and all(int(row["hits"]) >= 5 * 2000 * 0.95 for row in hits.values())
    for row in hits.values():
        assert_rate(row["hits_per_s"], int(row["hits"]), row["seconds"])
