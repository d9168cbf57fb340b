"""bench.library_scaling --quick: every form timed on 1 and 2 threads, the results checked against the str form's."""

from __future__ import annotations

import pytest

from bench import library_scaling
from bench.environment import read_csv
from tests.bench.test_bench_quick import assert_rate


def test_quick_run_writes_a_row_per_form_and_thread_count(tmp_path):
    assert library_scaling.main(["--quick", "--out", str(tmp_path)]) == 0
    path = tmp_path / "library_scaling_quick_cpu.csv"
    rows = read_csv(path)
    assert {(row["form"], row["threads"]) for row in rows} == {
        (form, threads) for form in ("str", "buffer", "records") for threads in ("1", "2")}
    for row in rows:
        assert int(row["reads"]) == 2000 and int(row["alignments"]) == 2000 // library_scaling.HIT_EVERY
        assert_rate(row["gcups"], int(row["reads"]) * int(row["read_length"]) * int(row["pattern_length"]) / 1e9,
                    row["seconds"])
    one = {row["form"]: float(row["seconds"]) for row in rows if row["threads"] == "1"}
    for row in rows:  # the 1-thread median over this one's
        assert abs(float(row["ratio_to_1_thread"]) - one[row["form"]] / float(row["seconds"])) <= 6e-4
    text = path.read_text()
    assert "# cpu_target:" in text and "# omp_wait_policy:" in text


def test_a_wrong_result_fails_the_run(tmp_path, monkeypatch):
    """The benchmark times only answers equal to the str form's."""
    real = library_scaling.make_input

    def shifted(form, reads):
        made = real(form, reads)
        return made if form == "str" else real(form, reads[1:] + reads[:1])

    monkeypatch.setattr(library_scaling, "make_input", shifted)
    with pytest.raises(AssertionError, match="differs from the str form"):
        library_scaling.main(["--quick", "--forms", "str", "buffer", "--out", str(tmp_path)])
