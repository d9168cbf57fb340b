"""bpbc-serve and BPBC_SERVER (bpbc.server): runs sent to a resident process
give the outputs, messages and exit statuses of runs in the client's own
process; Ctrl-C stops the run, not the server; SIGTERM stops the server.
One server (CPU engine) serves the whole module."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.bpbc.test_cli import PACKAGE_ROOT, PATTERNS, READS, golden

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="Unix sockets")


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "BPBC_SERVER"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    return {**env, **extra}


def _start_server(path: Path) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "bpbc.server", str(path), "--device", "cpu"],
                              env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240  # the warm-up may compile kernels on a cold cache
    while not path.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            _, err = server.communicate()
            raise AssertionError(f"bpbc-serve did not start: {err.decode()}")
        time.sleep(0.1)
    return server


def _stop(server: subprocess.Popen) -> int:
    server.terminate()
    server.communicate(timeout=60)
    return server.returncode


#: socket path -> the server process listening there
_PROCESSES: dict[Path, subprocess.Popen] = {}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve") / "bpbc.sock"
    process = _PROCESSES[path] = _start_server(path)
    yield path
    _stop(process)


def _client(address, *args, cwd, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bpbc", *map(str, args)], input=stdin, capture_output=True,
                          cwd=cwd, env=_env(BPBC_SERVER=str(address)), timeout=300)


def test_runs_through_the_server_equal_the_golden_outputs(server, tmp_path):
    """PAF to stdout and to a file given relative to the client's directory,
    the reads from stdin, the summary on the client's stderr."""
    done = _client(server, READS, PATTERNS, "-t", "20", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == golden("expected.paf")
    assert b"reads screened" in done.stderr
    done = _client(server, "-", PATTERNS, "-t", "20", "-o", "out.paf", "-q", cwd=tmp_path,
                   stdin=READS.read_bytes())
    assert done.returncode == 0, done.stderr
    assert done.stdout == done.stderr == b""
    assert (tmp_path / "out.paf").read_text() == golden("expected.paf")


def test_errors_and_statuses_come_back(server, tmp_path):
    done = _client(server, tmp_path / "missing.fq", PATTERNS, "-t", "20", "-o", "out.paf", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.decode().startswith("bpbc-screen: error: ") and "missing.fq" in done.stderr.decode()
    assert b"Traceback" not in done.stderr
    assert not (tmp_path / "out.paf").exists()
    assert _client(server, READS, PATTERNS, "--no-such-option", cwd=tmp_path).returncode == 2


def test_ctrl_c_stops_the_run_and_the_server_goes_on(server, tmp_path):
    """Ctrl-C once the server's run is under way (the server has moved to
    the client's directory to run it, waiting for more input; not after a
    fixed sleep, which could let the signal come before the run began and
    end only the client): status 130, no output, and the server runs the
    next command. Planted once (the server's watcher not stopping the run
    when the client asks): fails, the client still waiting after 60 s."""
    client = subprocess.Popen([sys.executable, "-m", "bpbc", "-", PATTERNS, "-t", "20", "-o", "out.paf", "-q"],
                              stdin=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                              env=_env(BPBC_SERVER=str(server)))
    client.stdin.write(READS.read_bytes())  # and the input stays open: the run waits for more
    client.stdin.flush()
    deadline = time.monotonic() + 120
    while os.readlink(f"/proc/{_PROCESSES[server].pid}/cwd") != str(tmp_path):  # the server runs the command
        assert client.poll() is None and time.monotonic() < deadline, "the run did not start"
        time.sleep(0.01)
    client.send_signal(signal.SIGINT)
    try:
        status = client.wait(timeout=60)
    finally:
        client.stdin.close()
        err = client.stderr.read()
        client.stderr.close()
    assert status == 130, err
    assert not (tmp_path / "out.paf").exists()
    done = _client(server, READS, PATTERNS, "-t", "20", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.decode() == golden("expected.paf")


def test_a_local_dask_cluster_leaves_no_process_holding_the_clients_streams(server, tmp_path):
    """--dask local starts processes in the server; the run's client, whose
    stdout and stderr are pipes here, must see them closed when it ends."""
    pytest.importorskip("distributed")
    listing = tmp_path / "reads.txt"
    listing.write_text(f"{READS}\n")
    done = _client(server, "--dask", "local:1", "--reads-from", listing, PATTERNS, "-t", "20", "--device", "cpu",
                   "-o", "{stem}.paf", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "reads.paf").read_text() == golden("expected.paf")


def test_without_a_server_the_command_runs_here(tmp_path):
    done = _client(tmp_path / "nothing.sock", READS, PATTERNS, "-t", "20", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.decode() == golden("expected.paf")
    assert b"no bpbc server there" in done.stderr and b"running here" in done.stderr


def test_sigterm_stops_the_server_and_removes_its_socket(tmp_path):
    path = tmp_path / "s.sock"
    server = _start_server(path)
    assert _start_server_again_fails(path)
    assert _stop(server) == 0
    assert not path.exists()


def _take_request(connection) -> dict:
    """What a stand-in server gets from a client: the request (short enough
    to come in one message), its three descriptors closed."""
    import json
    import socket

    from bpbc import server

    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    for fd in fds:
        os.close(fd)
    return json.loads(data[server._LENGTH.size:])


def _start_server_again_fails(path: Path) -> bool:
    done = subprocess.run([sys.executable, "-m", "bpbc.server", str(path), "--device", "cpu"], env=_env(),
                          capture_output=True, timeout=300)
    return done.returncode == 1 and b"already listens there" in done.stderr


def test_the_client_statuses_are_the_commands():
    from bpbc import cli, server

    assert (server._EXIT_INTERNAL, server._EXIT_INTERRUPTED, server._EXIT_TERMINATED) == (
        cli.EXIT_INTERNAL, cli.EXIT_INTERRUPTED, cli.EXIT_TERMINATED)


def test_the_entry_point_imports_only_what_the_client_needs():
    """bpbc-screen's entry point (bpbc.server) loads nothing heavy: a client
    forwarding to a server starts in the time Python does."""
    probe = ("import sys; before = set(sys.modules); import bpbc.server; "
             "print(' '.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=_env(), timeout=60, check=True)
    loaded = set(done.stdout.decode().split())
    assert "bpbc.server" in loaded
    assert not loaded & {"bpbc.cli", "numpy", "numba", "typer", "socket", "json"}


def test_command_starts_lean(tmp_path):
    """The command hides SciPy and PyYAML from numba and keeps OpenBLAS to
    one thread (a user's own setting wins), and still screens."""
    argv = [str(READS), str(PATTERNS), "-t", "20", "--device", "cpu", "-q", "-o", str(tmp_path / "a.paf")]
    probe = ("import os, sys\n"
             "from bpbc.server import lean_imports\n"
             f"lean_imports({argv!r})\n"
             "import numba\n"
             "print(sys.modules['scipy'] is None, sys.modules['yaml'] is None, os.environ['OPENBLAS_NUM_THREADS'])\n"
             "from bpbc.cli import main\n"
             f"sys.exit(main({argv!r}))\n")
    env = _env(OPENBLAS_NUM_THREADS="3")
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "3"]
    assert (tmp_path / "a.paf").read_text() == golden("expected.paf")


@pytest.mark.parametrize("dask", [False, True])
def test_pyyaml_stays_for_dask_and_numbas_configuration_file(tmp_path, dask):
    """PyYAML is not hidden where the command line names Dask (its
    configuration is YAML) or numba's configuration file is there to read."""
    if not dask:
        (tmp_path / ".numba_config.yaml").write_text("")
    argv = ["r.fq", "p.fa"] + (["--dask", "local:1"] if dask else [])
    probe = ("import sys\n"
             "from bpbc.server import lean_imports\n"
             f"lean_imports({argv!r})\n"
             "print(sys.modules.get('yaml', 'absent') is None)\n")
    done = subprocess.run([sys.executable, "-c", probe], env=_env(), capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


def test_the_gpu_is_started_early_unless_the_command_line_rules_it_out():
    from bpbc.server import may_use_gpu

    assert may_use_gpu(["reads.fq", "p.fa"]) and may_use_gpu(["reads.fq", "p.fa", "--device", "gpu"])
    assert may_use_gpu(["reads.fq", "p.fa", "--device", "auto", "-o", "cpu"])
    for argv in (["r.fq", "p.fa", "--device", "cpu"], ["r.fq", "p.fa", "--device=cpu"], ["--help"], ["--version"],
                 ["r.fq", "p.fa", "--dask", "tcp://h:8786"], ["r.fq", "p.fa", "--dask-scheduler-file", "s.json"]):
        assert not may_use_gpu(argv), argv


@pytest.mark.parametrize("when", ["as the request goes", "just after the request went"])
def test_a_signal_as_the_request_goes_stops_the_run(tmp_path, monkeypatch, when):
    """The server starts the run as soon as the request arrives, so a Ctrl-C
    may come before the client is waiting for the run's end. Forced here in
    the client's own process, against a server that records what it gets:
    SIGINT is raised inside ``send_fds`` (before or after the real send).
    The server must get the request, then the stop, and the client must
    exit 130. The client once set its handlers only after the request went:
    with SIGINT ignored (a background job, as under the load runner) the
    signal was lost and the client waited for a run that went on (8 of 300
    runs of test_ctrl_c_stops_the_run_and_the_server_goes_on under load,
    the server's watcher still waiting in recv); with Python's default
    handler the client ended by KeyboardInterrupt. Planted once (the
    handlers set after ``send_fds`` again): both cases fail, every run."""
    import socket
    import threading

    from bpbc import server

    address = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(1)
    got: dict = {}

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            got["request"] = _take_request(connection)
            connection.settimeout(10)  # only the broken client makes it wait this long
            try:
                got["then"] = connection.recv(1)
            except TimeoutError:
                got["then"] = None
            connection.sendall(server._STATUS.pack(130 if got["then"] == server._STOP else 0))

    real_send_fds = socket.send_fds

    def send_fds_and_signal(*args, **kwargs):
        if when == "as the request goes":
            os.kill(os.getpid(), signal.SIGINT)
        sent = real_send_fds(*args, **kwargs)
        if when == "just after the request went":
            os.kill(os.getpid(), signal.SIGINT)
        return sent

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setattr(socket, "send_fds", send_fds_and_signal)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job starts
    try:
        status = server.forward(address, ["reads.fq", "p.fa"])
    finally:
        signal.signal(signal.SIGINT, previous)
        thread.join(30)
        listener.close()
    assert got["request"] == {"argv": ["reads.fq", "p.fa"], "cwd": os.getcwd()}
    assert got["then"] == server._STOP
    assert status == 130
    assert signal.getsignal(signal.SIGINT) is previous


def test_a_stop_is_sent_again_until_the_run_takes_it():
    """A SIGINT that reaches the server's main thread just before it blocks
    in a system call (the run's first read of an idle stdin pipe) runs its
    C handler there but not the Python one, and the call does not end: the
    run went on, its client waiting (2 of 1,000 runs of the Ctrl-C test
    under load; logged: the stop sent, the handler run only when the input
    closed 20 s later). Forced here: the first SIGINT's handler does
    nothing, and the command blocks reading a pipe nobody writes to. The
    stop must come again and end the command at once. Planted once (one
    SIGINT only, as before): the read waits for the 10 s fallback write
    (5 of 5 runs). A stop of an earlier run stops nothing, and one that lands
    outside the command is sent again until it is in it."""
    import threading

    from bpbc.server import _Run

    run = _Run()
    calls: list[str] = []

    def handler(signum, frame):
        calls.append(frame.f_code.co_name)
        if len(calls) > 1:  # the first is lost
            run.on_sigint(signum, frame)

    read_end, write_end = os.pipe()
    fallback = threading.Timer(10, os.write, (write_end, b"x"))

    def command():
        return os.read(read_end, 1)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        fallback.start()
        stale = run.start(command)
        run.end()
        number = run.start(command)
        run.stop(stale)  # nothing: that run has ended
        assert calls == []
        started = time.monotonic()
        threading.Thread(target=run.stop, args=(number,), daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            command()
        assert time.monotonic() - started < 5 and len(calls) >= 2 and calls[-1] == "command"
        run.end()
        # a stop outside the command (the server's bookkeeping) is not raised there, but sent again
        calls.clear()
        number = run.start(command)
        stopper = threading.Thread(target=run.stop, args=(number,), daemon=True)
        stopper.start()
        while len(calls) < 3:  # the stop lands here, outside the command, and comes again
            time.sleep(0.01)
        with pytest.raises(KeyboardInterrupt):
            command()
        stopper.join(5)
        assert not stopper.is_alive()
    finally:
        signal.signal(signal.SIGINT, previous)
        fallback.cancel()
        os.close(read_end)
        os.close(write_end)


def test_the_client_acts_on_a_signal_that_came_just_before_it_waits():
    """The client waits for its run's status in a recv; a signal whose C
    handler ran just before that recv began does not end it, so the Python
    handler (which sends the stop) waited for the status, which waited for
    the stop. Forced with ``_thread.interrupt_main``, which trips the
    handler without a system signal, once the client waits in its recv.
    Planted once (recv without a timeout, as before): fails, the server
    getting no stop within its 5 s, in 5 of 5 runs."""
    import _thread
    import socket
    import threading

    from bpbc import server

    address = f"/tmp/bpbc-test-{os.getpid()}-{threading.get_ident()}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(1)
    got: dict = {}
    main = threading.main_thread().ident
    receiving = server._receive_exactly.__code__

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            got["request"] = _take_request(connection)
            while sys._current_frames()[main].f_code is not receiving:  # the client waits for the status
                time.sleep(0.001)
            _thread.interrupt_main(signal.SIGINT)
            connection.settimeout(5)
            try:
                got["then"] = connection.recv(1)
            except TimeoutError:
                got["then"] = None
            connection.sendall(server._STATUS.pack(130 if got["then"] == server._STOP else 0))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        status = server.forward(address, ["r.fq", "p.fa"])
    finally:
        thread.join(30)
        listener.close()
        os.unlink(address)
    assert got["then"] == server._STOP and status == 130
