"""A ``bpbc-screen`` that stays loaded: ``bpbc-serve SOCKET`` and ``BPBC_SERVER``.

A fresh ``bpbc-screen`` process spends its first one to two seconds on
Python, numpy, numba's compiler and kernel cache, CuPy and the CUDA context
(``python -m bench.startup``): on a GPU host that is more than reading a
million reads takes. ``bpbc-serve SOCKET`` pays it once and then runs the
command lines sent to it, one at a time, in its own process. A
``bpbc-screen`` whose environment holds ``BPBC_SERVER=SOCKET`` hands its
command line, its working directory and its standard input, output and
error (the descriptors themselves, passed over the Unix socket) to that
server, waits, and exits with the status the run ended with. Outputs, error
messages and exit statuses are those of a run in the client's own process.
Ctrl-C (SIGINT) or SIGTERM of the client stops the run in the server as it
would stop a local run (status 130 or 143, no output left behind), and the
server goes on serving. Where nothing listens at ``BPBC_SERVER``, the
command says so on stderr and runs by itself.

The run takes the server's environment (``BPBC_*``, ``OMP_*``,
``CUDA_VISIBLE_DEVICES``, the umask), not the client's. The socket is the
owner's only (mode 600). SIGTERM (or Ctrl-C while no run is under way)
stops the server; Ctrl-C at its terminal during a run stops that run.

Only the standard library is imported here (the socket and JSON modules
only where a server is named), so a forwarding client starts in the time
Python does; the server imports :mod:`bpbc.cli` and warms its engine before
it listens.
"""

from __future__ import annotations

import gc
import os
import signal
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket

#: the environment variable that sends ``bpbc-screen`` runs to a server
SERVER_VARIABLE = "BPBC_SERVER"
_STATUS = struct.Struct("!i")
_LENGTH = struct.Struct("!I")
_STOP = b"I"  # client to server: stop the run (the client got SIGINT or SIGTERM)
#: bpbc.cli's statuses, restated: the client must not import bpbc.cli
_EXIT_INTERNAL, _EXIT_INTERRUPTED, _EXIT_TERMINATED = 3, 130, 128 + signal.SIGTERM


def _receive_exactly(connection: socket.socket, size: int, poll: float | None = None) -> bytes:
    """``size`` bytes; with ``poll``, waiting at most that long at a time, so
    that a signal handler runs even where the signal came just before the
    wait began (its C handler ran, the Python one waits for the interpreter,
    and a recv without a timeout would not end)."""
    data = b""
    if poll is not None:
        connection.settimeout(poll)
    while len(data) < size:
        try:
            part = connection.recv(size - len(data))
        except TimeoutError:
            continue
        if not part:
            raise ConnectionError("the connection closed early")
        data += part
    return data


#: set for the command before numpy loads, where the user has not: bpbc makes
#: no BLAS calls, and OpenBLAS starting (and spinning) a thread per core took
#: 0.2 s of wall and 2 s of CPU time on a 16-core host
LEAN_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1"}
#: modules hidden from the command where nothing has imported them yet:
#: numba imports them where they are installed and works without them
#: (SciPy: see :func:`lean_imports`; coverage: a plug-in for numba's code
#: under coverage measurement, 60 ms of a start on a host that has it)
LEAN_HIDDEN = ("scipy", "coverage")
#: numba's own configuration file, in the working directory, which it reads with PyYAML
NUMBA_CONFIG_FILE = ".numba_config.yaml"


def lean_imports(argv: list[str]) -> None:
    """Before the command ``argv`` imports numpy and numba: :data:`LEAN_ENVIRONMENT`,
    and :data:`LEAN_HIDDEN` hidden from this process (where nothing has
    imported them).
    numba imports SciPy, where it is installed, only to check its version
    and to bind BLAS for ``np.linalg`` and ``np.dot``, which bpbc's kernels
    do not use: 0.3-0.45 s of a one-read run on a host with SciPy. Without
    SciPy numba works as where it is not installed (as in CI).
    PyYAML is hidden too where the working directory holds no
    :data:`NUMBA_CONFIG_FILE` and the command line names no Dask (whose
    configuration is YAML): numba imports it only to read that file (11 ms
    of a one-read run on a 2-core AMD EPYC)."""
    for name, value in LEAN_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    hidden: tuple[str, ...] = LEAN_HIDDEN
    if not os.path.exists(NUMBA_CONFIG_FILE) and not any(arg.startswith("--dask") for arg in argv):
        hidden += ("yaml",)
    for module in hidden:
        sys.modules.setdefault(module, None)  # type: ignore[arg-type]  # None: 'import scipy' raises ImportError


def may_use_gpu(argv: list[str]) -> bool:
    """Whether the command line ``argv`` may screen on this host's GPU: not
    with ``--device cpu``, Dask, or help and version only."""
    for k, arg in enumerate(argv):
        if arg in ("-h", "--help", "--version") or arg.startswith("--dask"):
            return False
        if arg == "--device=cpu" or (arg == "--device" and argv[k + 1:k + 2] == ["cpu"]):
            return False
    return True


def start_cuda_early() -> threading.Thread:
    """Import CuPy, start CUDA and create every device's context in a thread
    of its own from the command's first moment, beside its own imports
    (numpy, numba: half a second): the driver's start and the contexts (0.4 s
    a device on an H200 host) wait on the driver, not on Python
    (:mod:`bpbc.cuda_driver`). Anything that fails here is met, and
    reported, by the engine later; the GPU warm-up (bpbc.gpu_engine) goes on
    from here."""
    def start() -> None:
        from bpbc.cuda_driver import import_cupy

        try:
            cupy = import_cupy()  # the driver started without the GIL, beside the import
            if cupy.cuda.runtime.getDeviceCount():
                cupy.cuda.runtime.free(0)  # the current device's primary context, which every thread shares
        except Exception:  # noqa: BLE001, S110 - no CuPy or no usable GPU: the engine says so where it matters
            pass

    thread = threading.Thread(target=start, name="bpbc-cuda-start", daemon=True)
    thread.start()
    return thread


# ---------------------------------------------------------------- client side

def forward(address: str, argv: list[str]) -> int | None:
    """Run ``bpbc-screen argv`` in the server at ``address``: its exit status,
    or None when no server listens there (the caller runs it by itself)."""
    import json
    import socket

    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(address)
    except OSError as error:
        connection.close()
        print(f"bpbc-screen: {SERVER_VARIABLE}={address}: no bpbc server there ({error.strerror or error});"
              " running here", file=sys.stderr)
        return None
    signalled: list[int] = []
    sent: list[bool] = []  # [True] once the request is sent; then [True, True] once the stop is

    def send_stop() -> None:
        if signalled and len(sent) == 1:
            sent.append(True)
            try:
                connection.sendall(_STOP)
            except OSError:
                pass

    def stop(signum, frame) -> None:
        if not signalled:
            signalled.append(signum)
        send_stop()

    with connection:
        request = json.dumps({"argv": list(argv), "cwd": os.getcwd()}).encode()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        # The handlers come first: the server starts the run as soon as the
        # request arrives, and a signal between the two (once set only after
        # the request went) was lost where SIGINT was ignored (a background
        # job: the run went on, the client waiting for it) or ended the client
        # by KeyboardInterrupt. One that comes before the request has gone is
        # sent as the stop right after it.
        previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            socket.send_fds(connection, [_LENGTH.pack(len(request)) + request], [0, 1, 2])
            sent.append(True)
            send_stop()
            status = _STATUS.unpack(_receive_exactly(connection, _STATUS.size, poll=_RESEND_S))[0]
        except (ConnectionError, OSError):
            print(f"bpbc-screen: internal error: the bpbc server at {address} stopped during the run",
                  file=sys.stderr)
            return _EXIT_INTERNAL
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    if signalled:
        return _EXIT_TERMINATED if signalled[0] == signal.SIGTERM else _EXIT_INTERRUPTED
    return status


def command() -> None:
    """Console entry point of ``bpbc-screen``: through the server that
    ``BPBC_SERVER`` names, else in this process (:func:`bpbc.cli.run`)."""
    address = os.environ.get(SERVER_VARIABLE)
    if address:
        status = forward(address, sys.argv[1:])
        if status is not None:
            sys.exit(status)
    # One command, then the process ends: Python's cyclic garbage collector
    # stays off from here (CuPy's import in start_cuda_early's thread too).
    # Its 134 passes of a one-read CPU run took 40-65 ms (2-core AMD EPYC)
    # and found some 10^3 objects to free: the imports make some 10^5 that
    # live as long as the process, the run pauses the collector anyway
    # (bpbc.pipeline.cyclic_gc_paused), and a pass over all the run had
    # allocated followed it. A Dask run turns it back on (bpbc.cli._screen_on_dask).
    gc.disable()
    lean_imports(sys.argv[1:])
    if may_use_gpu(sys.argv[1:]):
        start_cuda_early()
    from bpbc.cli import run

    run()


# ---------------------------------------------------------------- server side

class _Run:
    """The run under way in the server's main thread, stopped through SIGINT
    when its client asks (or goes away). A stop that comes too late, when
    the run has ended, is dropped, as is one for an earlier run.

    The SIGINT is sent again every :data:`_RESEND_S` until the run has taken
    it (``on_sigint`` raised) or ended: one that reaches the main thread
    just before it blocks in a system call (reading an idle stdin pipe, the
    run's first block) runs its C handler there, but not the Python one,
    and the call does not end: the run went on waiting for input, and its
    client for the run (2 of 1,000 runs of the Ctrl-C test under load). The
    run raises KeyboardInterrupt once for its client's stop, so that a
    later SIGINT does not cut its clean-up short."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # taken again by on_sigint in the main thread
        self.active = False
        self.stop_requested = False
        self.interrupted = False  # the run has raised KeyboardInterrupt for its client's stop
        self.number = 0  # of the run under way (or the last one)
        self.command = None  # the code of the function running it

    def start(self, command) -> int:
        """A run of the function ``command`` begins: its number. A stop is
        raised only inside it, not in the bookkeeping around it (it is sent
        again until the command has begun, or has ended)."""
        with self.lock:
            self.number += 1
            self.active, self.stop_requested, self.interrupted = True, False, False
            self.command = command.__code__
            return self.number

    def end(self) -> None:
        with self.lock:
            self.active = False

    def _in_command(self, frame) -> bool:
        while frame is not None:
            if frame.f_code is self.command:
                return True
            frame = frame.f_back
        return False

    def _under_way(self, number: int) -> bool:
        return self.active and self.number == number and not self.interrupted

    def stop(self, number: int) -> None:
        """Stop run ``number``, if it is still under way, until it has taken the stop."""
        while True:
            with self.lock:
                if not self._under_way(number):
                    return
                self.stop_requested = True
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            time.sleep(_RESEND_S)

    def on_sigint(self, signum, frame) -> None:
        with self.lock:
            ours = self.stop_requested
            self.stop_requested = False
            active = self.active
            if active and ours:
                if self.interrupted or not self._in_command(frame):
                    return  # sent again before the run took it: once is enough; or not in the command
                self.interrupted = True
        if active or not ours:  # a run to stop, or Ctrl-C at the server's own terminal
            raise KeyboardInterrupt


#: how often a stop is sent again until the run takes it (see _Run)
_RESEND_S = 0.1


#: the stdin streams of failed runs that read stdin (see _serve_one)
_ABANDONED_INPUTS: list = []


def _watch(connection: socket.socket, run: _Run, number: int) -> None:
    """Stop run ``number`` when its client asks, or when it goes away (after
    the run has ended too: then nothing is stopped)."""
    try:
        connection.recv(1)
    except OSError:
        pass
    run.stop(number)


def _serve_one(connection: socket.socket, run: _Run, home: str) -> int | None:
    """Run one client's command line; its exit status (None: no request)."""
    import json
    import socket

    from bpbc.cli import EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, main

    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    keep_stdin = False
    try:
        if len(fds) != 3 or len(data) < _LENGTH.size:
            return None
        size = _LENGTH.unpack(data[:_LENGTH.size])[0]
        body = data[_LENGTH.size:]
        if len(body) < size:
            body += _receive_exactly(connection, size - len(body))
        request = json.loads(body)
        argv = list(request["argv"])
        # The run reads the client's stdin through a fresh object on its
        # descriptor (no buffered bytes of an earlier run), and writes to the
        # client's stdout and stderr, put in place of the server's own.
        saved = [os.dup(1), os.dup(2)]
        server_stdin, run_stdin = sys.stdin, open(fds[0], closefd=False)  # noqa: SIM115
        status = EXIT_INTERNAL
        try:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os.dup2(fds[1], 1)
            os.dup2(fds[2], 2)
            sys.stdin = run_stdin
            try:
                os.chdir(request["cwd"])
                number = run.start(main)
                threading.Thread(target=_watch, args=(connection, run, number), daemon=True,
                                 name="bpbc-serve-watch").start()
                status = main(argv)
            except KeyboardInterrupt:  # the stop came before the run had begun
                status = EXIT_INTERRUPTED
            except OSError as error:  # the client's directory is gone
                print(f"bpbc-screen: error: {request['cwd']}: {error.strerror or error}", file=sys.stderr)
                status = EXIT_ERROR
            finally:
                run.end()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except OSError:  # a closed pipe: the run has said so already
                    pass
        finally:
            sys.stdin = server_stdin
            for k, fd in ((1, saved[0]), (2, saved[1])):
                os.dup2(fd, k)
                os.close(fd)
            os.chdir(home)
            # A run that failed while reading stdin may leave its reader
            # thread blocked in a read holding the stream's lock (a pipe whose
            # writer is idle): the stream and its descriptor are kept, as the
            # command's os._exit keeps them, so that neither closing it here
            # nor a later read waits for or lands on anything else.
            keep_stdin = status != 0 and "-" in argv
            if keep_stdin:
                _ABANDONED_INPUTS.append(run_stdin)
        try:
            connection.sendall(_STATUS.pack(status))
        except OSError:
            pass
        return status
    finally:
        for fd in fds[1:] if keep_stdin else fds:
            os.close(fd)


def _listen(path: str) -> socket.socket:
    import socket

    if os.path.exists(path):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # left by a server that is gone
        else:
            raise FileExistsError(f"{path}: a bpbc server already listens there")
        finally:
            probe.close()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    umask = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(umask)
    listener.listen(16)
    return listener


def _warm_up(device: str) -> None:
    """Set the process up as the command does and load what the first run
    would: the command and its pipeline, numba's kernels of a small screen,
    and on the GPU CuPy, the CUDA context and the kernels."""
    from bpbc.engines import set_up_process

    set_up_process()  # before numba loads its OpenMP runtime
    import bpbc
    import bpbc.pipeline  # noqa: F401 - what a run imports (bpbc.cli imports it where a run starts)
    from bpbc.cli import _command

    _command()
    bpbc.screen(["ACGTACGTTGCAACGTAGGT" * 4], ["ACGTACGTTGCA"], threshold=10, device=device)


def serve(path: str, device: str = "auto", ready=None) -> None:
    """Serve ``bpbc-screen`` runs at the Unix socket ``path`` until SIGTERM or
    SIGINT (Ctrl-C at the server's own terminal); ``ready()`` is called once
    it listens."""
    _warm_up(device)
    # A child process that outlives a run would keep the client's stdout and
    # stderr open, and whoever reads them would wait for it: multiprocessing's
    # resource tracker, started by the first run that starts processes
    # (--dask local), lives as long as the server. Start it now, on the
    # server's own streams.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    listener = _listen(path)
    home = os.getcwd()
    run = _Run()
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, run.on_sigint),
                signal.SIGTERM: signal.signal(signal.SIGTERM, signal.default_int_handler)}
    try:
        if ready is not None:
            ready()
        while True:
            connection, _ = listener.accept()
            with connection:
                status = _serve_one(connection, run, home)
            # a client's SIGTERM stops its run through SIGINT (status 130): a
            # run terminated (143) was so by a SIGTERM to this server
            if status == _EXIT_TERMINATED:
                break
    except KeyboardInterrupt:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        listener.close()
        try:
            os.unlink(path)
        except OSError:
            pass


def serve_command(argv: list[str] | None = None) -> None:
    """Console entry point of ``bpbc-serve SOCKET [--device auto|cpu|gpu]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="bpbc-serve", description=(
        "Keep bpbc loaded and run the bpbc-screen command lines sent to SOCKET: "
        f"bpbc-screen runs there when {SERVER_VARIABLE}=SOCKET is in its environment."))
    parser.add_argument("socket", metavar="SOCKET", help="path of the Unix socket to listen at")
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                        help="the engine to load before listening (each run still picks its own with --device)")
    args = parser.parse_args(argv)
    try:
        serve(args.socket, args.device, ready=lambda: print(f"bpbc-serve: listening at {args.socket}",
                                                            file=sys.stderr, flush=True))
    except (OSError, RuntimeError) as error:
        print(f"bpbc-serve: error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    serve_command()
