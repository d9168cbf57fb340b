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
import functools
import gc
import os
import shlex
import signal
import sys
import threading
import time
import traceback
from contextlib import ExitStack, contextmanager
from enum import Enum
from typing import Annotated, Callable, Optional

import typer

from bpbc.compile_watch import COMPILE_NOTICE, watching_compiles
from bpbc.errors import InputError, InternalError, one_line
from bpbc.scoring import Scoring
from bpbc.settings import DEFAULT_CHUNK_SIZE, DEFAULT_THRESHOLD, ScreenSettings

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


class Strand(str, Enum):
    both = "both"
    forward = "forward"


class PairFilter(str, Enum):
    any = "any"
    both = "both"


class Action(str, Enum):
    none = "none"
    trim = "trim"
    mask = "mask"


class AdapterKind(str, Enum):
    three_prime = "3prime"
    five_prime = "5prime"
    anywhere = "anywhere"


class TrimStrand(str, Enum):
    forward = "forward"
    both = "both"


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    gpu = "gpu"


app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


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


def _version(value: bool) -> None:
    if value:
        from bpbc import __version__

        print(f"{PROG} {__version__}")
        raise typer.Exit(EXIT_OK)


@app.command(
    help="Screen every read against every pattern with exact Smith-Waterman local alignment "
    "(affine gaps) and report the (read, pattern, strand) triples whose score reaches the "
    "threshold, as PAF.",
    no_args_is_help=True,
)
def screen_command(
    # READS is variadic and PATTERNS the last argument (as cp's SOURCE... DEST): the old
    # style of defaults, since Python wants the required PATTERNS (default ...) after it
    reads: Optional[list[str]] = typer.Argument(
        None, metavar="READS", show_default=False,
        help="Reads: FASTA or FASTQ, plain or compressed (gz, bz2, xz, zst); '-' reads stdin. Several files: "
        "each is screened whole (with --dask: by one worker), outputs named by {stem}."),
    patterns: str = typer.Argument(
        ..., metavar="PATTERNS", show_default=False,
        help="Patterns (adapters, primers, ...): FASTA or FASTQ, one or many records; IUPAC codes allowed."),
    threshold: Annotated[Optional[int], typer.Option(
        "--threshold", "-t", show_default=False,
        help=f"Report instances whose local alignment score is at least this [default: {DEFAULT_THRESHOLD}].")] = None,
    min_score_fraction: Annotated[Optional[float], typer.Option(
        "--min-score-fraction", metavar="F", show_default=False,
        help="Instead of --threshold: each pattern's threshold is ceil(F x match x its length), 0 < F <= 1. "
        "'threshold=N' in a pattern's header overrides both.")] = None,
    reads2: Annotated[Optional[str], typer.Option(
        "--reads2", "-2", metavar="FILE", show_default=False,
        help="Second mates of paired reads (same formats as READS); READS holds the first mates.")] = None,
    interleaved: Annotated[bool, typer.Option(
        "--interleaved", help="READS holds pairs: mate 1, mate 2, mate 1, ...")] = False,
    pair_filter: Annotated[PairFilter, typer.Option(
        "--pair-filter", help="Paired reads: a pair passes when any mate passes, or only when both do.")
    ] = PairFilter.any,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", metavar="FILE", show_default=False,
        help="Write PAF here instead of stdout (compressed by name: .gz, .bz2, .xz, .zst).")] = None,
    matched: Annotated[Optional[str], typer.Option(
        "--matched", metavar="FILE", show_default=False,
        help="Write the reads that pass for some pattern here, unchanged (same format as the input); "
        "with {name} in the path, one file per pattern (the best hit's).")] = None,
    unmatched: Annotated[Optional[str], typer.Option(
        "--unmatched", metavar="FILE", show_default=False,
        help="Write the reads that pass for no pattern here, unchanged.")] = None,
    matched2: Annotated[Optional[str], typer.Option(
        "--matched2", metavar="FILE", show_default=False,
        help="Paired reads: the second mates of the passing pairs (--matched takes the first).")] = None,
    unmatched2: Annotated[Optional[str], typer.Option(
        "--unmatched2", metavar="FILE", show_default=False,
        help="Paired reads: the second mates of the other pairs.")] = None,
    action: Annotated[Action, typer.Option(
        "--action", help="What to do with the adapters found: nothing, trim them (--matched then receives the "
        "trimmed reads) or mask them with N (docs/trimming.md).")] = Action.none,
    adapter_kind: Annotated[AdapterKind, typer.Option(
        "--adapter-kind", help="Where a pattern is cut from: a 3' adapter (its hit and everything after it), a "
        "5' adapter (its hit and everything before it) or anywhere; 'adapter=KIND' in a pattern's header "
        "overrides it.")] = AdapterKind.three_prime,
    min_overlap: Annotated[int, typer.Option(
        "--min-overlap", metavar="N",
        help="Trim an adapter cut off by the read's end down to N bases (a 3' adapter's first bases at the "
        "read's end, a 5' adapter's last bases at its start).")] = 3,
    trim_strand: Annotated[TrimStrand, typer.Option(
        "--trim-strand", help="Trim or mask the forward-strand hits only, or the reverse-strand hits too "
        "(needs --strand both).")] = TrimStrand.forward,
    min_length: Annotated[Optional[int], typer.Option(
        "--min-length", metavar="N", show_default=False,
        help="With --action: drop reads (pairs) with a read shorter than N bases after trimming.")] = None,
    trimmed: Annotated[Optional[str], typer.Option(
        "--trimmed", metavar="FILE", show_default=False,
        help="With --action: write every read here, trimmed (masked) where an adapter was found, in input "
        "order.")] = None,
    trimmed2: Annotated[Optional[str], typer.Option(
        "--trimmed2", metavar="FILE", show_default=False,
        help="Paired reads: the second mates for --trimmed.")] = None,
    json_path: Annotated[Optional[str], typer.Option(
        "--json", metavar="FILE", show_default=False, help="Write the summary as JSON here.")] = None,
    report: Annotated[Optional[str], typer.Option(
        "--report", metavar="FILE", show_default=False,
        help="Write an HTML report with plots here: one file, no network needed (docs/report.md).")] = None,
    multiqc: Annotated[Optional[str], typer.Option(
        "--multiqc", metavar="FILE", show_default=False,
        help="Write MultiQC custom content here (a name ending in _mqc.json): a bpbc section in MultiQC's report.")
    ] = None,
    match: Annotated[int, typer.Option("--match", help="Score of a matching base.")] = 2,
    mismatch: Annotated[int, typer.Option("--mismatch", help="Penalty of a mismatching base.")] = 3,
    gap_open: Annotated[int, typer.Option(
        "--gap-open", help="Gap opening penalty: a gap of length k costs gap-open + k * gap-extend.")] = 5,
    gap_extend: Annotated[int, typer.Option("--gap-extend", help="Gap extension penalty per base.")] = 2,
    strand: Annotated[Strand, typer.Option(
        "--strand", help="Screen the reverse complement too (both) or not (forward).")] = Strand.both,
    exact_scores: Annotated[bool, typer.Option(
        "--exact-scores", help="Have the engine compute every score exactly, not only up to the "
        "threshold's bit width (slower; the PAF output is the same).")] = False,
    device: Annotated[Device, typer.Option(
        "--device", help="Where to screen: auto (GPU if usable, else CPU), cpu or gpu.")] = Device.auto,
    threads: Annotated[Optional[int], typer.Option(
        "--threads", min=1, metavar="N", show_default=False,
        help="CPU threads for the engine (default: all cores).")] = None,
    eqx: Annotated[bool, typer.Option("--eqx", help="Write = and X instead of M in CIGARs.")] = False,
    ends: Annotated[Optional[int], typer.Option(
        "--ends", min=1, metavar="N", show_default=False,
        help="Screen only the first and last N bases of each read (adapters and barcodes of long reads); "
        "coordinates stay the read's.")] = None,
    chunk_size: Annotated[Optional[int], typer.Option(
        "--chunk-size", min=1, metavar="N", show_default=False,
        help=f"Reads screened per batch (default: {DEFAULT_CHUNK_SIZE}, fewer with many patterns); "
        "memory grows with it.")] = None,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="No summary and no progress bar on stderr.")] = False,
    reads_from: Annotated[Optional[str], typer.Option(
        "--reads-from", metavar="LIST", show_default=False,
        help="Screen the reads files listed in LIST (one path a line), besides any READS.")] = None,
    dask: Annotated[Optional[str], typer.Option(
        "--dask", metavar="ADDRESS", show_default=False,
        help="Screen on a Dask cluster: the scheduler's address (tcp://host:8786), or local[:N] for N workers "
        "on this machine (CPU processes; with --device gpu one dask-cuda worker per GPU).")] = None,
    dask_scheduler_file: Annotated[Optional[str], typer.Option(
        "--dask-scheduler-file", metavar="FILE", show_default=False,
        help="Screen on the Dask cluster whose scheduler wrote FILE (dask scheduler --scheduler-file FILE).")] = None,
    version: Annotated[Optional[bool], typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = None,
) -> None:
    # the body is a plain function: mutation testing (scripts/mutation.py) reaches it, as it does no decorated one
    options = dict(locals())
    del options["version"]  # handled by its callback
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
        raise typer.Exit(EXIT_ERROR) from None
    if threshold is not None and min_score_fraction is not None:
        _error("give --threshold or --min-score-fraction, not both")
        raise typer.Exit(EXIT_ERROR)
    settings = ScreenSettings(
        threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
        min_score_fraction=min_score_fraction,
        pair_filter=pair_filter.value,
        scoring=scoring,
        strand=strand.value,
        device=device.value,
        exact_scores=exact_scores,
        eqx=eqx,
        threads=threads,
        chunk_size=chunk_size,
        action=action.value,
        adapter_kind=adapter_kind.value,
        min_overlap=min_overlap,
        trim_strand=trim_strand.value,
        min_length=min_length,
        ends=ends,
    )
    started = time.perf_counter()
    reads_files = _reads_files(reads or [], patterns, reads_from)
    distributed = dask is not None or dask_scheduler_file is not None
    many = reads_from is not None or len(reads_files) > 1
    if not distributed and not many:
        _start_reading_early([reads_files[0], reads2], settings.threads)
    from bpbc.engines import set_up_process  # numpy: the run's modules load from here on

    set_up_process()  # before numba may load its OpenMP runtime
    if device is not Device.cpu and not distributed and not many:
        from bpbc.gpu_engine import warm_up_in_background

        warm_up_in_background()  # the GPU's set-up beside the reading, where there is one
    try:
        trimming = action is not Action.none or trimmed is not None or trimmed2 is not None
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
        raise typer.Exit(EXIT_ERROR) from None
    except BrokenPipeError:
        _silence_stdout()
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    except OSError as error:
        if error.errno is None:
            raise  # not the system's answer: an internal error
        # reading errors are InputErrors already: writing failed (disk full, quota, file too large, I/O error)
        where = f"{error.filename}: " if error.filename else ""
        _error(f"{where}cannot write the outputs: {error.strerror or error}")
        raise typer.Exit(EXIT_ERROR) from None
    except Terminated:
        _error("terminated (SIGTERM)")
        raise typer.Exit(EXIT_TERMINATED) from None
    except KeyboardInterrupt:
        _error("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        gzip_reader = sys.modules.get("bpbc.gzip_reader")
        if gzip_reader is not None:
            gzip_reader.close_unused()  # what _start_reading_early started and no run took
    if not quiet:
        print(summary.format(), file=sys.stderr)


def _start_reading_early(paths: list, threads: int | None) -> None:
    """Large gzip reads files' decompression started now, on the threads the
    run's plan gives reading (bpbc.gzip_reader.start_early): the child's
    start and first chunks then run beside the imports still to come."""
    from bpbc.gzip_reader import start_early
    from bpbc.resources import plan_run

    read_threads = plan_run(threads).read
    for path in paths:
        if path is not None and path != "-":
            start_early(path, read_threads)


def _reads_files(reads: list[str], patterns: str, reads_from: str | None) -> list[str]:
    """The reads files: the READS arguments, then those listed in --reads-from;
    none (or no PATTERNS) is a usage error."""
    if not reads and reads_from is None:
        raise typer.BadParameter("missing: give one or more reads files before PATTERNS (or --reads-from LIST)",
                                 param_hint="'READS'")
    if reads_from is None:
        return list(reads)
    try:
        with open(reads_from) as listing:
            listed = [line.strip() for line in listing]
    except OSError as error:
        _error(f"{reads_from}: cannot read the list of reads files: {error.strerror or error}")
        raise typer.Exit(EXIT_ERROR) from None
    files = list(reads) + [line for line in listed if line and not line.startswith("#")]
    if not files:
        _error(f"{reads_from}: lists no reads files")
        raise typer.Exit(EXIT_ERROR)
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


@functools.cache
def _command():
    """The click command behind :func:`main`, built once: typer takes about
    50 ms to build it from the signature, which matters when main() is called
    many times in one process (tests, fuzzing)."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    command = _command()
    args = sys.argv[1:] if argv is None else list(argv)
    terminated: list[int] = []
    _ARGUMENTS.set(tuple(args))
    try:
        with _interrupts() as terminated:
            command.main(args=args, prog_name=PROG, standalone_mode=True)
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
