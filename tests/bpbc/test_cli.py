"""The bpbc-screen command line, in-process (bpbc.cli.main) and as a subprocess.

Golden files: tests/data/expected*.paf were written by the real engine with
the arguments in GOLDEN, from the repository root::

    python -m bpbc tests/data/reads.fq tests/data/patterns.fa -t 20 -q > tests/data/expected.paf
    python -m bpbc tests/data/reads.fq tests/data/patterns.fa -t 30 --strand forward --eqx -q \\
        > tests/data/expected_forward_eqx.paf

tests/data/reads.fq holds 20 hand-designed reads whose headers say what each
carries (exact, substituted, inserted, deleted, reverse-complemented,
truncated copies of the three patterns, N, lowercase, a short read, none).
Regenerate the PAF files only after a deliberate change of output; test_paf.py then
checks every line against the sequences independently of bpbc (CIGAR replay,
parasail optimum, nothing above the threshold missing), and test_outputs.py
compares them with the independent oracle of tests/oracle.py.
"""

from __future__ import annotations

import bz2
import gzip
import io
import itertools
import json
import lzma
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dnaio
import pytest

import bpbc
from bpbc.cli import main
from tests.bpbc.conftest import run_without_root_file_access, zstd_compress

DATA = Path(__file__).resolve().parents[1] / "data"
READS = DATA / "reads.fq"
PATTERNS = DATA / "patterns.fa"
GOLDEN = {
    "expected.paf": ["-t", "20"],
    "expected_forward_eqx.paf": ["-t", "30", "--strand", "forward", "--eqx"],
}
#: the directory holding the bpbc package under test, for subprocesses
PACKAGE_ROOT = str(Path(bpbc.__file__).resolve().parents[1])


def run_cli(capsys, *args) -> tuple[int, str, str]:
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def run_subprocess(*args, cwd, stdin: bytes | None = None, env: dict | None = None,
                   terminal: bool = False) -> subprocess.CompletedProcess:
    """The command in a fresh process; with ``terminal`` its stderr is a
    pseudo-terminal (what it writes there comes back as ``stderr``)."""
    env = dict(os.environ, **(env or {}))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "bpbc", *map(str, args)]
    if not terminal:
        return subprocess.run(command, input=stdin, capture_output=True, cwd=cwd, env=env, timeout=300)
    import pty

    controller, terminal_end = pty.openpty()
    with subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal_end,
                          cwd=cwd, env=env) as process:
        os.close(terminal_end)
        written = bytearray()
        while True:  # read as it comes: a full terminal buffer would hold the process up
            try:
                block = os.read(controller, 4096)
            except OSError:  # EIO: the process closed its end
                break
            if not block:
                break
            written += block
        out = process.stdout.read() if process.stdout else b""
        process.wait(timeout=300)
    os.close(controller)
    return subprocess.CompletedProcess(command, process.returncode, out, bytes(written).replace(b"\r\n", b"\n"))


def golden(name: str) -> str:
    return (DATA / name).read_text()


def records(path) -> list[tuple[str, str, str | None]]:
    with dnaio.open(path) as reader:
        return [(r.name, r.sequence, r.qualities) for r in reader]


def write_fasta(path: Path, line_length: int | None = None) -> Path:
    with dnaio.FastaWriter(path, line_length=line_length) as writer:
        for name, sequence, _ in records(READS):
            writer.write(dnaio.SequenceRecord(name, sequence))
    return path


def assert_one_line_error(err: str, path, *fragments: str) -> None:
    assert "Traceback" not in err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    assert lines[0].startswith(f"bpbc-screen: error: {path}"), err
    for fragment in fragments:
        assert fragment in lines[0], err


# --- results ----------------------------------------------------------------

@pytest.mark.parametrize("chunk_size", [None, 3])
@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_paf_matches_golden_file(capsys, name, chunk_size):
    extra = [] if chunk_size is None else ["--chunk-size", chunk_size]
    status, out, err = run_cli(capsys, READS, PATTERNS, *GOLDEN[name], *extra, "-q")
    assert (status, err) == (0, "")
    assert out == golden(name)


def test_summary_on_stderr_lists_every_pattern_and_strand(capsys):
    status, out, err = run_cli(capsys, READS, PATTERNS, "-t", "20")
    assert status == 0 and out == golden("expected.paf")
    lines = err.splitlines()
    assert lines[0].startswith("bpbc-screen: 20 reads screened in ")
    assert "reads/s); 16 passed (threshold 20, both strands)" in lines[0]
    assert lines[1].split() == ["pattern", "length", "threshold", "strand", "reads", "passing"]
    rows = [line.split() for line in lines[2:]]
    assert {r[2] for r in rows} == {"20"}
    assert [(r[0], r[3], int(r[4])) for r in rows] == [
        ("adapter_A", "+", 8), ("adapter_A", "-", 3),
        ("primer_iupac", "+", 2), ("primer_iupac", "-", 2),
        ("rna_lower", "+", 1), ("rna_lower", "-", 1),
    ]


def test_progress_bar_only_on_a_terminal(capsys, monkeypatch):
    # captured stderr is not a terminal: no progress line, just the summary
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5")
    assert status == 0 and len(err.splitlines()) == 2 + 3 * 2
    # pretend it is one: the progress bar runs and the output is unchanged
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    status, out, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5")
    assert status == 0 and out == golden("expected.paf")
    assert "reads screened" in err and "16 passed" in err
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--quiet")
    assert (status, err) == (0, "")


def test_subprocess_python_m_bpbc(tmp_path):
    done = run_subprocess(READS, PATTERNS, "-t", "20", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == golden("expected.paf")
    assert b"16 passed" in done.stderr and b"Traceback" not in done.stderr


def test_output_file_and_json(capsys, tmp_path):
    out_path, json_path = tmp_path / "hits.paf", tmp_path / "summary.json"
    status, out, err = run_cli(capsys, READS, PATTERNS, "-t", "30", "--strand", "forward", "--eqx",
                               "-o", out_path, "--json", json_path, "-q")
    assert (status, out, err) == (0, "", "")
    assert out_path.read_text() == golden("expected_forward_eqx.paf")
    figures = json.loads(json_path.read_text())
    lines = [line.split("\t") for line in golden("expected_forward_eqx.paf").splitlines()]
    assert figures["reads"] == 20
    assert figures["reads_passing"] == len({f[0] for f in lines}) == 10
    assert figures["reads_not_passing"] == 10
    assert figures["alignments"] == len(lines) == 10
    assert figures["threshold"] == 30 and figures["strands"] == ["+"]
    assert figures["scoring"] == {"match": 2, "mismatch": 3, "gap_open": 5, "gap_extend": 2}
    assert figures["device"] in ("cpu", "gpu")
    assert figures["reads_file"] == str(READS) and figures["patterns_file"] == str(PATTERNS)
    assert [(p["name"], p["length"], p["reads_passing"]) for p in figures["patterns"]] == [
        ("adapter_A", 26, {"+": sum(f[5] == "adapter_A" for f in lines)}),
        ("primer_iupac", 19, {"+": sum(f[5] == "primer_iupac" for f in lines)}),
        ("rna_lower", 20, {"+": sum(f[5] == "rna_lower" for f in lines)}),
    ]
    assert figures["stage_seconds"]["setup"] <= figures["wall_time_s"]  # a part of the run, not beside it
    # the seconds numba spent compiling kernels (a cold cache) are not in the rate
    compiling = figures["stage_seconds"]["compile"]
    assert 0 <= compiling < figures["wall_time_s"]
    assert figures["reads_per_s"] == pytest.approx(20 / (figures["wall_time_s"] - compiling), rel=1e-3)


def test_scoring_options_reach_the_engine(capsys):
    # a harsher mismatch drops r18 (4 substitutions: 22*2 - 4*8 = 12) and r02
    # is scored 25*2 - 8 = 42
    status, out, _ = run_cli(capsys, READS, PATTERNS, "-t", "20", "--mismatch", "8", "-q")
    assert status == 0
    by_read = {line.split("\t")[0]: line for line in out.splitlines()}
    assert "r18" not in by_read
    assert "AS:i:42\t" in by_read["r02"]


@pytest.mark.parametrize("flags", [["--threads", "1"], ["--exact-scores"], ["--device", "cpu"]])
def test_engine_options_do_not_change_the_output(capsys, flags):
    status, out, _ = run_cli(capsys, READS, PATTERNS, "-t", "20", "-q", *flags)
    assert status == 0 and out == golden("expected.paf")


# --- matched / unmatched ----------------------------------------------------

@pytest.mark.parametrize("suffixes", [("", ""), (".gz", ".bz2")])
def test_matched_and_unmatched_partition_the_fastq_input(capsys, tmp_path, suffixes):
    matched, unmatched = tmp_path / f"m.fq{suffixes[0]}", tmp_path / f"u.fq{suffixes[1]}"
    status, out, _ = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "4",
                             "--matched", matched, "--unmatched", unmatched, "-q")
    assert status == 0
    if suffixes[0] == ".gz":
        assert matched.read_bytes()[:2] == b"\x1f\x8b" and unmatched.read_bytes()[:3] == b"BZh"
    passing = {line.split("\t")[0] for line in out.splitlines()}
    everything = records(READS)
    kept, dropped = records(matched), records(unmatched)
    assert [r for r in everything if r[0].split()[0] in passing] == kept
    assert [r for r in everything if r[0].split()[0] not in passing] == dropped
    assert len(kept) == 16 and all(q is not None for _, _, q in kept + dropped)


def test_matched_fasta_stays_fasta_and_two_fastq_headers_are_kept(capsys, tmp_path):
    fasta = write_fasta(tmp_path / "reads.fa", line_length=30)
    status, out, _ = run_cli(capsys, fasta, PATTERNS, "-t", "20", "--matched", tmp_path / "m.fa", "-q")
    assert status == 0 and out == golden("expected.paf")
    assert (tmp_path / "m.fa").read_text().startswith(">r01 exact adapter_A +\n")
    assert len(records(tmp_path / "m.fa")) == 16

    two = tmp_path / "two.fq"
    two.write_text("".join(f"@{n}\n{s}\n+{n}\n{q}\n" for n, s, q in records(READS)))
    status, _, _ = run_cli(capsys, two, PATTERNS, "-t", "20", "--unmatched", tmp_path / "u.fq", "-q")
    assert status == 0
    assert (tmp_path / "u.fq").read_text().split("\n")[2] == "+r14 no pattern"


# --- input formats ----------------------------------------------------------

@pytest.mark.parametrize("suffix,compress", [
    (".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress), (".zst", zstd_compress),
])
def test_compressed_reads(capsys, tmp_path, suffix, compress):
    data = compress(READS.read_bytes())
    if data is None:
        pytest.skip("xopen cannot handle zstd here: needs backports.zstd (Python < 3.14) or the zstd program")
    path = tmp_path / f"reads.fq{suffix}"
    path.write_bytes(data)
    status, out, _ = run_cli(capsys, path, PATTERNS, "-t", "20", "-q")
    assert status == 0 and out == golden("expected.paf")


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="a gzip reader process needs memfd_create (Linux)")
def test_a_gzip_reads_file_is_decompressed_from_the_commands_start(capsys, tmp_path, monkeypatch):
    """Where a gzip file is decompressed in a process of its own, the command
    starts that process before its imports (gzip_reader.start_early), and
    the run reads through it: one process, the same PAF; a damaged file
    gives the run's one-line error, and no process is left either way."""
    pytest.importorskip("rapidgzip")
    import bpbc.gzip_reader

    monkeypatch.setattr(bpbc.gzip_reader, "PARALLEL_GZIP_MIN_THREADS", 2)
    monkeypatch.setattr(bpbc.gzip_reader, "PARALLEL_GZIP_MIN_BYTES", 0)
    monkeypatch.setattr(bpbc.gzip_reader, "GZIP_PROCESS_MIN_BYTES", 0)
    started, made = [], []
    starting, making = bpbc.gzip_reader._Starting._make, bpbc.gzip_reader.GzipProcess.__init__
    monkeypatch.setattr(bpbc.gzip_reader._Starting, "_make",
                        lambda self, *args: (started.append(args), starting(self, *args))[1])
    monkeypatch.setattr(bpbc.gzip_reader.GzipProcess, "__init__",
                        lambda self, *args: (made.append(self), making(self, *args))[1])
    path = tmp_path / "reads.fq.gz"
    path.write_bytes(gzip.compress(READS.read_bytes()))
    status, out, _ = run_cli(capsys, path, PATTERNS, "-t", "20", "-q", "--threads", "2")
    assert status == 0 and out == golden("expected.paf")
    assert started == [(str(path), 2)] and len(made) == 1 and not bpbc.gzip_reader._STARTED
    path.write_bytes(gzip.compress(READS.read_bytes() * 20)[:-30])
    status, out, err = run_cli(capsys, path, PATTERNS, "-t", "20", "-q", "--threads", "2")
    assert status == 1 and out == ""
    assert_one_line_error(err, path, "truncated")
    assert len(started) == 2 and not bpbc.gzip_reader._STARTED
    status, _, err = run_cli(capsys, path, PATTERNS, "-t", "20", "--threads", "2", "--gap-open", "0")
    assert status == 1 and "gap_open" in err and len(started) == 2  # a usage error: nothing started
    path.write_bytes(gzip.compress(READS.read_bytes()))
    status, _, err = run_cli(capsys, path, tmp_path / "absent.fa", "-t", "20", "--threads", "2")
    assert status == 1 and "absent.fa" in err and len(started) == 3  # started, then not read: ended
    assert not bpbc.gzip_reader._STARTED and made[-1]._child is None and made[-1].closed


def test_fasta_crlf_and_lowercase_reads_are_accepted(capsys, tmp_path):
    fasta = write_fasta(tmp_path / "reads.fa", line_length=25)
    crlf = tmp_path / "crlf.fa"
    crlf.write_bytes(fasta.read_bytes().replace(b"\n", b"\r\n"))
    lower = tmp_path / "lower.fq"
    lower.write_text("".join(f"@{n}\n{s.lower()}\n+\n{q}\n" for n, s, q in records(READS)))
    for path in (fasta, crlf, lower):
        status, out, err = run_cli(capsys, path, PATTERNS, "-t", "20", "-q")
        assert (status, err) == (0, "") and out == golden("expected.paf"), path


def test_stdin_in_process(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(READS.read_bytes()))))
    status, out, _ = run_cli(capsys, "-", PATTERNS, "-t", "20", "-q")
    assert status == 0 and out == golden("expected.paf")


def test_a_cold_kernel_cache_is_announced_once_and_left_out_of_the_rate(tmp_path):
    """A run that compiles kernels (here the engine's, in a fresh
    BPBC_CACHE_DIR) says so once on a terminal's stderr, unless --quiet, and
    its rate leaves the compiling out; the next run loads them: no word, no
    compile. Where stderr is not a terminal (a log) only the summary says
    it, so that an expected error stays one line there."""
    from bpbc.compile_watch import COMPILE_NOTICE

    env = {"BPBC_CACHE_DIR": str(tmp_path / "kernels")}
    summaries = []
    for threshold, quiet in (("20", ("-q",)), ("20", ()), ("50", ())):
        summary = tmp_path / f"{threshold}{len(quiet)}.json"
        done = run_subprocess(READS, PATTERNS, "-t", threshold, "--device", "cpu", "--json", summary, *quiet,
                              "-o", tmp_path / "hits.paf", cwd=tmp_path, env=env, terminal=True)
        assert done.returncode == 0, done.stderr
        summaries.append((done.stderr.decode(), json.loads(summary.read_text())))
    (quiet_err, cold), (warm_err, warm), (new_err, other) = summaries
    assert quiet_err == ""
    assert cold["stage_seconds"]["compile"] > 0 and warm["stage_seconds"]["compile"] == 0
    assert cold["reads_per_s"] == pytest.approx(20 / (cold["wall_time_s"] - cold["stage_seconds"]["compile"]),
                                                rel=1e-3)
    assert COMPILE_NOTICE not in warm_err and "compiling" not in warm_err.splitlines()[0]
    # threshold 50 needs 6 planes, not 5: kernels of their own
    assert new_err.count(COMPILE_NOTICE) == 1 and f"bpbc-screen: {COMPILE_NOTICE}\n" in new_err  # beside the progress bar
    assert f"not counting {other['stage_seconds']['compile']:.2f} s compiling CPU kernels" in new_err
    # a log: the summary only
    env["BPBC_CACHE_DIR"] = str(tmp_path / "other kernels")
    done = run_subprocess(READS, PATTERNS, "-t", "20", "--device", "cpu", cwd=tmp_path, env=env)
    assert done.returncode == 0 and COMPILE_NOTICE not in done.stderr.decode()
    assert "s compiling CPU kernels)" in done.stderr.decode().splitlines()[0]


def test_stdin_subprocess(tmp_path):
    done = run_subprocess("-", PATTERNS, "-t", "20", "-q", cwd=tmp_path, stdin=READS.read_bytes())
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == golden("expected.paf") and done.stderr == b""


def test_empty_reads_file_is_fine(capsys, tmp_path):
    empty = tmp_path / "empty.fq"
    empty.write_bytes(b"")
    status, out, err = run_cli(capsys, empty, PATTERNS, "--json", tmp_path / "s.json",
                               "--matched", tmp_path / "m.fq", "--unmatched", tmp_path / "u.fq")
    assert (status, out) == (0, "")
    assert "0 reads screened" in err
    assert json.loads((tmp_path / "s.json").read_text())["reads"] == 0
    assert (tmp_path / "m.fq").read_bytes() == b"" and (tmp_path / "u.fq").read_bytes() == b""


# --- bad input --------------------------------------------------------------

GOOD_FASTQ = READS.read_bytes()
# case -> (reads file name, reads content (None: the shipped reads), patterns content
#          (None: the shipped patterns), options, file the message names, fragments it holds)
BAD = {
    "truncated FASTQ record": ("r.fq", GOOD_FASTQ + b"@r21\nACGT\n", None, [], "reads", ["line 83", "Premature end"]),
    "missing plus line": ("r.fq", GOOD_FASTQ.replace(b"\n+\n", b"\n", 1), None, [], "reads", ["line 3", "'+'"]),
    "length mismatch": ("r.fq", GOOD_FASTQ + b"@r21\nACGT\n+\nIII\n", None, [], "reads", ["line 84", "differ"]),
    "truncated gzip": ("r.fq.gz", gzip.compress(GOOD_FASTQ * 20)[:-30], None, [], "reads", ["truncated"]),
    "non-ASCII": ("r.fq", GOOD_FASTQ + b"@r21\nAC\xc3\xa9T\n+\nIIIII\n", None, [], "reads", ["line 82", "non-ASCII"]),
    "non-IUPAC character": ("r.fq", GOOD_FASTQ + b"@r21 x\nACGTZ\n+\nIIIII\n", None, [], "reads",
                            ["read r21", "'Z' at position 5"]),
    "empty pattern file": ("r.fq", None, b"", [], "patterns", ["holds no sequences"]),
    "pattern of length 0": ("r.fq", None, b">a\nACGT\n>empty\n", [], "patterns", ["'empty'", "empty sequence"]),
    "duplicate pattern names": ("r.fq", None, b">a 1\nACGT\n>a 2\nTTTT\n", [], "patterns",
                                ["duplicate pattern name 'a'"]),
    "non-IUPAC pattern": ("r.fq", None, b">a\nAC*GT\n", [], "patterns", ["pattern a", "'*' at position 3"]),
    "threshold 0": ("r.fq", None, None, ["-t", "0"], None, ["threshold must be positive"]),
    "threshold negative": ("r.fq", None, None, ["-t", "-5"], None, ["threshold must be positive"]),
    "threshold above maximum": ("r.fq", None, None, ["-t", "53"], None, ["threshold 53", "(52)"]),
    "zero gap penalty": ("r.fq", None, None, ["-t", "20", "--gap-open", "0"], None,
                         ["gap_open must be a positive integer"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_one_line_error_exit_1_nothing_left_behind(capsys, tmp_path, case):
    name, reads, patterns, options, named, fragments = BAD[case]
    reads_path = tmp_path / name
    reads_path.write_bytes(GOOD_FASTQ if reads is None else reads)
    patterns_path = tmp_path / "p.fa"
    patterns_path.write_bytes(PATTERNS.read_bytes() if patterns is None else patterns)
    inputs = sorted(tmp_path.iterdir())
    options = options or ["-t", "20"]
    # a small chunk size: errors late in the file arrive after output was written
    status, _, err = run_cli(capsys, reads_path, patterns_path, *options, "--chunk-size", "4",
                             "-o", tmp_path / "out.paf", "--matched", tmp_path / "m.fq",
                             "--unmatched", tmp_path / "u.fq.gz", "--json", tmp_path / "s.json")
    assert status == 1
    assert_one_line_error(err, {"reads": reads_path, "patterns": patterns_path, None: ""}[named], *fragments)
    assert sorted(tmp_path.iterdir()) == inputs  # no output, no temporary file


def test_missing_files_and_directories(capsys, tmp_path):
    status, _, err = run_cli(capsys, tmp_path / "nope.fq", PATTERNS)
    assert status == 1
    assert_one_line_error(err, tmp_path / "nope.fq", "No such file")
    status, _, err = run_cli(capsys, READS, tmp_path / "nope.fa")
    assert status == 1
    assert_one_line_error(err, tmp_path / "nope.fa", "No such file")
    # a directory stands in for an unreadable file (root can read any file)
    status, _, err = run_cli(capsys, tmp_path, PATTERNS)
    assert status == 1
    assert_one_line_error(err, tmp_path, "is a directory")
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "-o", tmp_path / "no-dir" / "x.paf")
    assert status == 1
    assert_one_line_error(err, tmp_path / "no-dir" / "x.paf", "cannot write")


@pytest.mark.skipif(os.name != "posix", reason="file modes")
def test_unreadable_inputs_and_unwritable_outputs(tmp_path):
    """Files whose modes forbid reading or writing, in a process that file
    modes bind although CI runs as root (its capabilities to pass them
    dropped): one line, exit 1, no output file left."""
    unreadable = tmp_path / "r.fq"
    unreadable.write_bytes(GOOD_FASTQ)
    unreadable.chmod(0)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    for args, path, message in (
        ([unreadable, PATTERNS, "-o", tmp_path / "o.paf"], unreadable, "Permission denied"),
        ([READS, unreadable, "-o", tmp_path / "o.paf"], unreadable, "Permission denied"),
        ([READS, PATTERNS, "-o", locked / "o.paf"], locked / "o.paf", "cannot write the PAF file: Permission denied"),
        ([READS, PATTERNS, "-o", tmp_path / "o.paf", "--matched", locked / "m.fq"], locked / "m.fq",
         "Permission denied"),
    ):
        done = run_without_root_file_access(["-m", "bpbc", *args, "-t", "20", "--device", "cpu", "-q"], tmp_path)
        assert done.returncode == 1, done.stderr
        assert_one_line_error(done.stderr, path, message)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["locked", "r.fq"] and not list(locked.iterdir())


def test_bad_stdin_names_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"@r1\nACGT\n+\nII\n")))
    status, _, err = run_cli(capsys, "-", PATTERNS, "-t", "20")
    assert status == 1
    assert_one_line_error(err, "<stdin>", "line 4")


def test_bad_input_in_subprocess_has_no_traceback(tmp_path):
    bad = tmp_path / "r.fq"
    bad.write_bytes(b"@r1\nACGT\n+\nIIII\n@r2\nACGT\nIIII\n@r3\nA\n+\nI\n")
    done = run_subprocess(bad, PATTERNS, "-t", "20", "-o", tmp_path / "o.paf", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.decode().startswith(f"bpbc-screen: error: {bad}: line 7:")
    assert done.stderr.count(b"\n") == 1 and not (tmp_path / "o.paf").exists()


def test_device_gpu_without_gpu(capsys):
    from bpbc.engines import gpu_unavailable_reason

    if gpu_unavailable_reason() is None:
        pytest.skip("a GPU is usable here")
    status, out, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--device", "gpu")
    assert (status, out) == (1, "")
    assert err.startswith("bpbc-screen: error: ") and "gpu" in err and err.count("\n") == 1


# --- exit codes -------------------------------------------------------------

@pytest.mark.parametrize("args", [
    [],
    [READS],
    [READS, PATTERNS, "--no-such-option"],
    [READS, PATTERNS, "--strand", "reverse"],
    [READS, PATTERNS, "--device", "tpu"],
    [READS, PATTERNS, "--threshold", "forty"],
    [READS, PATTERNS, "--chunk-size", "0"],
])
def test_usage_errors_exit_2(capsys, args):
    status, out, err = run_cli(capsys, *args)
    assert status == 2
    assert out == "" or not args  # no arguments at all: help on stdout
    assert "Traceback" not in err


def test_importing_the_command_loads_nothing_a_run_does_not_need_yet():
    """``import bpbc.cli`` loads neither numpy, numba nor the pipeline (nor
    rich, nor the pydantic that typer parses the options with): the run
    imports what it needs where it starts, so help, version, usage errors and
    a Dask client do without numpy and numba. typer itself is imported."""
    code = ("import sys, bpbc.cli; "
            "print(' '.join(sorted(m for m in ('numpy', 'numba', 'llvmlite', 'dnaio', 'xopen', 'rich', 'pydantic', "
            "'bpbc.pipeline', 'bpbc.io') if m in sys.modules)))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "", "")


def test_the_commands_process_runs_without_the_cyclic_collector():
    """bpbc-screen's own process (its entry point, bpbc.server.command) turns
    Python's cyclic garbage collector off for good: one command, then the
    process ends."""
    code = ("import gc, sys, bpbc.cli, bpbc.server; bpbc.cli.main = lambda: print(gc.isenabled()) or 0; "
            "sys.argv[0] = 'bpbc-screen'; bpbc.server.command()")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
    env.pop("BPBC_SERVER", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "False\n", "")


def test_help_and_version(capsys):
    status, out, _ = run_cli(capsys, "--help")
    assert status == 0 and "--threshold" in out and "--unmatched" in out
    status, out, _ = run_cli(capsys, "--version")
    assert (status, out) == (0, f"bpbc-screen {bpbc.__version__}\n")


@pytest.mark.parametrize("stage", ["setup", "read", "encode", "device", "traceback", "write"])
def test_ctrl_c_in_any_stage_exits_130_and_leaves_no_files(capsys, tmp_path, monkeypatch, stage):
    """No stage is called again after the interrupt (under load this saw a
    third call about once in 180 runs: a background stage's queued call could
    start after its error had been handed on; fixed in OrderedWorker, and
    forced in test_pipeline.py's test_nothing_queued_runs_after_a_worker_call_failed)."""
    import bpbc.chunks
    import bpbc.pipeline
    import bpbc.screener

    owner, name = {
        "setup": (bpbc.pipeline, "make_screener"),
        "read": (bpbc.chunks, "scan_fastq"),
        "encode": (bpbc.pipeline, "encode_chunk"),
        "device": (bpbc.screener.Screener, "hits"),
        "traceback": (bpbc.screener.Screener, "align"),
        "write": (bpbc.pipeline, "paf_lines"),
    }[stage]
    real = getattr(owner, name)
    calls = []
    at_call = 1 if stage == "setup" else 2  # the set-up happens once, while reading

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == at_call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, interrupted)
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5",
                             "-o", tmp_path / "o.paf", "--matched", tmp_path / "m.fq")
    assert status == 130 and len(calls) == at_call
    assert err == "bpbc-screen: error: interrupted\n"
    assert list(tmp_path.iterdir()) == []


# --- internal errors, unexpected exceptions, SIGTERM ------------------------

REPORT = "; please report it at the bpbc issue tracker with the command line\n"
#: a function of each stage, called once per chunk: (module or class, attribute)
STAGE_FUNCTIONS = {
    "read": ("bpbc.chunks", None, "scan_fastq"),
    "encode": ("bpbc.pipeline", None, "encode_chunk"),
    "device": ("bpbc.screener", "Screener", "hits"),
    "traceback": ("bpbc.screener", "Screener", "align"),
    "write": ("bpbc.pipeline", None, "paf_lines"),
}


def patch_stage(monkeypatch, stage: str, action) -> list:
    """Make the stage's function run ``action()`` on its second call (then go
    on as usual, if action returns); returns the list of calls."""
    import importlib

    module, class_name, name = STAGE_FUNCTIONS[stage]
    owner = importlib.import_module(module)
    owner = getattr(owner, class_name) if class_name else owner
    real = getattr(owner, name)
    calls = []

    def patched(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            action()
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, patched)
    return calls


def every_output(tmp_path) -> list:
    return ["-o", tmp_path / "o.paf", "--matched", tmp_path / "m.fq", "--unmatched", tmp_path / "u.fq.gz",
            "--json", tmp_path / "s.json"]


def test_failed_cross_check_exits_3_with_one_line_and_no_files(capsys, tmp_path, monkeypatch):
    import bpbc.traceback

    real = bpbc.traceback.align_hits

    def off_by_one(*args, **kwargs):
        found = real(*args, **kwargs)
        found.score[:] -= 1
        return found

    monkeypatch.setattr(bpbc.traceback, "align_hits", off_by_one)
    status, out, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", *every_output(tmp_path))
    assert (status, out) == (3, "")
    assert err.startswith("bpbc-screen: internal error: traceback score ") and err.endswith(REPORT)
    assert err.count("\n") == 1 and "disagrees with screen score" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("stage", sorted(STAGE_FUNCTIONS))
def test_unexpected_exception_in_any_stage_exits_3_and_leaves_no_files(capsys, tmp_path, monkeypatch, stage):
    def fail():
        raise ZeroDivisionError("boom")

    calls = patch_stage(monkeypatch, stage, fail)
    status, out, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", *every_output(tmp_path))
    assert (status, out) == (3, "") and len(calls) >= 2
    assert err == "bpbc-screen: internal error: ZeroDivisionError: boom" + REPORT
    assert list(tmp_path.iterdir()) == []


def test_unexpected_exception_outside_the_run_exits_3(capsys, monkeypatch):
    import bpbc.cli
    import bpbc.pipeline

    def broken(*args, **kwargs):
        raise TypeError("the summary cannot be formatted\n(second line)")

    monkeypatch.setattr(bpbc.pipeline.Summary, "format", broken)
    status, out, err = run_cli(capsys, READS, PATTERNS, "-t", "20")
    assert (status, out) == (3, golden("expected.paf"))
    assert err == "bpbc-screen: internal error: TypeError: the summary cannot be formatted (second line)" + REPORT
    assert bpbc.cli.EXIT_INTERNAL == 3


def test_an_output_that_cannot_be_written_exits_1_subprocess(tmp_path):
    """A full disk, as the file size limit makes it (EFBIG where ENOSPC would
    come): the write fails mid-run. That is no bug of bpbc: one line, exit 1
    (not 3), and nothing left behind."""
    code = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000)); "
            "from bpbc.cli import run; sys.argv[0] = 'bpbc-screen'; run()")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", code, str(EXAMPLES / "reads.fq.gz"), str(EXAMPLES / "adapters.fa"), "-t", "30",
         "--device", "cpu", "--chunk-size", "500", "-o", str(out / "o.paf"), "--unmatched", str(out / "u.fq")],
        capture_output=True, cwd=tmp_path, env=env, timeout=300,
    )
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert err == "bpbc-screen: error: cannot write the outputs: File too large\n"
    assert list(out.iterdir()) == []


def test_a_write_error_in_process_exits_1(capsys, tmp_path, monkeypatch):
    import errno

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    patch_stage(monkeypatch, "write", full)
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", *every_output(tmp_path))
    assert status == 1 and err == "bpbc-screen: error: cannot write the outputs: No space left on device\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value,traceback_shown", [("1", True), ("0", False), ("", False)])
def test_bpbc_debug_shows_the_traceback_of_an_internal_error(capsys, tmp_path, monkeypatch, value, traceback_shown):
    def fail():
        raise ValueError("boom")

    monkeypatch.setenv("BPBC_DEBUG", value)
    patch_stage(monkeypatch, "device", fail)
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", *every_output(tmp_path))
    assert status == 3
    assert err.endswith("bpbc-screen: internal error: ValueError: boom" + REPORT)
    assert ("Traceback (most recent call last)" in err) == traceback_shown
    assert (err.count("\n") > 1) == traceback_shown
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("stage", sorted(STAGE_FUNCTIONS))
def test_sigterm_in_any_stage_exits_143_and_leaves_no_files(capsys, tmp_path, monkeypatch, stage):
    before = signal.getsignal(signal.SIGTERM)
    calls = patch_stage(monkeypatch, stage, lambda: os.kill(os.getpid(), signal.SIGTERM))
    status, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", *every_output(tmp_path))
    assert status == 143 and len(calls) >= 2
    assert err == "bpbc-screen: error: terminated (SIGTERM)\n"
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is the command's only while it runs


#: each signal the command stops on: its exit status and message
SIGNAL_EXITS = [(signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted")]


class _SignalWhenUnpickled:
    """Unpickled, sends the signal to this process (from C, inside the unpickling)."""

    def __init__(self, signum: int):
        self.signum = signum

    def __reduce__(self):
        return os.kill, (os.getpid(), self.signum)


def _wait_for(condition, seconds: float = 120) -> bool:
    """Wait until ``condition()`` (in the main thread): a wait for an event, not a guess at how long it takes.
    It looks every millisecond, so that a signal handler runs between two looks even where the signal woke
    another thread (a handler runs in the main thread once it runs Python code)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _until_interrupted() -> None:
    """Wait here (in the main thread) for the signal put off: it ends the wait by its exception. The run cannot
    end first (under load, a put-off signal's retry could come after the run had ended, which then exited 0)."""
    _wait_for(lambda: False)
    raise AssertionError("the signal put off did not come within 120 s")


def _signal_holding_numbas_compiler_lock(signum: int, went_on: list, put_off: threading.Event) -> None:
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        os.kill(os.getpid(), signum)
        assert _wait_for(put_off.is_set)  # the handler ran here, in this (the main) thread, and put the signal off
        went_on.append(True)
    _until_interrupted()


_UNPICKLED_KEYS = itertools.count(1 << 40)  # numba keeps what it unpickled by key: a new one each call


def _signal_inside_a_kernels_call_to_python(signum: int, went_on: list, put_off: threading.Event) -> None:
    import pickle

    from numba.core.serialize import _numba_unpickle

    data = pickle.dumps(_SignalWhenUnpickled(signum))
    _numba_unpickle(next(_UNPICKLED_KEYS), data, hash(data))  # as a kernel calls it; the signal comes inside
    assert put_off.is_set()  # its handler ran inside (the first bytecode after the C call) and put it off
    went_on.append(True)
    _until_interrupted()


@pytest.mark.parametrize("signal_there", [_signal_holding_numbas_compiler_lock,
                                          _signal_inside_a_kernels_call_to_python])
@pytest.mark.parametrize("signum,status,message", SIGNAL_EXITS)
def test_a_signal_waits_until_the_main_thread_may_be_interrupted(capsys, tmp_path, monkeypatch, signal_there,
                                                                 signum, status, message):
    """Raised while the main thread holds numba's or LLVM's lock (loading or
    compiling a kernel), the interrupt could leave it held (another thread's
    next load then waited for ever); raised in Python code that a numba
    kernel called (``_numba_unpickle``), it came back to the kernel as an
    error of its own and the run ended as an internal error (status 3). It
    comes once the block is done.

    Forced with events, no sleeps: the stage waits until the handler has put
    the signal off (the retry timer bpbc.cli starts), then, out of the block,
    until the signal ends the wait (before, it slept 50 ms, and under load
    the run could end before the retry came: one failure in about 300 runs).
    Planted once (``_unsafe_to_interrupt`` always False): 100 of 100 runs fail."""
    went_on: list = []
    put_off = threading.Event()
    real_timer = threading.Timer

    class Retry(real_timer):  # type: ignore[misc, valid-type]
        def __init__(self, interval, function, args=None, kwargs=None):
            if function is os.kill:
                put_off.set()
            super().__init__(interval, function, args, kwargs)

    monkeypatch.setattr(threading, "Timer", Retry)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal
    try:
        calls = patch_stage(monkeypatch, "device", lambda: signal_there(signum, went_on, put_off))
        got, _, err = run_cli(capsys, READS, PATTERNS, "-t", "20", "--chunk-size", "5", *every_output(tmp_path))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert went_on == [True] and len(calls) >= 2
    assert (got, err) == (status, f"bpbc-screen: error: {message}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("signum,status,message", SIGNAL_EXITS)
def test_signal_while_reading_a_pipe_subprocess(tmp_path, signum, status, message):
    """``producer | bpbc-screen -`` where the producer stalls: the reader
    thread is blocked reading stdin when the signal comes. The command stops
    at once, removes its temporary files and exits with the status."""
    import bpbc.io

    record = b"@r%d\n" + b"ACGT" * 37 + b"AC\n+\n" + b"I" * 150 + b"\n"
    count = bpbc.io.READ_BLOCK // len(record) + 3000  # more than the first block: the run starts
    data = b"".join(record % i for i in range(count))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    out = tmp_path / "out"
    out.mkdir()
    # Ctrl-C as a user at a terminal sends it: the command starts with SIGINT
    # handled as Python does by default. A process started with SIGINT ignored
    # (as a shell starts background jobs, or as it was in a pytest-xdist
    # worker late in a run) inherits that and rightly keeps ignoring it.
    restore_sigint = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                      "runpy.run_module('bpbc', run_name='__main__', alter_sys=True)")
    command = [sys.executable, "-c", restore_sigint, "-", str(PATTERNS), "-t", "20", "--device", "cpu", "--threads", "1",
               "-q", "-o", str(out / "o.paf"), "--matched", str(out / "m.fq.gz")]
    # the same run to its end first, on the same input, so that every kernel
    # it needs is compiled and cached: the signal must find the reader waiting
    # on the pipe, not numba compiling (a signal there is not what this tests)
    subprocess.run(command, input=data, capture_output=True, cwd=tmp_path, env=env, check=True, timeout=600)
    for path in out.iterdir():
        path.unlink()
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=env,
    )
    try:
        process.stdin.write(data)  # the pipe stays open: more may come
        process.stdin.flush()
        deadline = time.monotonic() + 240
        while len(list(out.iterdir())) < 2:  # the temporary output files: the run is under way
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
            time.sleep(0.05)
        process.send_signal(signum)
        try:
            returncode = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with open(f"/proc/{process.pid}/status") as status_file:  # which signals it ignores, blocks, catches
                masks = [line.strip() for line in status_file if line.startswith(("SigIgn", "SigBlk", "SigCgt"))]
            raise AssertionError(f"the command did not stop; {masks}") from None
        err = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdin.close()
        process.stdout.close()
        process.stderr.close()
    assert returncode == status, err
    assert err.decode() == f"bpbc-screen: error: {message}\n"
    assert list(out.iterdir()) == []


def test_closed_stdout_in_process(capsys, monkeypatch, tmp_path):
    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    status = main([str(READS), str(PATTERNS), "-t", "20", "--matched", str(tmp_path / "m.fq")])
    assert status == 141
    assert capsys.readouterr().err == ""
    assert list(tmp_path.iterdir()) == []


def test_closed_stdout_pipe_subprocess(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [sys.executable, "-m", "bpbc", str(READS), str(PATTERNS), "-t", "20"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=env,
    )
    process.stdout.close()  # like `| head -0`: the reader is gone before anything is written
    _, err = process.communicate(timeout=300)
    assert process.returncode == 141
    assert err == b""


# --- the shipped example ----------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_example_files_are_what_make_example_writes(tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_example", EXAMPLES / "make_example.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reads, adapters = module.write_example(tmp_path)
    capsys.readouterr()
    assert adapters.read_bytes() == (EXAMPLES / "adapters.fa").read_bytes()
    # compare decompressed: gzip bytes may differ between zlib builds
    assert gzip.decompress(reads.read_bytes()) == gzip.decompress((EXAMPLES / "reads.fq.gz").read_bytes())


def test_example_finds_every_exact_plant_and_nothing_unplanted(capsys):
    """The README's example command: each read's header says what was planted
    (pattern, strand, start, number of edits)."""
    status, out, _ = run_cli(capsys, EXAMPLES / "reads.fq.gz", EXAMPLES / "adapters.fa", "--threshold", "30", "-q")
    assert status == 0
    lengths = {r[0]: len(r[1]) for r in records(EXAMPLES / "adapters.fa")}
    planted = {name.split()[0]: dict(kv.split("=") for kv in name.split()[1:])
               for name, _, _ in records(EXAMPLES / "reads.fq.gz")}
    hits = [line.split("\t") for line in out.splitlines()]
    assert len(hits) > 500
    for fields in hits:  # no hit on a read without a plant, nor for another pattern
        assert planted[fields[0]]["planted"] == fields[5]
    found = {(f[0], f[5], f[4]): (int(f[2]), int(f[3])) for f in hits}
    exact = 0
    for read, plant in planted.items():
        if plant["planted"] == "none" or plant["edits"] != "0":
            continue
        start, end = int(plant["start"]), int(plant["start"]) + lengths[plant["planted"]]
        if end <= 150:  # the whole pattern is in the read, unchanged
            exact += 1
            assert found[(read, plant["planted"], plant["strand"])] == (start, end), read
    assert exact > 300


def test_stages_keep_order_and_a_bounded_number_of_chunks(capsys, tmp_path, monkeypatch):
    """100 chunks through the overlapping stages: the same outputs as one
    chunk, in input order, and never more than a few chunks alive at once."""
    import weakref

    import bpbc.chunks
    import bpbc.screener

    reads = tmp_path / "r.fq"
    reads.write_bytes(READS.read_bytes() * 10)  # 200 reads
    outputs = {}
    real_init, real_hits = bpbc.chunks.RawFastqChunk.__init__, bpbc.screener.Screener.hits
    for size in ("1000", "2"):
        paths = [tmp_path / f"{name}{size}" for name in ("o.paf", "m.fq", "u.fq")]
        live, most = weakref.WeakSet(), []

        def tracked_init(self, *args):
            real_init(self, *args)
            live.add(self)

        def counted_hits(self, batch):
            most.append(len(live))
            return real_hits(self, batch)

        monkeypatch.setattr(bpbc.chunks.RawFastqChunk, "__init__", tracked_init)
        monkeypatch.setattr(bpbc.screener.Screener, "hits", counted_hits)
        status, _, _ = run_cli(capsys, reads, PATTERNS, "-t", "20", "--chunk-size", size, "-q",
                               "-o", paths[0], "--matched", paths[1], "--unmatched", paths[2])
        assert status == 0
        outputs[size] = [path.read_bytes() for path in paths]
        if size == "2":
            # the first chunk holds one read (ramp). Alive at most: 2 at the reading (one handed over, one
            # being read), 2 at the encoding, 1 screened, 3 at the traceback (one waiting, one traced and
            # the subset of its reads that hit), 3 at the writer (two waiting, one written) and 3 more at the
            # slowest reads file's own writer: 14, whatever the number of chunks (5-9 were seen)
            assert len(most) == 101 and max(most) <= 14
    assert outputs["2"] == outputs["1000"]
    assert outputs["2"][0] == (DATA / "expected.paf").read_bytes() * 10
