"""The command's option checks (bpbc.cli._screen and its helpers), in-process.

Each refused combination: one line on stderr, exit 1, no file left; each
option given reaches the run, as ``--json`` reports it. scripts/mutation.py
mutates these checks (issue 43); a mutant that loosens a check or drops an
option is caught here.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys

import pytest

import bpbc.cli
from tests.bpbc.test_cli import PATTERNS, READS, patch_stage, run_cli

#: an address no Dask scheduler answers at: every check below comes before any connection
NO_SCHEDULER = "tcp://127.0.0.1:9"


def _refused(capsys, tmp_path, *args) -> str:
    """Run ``args`` (outputs under tmp_path/out) and return the one error line; assert exit 1 and no file."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    status, stdout, err = run_cli(capsys, *args)
    assert (status, stdout) == (1, ""), err
    assert err.count("\n") == 1 and err.startswith("bpbc-screen: error: "), err
    assert list(out.iterdir()) == []
    return err[len("bpbc-screen: error: "):-1]


REFUSED = {
    "scoring": (["--match", "0"], "match must be a positive integer, got 0"),
    "scoring at the top": (["--gap-extend", "100000"], "gap_extend must be at most"),
    "threshold and fraction": (["-t", "20", "--min-score-fraction", "0.5"],
                               "give --threshold or --min-score-fraction, not both"),
    "several files, trim": (["+READS", "--action", "trim"], "--action trim or mask takes one reads file, not "
                                                              "several (or --reads-from)"),
    "reads-from, trimmed": (["--reads-from", "+LIST", "--trimmed", "+OUT/t.fq"], "--action trim or mask takes one "
                                                                                 "reads file"),
    "several files, reads2": (["+READS", "-2", "+READS"], "paired reads (--reads2, --interleaved) take one reads "
                                                          "file, not several (or --reads-from)"),
    "reads-from, interleaved": (["--reads-from", "+LIST", "--interleaved"], "paired reads (--reads2, --interleaved) "
                                                                            "take one reads file"),
    "trim with dask": (["--action", "trim", "--dask", NO_SCHEDULER], "--action trim or mask runs on one host, "
                                                                       "not with --dask"),
    "mask with a scheduler file": (["--action", "mask", "--dask-scheduler-file", "+SCHEDULER"],
                                   "--action trim or mask runs on one host"),
    "trimmed with dask": (["--trimmed", "+OUT/t.fq", "--dask", NO_SCHEDULER], "--action trim or mask runs on one "
                                                                               "host"),
    "trimmed2 with dask": (["--trimmed2", "+OUT/t2.fq", "--dask", NO_SCHEDULER], "--action trim or mask runs on "
                                                                                  "one host"),
    "dask and a scheduler file": (["--dask", NO_SCHEDULER, "--dask-scheduler-file", "+SCHEDULER"],
                                  "give --dask or --dask-scheduler-file, not both"),
    "reads2 with dask": (["-2", "+READS", "--dask", NO_SCHEDULER],
                         "paired reads (--reads2, --interleaved) are not supported with --dask"),
    "interleaved with a scheduler file": (["--interleaved", "--dask-scheduler-file", "+SCHEDULER"],
                                          "paired reads (--reads2, --interleaved) are not supported with --dask"),
    "matched2 with dask": (["--matched2", "+OUT/m2.fq", "--dask", NO_SCHEDULER], "paired reads"),
    "unmatched2 with dask": (["--unmatched2", "+OUT/u2.fq", "--dask", NO_SCHEDULER], "paired reads"),
    "report stem, several files": (["+READS", "--dask", NO_SCHEDULER, "--report", "+OUT/{stem}.html"],
                                   "--report is one file for the run: {stem} needs a single reads file"),
    "multiqc stem, reads-from": (["--reads-from", "+LIST", "--dask", NO_SCHEDULER, "--multiqc",
                                  "+OUT/{stem}_mqc.json"],
                                 "--multiqc is one file for the run: {stem} needs a single reads file"),
    "report stem, stdin": (["--report", "+OUT/{stem}.html"], "--report is one file for the run: {stem} needs a "
                                                             "single reads file"),
    "reads-from unreadable": (["--reads-from", "+MISSING", "--dask", NO_SCHEDULER],
                              "cannot read the list of reads files: No such file or directory"),
    "reads-from lists none": (["--reads-from", "+COMMENTS", "--dask", NO_SCHEDULER], "lists no reads files"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_options_exit_1_with_one_line_and_no_files(capsys, tmp_path, monkeypatch, case):
    args, message = REFUSED[case]
    listing = tmp_path / "list.txt"
    listing.write_text(f"# reads\n\n{READS}\n")
    (tmp_path / "comments.txt").write_text("# none\n\n   \n")
    (tmp_path / "scheduler.json").write_text("{}")
    places = {"+READS": str(READS), "+LIST": str(listing), "+SCHEDULER": str(tmp_path / "scheduler.json"),
              "+MISSING": str(tmp_path / "missing.txt"), "+COMMENTS": str(tmp_path / "comments.txt")}
    args = [places.get(arg, arg.replace("+OUT", str(tmp_path / "out"))) for arg in args]
    reads = "-" if case.endswith("stdin") else str(READS)
    if case in ("reads-from lists none", "reads-from unreadable"):
        reads = "--quiet"  # no READS argument: the listed files only (and a harmless option in its place)
    if reads == "-":
        import io
        import sys

        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(READS.read_bytes())))
    # the same refusal with and without outputs named, and whatever comes first on the line
    for outputs in ([], ["-o", tmp_path / "out" / "o.paf", "--json", tmp_path / "out" / "s.json"]):
        got = _refused(capsys, tmp_path, reads, *args, PATTERNS, "-t", "20", *outputs)
        assert got.startswith(message) or got.endswith(message), got  # the message, not inside another
    if case == "reads-from unreadable":
        assert got == f"{places['+MISSING']}: {message}"


def test_the_options_accepted_reach_the_run(capsys, tmp_path):
    """Every setting that --json reports is the one given (the defaults
    where none is), and a run with them succeeds."""
    runs = {
        "defaults": ([], {"threshold": 40, "min_score_fraction": None, "strands": ["+", "-"],
                          "scoring": {"match": 2, "mismatch": 3, "gap_open": 5, "gap_extend": 2}}),
        "given": (["-t", "17", "--match", "3", "--mismatch", "4", "--gap-open", "6", "--gap-extend", "1",
                   "--strand", "forward", "--threads", "1"],
                  {"threshold": 17, "min_score_fraction": None, "strands": ["+"],
                   "scoring": {"match": 3, "mismatch": 4, "gap_open": 6, "gap_extend": 1}}),
        "fraction": (["--min-score-fraction", "0.75"], {"threshold": None, "min_score_fraction": 0.75}),
        "trim": (["-t", "20", "--action", "trim", "--trimmed", "TRIMMED"], {"action": "trim", "threshold": 20}),
        "mask": (["-t", "20", "--action", "mask", "--trimmed", "TRIMMED"], {"action": "mask"}),
    }
    for name, (args, expected) in runs.items():
        out = tmp_path / name
        out.mkdir()
        args = [str(out / "t.fq") if arg == "TRIMMED" else arg for arg in args]
        status, stdout, err = run_cli(capsys, READS, PATTERNS, "--device", "cpu", *args, "--json", out / "s.json",
                                      "-q")
        assert (status, err) == (0, ""), (name, err)
        summary = json.loads((out / "s.json").read_text())
        assert {key: summary.get(key) for key in expected} == expected, name
        assert summary["device"] == "cpu" and summary["reads"] == 20
        if name == "given":
            assert summary["plan"]["cores"] == 1 and summary["plan"]["source"] == "--threads"
            assert all(line.split("\t")[4] == "+" for line in stdout.splitlines()) and stdout
        if name in ("trim", "mask"):
            assert (out / "t.fq").stat().st_size > 0


def test_pair_filter_reaches_the_run(capsys, tmp_path):
    data = READS.parent
    for pair_filter in ("any", "both"):
        status, _, err = run_cli(capsys, data / "reads_1.fq", PATTERNS, "-2", data / "reads_2.fq", "-t", "20",
                                 "--pair-filter", pair_filter, "--json", tmp_path / f"{pair_filter}.json", "-q",
                                 "--device", "cpu")
        assert status == 0, err
        summary = json.loads((tmp_path / f"{pair_filter}.json").read_text())
        assert summary["pair_filter"] == pair_filter and summary["paired"] is True
    anything, both = (json.loads((tmp_path / f"{f}.json").read_text())["pairs_passing"] for f in ("any", "both"))
    assert anything > both  # the data holds pairs where one mate passes


@pytest.mark.parametrize("device, warmed", [("cpu", False), ("auto", True), ("gpu", True)])
def test_the_gpu_is_warmed_up_beside_the_reading_unless_the_cpu_is_asked_for(capsys, tmp_path, monkeypatch, device,
                                                                              warmed):
    import bpbc.gpu_engine

    calls = []
    monkeypatch.setattr(bpbc.gpu_engine, "warm_up_in_background", lambda: calls.append(1))
    run_cli(capsys, READS, PATTERNS, "-t", "20", "--device", device, "-q", "-o", tmp_path / "o.paf")
    assert calls == ([1] if warmed else [])


def test_a_failed_write_names_the_file_it_could_not_write(capsys, tmp_path, monkeypatch):
    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "o.paf"))

    patch_stage(monkeypatch, "write", full)
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", "-o", tmp_path / "o.paf")
    assert status == 1
    assert err == f"bpbc-screen: error: {tmp_path / 'o.paf'}: cannot write the outputs: No space left on device\n"
    assert list(tmp_path.iterdir()) == []


def test_an_os_error_that_is_no_system_answer_is_an_internal_error(capsys, tmp_path, monkeypatch):
    def odd(*args):
        raise OSError("not from the system")  # errno None: a bug, not a full disk

    patch_stage(monkeypatch, "write", odd)
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", "-o", tmp_path / "o.paf")
    assert status == bpbc.cli.EXIT_INTERNAL == 3
    assert err.startswith("bpbc-screen: internal error: OSError: not from the system; please report it")


def test_the_summary_goes_to_stderr_unless_quiet(capsys, tmp_path):
    status, out, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "-o", tmp_path / "o.paf")
    assert status == 0 and out == "" and "bpbc-screen: 20 reads screened" in err
    status, out, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "-o", tmp_path / "p.paf", "-q")
    assert (status, out, err) == (0, "", "")
    assert (tmp_path / "o.paf").read_bytes() == (tmp_path / "p.paf").read_bytes() != b""


def test_reads_from_lists_files_after_the_arguments(tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text("# a comment\n  b.fq  \n\nc.fq\n#d.fq\n")
    assert bpbc.cli._reads_files(["a.fq"], "p.fa", str(listing)) == ["a.fq", "b.fq", "c.fq"]
    assert bpbc.cli._reads_files([], "p.fa", str(listing)) == ["b.fq", "c.fq"]
    assert bpbc.cli._reads_files(["a.fq", "z.fq"], "p.fa", None) == ["a.fq", "z.fq"]


def test_report_paths_fill_the_stem_of_one_reads_file():
    assert bpbc.cli._report_paths("{stem}.html", "{stem}_mqc.json", ["dir/s1.fq.gz"], False) == (
        "s1.html", "s1_mqc.json")
    assert bpbc.cli._report_paths("r.html", None, ["a.fq", "b.fq"], True) == ("r.html", None)
    assert bpbc.cli._report_paths(None, "m_mqc.json", ["-"], False) == (None, "m_mqc.json")


def test_after_a_closed_pipe_stdout_points_at_dev_null(monkeypatch):
    """The Python docs' recipe for a closed pipe (``... | head``): stdout's
    descriptor is pointed at /dev/null, so the interpreter's last flush
    does not fail again; no descriptor is left open."""
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)
    stream = open(write_end, "w")
    try:
        monkeypatch.setattr(sys, "stdout", stream)
        open_before = len(os.listdir("/proc/self/fd"))
        bpbc.cli._silence_stdout()
        assert len(os.listdir("/proc/self/fd")) == open_before
        assert os.path.samestat(os.fstat(write_end), os.stat(os.devnull))
        stream.write("x" * 100_000)
        stream.flush()  # no BrokenPipeError: /dev/null takes it
    finally:
        stream.close()


def test_stdout_that_is_no_file_is_left_alone(monkeypatch):
    import io
    import sys

    captured = io.StringIO()
    monkeypatch.setattr(sys, "stdout", captured)
    bpbc.cli._silence_stdout()  # tests capture stdout: nothing to point anywhere
    assert sys.stdout is captured and not captured.closed


def test_an_internal_error_is_one_line_without_bpbc_debug(capsys, tmp_path, monkeypatch):
    def fail():
        raise ValueError("boom\nsecond line")

    monkeypatch.delenv("BPBC_DEBUG", raising=False)  # unset, not empty: no traceback either
    patch_stage(monkeypatch, "device", fail)
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", "-o", tmp_path / "o.paf")
    assert status == 3
    assert err == ("bpbc-screen: internal error: ValueError: boom second line; please report it at the bpbc issue "
                   "tracker with the command line\n")


def test_bpbc_debug_shows_the_whole_traceback_of_the_error(capsys, tmp_path, monkeypatch):
    def fail():
        raise ValueError("boom")

    monkeypatch.setenv("BPBC_DEBUG", "1")
    patch_stage(monkeypatch, "device", fail)
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", "-o", tmp_path / "o.paf")
    lines = err.splitlines()
    assert status == 3 and lines[0] == "Traceback (most recent call last):"
    assert lines[-2:] == ["ValueError: boom", "bpbc-screen: internal error: ValueError: boom; please report it at "
                          "the bpbc issue tracker with the command line"]
    assert any("in fail" in line for line in lines)  # the frames down to the one that raised


def test_no_signal_is_raised_inside_the_threading_modules_locks():
    """A signal's exception raised in ``Condition.__enter__`` just after its
    lock was taken leaves the lock held: under 300 SIGTERMs in one process
    an engine pool's idle semaphore stayed locked and the next run waited for
    ever. bpbc.cli puts such a signal off until the main thread is out of
    the threading module's code (as it does inside numba's locks)."""
    import sys
    import threading

    seen = []

    class Lock:  # a Condition's lock that looks at the frame taking it
        def __init__(self):
            self._lock = threading.Lock()

        def __enter__(self):
            self._lock.acquire()
            seen.append(bpbc.cli._unsafe_to_interrupt(sys._getframe(1)))  # Condition.__enter__'s frame
            return True

        def __exit__(self, *exc_info):
            self._lock.release()

        def acquire(self, *args):
            return self._lock.acquire(*args)

        def release(self):
            self._lock.release()

    with threading.Condition(Lock()):
        seen.append(bpbc.cli._unsafe_to_interrupt(sys._getframe(0)))  # this test's own frame
    assert seen == [True, False]


def _words(text: str) -> str:
    """Text of a message rich drew in a box, wrapped: its words, one space apart."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_version_and_usage_errors_name_the_program(capsys):
    from bpbc import __version__

    assert run_cli(capsys, "--version") == (0, f"bpbc-screen {__version__}\n", "")
    status, out, err = run_cli(capsys, "--no-such-option", READS, PATTERNS)
    assert (status, out) == (2, "") and err.startswith("Usage: bpbc-screen [OPTIONS] [READS]... {PATTERNS}\n")
    assert "No such option: --no-such-option" in _words(err)
    status, out, err = run_cli(capsys, PATTERNS)  # no reads
    assert (status, out) == (2, "") and err.startswith("Usage: bpbc-screen ")
    assert ("Invalid value for 'READS': missing: give one or more reads files before PATTERNS (or --reads-from "
            "LIST)") in _words(err)


@pytest.mark.parametrize("stderr_tty,stdout_tty,quiet,output,expected", [
    (False, False, False, "x.paf", False), (True, False, True, "x.paf", False), (True, True, False, "x.paf", True),
    (True, True, False, None, False), (True, True, False, "-", False), (True, False, False, None, True),
    (True, False, False, "-", True)])
def test_progress_only_on_a_terminal_without_the_paf(monkeypatch, stderr_tty, stdout_tty, quiet, output, expected):
    monkeypatch.setattr(bpbc.cli.sys.stderr, "isatty", lambda: stderr_tty, raising=False)
    monkeypatch.setattr(bpbc.cli.sys.stdout, "isatty", lambda: stdout_tty, raising=False)
    assert bpbc.cli._show_progress(quiet, output) is expected


@pytest.mark.parametrize("tty,quiet,stdout_tty", [(True, False, False), (True, True, False), (False, False, False),
                                                   (True, False, True)])
def test_the_progress_and_the_compile_notice_reach_a_terminal_only(capsys, tmp_path, monkeypatch, tty, quiet,
                                                                   stdout_tty):
    """On a terminal (and not -q), the run drives the progress line (to the
    number of reads screened) and says once that kernels compile where
    that happens (here: made to happen at once); elsewhere neither."""
    from contextlib import contextmanager

    from bpbc.compile_watch import COMPILE_NOTICE

    shown, updates = [], []

    @contextmanager
    def progress_bar(enabled):
        shown.append(enabled)
        yield updates.append if enabled else None

    @contextmanager
    def compiles_at_once(notice):
        if notice is not None:
            notice()
        yield

    monkeypatch.setattr(bpbc.cli, "_progress_bar", progress_bar)
    monkeypatch.setattr(bpbc.cli, "watching_compiles", compiles_at_once)
    capsys.readouterr()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: stdout_tty, raising=False)  # the PAF goes to a file
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "-o", tmp_path / "o.paf", *(["-q"] if quiet else []),
                             "--chunk-size", "5")
    assert status == 0
    on = tty and not quiet
    assert shown == [on] and (updates[-1] == 20 if on else updates == [])
    assert err.count(f"bpbc-screen: {COMPILE_NOTICE}\n") == (1 if on else 0)


def test_stem_names_every_output_after_the_first_reads_file(capsys, tmp_path):
    """{stem} in any output path of a paired run (mate 2's and the trimmed
    reads' too) is the name of the first reads file without its suffixes."""
    data = READS.parent
    out = tmp_path / "out"
    out.mkdir()
    names = {"-o": "{stem}.paf", "--matched": "{stem}.m1.fq", "--unmatched": "{stem}.u1.fq",
             "--matched2": "{stem}.m2.fq", "--unmatched2": "{stem}.u2.fq", "--trimmed": "{stem}.t1.fq",
             "--trimmed2": "{stem}.t2.fq", "--json": "{stem}.json"}
    status, _, err = run_cli(capsys, data / "reads_1.fq", PATTERNS, "-2", data / "reads_2.fq", "-t", "20", "-q",
                             "--action", "trim", *[arg for option, name in names.items()
                                                   for arg in (option, out / name)])
    assert status == 0, err
    assert sorted(p.name for p in out.iterdir()) == sorted(name.replace("{stem}", "reads_1") for name in names.values())


def test_an_internal_error_of_bpbcs_own_is_its_message_and_bpbc_debug_0_is_off(capsys, tmp_path, monkeypatch):
    """An InternalError (a check of bpbc's own that failed) is reported by
    its message alone; any other exception by its type and message.
    BPBC_DEBUG=0 is off, as unset or empty."""
    from bpbc.errors import InternalError

    def fail():
        raise InternalError("the traceback disagrees with the screen")

    monkeypatch.setenv("BPBC_DEBUG", "0")
    patch_stage(monkeypatch, "device", fail)
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", "-o", tmp_path / "o.paf")
    assert status == 3
    assert err == ("bpbc-screen: internal error: the traceback disagrees with the screen; please report it at the "
                   "bpbc issue tracker with the command line\n")


def test_a_failed_write_without_a_file_name_says_what_failed(capsys, tmp_path, monkeypatch):
    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    patch_stage(monkeypatch, "write", full)
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", "-o", tmp_path / "o.paf")
    assert (status, err) == (1, "bpbc-screen: error: cannot write the outputs: No space left on device\n")


def test_a_closed_pipe_exits_141_in_silence(capsys, tmp_path, monkeypatch):
    """The reader of the PAF went away (``bpbc-screen ... | head``): status
    141 as a shell reports SIGPIPE, no message."""
    def closed(*args):
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    patch_stage(monkeypatch, "write", closed)
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5")
    assert (status, err) == (141, "")


def test_main_reads_the_command_line_of_the_process(capsys, monkeypatch):
    from bpbc import __version__

    monkeypatch.setattr(sys, "argv", ["bpbc-screen", "--version"])
    assert bpbc.cli.main() == 0
    assert capsys.readouterr().out == f"bpbc-screen {__version__}\n"


@pytest.mark.parametrize("tty,quiet,stdout_tty", [(True, False, False), (True, True, False), (False, False, False),
                                                   (True, False, True)])
def test_several_files_get_the_options_and_the_progress_line_of_one(capsys, tmp_path, monkeypatch, tty, quiet,
                                                                    stdout_tty):
    """Several reads files without Dask (bpbc.many_files, from _screen_many_here):
    the progress line on a terminal only, not with -q, driven to the reads of
    every file; and the options given reach each file's run: each PAF is
    the one-file run's golden PAF at -t 20, not the default threshold's
    (mutants _screen_many_here 1-3, 13, 16, 21 and _screen 149: the
    progress or quiet dropped, the settings left at their defaults)."""
    from contextlib import contextmanager

    from tests.bpbc.test_cli import golden

    shown, updates = [], []

    @contextmanager
    def progress_bar(enabled):
        shown.append(enabled)
        yield updates.append if enabled else None

    monkeypatch.setattr(bpbc.cli, "_progress_bar", progress_bar)
    second = tmp_path / "again.fq"
    second.write_bytes(READS.read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    capsys.readouterr()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: stdout_tty, raising=False)  # the PAF goes to files
    status, _, err = run_cli(capsys, READS, second, PATTERNS, "-t", "20", "--device", "cpu", "--threads", "1",
                             "-o", out / "{stem}.paf", *(["-q"] if quiet else []))
    assert status == 0, err
    on = tty and not quiet
    assert shown == [on] and (updates[-1] == 40 if on else updates == [])
    assert (out / "reads.paf").read_text() == (out / "again.paf").read_text() == golden("expected.paf")
