"""``bpbc-screen``: screen reads against patterns, write PAF (a thin layer over bpbc.pipeline).

Exit status:

* 0 success;
* 1 a bad input file or option value, or an output that cannot be written (one
  line on stderr, ``bpbc-screen: error: ...``);
* 2 a usage error (unknown option, missing argument, a value of the wrong type);
* 3 an internal error: a failed cross-check or any unexpected exception (one
  line on stderr, ``bpbc-screen: internal error: ...; please report it ...``;
  with the environment variable ``BPBC_DEBUG=1`` the traceback comes first);
* 130 interrupted (Ctrl-C, SIGINT);
* 141 stdout closed early (e.g. ``| head``);
* 143 terminated (SIGTERM).

Whatever the status, a run that does not succeed leaves no output file behind.
"""

from __future__ import annotations

import atexit
import contextvars
import gc
import os
import shlex
import signal
import sys
import threading
import time
import traceback
from contextlib import ExitStack, contextmanager
from typing import Callable

import click
from click.exceptions import Exit

from bpbc.compile_watch import COMPILE_NOTICE, watching_compiles
from bpbc.errors import InputError, InternalError, one_line
from bpbc.scoring import Scoring
from bpbc.settings import DEFAULT_CHUNK_SIZE, DEFAULT_THRESHOLD, PAIR_FILTERS, STRANDS, ScreenSettings

PROG = "bpbc-screen"
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE, EXIT_TERMINATED = 130, 141, 128 + signal.SIGTERM
#: where internal errors are to be reported (the project names no URL)
ISSUE_TRACKER = "the bpbc issue tracker"
#: set (to anything but "" or "0") to see the traceback of an internal error
DEBUG_VARIABLE = "BPBC_DEBUG"
#: the arguments of the command line being run (the report shows them)
_ARGUMENTS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("bpbc_arguments", default=())


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM while :func:`main` runs, so that
    a terminated run stops and cleans up exactly as an interrupted one."""


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def _internal_error(error: BaseException) -> int:
    """Report a bug (one line, the traceback first with BPBC_DEBUG=1); the exit status."""
    if os.environ.get(DEBUG_VARIABLE, "") not in ("", "0"):
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    message = str(error) if isinstance(error, InternalError) else f"{type(error).__name__}: {error}"
    print(f"{PROG}: internal error: {one_line(message)}; please report it at {ISSUE_TRACKER} with the command line",
          file=sys.stderr)
    return EXIT_INTERNAL


#: where threading's Python code has just taken a lock that a ``with`` block is to release (Semaphore, Event and
#: Queue take theirs through it): an exception raised there leaves the lock held
_CONDITION_ENTER = threading.Condition.__enter__.__code__
#: how soon a signal put off (:func:`_unsafe_to_interrupt`) comes again
SIGNAL_RETRY_S = 0.001


def _unsafe_to_interrupt(frame) -> bool:
    """Whether an exception raised now in the calling thread, at ``frame``,
    could break what it is doing: it holds numba's compiler lock or
    llvmlite's lock of the LLVM library (raised between their acquire and
    the block that releases them, it left one held: a SIGTERM while the
    main thread loaded a kernel, and the next load in another thread waited
    for ever), or it runs Python code that a numba kernel called
    (``_numba_unpickle``: the kernel took the exception for an internal
    error, SystemError, and the run ended with status 3), or it is in
    ``threading.Condition.__enter__`` (an exception raised just after the
    lock is taken leaves it held: a SIGTERM inside an engine pool's
    ``submit`` left its idle semaphore's lock held, and the next run in the
    same process, as in the resident server, waited for ever). Not anywhere
    in threading's code: the main thread waits there (a queue's get), and a
    signal put off there each time could be put off for good."""
    if frame is not None and frame.f_code is _CONDITION_ENTER:
        return True
    compiler_lock = sys.modules.get("numba.core.compiler_lock")
    if compiler_lock is not None and compiler_lock.global_compiler_lock.is_locked():
        return True
    ffi = sys.modules.get("llvmlite.binding.ffi")
    llvm_lock = getattr(getattr(getattr(ffi, "lib", None), "_lock", None), "_lock", None)
    if llvm_lock is not None and llvm_lock._is_owned():
        return True
    serialize = sys.modules.get("numba.core.serialize")
    unpickle = getattr(getattr(serialize, "_numba_unpickle", None), "__code__", None)
    while frame is not None and unpickle is not None:
        if frame.f_code is unpickle:
            return True
        frame = frame.f_back
    return False


@contextmanager
def _interrupts():
    """While the block runs (in the main thread), SIGTERM raises
    :class:`Terminated` once (a second SIGTERM does not cut the cleanup
    short) and SIGINT calls its handler as before (KeyboardInterrupt by
    default); both are put off while an exception could break what the main
    thread does (:func:`_unsafe_to_interrupt`). The previous handlers are restored
    afterwards. Yields the list of SIGTERMs received."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received  # signal handlers can only be set in the main thread
        return

    retries: list[threading.Timer] = []

    def put_off(handler: Callable) -> Callable:
        def handle(signum, frame) -> None:
            if _unsafe_to_interrupt(frame):  # the signal comes again shortly
                retry = threading.Timer(SIGNAL_RETRY_S, os.kill, (os.getpid(), signum))
                retry.daemon = True
                retries[:] = [waiting for waiting in retries if waiting.is_alive()]
                retries.append(retry)
                retry.start()
                return
            handler(signum, frame)
        return handle

    def terminate(signum, frame) -> None:
        if received:
            return
        received.append(signum)
        raise Terminated

    previous = {signal.SIGTERM: signal.getsignal(signal.SIGTERM), signal.SIGINT: signal.getsignal(signal.SIGINT)}
    signal.signal(signal.SIGTERM, put_off(terminate))
    if callable(previous[signal.SIGINT]):  # not where it is ignored (a background job) or left to the system
        signal.signal(signal.SIGINT, put_off(previous[signal.SIGINT]))
    try:
        yield received
    finally:
        try:
            for retry in retries:  # none may come once the previous handlers are back
                retry.cancel()
                retry.join()
        finally:
            for signum, handler in previous.items():
                if handler is not None:  # None: set outside Python, and left so
                    signal.signal(signum, handler)


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the interpreter's
    final flush does not fail again (the Python docs' recipe)."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (tests capture stdout)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)


@contextmanager
def _progress_bar(enabled: bool):
    """A callback ``update(reads_done)`` that drives a rich progress line on
    stderr, or None when disabled."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    started = time.perf_counter()
    columns = (
        SpinnerColumn(),
        TextColumn("{task.completed:,} reads screened"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
    )
    # no redirection: stdout carries the PAF, never the console
    with Progress(*columns, console=Console(stderr=True), transient=True,
                  redirect_stdout=False, redirect_stderr=False) as bar:
        task = bar.add_task("screening", total=None, rate="")

        def update(reads_done: int) -> None:
            elapsed = time.perf_counter() - started
            rate = f"{reads_done / elapsed:,.0f} reads/s" if elapsed > 0 else ""
            bar.update(task, completed=reads_done, rate=rate)

        yield update


def _show_progress(quiet: bool, output: str | None) -> bool:
    """Progress only on a terminal, and not while PAF lines go to that terminal too."""
    if quiet or not sys.stderr.isatty():
        return False
    paf_to_stdout = output in (None, "-")
    return not (paf_to_stdout and sys.stdout.isatty())


def _version(context: click.Context, option: click.Parameter, value: bool) -> None:
    if value:
        from bpbc import __version__

        print(f"{PROG} {__version__}")
        context.exit(EXIT_OK)


#: the words of the options that take one of a few, the first the default
DEVICES, ACTIONS = ("auto", "cpu", "gpu"), ("none", "trim", "mask")
ADAPTER_KINDS, TRIM_STRANDS = ("3prime", "5prime", "anywhere"), ("forward", "both")


def _value(*names: str, help: str, metavar: str = "FILE"):
    """An option that takes a value (a path, unless ``metavar`` says otherwise), no default."""
    return click.option(*names, metavar=metavar, show_default=False, help=help)


def _choice(name: str, words: tuple[str, ...], help: str):
    return click.option(name, type=click.Choice(words), default=words[0], help=help)


@click.command(
    help="Screen every read against every pattern with exact Smith-Waterman local alignment (affine gaps) and "
    "report the (read, pattern, strand) triples whose score reaches the threshold, as PAF.\n\n"
    "READS: FASTA or FASTQ, plain or compressed (gz, bz2, xz, zst); '-' reads stdin. Several files: each is "
    "screened whole (with --dask: by one worker), outputs named by {stem}.\n\n"
    "PATTERNS: the patterns (adapters, primers, ...), FASTA or FASTQ, one or many records; IUPAC codes allowed.",
    no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
# READS is variadic and PATTERNS the last argument (as cp's SOURCE... DEST)
@click.argument("reads", nargs=-1)
@click.argument("patterns")
@click.option("--threshold", "-t", type=int, metavar="N", show_default=False,
              help=f"Report instances whose local alignment score is at least this [default: {DEFAULT_THRESHOLD}].")
@click.option("--min-score-fraction", type=float, metavar="F", show_default=False,
              help="Instead of --threshold: each pattern's threshold is ceil(F x match x its length), 0 < F <= 1. "
              "'threshold=N' in a pattern's header overrides both.")
@_value("--reads2", "-2", help="Second mates of paired reads (same formats as READS); READS holds the first mates.")
@click.option("--interleaved", is_flag=True, show_default=False, help="READS holds pairs: mate 1, mate 2, mate 1, ...")
@_choice("--pair-filter", PAIR_FILTERS, "Paired reads: a pair passes when any mate passes, or only when both do.")
@_value("--output", "-o", help="Write PAF here instead of stdout (compressed by name: .gz, .bz2, .xz, .zst).")
@_value("--matched", help="Write the reads that pass for some pattern here, unchanged (same format as the input); "
        "with {name} in the path, one file per pattern (the best hit's).")
@_value("--unmatched", help="Write the reads that pass for no pattern here, unchanged.")
@_value("--matched2", help="Paired reads: the second mates of the passing pairs (--matched takes the first).")
@_value("--unmatched2", help="Paired reads: the second mates of the other pairs.")
@_choice("--action", ACTIONS, "What to do with the adapters found: nothing, trim them (--matched then receives the "
         "trimmed reads) or mask them with N (docs/trimming.md).")
@_choice("--adapter-kind", ADAPTER_KINDS, "Where a pattern is cut from: a 3' adapter (its hit and everything after it), "
         "a 5' adapter (its hit and everything before it) or anywhere; 'adapter=KIND' in a pattern's header "
         "overrides it.")
@click.option("--min-overlap", type=int, default=3, metavar="N",
              help="Trim an adapter cut off by the read's end down to N bases (a 3' adapter's first bases at the "
              "read's end, a 5' adapter's last bases at its start).")
@_choice("--trim-strand", TRIM_STRANDS, "Trim or mask the forward-strand hits only, or the reverse-strand hits too "
         "(needs --strand both).")
@click.option("--min-length", type=int, metavar="N", show_default=False,
              help="With --action: drop reads (pairs) with a read shorter than N bases after trimming.")
@_value("--trimmed", help="With --action: write every read here, trimmed (masked) where an adapter was found, in input "
        "order.")
@_value("--trimmed2", help="Paired reads: the second mates for --trimmed.")
@_value("--json", "json_path", help="Write the summary as JSON here.")
@_value("--report", help="Write an HTML report with plots here: one file, no network needed (docs/report.md).")
@_value("--multiqc", help="Write MultiQC custom content here (a name ending in _mqc.json): a bpbc section in MultiQC's "
        "report.")
@click.option("--match", type=int, default=2, metavar="N", help="Score of a matching base.")
@click.option("--mismatch", type=int, default=3, metavar="N", help="Penalty of a mismatching base.")
@click.option("--gap-open", type=int, default=5, metavar="N",
              help="Gap opening penalty: a gap of length k costs gap-open + k * gap-extend.")
@click.option("--gap-extend", type=int, default=2, metavar="N", help="Gap extension penalty per base.")
@_choice("--strand", tuple(STRANDS), "Screen the reverse complement too (both) or not (forward).")
@click.option("--exact-scores", is_flag=True, show_default=False,
              help="Have the engine compute every score exactly, not only up to the threshold's bit width (slower; "
              "the PAF output is the same).")
@_choice("--device", DEVICES, "Where to screen: auto (GPU if usable, else CPU), cpu or gpu.")
@click.option("--threads", type=click.IntRange(min=1), metavar="N", show_default=False,
              help="CPU threads for the engine (default: all cores).")
@click.option("--eqx", is_flag=True, show_default=False, help="Write = and X instead of M in CIGARs.")
@click.option("--ends", type=click.IntRange(min=1), metavar="N", show_default=False,
              help="Screen only the first and last N bases of each read (adapters and barcodes of long reads); "
              "coordinates stay the read's.")
@click.option("--chunk-size", type=click.IntRange(min=1), metavar="N", show_default=False,
              help=f"Reads screened per batch (default: {DEFAULT_CHUNK_SIZE}, fewer with many patterns); "
              "memory grows with it.")
@click.option("--quiet", "-q", is_flag=True, show_default=False, help="No summary and no progress bar on stderr.")
@_value("--reads-from", metavar="LIST",
        help="Screen the reads files listed in LIST (one path a line; with --dask), besides any READS.")
@_value("--dask", metavar="ADDRESS",
        help="Screen on a Dask cluster: the scheduler's address (tcp://host:8786), or local[:N] for N workers on this "
        "machine (CPU processes; with --device gpu one dask-cuda worker per GPU).")
@_value("--dask-scheduler-file",
        help="Screen on the Dask cluster whose scheduler wrote FILE (dask scheduler --scheduler-file FILE).")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Print the version and exit.")
def screen_command(**options) -> None:
    # the body is a plain function: mutation testing (scripts/mutation.py) reaches it, as it does no decorated one
    _screen(**options)


def _screen(reads, patterns, threshold, min_score_fraction, reads2, interleaved, pair_filter, output, matched,
            unmatched, matched2, unmatched2, action, adapter_kind, min_overlap, trim_strand, min_length, trimmed,
            trimmed2, json_path, report, multiqc, match, mismatch, gap_open, gap_extend, strand, exact_scores, device,
            threads, eqx, ends, chunk_size, quiet, reads_from, dask, dask_scheduler_file) -> None:
    """The command's options checked, the run, its errors as exit statuses."""
    try:
        scoring = Scoring(match, mismatch, gap_open, gap_extend)
    except ValueError as error:
        _error(str(error))
        raise Exit(EXIT_ERROR) from None
    if threshold is not None and min_score_fraction is not None:
        _error("give --threshold or --min-score-fraction, not both")
        raise Exit(EXIT_ERROR)
    settings = ScreenSettings(
        threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
        min_score_fraction=min_score_fraction,
        pair_filter=pair_filter,
        scoring=scoring,
        strand=strand,
        device=device,
        exact_scores=exact_scores,
        eqx=eqx,
        threads=threads,
        chunk_size=chunk_size,
        action=action,
        adapter_kind=adapter_kind,
        min_overlap=min_overlap,
        trim_strand=trim_strand,
        min_length=min_length,
        ends=ends,
    )
    started = time.perf_counter()
    reads_files = _reads_files(reads or [], patterns, reads_from)
    distributed = dask is not None or dask_scheduler_file is not None
    many = reads_from is not None or len(reads_files) > 1
    from bpbc.engines import set_up_process  # numpy: the run's modules load from here on

    set_up_process()  # before numba may load its OpenMP runtime
    if device != "cpu" and not distributed and not many:
        from bpbc.gpu_engine import warm_up_in_background

        warm_up_in_background()  # the GPU's set-up beside the reading, where there is one
    try:
        trimming = action != "none" or trimmed is not None or trimmed2 is not None
        paired = reads2 is not None or interleaved or matched2 is not None or unmatched2 is not None
        if distributed and trimming:
            raise InputError("--action trim or mask runs on one host, not with --dask")
        if dask is not None and dask_scheduler_file is not None:
            raise InputError("give --dask or --dask-scheduler-file, not both")
        if distributed and paired:
            raise InputError("paired reads (--reads2, --interleaved) are not supported with --dask")
        if many and trimming:
            raise InputError("--action trim or mask takes one reads file, not several (or --reads-from)")
        if many and paired:
            raise InputError("paired reads (--reads2, --interleaved) take one reads file, not several (or --reads-from)")
        from bpbc.report import RunInfo, report_files  # no plotting library until a report is written

        with report_files(*_report_paths(report, multiqc, reads_files, many)) as report_outputs:
            if distributed:
                summaries = _screen_on_dask(dask, dask_scheduler_file, reads_files, patterns, settings, quiet,
                                            output=output, matched=matched, unmatched=unmatched, json_path=json_path,
                                            many=many)
            elif many:
                summaries = _screen_many_here(reads_files, patterns, settings, quiet, output=output, matched=matched,
                                              unmatched=unmatched, json_path=json_path)
            else:
                summaries = [_screen_here(reads_files[0], patterns, settings, quiet, reads2=reads2,
                                          interleaved=interleaved, output=output, matched=matched,
                                          unmatched=unmatched, matched2=matched2, unmatched2=unmatched2,
                                          trimmed=trimmed, trimmed2=trimmed2, json_path=json_path)]
            summary = summaries[0]
            if many:
                from bpbc.summary import combined_summary

                summary = combined_summary(summaries, time.perf_counter() - started)
            from bpbc.engines import usable_cores

            run = RunInfo.now(shlex.join([PROG, *_ARGUMENTS.get()]), settings.threads or usable_cores())
            report_outputs.write(run, summaries, summary if many else None)
    except InputError as error:
        _error(str(error))
        raise Exit(EXIT_ERROR) from None
    except BrokenPipeError:
        _silence_stdout()
        raise Exit(EXIT_BROKEN_PIPE) from None
    except OSError as error:
        if error.errno is None:
            raise  # not the system's answer: an internal error
        # reading errors are InputErrors already: writing failed (disk full, quota, file too large, I/O error)
        where = f"{error.filename}: " if error.filename else ""
        _error(f"{where}cannot write the outputs: {error.strerror or error}")
        raise Exit(EXIT_ERROR) from None
    except Terminated:
        _error("terminated (SIGTERM)")
        raise Exit(EXIT_TERMINATED) from None
    except KeyboardInterrupt:
        _error("interrupted")
        raise Exit(EXIT_INTERRUPTED) from None
    if not quiet:
        print(summary.format(), file=sys.stderr)


def _reads_files(reads: list[str], patterns: str, reads_from: str | None) -> list[str]:
    """The reads files: the READS arguments, then those listed in --reads-from;
    none (or no PATTERNS) is a usage error."""
    if not reads and reads_from is None:
        raise click.BadParameter("missing: give one or more reads files before PATTERNS (or --reads-from LIST)",
                                 param_hint="'READS'")
    if reads_from is None:
        return list(reads)
    try:
        with open(reads_from) as listing:
            listed = [line.strip() for line in listing]
    except OSError as error:
        _error(f"{reads_from}: cannot read the list of reads files: {error.strerror or error}")
        raise Exit(EXIT_ERROR) from None
    files = list(reads) + [line for line in listed if line and not line.startswith("#")]
    if not files:
        _error(f"{reads_from}: lists no reads files")
        raise Exit(EXIT_ERROR)
    return files


def _report_paths(report, multiqc, reads_files: list[str], many: bool) -> tuple[str | None, str | None]:
    """The report's and the MultiQC file's paths, {stem} filled (one reads
    file); with several reads files each is one file for the run."""
    from bpbc.distributed import STEM_FIELD, fill_stem  # no Dask in it

    paths = (report, multiqc)
    for path, option in zip(paths, ("--report", "--multiqc")):
        if path is not None and STEM_FIELD in path and (many or reads_files[0] == "-"):
            raise InputError(f"{option} is one file for the run: {STEM_FIELD} needs a single reads file")
    if many or reads_files[0] == "-":
        return paths
    return fill_stem(report, reads_files[0]), fill_stem(multiqc, reads_files[0])


def _screen_here(reads, patterns, settings, quiet, output, matched, unmatched, json_path, **paired):
    """The local run: one process, on this host's CPU or every GPU it sees (docs/gpu.md)."""
    from bpbc.distributed import fill_stem  # no Dask in it
    from bpbc.pipeline import screen_files  # numba and the engines: imported where a run needs them

    if reads != "-":  # {stem}: the reads file's name, as with --dask
        output, matched, unmatched, json_path = (fill_stem(path, reads) for path in (output, matched, unmatched,
                                                                                      json_path))
        paired = {kind: fill_stem(path, reads) if kind in ("matched2", "unmatched2", "trimmed", "trimmed2") else path
                  for kind, path in paired.items()}
    def compiling() -> None:  # said once, when the kernels' cache turns out cold
        print(f"{PROG}: {COMPILE_NOTICE}", file=sys.stderr, flush=True)

    # the notice on a terminal only, as the progress bar: in a log an expected
    # error stays one line, and the summary says how long the compiling took
    notice = compiling if not quiet and sys.stderr.isatty() else None
    with _progress_bar(_show_progress(quiet, output)) as progress, watching_compiles(notice):
        return screen_files(reads, patterns, settings, output=output, matched=matched, unmatched=unmatched,
                            json_path=json_path, progress=progress, **paired)


def _screen_many_here(reads_files, patterns, settings, quiet, output, matched, unmatched, json_path):
    """Several reads files on this host, each screened whole, several at once
    where the host has the GPUs or cores for it (bpbc.many_files)."""
    from bpbc.many_files import screen_many_files

    with _progress_bar(_show_progress(quiet, output)) as progress:
        return screen_many_files(reads_files, patterns, settings, output=output, matched=matched,
                                 unmatched=unmatched, json_path=json_path, progress=progress)


def _screen_on_dask(address, scheduler_file, reads_files, patterns, settings, quiet, output, matched, unmatched,
                    json_path, many):
    """The run on a Dask cluster: one file sharded by chunks, or many files, one task each; the summary of
    each file (the options are checked already)."""
    from bpbc import distributed as dd

    if not gc.isenabled():  # off in the command's own process (bpbc.server.command): its Dask client may run for hours
        gc.freeze()  # what the command has loaded lives until it ends: out of the collector's passes
        gc.enable()
    with ExitStack() as stack:
        workers = False if address is None else dd.parse_local(address)
        if workers is not False:  # local[:N]
            device = settings.device
            if device == "auto":
                from bpbc.engines import gpu_unavailable_reason

                device = "gpu" if gpu_unavailable_reason() is None else "cpu"
            cluster = stack.enter_context(dd.local_cluster(workers, device))
            from distributed import Client

            client = stack.enter_context(Client(cluster, set_as_default=False))
        else:
            client = stack.enter_context(dd.connect(address, scheduler_file))
        reads = reads_files if many else reads_files[0]
        with _progress_bar(_show_progress(quiet, output)) as progress:
            result = dd.screen_distributed(client, reads, patterns, settings, output=output, matched=matched,
                                           unmatched=unmatched, json_path=json_path, progress=progress)
    return result if many else [result]


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    terminated: list[int] = []
    _ARGUMENTS.set(tuple(args))
    try:
        with _interrupts() as terminated:
            screen_command.main(args=args, prog_name=PROG, standalone_mode=True)
    except SystemExit as exit_:
        if terminated:
            return EXIT_TERMINATED  # also where click turned it into "Aborted!" (while parsing)
        code = exit_.code
        if code is None:
            return EXIT_OK
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return EXIT_ERROR
    except Terminated:
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 - a bug: one line (the run has cleaned up), no traceback
        return _internal_error(error)
    return EXIT_OK


def run() -> None:
    """Console entry point of ``bpbc-screen``."""
    status = main()
    # Every output is committed or removed by now; end without the
    # interpreter's teardown. After a run it took 0.3 s (numba's compiled
    # code and LLVM freed object by object, on a 2-core Skylake-SP), and
    # after an interrupt a reader thread may still be blocked reading its
    # input (a pipe whose writer is idle) holding the stream's lock, which the
    # teardown would wait for and then abort. The exit handlers still run.
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)
