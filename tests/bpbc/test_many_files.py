"""Several reads files on this host (bpbc.many_files, bpbc-screen READS... PATTERNS without --dask).

Each file's outputs are those of its own one-file run, whether the files are
screened in turn in this process or shared out among worker processes; a
failed or interrupted run leaves no output and no worker behind.
"""

from __future__ import annotations

import gzip
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import bpbc
from bpbc import many_files
from bpbc.engines import gpu_unavailable_reason
from bpbc.io import InputError
from bpbc.many_files import screen_many_files
from bpbc.pipeline import ScreenSettings, screen_files
from bpbc.resources import CORES_PER_PROCESS, MIN_BYTES_PER_PROCESS, file_processes, gpu_groups
from tests.bpbc.conftest import write_three_reads_files
from tests.bpbc.test_cli import run_cli

PACKAGE_ROOT = str(Path(bpbc.__file__).resolve().parents[1])
SETTINGS = ScreenSettings(threshold=40, device="cpu", threads=1, chunk_size=300)
#: how the run went on its machine, not what it found
TIMING = ("wall_time_s", "reads_per_s", "stage_seconds", "stage_shares", "plan")
#: how long a run may take to reach the point where a test stops it (the
#: kernels compiled cold in two processes at once, under load), and then to
#: end (seconds): bounds on waits that otherwise last for good
START_SECONDS, EXIT_SECONDS = 300, 60
NAMES = ("one.fq.gz", "two.fastq", "three.fa")
STEMS = ("one", "two", "three")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The patterns and three reads files of conftest.write_three_reads_files."""
    work = tmp_path_factory.mktemp("inputs")
    write_three_reads_files(work, 21, 1500)
    return work


@pytest.fixture(scope="module")
def references(inputs, tmp_path_factory):
    """Each file's own one-file run."""
    work = tmp_path_factory.mktemp("one_file_runs")
    outputs = {}
    for name, stem in zip(NAMES, STEMS):
        files = {"output": work / f"{stem}.paf", "matched": work / f"{stem}.m.fq.gz",
                 "unmatched": work / f"{stem}.u.fq", "json_path": work / f"{stem}.json"}
        screen_files(inputs / name, inputs / "p.fa", SETTINGS, **files)
        outputs[stem] = files
    return outputs


def _templates(out: Path) -> dict:
    return {"output": out / "{stem}.paf", "matched": out / "{stem}.m.fq.gz", "unmatched": out / "{stem}.u.fq",
            "json_path": out / "{stem}.json"}


def _content(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def _counts(path: Path) -> dict:
    return {key: value for key, value in json.loads(path.read_text()).items() if key not in TIMING}


def _assert_each_files_own_outputs(out: Path, references: dict, device: str = "cpu") -> None:
    assert sorted(os.listdir(out)) == sorted(f"{stem}{suffix}" for stem in STEMS
                                             for suffix in (".paf", ".m.fq.gz", ".u.fq", ".json"))
    for stem, reference in references.items():
        for kind, suffix in (("output", ".paf"), ("matched", ".m.fq.gz"), ("unmatched", ".u.fq")):
            assert _content(out / f"{stem}{suffix}") == _content(reference[kind]), (stem, kind)
        assert _counts(out / f"{stem}.json") == {**_counts(reference["json_path"]), "device": device}, stem


def test_the_processes_a_host_calls_for():
    big = 8 * MIN_BYTES_PER_PROCESS
    assert file_processes(4, big, 32, lambda: 2) == 1  # two GPUs: one process drives both
    assert file_processes(4, big, 64, lambda: 4) == 2  # one per two GPUs
    assert file_processes(8, big, 128, lambda: 8) == 4
    assert file_processes(8, big, 64, lambda: 3) == 2  # the third GPU: a process of its own
    assert file_processes(1, big, 64, lambda: 4) == 1  # never more than files
    assert file_processes(8, big, 128, lambda: 0) == 4 == 128 // CORES_PER_PROCESS  # the CPU: one per share of cores
    assert file_processes(8, big, 2 * CORES_PER_PROCESS - 1, lambda: 0) == 1
    assert file_processes(8, big, 2 * CORES_PER_PROCESS, lambda: 0) == 2
    assert file_processes(8, big, 128, lambda: 1) == 1  # one GPU: one process, whatever the cores
    assert file_processes(8, 3 * MIN_BYTES_PER_PROCESS - 1, 128, lambda: 8) == 2  # each process its share of input

    def no_gpus_asked() -> int:
        raise AssertionError("the GPUs were counted for a run that one process screens anyway")

    assert file_processes(8, 2 * MIN_BYTES_PER_PROCESS - 1, 64, no_gpus_asked) == 1
    assert file_processes(1, big, 64, no_gpus_asked) == 1


def test_the_gpus_are_shared_out_in_runs_of_neighbours():
    assert gpu_groups(["0", "1", "2", "3"], 2) == ["0,1", "2,3"]
    assert gpu_groups(["0", "1", "2"], 2) == ["0,1", "2"]
    assert gpu_groups(["3", "5"], 2) == ["3", "5"]
    assert gpu_groups(["0"], 2) == ["0"]  # more processes than GPUs: they share it
    assert gpu_groups([], 2) == []  # no usable GPU: the workers run on the CPU
    assert gpu_groups(["GPU-a", "GPU-b", "GPU-c", "GPU-d", "GPU-e", "GPU-f", "GPU-g", "GPU-h"], 4) == [
        "GPU-a,GPU-b", "GPU-c,GPU-d", "GPU-e,GPU-f", "GPU-g,GPU-h"]


@pytest.mark.parametrize("processes", [1, 2])
def test_each_file_gets_its_own_runs_outputs(inputs, references, tmp_path, processes):
    out = tmp_path / "out"
    out.mkdir()
    done = []
    summaries = screen_many_files([inputs / name for name in NAMES], inputs / "p.fa", SETTINGS,
                                  progress=done.append, processes=processes, **_templates(out))
    _assert_each_files_own_outputs(out, references)
    assert [summary.reads for summary in summaries] == [1500, 700, 500]  # in the order given
    assert [summary.reads_file for summary in summaries] == [str(inputs / name) for name in NAMES]
    assert done[-1] == 2700 and done == sorted(done) and len(done) == 3
    # a worker plans for its share of the cores, the run in turn for the run's
    assert {summary.plan["source"] for summary in summaries} == {
        "one of 2 processes" if processes == 2 else "--threads"}


def test_the_command_line_screens_several_files_without_dask(inputs, references, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    status, stdout, err = run_cli(capsys, *(inputs / name for name in NAMES), inputs / "p.fa", "-t", "40",
                                  "--device", "cpu", "--threads", "1", "--chunk-size", "300",
                                  "-o", out / "{stem}.paf", "--matched", out / "{stem}.m.fq.gz",
                                  "--unmatched", out / "{stem}.u.fq", "--json", out / "{stem}.json")
    assert (status, stdout) == (0, ""), err
    assert "bpbc-screen: 2700 reads screened" in err
    _assert_each_files_own_outputs(out, references)


@pytest.mark.parametrize("processes", [1, 2])
def test_a_bad_file_leaves_no_output(inputs, tmp_path, monkeypatch, processes):
    (tmp_path / "in").mkdir()
    lines = (inputs / "two.fastq").read_text().splitlines(keepends=True)
    lines[4 * 600 + 1] = "ACGT*ACGT\n"  # read 600 of 700
    lines[4 * 600 + 3] = "IIIIIIIII\n"
    (tmp_path / "in" / "bad.fq").write_text("".join(lines))
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"^in/bad\.fq: read y600"):  # the file as given
        screen_many_files([inputs / "one.fq.gz", Path("in/bad.fq"), inputs / "three.fa"], inputs / "p.fa", SETTINGS,
                          processes=processes, **_templates(out))
    assert os.listdir(out) == []  # nor the good files' outputs, nor any staged or temporary file


def test_demultiplexing_and_stdin_patterns_are_refused(inputs, tmp_path):
    reads = [inputs / "two.fastq", inputs / "three.fa"]
    with pytest.raises(InputError, match=r"demultiplexing \(\{name\} in --matched\) takes one reads file"):
        screen_many_files(reads, inputs / "p.fa", SETTINGS, output=tmp_path / "{stem}.paf",
                          matched=tmp_path / "{name}.fq")
    with pytest.raises(InputError, match="the patterns cannot come from stdin"):
        screen_many_files(reads, "-", SETTINGS, output=tmp_path / "{stem}.paf")
    with pytest.raises(InputError, match="--matched must hold {stem}"):
        screen_many_files(reads, inputs / "p.fa", SETTINGS, output=tmp_path / "{stem}.paf",
                          matched=tmp_path / "m.fq")
    assert os.listdir(tmp_path) == []


def test_a_worker_takes_its_gpu_and_its_share(monkeypatch):
    """What a worker process does first (here, in this process): it sees only
    the GPU it was given, plans for its share of the cores, and leaves
    Ctrl-C to the parent."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    previous = signal.getsignal(signal.SIGINT)
    try:
        plan = many_files._start_worker("3", 5, 2)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    assert (plan.cores, plan.source) == (5, "one of 2 processes")


def _workers(pid: int) -> set[int]:
    """The worker processes among ``pid``'s children (not multiprocessing's resource tracker)."""
    with open(f"/proc/{pid}/task/{pid}/children") as listing:
        children = [int(child) for child in listing.read().split()]
    return {child for child in children if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()}


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _writer_once_read(fifo: Path, seconds: float = START_SECONDS) -> int:
    """A writing end of ``fifo``, opened once a process opened it to read;
    the test fails, rather than waits for good, where none does in time."""
    opened: list[int] = []
    opener = threading.Thread(target=lambda: opened.append(os.open(fifo, os.O_WRONLY)), daemon=True)
    opener.start()
    opener.join(seconds)
    if opener.is_alive():
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # a reader, so that the thread's open returns
        opener.join()
        os.close(opened[0])
        pytest.fail(f"no process opened {fifo} to read it in {seconds} s")
    return opened[0]


def _message(fifo: int, seconds: float = START_SECONDS) -> str:
    """What a process writes to the FIFO open (not blocking) at ``fifo``; the
    test fails where nothing comes in time."""
    ready, _, _ = select.select([fifo], [], [], seconds)
    assert ready, f"no message in {seconds} s"
    return os.read(fifo, 4096).decode()


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
def test_ctrl_c_stops_the_workers_and_leaves_no_output(inputs, tmp_path):
    """A worker blocked reading a FIFO whose writer (this test) is idle; a
    SIGINT to the parent alone must end the run, kill that worker (it
    ignores SIGINT) and remove every output, also the finished file's.
    Without the kill the worker stays blocked for good (planted once: the
    check on the children below failed)."""
    fifo = tmp_path / "slow.fq"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    script = textwrap.dedent(f"""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)  # even where it came ignored (pytest run in the background)
        from bpbc.many_files import screen_many_files
        from bpbc.pipeline import ScreenSettings
        screen_many_files([{str(inputs / 'two.fastq')!r}, {str(fifo)!r}], {str(inputs / 'p.fa')!r},
                          ScreenSettings(threshold=40, device="cpu", threads=1), output={str(out / '{stem}.paf')!r},
                          matched={str(out / '{stem}.m.fq')!r}, processes=2)
    """)
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT)
    parent = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)  # its workers in its process group, for the clean-up below
    try:
        writer = _writer_once_read(fifo)
        try:  # the FIFO open till the run ends: its worker stays blocked unless killed
            os.write(writer, (inputs / "two.fastq").read_bytes()[:5000])
            workers = _workers(parent.pid)
            deadline = time.monotonic() + START_SECONDS
            while not any(name.startswith(".bpbc-part-") and not name.endswith(".bpbc-tmp")  # the other file's
                          for name in os.listdir(out)):  # outputs, staged
                assert time.monotonic() < deadline, "the good file was never screened"
                time.sleep(0.05)
            parent.send_signal(signal.SIGINT)
            _, err = parent.communicate(timeout=EXIT_SECONDS)
        finally:
            os.close(writer)
    finally:
        if parent.poll() is None:  # the run hung: it and its workers (its process group) killed
            os.killpg(parent.pid, signal.SIGKILL)
            parent.communicate()
    assert parent.returncode != 0 and "KeyboardInterrupt" in err
    assert len(workers) == 2 and not any(_alive(pid) for pid in workers), workers
    assert os.listdir(out) == []


#: a run's parent script. In its worker processes (spawn imports the script
#: there, named __mp_main__), the message that carries a file's summary is
#: sent half, whether written with os.write (bpbc.many_files) or through
#: multiprocessing.connection (concurrent.futures' executor, multiprocessing's
#: queues; the half after the header of the whole: its wire format, Python
#: 3.7-3.13); then the worker writes its pid to the FIFO ``notice`` and waits.
CUT_SUMMARY_SCRIPT = """
import os, struct, sys, threading
from multiprocessing import connection

notice, reads, patterns, out = sys.argv[1:]
write, send_bytes = os.write, connection.Connection._send_bytes


def half_sent(fd, message):
    write(fd, message[:len(message) // 2])
    with open(notice, "w") as told:
        told.write(str(os.getpid()))
    threading.Event().wait()


def write_half_of_a_summary(fd, data):
    if b"bpbc.summary" not in bytes(data):
        return write(fd, data)
    half_sent(fd, bytes(data))


def send_half_of_a_summary(self, buf):
    if b"bpbc.summary" not in bytes(buf):
        return send_bytes(self, buf)
    write(self.fileno(), struct.pack("!i", len(buf)))
    half_sent(self.fileno(), bytes(buf))


if __name__ == "__mp_main__":
    os.write = write_half_of_a_summary
    connection.Connection._send_bytes = send_half_of_a_summary
elif __name__ == "__main__":
    import signal
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even where it came ignored (pytest run in the background)
    from bpbc.many_files import screen_many_files
    from bpbc.pipeline import ScreenSettings

    screen_many_files(reads.split(","), patterns, ScreenSettings(threshold=40, device="cpu", threads=1),
                      output=os.path.join(out, "{stem}.paf"), processes=2)
"""

#: per way the run is stopped: the last line of its stderr
ENDS = {"ctrl-c": "KeyboardInterrupt", "failure": "bpbc.errors.InputError: {fifo}: read r1: character '*'",
        "killed": "bpbc.errors.InputError: a process screening the reads files ended abruptly"}


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("end", sorted(ENDS))
def test_a_worker_stopped_while_it_sends_a_result_leaves_no_one_waiting(inputs, tmp_path, end):
    """A worker stopped half-way through sending its file's summary to the
    parent: killed by the parent after Ctrl-C or after the other file's
    failure, or killed by someone else (the out-of-memory killer, say). The
    run still ends, with the right error, its workers gone and no output
    left. The half message is forced (CUT_SUMMARY_SCRIPT: the worker sends
    it, says so, then waits), the other worker is blocked reading a FIFO
    meanwhile, and the run is stopped only once the half is sent: no timing
    involved. The worker sending is the last one started (the files' order),
    so that a copy of its pipe's end left open in the parent would show.
    With concurrent.futures' ProcessPoolExecutor (bpbc.many_files before
    this test), the executor's thread reading results waited for the rest of
    the message for good, and with it the interpreter's exit (Ctrl-C) or the
    run (killed; failure: the other worker's error queued behind the half):
    planted back once (bench/results/flaky_repeated_runs_cpu.md, P and P2),
    every run failed: 100 of 100 of each case by the hang (the parent not
    ended 5 s after the stop), the Ctrl-C case in a second 100 (of the
    first, 2 failed earlier: the kernels compiled cold for over 60 s)."""
    fifo, notice, out = tmp_path / "slow.fq", tmp_path / "notice", tmp_path / "out"
    os.mkfifo(fifo)
    os.mkfifo(notice)
    out.mkdir()
    script = tmp_path / "run.py"
    script.write_text(CUT_SUMMARY_SCRIPT)
    told = os.open(notice, os.O_RDONLY | os.O_NONBLOCK)  # open already, so that the worker's open returns at once
    parent = subprocess.Popen([sys.executable, script, notice, f"{fifo},{inputs / 'two.fastq'}", inputs / "p.fa", out],
                              env=dict(os.environ, PYTHONPATH=PACKAGE_ROOT), stderr=subprocess.PIPE, text=True,
                              start_new_session=True)  # its workers in its process group, for the clean-up below
    try:
        writer = _writer_once_read(fifo)
        try:  # the FIFO open till the run ends: its worker stays blocked unless killed
            half_sent = int(_message(told))
            workers = _workers(parent.pid)
            if end == "ctrl-c":
                parent.send_signal(signal.SIGINT)
            elif end == "failure":  # of the other file
                os.write(writer, b"@r1\nACGT*ACGT\n+\nIIIIIIIII\n")
                os.close(writer)
                writer = -1
            else:  # by the kernel's out-of-memory killer, say
                os.kill(half_sent, signal.SIGKILL)
            _, err = parent.communicate(timeout=EXIT_SECONDS)
        finally:
            if writer >= 0:
                os.close(writer)
    finally:
        os.close(told)
        if parent.poll() is None:  # the run hung: it and its workers (its process group) killed
            os.killpg(parent.pid, signal.SIGKILL)
            parent.communicate()
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert parent.returncode != 0 and err.rstrip().splitlines()[-1].startswith(ENDS[end].format(fifo=fifo)), err
    assert len(workers) == 2 and half_sent in workers and not left, (workers, left)
    assert os.listdir(out) == []


@pytest.mark.gpu
@pytest.mark.skipif(gpu_unavailable_reason() is not None, reason="needs a usable GPU")
def test_on_the_gpus_each_file_gets_its_own_runs_outputs(inputs, references, tmp_path):
    """The GPU engine in two worker processes (each on one of the host's
    GPUs where it has two, else both on one): the CPU engine's outputs."""
    out = tmp_path / "out"
    out.mkdir()
    summaries = screen_many_files([inputs / name for name in NAMES], inputs / "p.fa",
                                  ScreenSettings(threshold=40, device="gpu", chunk_size=300), processes=2,
                                  **_templates(out))
    assert {summary.device for summary in summaries} == {"gpu"}
    _assert_each_files_own_outputs(out, references, device="gpu")
