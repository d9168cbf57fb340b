"""The fuzz driver's checks catch what they are meant to catch (bench/fuzz.py),
and the driver runs, counts and reports."""

from __future__ import annotations

import json
import threading
import time

import pytest

from bench.fuzz import Case, case_for, error_kind, main, run_case, run_twice

FASTQ = b"".join(b"@r%d x\n%s\n+\n%s\n" % (i, b"ACGTACGTAC" * 3, b"I" * 30) for i in range(12))
PATTERNS = b">p\nACGTACGTACGT\n"
OUTPUTS = {"-o": "hits.paf", "--matched": "m.fq", "--unmatched": "u.fq.gz", "--json": "s.json"}


def case(reads: bytes = FASTQ, **changes) -> Case:
    fields = dict(reads=reads, reads_name="r.fq", patterns=PATTERNS, patterns_name="p.fa", threshold=16,
                  chunk_size=5, outputs=dict(OUTPUTS))
    fields.update(changes)
    return Case(**fields)


def test_a_good_run_and_an_expected_error(tmp_path):
    good = run_case(case(), tmp_path)
    assert (good.kind, good.status, good.stderr) == ("ok", 0, "")
    assert good.detail.startswith("12 reads, 12 matched, PAF ")
    bad = run_case(case(FASTQ + b"@r99\nACGT\n+\nII\n"), tmp_path)
    assert (bad.kind, bad.status) == ("error", 1)
    assert bad.detail == "r: line N: Length of sequence and qualities differ"
    assert not list((tmp_path / "out").iterdir())


def test_a_file_left_behind_is_a_finding(tmp_path, monkeypatch):
    import bpbc.io

    def close_but_keep(self):  # AtomicOutput.discard without the removal
        self.close_handles()
        self.done = True

    monkeypatch.setattr(bpbc.io.AtomicOutput, "discard", close_but_keep)
    outcome = run_case(case(FASTQ + b"@r99\nACGT\n+\nII\n"), tmp_path)
    assert outcome.kind == "partial-output" and ".bpbc-tmp" in outcome.detail


def test_an_internal_error_is_a_finding(tmp_path, monkeypatch):
    import bpbc.screener

    def broken(self, batch, hits):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(bpbc.screener.Screener, "align", broken)
    outcome = run_case(case(), tmp_path)
    assert (outcome.kind, outcome.status) == ("bad-status", 3)
    assert "internal error: ZeroDivisionError: boom" in outcome.stderr


def test_an_escaping_exception_and_a_printed_traceback_are_findings(tmp_path, monkeypatch):
    import sys

    import bpbc.cli

    def escaping(argv=None):
        raise MemoryError("out")

    monkeypatch.setattr(bpbc.cli, "main", escaping)
    outcome = run_case(case(), tmp_path)
    assert outcome.kind == "traceback" and "MemoryError: out" in outcome.detail
    monkeypatch.undo()

    def printing(argv=None):
        print("Traceback (most recent call last):\n  ...", file=sys.stderr)
        return 1

    monkeypatch.setattr(bpbc.cli, "main", printing)
    assert run_case(case(), tmp_path).kind == "traceback"


def test_a_run_past_the_timeout_is_a_hang(tmp_path, monkeypatch):
    import bpbc.screener

    real = bpbc.screener.Screener.hits

    def slow(self, batch):
        time.sleep(3)
        return real(self, batch)

    monkeypatch.setattr(bpbc.screener.Screener, "hits", slow)
    outcome = run_case(case(), tmp_path, timeout_s=0.5)
    assert outcome.kind == "hang" and outcome.seconds < 3


def test_a_thread_left_running_is_a_finding(tmp_path, monkeypatch):
    import bpbc.pipeline

    release = threading.Event()
    real = bpbc.pipeline.paf_lines

    def leaking(*args):
        threading.Thread(target=release.wait, name="left-behind", daemon=True).start()
        return real(*args)

    monkeypatch.setattr(bpbc.pipeline, "paf_lines", leaking)
    try:
        outcome = run_case(case(), tmp_path)
    finally:
        release.set()
    assert outcome.kind == "leaked-thread" and "left-behind" in outcome.detail


def test_outputs_that_disagree_with_the_summary_are_a_finding(tmp_path, monkeypatch):
    import bpbc.chunks

    monkeypatch.setattr(bpbc.chunks.RawFastqChunk, "write", lambda self, output, selected: None)
    outcome = run_case(case(), tmp_path)
    assert outcome.kind == "bad-result" and "records written" in outcome.detail


@pytest.mark.parametrize("wrong", ["a score", "the order of the matched reads"])
def test_an_answer_the_oracle_would_not_give_is_a_finding(tmp_path, monkeypatch, wrong):
    """Outputs that agree with each other and with the summary, but not with
    tests/oracle.py: a PAF score one too high, matched reads written in
    reverse order."""
    import bpbc.chunks
    import bpbc.pipeline

    if wrong == "a score":
        real_paf = bpbc.pipeline.paf_lines
        monkeypatch.setattr(bpbc.pipeline, "paf_lines", lambda *args: real_paf(*args).replace(b"AS:i:2", b"AS:i:3"))
    else:
        real_write = bpbc.chunks.RawFastqChunk.write
        monkeypatch.setattr(bpbc.chunks.RawFastqChunk, "write",
                            lambda self, output, rows: [real_write(self, output, rows[k:k + 1])
                                                        for k in range(len(rows) - 1, -1, -1)])
    outcome = run_case(case(), tmp_path)
    assert outcome.kind == "wrong-answer", outcome.report()
    assert ("PAF: 24 lines, the oracle 24" if wrong == "a score" else "matched: 12 records") in outcome.detail
    monkeypatch.undo()
    assert run_case(case(), tmp_path).kind == "ok"


def test_an_error_on_a_valid_input_is_a_finding(tmp_path):
    """A case marked valid (the fuzz's valid seeds, under a reachable
    threshold) may not end in an error; here a threshold above the pattern's
    best score stands in for a wrongly rejected input."""
    rejected = run_case(case(threshold=25, valid=True), tmp_path)
    assert (rejected.kind, rejected.status) == ("valid-rejected", 1)
    assert "threshold 25 is above the best score" in rejected.detail
    assert run_case(case(threshold=25), tmp_path).kind == "error"


def test_a_different_second_run_is_a_finding(tmp_path, monkeypatch):
    import bpbc.pipeline
    from bpbc.errors import InputError

    calls = []
    real = bpbc.pipeline.screen_files

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise InputError("r.fq: sometimes")
        return real(*args, **kwargs)

    monkeypatch.setattr(bpbc.pipeline, "screen_files", flaky)
    outcome = run_twice(case(), tmp_path)
    assert outcome.kind == "nondeterministic" and "sometimes" in outcome.detail


def test_error_kinds_blank_out_the_specifics():
    assert error_kind("bpbc-screen: error: /tmp/x/in/reads.fq.gz: line 12: expected '+', got 'A'\n") == (
        "reads: line N: expected Q, got Q")


def test_cases_of_a_seed_are_always_the_same():
    first, again = case_for(5, 17), case_for(5, 17)
    assert (first.reads, first.patterns, first.describe()) == (again.reads, again.patterns, again.describe())
    assert case_for(5, 18).reads != first.reads or case_for(5, 18).describe() != first.describe()


def test_the_driver_runs_counts_and_reports(tmp_path, capsys):
    status = main(["--inputs", "16", "--workers", "1", "--seed", "3", "--out", str(tmp_path), "--twice", "4"])
    figures = json.loads((tmp_path / "fuzz_cpu.json").read_text())
    assert status == 0 and figures["finished"] and figures["inputs"] == 16
    assert figures["outcomes"]["ok"] + figures["outcomes"]["error"] == 16 and figures["findings"] == []
    assert figures["environment"]["cpu_cores"]
    messages = (tmp_path / "fuzz_cpu_messages.csv").read_text().splitlines()
    assert messages[0] == "count,message"
    assert sum(int(line.split(",", 1)[0]) for line in messages[1:]) == figures["outcomes"]["error"]
    assert "16 inputs" in capsys.readouterr().err


def test_the_direct_harness_ends_as_the_command_line_does(tmp_path):
    """--harness direct (the command's function, not main) judges
    every case as the whole command line does."""
    for index in range(12):
        first = run_case(case_for(3, index), tmp_path, None, "main")
        second = run_case(case_for(3, index), tmp_path, None, "direct")
        assert (first.kind, first.status, first.stderr, first.detail) == (
            second.kind, second.status, second.stderr, second.detail), index


def test_a_time_limit_stops_the_run_and_runs_merge(tmp_path, capsys):
    """--time-limit ends a run with the count it reached; --merge adds up
    runs of disjoint ranges and refuses overlapping ones."""
    first, second, merged = tmp_path / "a", tmp_path / "b", tmp_path / "m"
    main(["--inputs", "100000", "--workers", "1", "--seed", "3", "--out", str(first), "--time-limit", "1"])
    figures = json.loads((first / "fuzz_cpu.json").read_text())
    assert figures["stopped_by_time_limit"] and not figures["finished"] and figures["inputs"] < 100000
    assert figures["next_index"] == [figures["inputs"]]
    main(["--inputs", "6", "--start", "100000", "--workers", "1", "--seed", "3", "--out", str(second)])
    assert main(["--merge", str(first), str(second), "--out", str(merged)]) == 0
    total = json.loads((merged / "fuzz_cpu.json").read_text())
    assert total["inputs"] == figures["inputs"] + 6 and total["ranges"] == [[0, 100000], [100000, 100006]]
    assert sum(total["outcomes"].values()) == total["inputs"]
    assert total["environment"] == figures["environment"] and "numba" in total["environment"]
    try:
        main(["--merge", str(first), str(first), "--out", str(merged)])
    except SystemExit as error:
        assert "overlap" in str(error)
    else:
        raise AssertionError("overlapping ranges merged")


def test_a_worker_that_cannot_start_is_given_up(tmp_path, monkeypatch, capsys):
    """A worker that dies before its first case (here numba refuses 0
    threads at its import) is started again 3 times at most, then the run
    ends with status 2 and says so (it was started again for ever)."""
    monkeypatch.setenv("NUMBA_NUM_THREADS", "0")
    began = time.monotonic()
    assert main(["--inputs", "4", "--workers", "1", "--seed", "3", "--out", str(tmp_path)]) == 2
    assert time.monotonic() - began < 120
    assert "worker 0 ended 3 times before its first case" in capsys.readouterr().err
    figures = json.loads((tmp_path / "fuzz_cpu.json").read_text())
    assert figures["inputs"] == 0 and not figures["finished"]


def test_replay_runs_one_case(capsys):
    assert main(["--replay", "2", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(("ok: status 0", "error: status 1")) and '"reads_name"' in out

