"""``bpbc-screen``: screen reads against patterns, write PAF (a thin layer over bpbc.pipeline).

Exit status: 0 success, 1 bad input or option value (one-line message on
stderr), 2 usage error, 130 interrupted (Ctrl-C), 141 stdout closed early
(e.g. ``| head``).
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from enum import Enum
from typing import Annotated, Optional

import typer

from bpbc.io import InputError
from bpbc.pipeline import DEFAULT_CHUNK_SIZE, DEFAULT_THRESHOLD, ScreenSettings, screen_files
from bpbc.scoring import Scoring

PROG = "bpbc-screen"
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 0, 1, 2, 130, 141


class Strand(str, Enum):
    both = "both"
    forward = "forward"


class PairFilter(str, Enum):
    any = "any"
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
    reads: Annotated[str, typer.Argument(
        metavar="READS", show_default=False,
        help="Reads: FASTA or FASTQ, plain or compressed (gz, bz2, xz, zst); '-' reads stdin.")],
    patterns: Annotated[str, typer.Argument(
        metavar="PATTERNS", show_default=False,
        help="Patterns (adapters, primers, ...): FASTA or FASTQ, one or many records; IUPAC codes allowed.")],
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
    json_path: Annotated[Optional[str], typer.Option(
        "--json", metavar="FILE", show_default=False, help="Write the summary as JSON here.")] = None,
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
    chunk_size: Annotated[Optional[int], typer.Option(
        "--chunk-size", min=1, metavar="N", show_default=False,
        help=f"Reads screened per batch (default: {DEFAULT_CHUNK_SIZE}, fewer with many patterns); "
        "memory grows with it.")] = None,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="No summary and no progress bar on stderr.")] = False,
    version: Annotated[Optional[bool], typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = None,
) -> None:
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
    )
    try:
        with _progress_bar(_show_progress(quiet, output)) as progress:
            summary = screen_files(
                reads,
                patterns,
                settings,
                reads2=reads2,
                interleaved=interleaved,
                output=output,
                matched=matched,
                unmatched=unmatched,
                matched2=matched2,
                unmatched2=unmatched2,
                json_path=json_path,
                progress=progress,
            )
    except InputError as error:
        _error(str(error))
        raise typer.Exit(EXIT_ERROR) from None
    except BrokenPipeError:
        _silence_stdout()
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    except KeyboardInterrupt:
        _error("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if not quiet:
        print(summary.format(), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    command = typer.main.get_command(app)
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        command.main(args=args, prog_name=PROG, standalone_mode=True)
    except SystemExit as exit_:
        code = exit_.code
        if code is None:
            return EXIT_OK
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


def run() -> None:
    """Console entry point of ``bpbc-screen``."""
    sys.exit(main())
