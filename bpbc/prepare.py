"""Compile bpbc's CPU kernels ahead, on every core: ``python -m bpbc.prepare``.

The first run on a machine compiles numba kernels for it (and for each new
bit-plane count a threshold needs), one at a time: numba compiles under one
lock per process, so a thread beside the run would gain nothing. This
compiles them ahead (after an install, when an image is built, on the node
type that will run the jobs: the kernels are specific to the CPU), in
several processes at once: the engine's kernel for each plane count, the
traceback's serial and parallel kernels (the parallel CIGAR writer of
batches of many hits, and long hits' start and band passes among them),
trimming's end-overlap pass for adapters up to about 64 bp, and what only
large inputs reach (the block parser's search for a record start, the
parallel scan, encoder and packing), and the command itself on a small
generated FASTQ (reading, encoding, formatting and writing), which finds the
others cached as it reaches them. Then the command runs on the other input
kinds (gzip, FASTA, paired, interleaved, one file per pattern, trimmed,
masked, long reads screened as windows, with and without --ends), which
compiles what only they use. Runs that set their thresholds per pattern
(``--min-score-fraction``, ``threshold=`` in headers) give prepare their
patterns (``--patterns``, and the fraction) for those thresholds' kernels. Everything goes to the caches a run reads
(``~/.cache/bpbc`` or ``BPBC_CACHE_DIR``, and numba's beside bpbc's modules
or in ``NUMBA_CACHE_DIR``).

    python -m bpbc.prepare [-t T ...] [--patterns FASTA [--min-score-fraction F]]
                           [--match 2 --mismatch 3 --gap-open 5 --gap-extend 2]
                           [--device auto|cpu|gpu] [--jobs N]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bpbc.settings import DEFAULT_THRESHOLD

#: the command's default threshold
DEFAULT_THRESHOLDS = (DEFAULT_THRESHOLD,)
#: from this many bit planes the CPU engine screens in two passes (bpbc.screener.MIN_TWO_PASS_PLANES)
_MIN_TWO_PASS_PLANES = 4


def engine_kernels(thresholds, scoring: tuple[int, int, int, int] = (2, 3, 5, 2), exact_scores: bool = False
                   ) -> list[tuple[int, bool]]:
    """(planes, track_best) of every CPU engine kernel a screen at these
    thresholds runs: a threshold of b bits is screened without scores in
    fewer planes (one short, or fewer for long instances:
    bpbc.scoring.cpu_flag_planes), then with scores in b planes on the
    flagged instances (from 4 planes on), or in one pass of b planes."""
    from .scoring import Scoring, cpu_flag_plane_counts, score_planes

    kernels: set[tuple[int, bool]] = set()
    for threshold in thresholds:
        planes = score_planes(threshold)
        if planes >= _MIN_TWO_PASS_PLANES and not exact_scores:
            kernels.update((flags, False) for flags in cpu_flag_plane_counts(Scoring(*scoring), planes))
        kernels.add((planes, True))
    return sorted(kernels)


def patterns_thresholds(path, scoring, threshold: int, min_score_fraction: float | None = None) -> list[int]:
    """The thresholds a run over the patterns of ``path`` screens them at
    (bpbc.thresholds: their headers, the fraction, else ``threshold``): with
    --min-score-fraction every length of pattern has its own, and so perhaps
    a plane count that no -t gave."""
    from .io import display_name, read_patterns
    from .thresholds import pattern_thresholds

    found = pattern_thresholds(read_patterns(path), display_name(path), scoring, threshold, min_score_fraction)
    return sorted(set(found)) if isinstance(found, list) else [found]


# ---------------------------------------------------------------- tasks (one process each)

#: (what it is, a function of this module, its arguments): run in a worker process
Task = tuple[str, Callable[..., tuple[float, float]], tuple]


def _timed(work) -> tuple[float, float]:
    """(seconds compiling, seconds in all) of ``work()``."""
    from .compile_watch import watching_compiles

    started = time.perf_counter()
    with watching_compiles() as watch:
        work()
    return watch.seconds, time.perf_counter() - started


def _engine_task(planes: int, track_best: bool, scoring: tuple[int, int, int, int]) -> tuple[float, float]:
    from .cpu_engine import CpuEngine
    from .scoring import Scoring

    return _timed(lambda: CpuEngine(threads=1).compile_kernel(planes, Scoring(*scoring), track_best))


def _traceback_task(parallel: bool, scoring: tuple[int, int, int, int], cell_bits: int = 16) -> tuple[float, float]:
    """The traceback's kernels: the parallel ones from traceback._PARALLEL_FROM
    instances on; on int8 cells (short patterns: adapters, primers), int16
    cells (those of most other runs) or int32 cells (scores or reads too long
    for int16); against a short pattern and a long one (the
    score pass and windows of patterns many times a read's length). The
    int16 task aligns enough instances for the parallel CIGAR writer
    (traceback._CIGARS_PARALLEL_FROM hits a batch, the same kernel whatever
    the cells: a run with many hits compiled it for 2.3-2.8 s after a
    prepare that left it out)."""
    import numpy as np

    from .alphabet import encode_pattern, encode_reads
    from .patterns import PatternTable
    from .scoring import Scoring
    from .traceback import _CIGARS_PARALLEL_FROM, _PARALLEL_FROM, _run_batch

    def work() -> None:
        count = (_CIGARS_PARALLEL_FROM if cell_bits == 16 else _PARALLEL_FROM) if parallel else 1
        codes, lengths = encode_reads(["ACGTTGCAACGTAGGT"] * count)
        table = PatternTable.build([encode_pattern("ACGTTGCA"), encode_pattern("ACGTTGCAAC" * 8)], ("+", "-"))
        _run_batch(codes, lengths, np.arange(count), table, np.arange(count) % 4, Scoring(*scoring), False,
                   np.arange(count) % 2 == 1, cell_bits)

    return _timed(work)


def _packing_task(from_bytes: bool) -> tuple[float, float]:
    """The engine's packing of reads: from their bytes as read (the first
    pass), or from codes (the second pass's flagged reads, with the sorts
    and the layout of its lanes) and back from planes."""
    import numpy as np

    from transpose import unpack_flags, unpack_planes

    from .alphabet import encode_reads
    from .cpu_engine import PARALLEL_GROUPS, CpuEngine, PreparedReads, _second_pass_layout, lexsort2

    def work() -> None:
        engine = CpuEngine(threads=1)
        if from_bytes:
            engine.prepare_bytes(bytearray(b"ACGTACGTNNACGT"), np.array([0, 4], np.int64),
                                 np.array([4, 10], np.int64))
        else:
            codes, lengths = encode_reads(["ACGT", "ACGTTGCA"])
            engine.prepare(codes, lengths)
            PreparedReads(codes, lengths, np.array([1, 2, 0], np.int64), engine.words, padding=2)
            # ... and in parallel from PARALLEL_GROUPS groups of lanes on (a second pass of many reads)
            PreparedReads(codes, lengths, np.arange(PARALLEL_GROUPS * 64, dtype=np.int64) % 2, engine.words,
                          padding=2)
            lexsort2(lengths, np.array([1, 0], np.int64))
            box = np.array([[1, 2], [2, 1]], np.int64)  # columns of a table, out of order (traceback._banded)
            lexsort2(box[:, 0], box[:, 1])
            _second_pass_layout(np.array([1, 2], np.int64), engine.lanes)
            unpack_planes(np.zeros((1, 5), np.uint64), 64)
            unpack_flags(np.zeros(1, np.uint64), 64)

    return _timed(work)


def _block_parsing_task() -> tuple[float, float]:
    """The block parser's search for the first record of a block after the
    first (plain FASTQ read in blocks, bpbc.fastq_blocks): the commands'
    small files fit in one block and never reach it."""
    import numpy as np

    from .fastq_blocks import first_record

    block = np.frombuffer(b"x\n@r\nACGT\n+\nIIII\n", np.uint8).copy()  # writable, as the parser's buffers
    return _timed(lambda: first_record(block, 0, len(block), False))


def _encoding_task() -> tuple[float, float]:
    """The parallel encoder of reads (chunks of bpbc.chunks.ENCODE_PARALLEL_FROM
    reads or more, with more than one numba thread): the commands' files are
    smaller, and a GPU run reaches it when it encodes a batch's hit reads
    again for their traceback."""
    import numpy as np

    from .chunks import ENCODE_PARALLEL_FROM, _encode_sequences

    count = ENCODE_PARALLEL_FROM
    data = np.frombuffer(bytearray(b"ACGTN" * count), np.uint8).copy()  # writable, as the chunks' buffers
    starts = np.arange(count, dtype=np.int64) * 5
    return _timed(lambda: _encode_sequences(data, starts, np.full(count, 5, np.int64), str))


def _scanning_task() -> tuple[float, float]:
    """The parallel scan of plain FASTQ records (bpbc.fastq_scan: paired,
    interleaved, or single-end at 4-7 threads, a span of fastq_scan.MIN_SPAN
    bytes or more): the commands' files are smaller."""
    import numpy as np

    from .fastq_scan import SEGMENT, _scan_parallel

    buf = np.frombuffer(bytearray(b"@r\nACGT\n+\nIIII\n" * 4), np.uint8).copy()  # writable, as a chunk's buffer
    rec_start, seq_start, seq_len = np.empty(8, np.int64), np.empty(8, np.int64), np.empty(8, np.int64)
    return _timed(lambda: _scan_parallel(buf, 0, len(buf), 8, rec_start, seq_start, seq_len, SEGMENT))


#: end-overlap passes compiled ahead: 1 to this many planes (trimming adapters up to about 64 bp)
END_OVERLAP_PLANES = 8


def _end_overlap_task(planes: int, scoring: tuple[int, int, int, int]) -> tuple[float, float]:
    """Trimming's bit-sliced end-overlap pass of ``planes`` planes (its plane
    count follows the adapters' lengths and score fractions, not only the
    threshold: a 33 bp adapter at T = 36 took 5 planes where prepare's
    patterns took 4), called as end_overlap.Decision.flags calls it."""
    import numpy as np

    from .end_overlap import _NO_BYTES, _NO_COLUMNS, _NO_ROWS, kernel_module
    from .scoring import Scoring

    one = np.zeros(1, np.int64)
    return _timed(lambda: kernel_module(planes, Scoring(*scoring)).first_pass(
        _NO_BYTES, _NO_ROWS, _NO_ROWS, _NO_ROWS, 0, np.zeros(256, np.uint8), _NO_COLUMNS, 0, 0, one,
        np.zeros(2, np.int64), one, one, one, 16, 0, 1, np.zeros((0, 1), np.int32), _NO_ROWS))


def _long_traceback_task(pattern_length: int, count: int, scoring: tuple[int, int, int, int]) -> tuple[float, float]:
    """Hits of long reads against a long pattern, traced with the command's
    cell choice (cell_bits None): the start pass (int16 under 8192 pattern
    columns, else int32; parallel from _PARALLEL_CELLS cells) and the band of
    each hit on a lane of its own (no more hits than threads: serial for
    one, parallel for several with boxes of _PARALLEL_CELLS cells)."""
    import numpy as np

    from .alphabet import encode_pattern, encode_reads
    from .patterns import PatternTable
    from .scoring import Scoring
    from .traceback import _run_batch

    rng = np.random.default_rng(5)
    pattern = "".join(np.array(list("ACGT"))[rng.integers(0, 4, pattern_length)])
    codes, lengths = encode_reads([pattern[-3000:]] * count)  # a hit ending at the last column
    table = PatternTable.build([encode_pattern(pattern)], ("+",))
    return _timed(lambda: _run_batch(codes, lengths, np.arange(count), table, np.zeros(count, np.int64),
                                     Scoring(*scoring), False, np.zeros(count, bool), None))


def _alone_task(int32: bool, parallel: bool, scoring: tuple[int, int, int, int]) -> tuple[float, float]:
    """The score pass over instances each alone, a stripe of rows a lane
    (bpbc.traceback._score_skewed_runs: a few long pairs, or spans of
    windows), on int32 or int16 lanes, serial (end_cells on one thread) or
    parallel. The runs' kernels themselves: _score_skewed_instances tries
    int16 lanes first, and a small instance never reaches the int32 ones."""
    import numpy as np

    from .alphabet import encode_pattern, encode_reads
    from .patterns import PatternTable
    from .scoring import Scoring
    from .traceback import _score_skewed_runs

    def work() -> None:
        codes, lengths = encode_reads(["ACGTTGCAACGTAGGT" * 8])
        table = PatternTable.build([encode_pattern("ACGTTGCAAC" * 4)], ("+",))
        _score_skewed_runs(codes, lengths.astype(np.int64), np.zeros(1, np.int64), table, np.zeros(1, np.int64), int32,
                           Scoring(*scoring), 2 if parallel else 1)

    return _timed(work)


def _command_task(argv: list[str]) -> tuple[float, float]:
    from .cli import main

    def work() -> None:
        status = main(argv)
        if status != 0:
            raise RuntimeError(f"bpbc-screen {' '.join(argv)} exited with status {status}")

    return _timed(work)


# ---------------------------------------------------------------- inputs

_BASES = "ACGT"


def _write_inputs(directory: Path, thresholds, match: int, seed: int = 27) -> dict[str, Path]:
    """Patterns, one a threshold (given in its header), and reads of every
    input kind, a third of them carrying a pattern (some reverse complemented)."""
    import random

    rng = random.Random(seed)

    def sequence(length: int) -> str:
        return "".join(rng.choice(_BASES) for _ in range(length))

    patterns = [sequence(max(12, math.ceil(t / match) + 4)) for t in thresholds]
    paths = {name: directory / name for name in ("patterns.fa", "reads.fq", "reads.fq.gz", "reads.fa", "reads_2.fq",
                                                 "interleaved.fq", "long.fq")}
    paths["patterns.fa"].write_text("".join(f">p{k} threshold={t}\n{p}\n" for k, (t, p) in enumerate(zip(thresholds,
                                                                                                         patterns))))
    complement = str.maketrans("ACGT", "TGCA")
    reads = []
    for i in range(300):
        read = sequence(rng.randint(40, 150))
        if i % 3 == 0:
            carried = patterns[i // 3 % len(patterns)]
            carried = carried if i % 2 else carried.translate(complement)[::-1]
            at = rng.randint(0, len(read))
            read = read[:at] + carried + read[at:]
        reads.append((f"r{i}", read))
    fastq = "".join(f"@{name}\n{read}\n+\n{'I' * len(read)}\n" for name, read in reads)
    paths["reads.fq"].write_text(fastq)
    paths["reads.fa"].write_text("".join(f">{name}\n{read}\n" for name, read in reads))
    import gzip

    paths["reads.fq.gz"].write_bytes(gzip.compress(fastq.encode(), compresslevel=1))
    mates = [(name, sequence(rng.randint(40, 150))) for name, _ in reads]
    paths["reads_2.fq"].write_text("".join(f"@{name}\n{read}\n+\n{'I' * len(read)}\n" for name, read in mates))
    # long reads (screened as windows, bpbc.windows), a few carrying the patterns
    long_reads = [sequence(6000) + (patterns[i % len(patterns)] if i % 4 == 0 else "") + sequence(3000)
                  for i in range(40)]
    paths["long.fq"].write_text("".join(f"@l{i}\n{read}\n+\n{'I' * len(read)}\n" for i, read in enumerate(long_reads)))
    paths["interleaved.fq"].write_text("".join(f"@{n1}\n{r1}\n+\n{'I' * len(r1)}\n@{n2}\n{r2}\n+\n{'I' * len(r2)}\n"
                                               for (n1, r1), (n2, r2) in zip(reads, mates)))
    return paths


# ---------------------------------------------------------------- the whole

def prepare(thresholds=DEFAULT_THRESHOLDS, scoring: tuple[int, int, int, int] = (2, 3, 5, 2), device: str = "auto",
            jobs: int | None = None, log=None) -> dict[str, float]:
    """Compile (or find cached) every kernel the command uses at these
    thresholds and this scoring, ``jobs`` processes at once (default: the
    usable cores); ``log(line)`` hears what each step took. Returns the
    seconds of the whole, the seconds spent compiling (all processes
    together; near 0 where everything was cached) and the processes."""
    from .resources import usable_cores

    thresholds = sorted(set(int(t) for t in thresholds))
    jobs = max(1, jobs or usable_cores())
    log = log or (lambda line: None)
    started = time.perf_counter()
    options = ["--match", str(scoring[0]), "--mismatch", str(scoring[1]), "--gap-open", str(scoring[2]),
               "--gap-extend", str(scoring[3]), "--device", device, "-q"]
    with tempfile.TemporaryDirectory(prefix="bpbc-prepare-") as work:
        directory = Path(work)
        paths = _write_inputs(directory, thresholds, scoring[0])
        patterns, out = str(paths["patterns.fa"]), str(directory / "out")

        def command(name: str, *args: str) -> Task:
            return f"bpbc-screen on {name}", _command_task, ([*args, *options, "-o", f"{out}.{len(name)}.paf"],)

        # first the kernels that need no files, in groups that share none
        kernels: list[Task] = [(f"traceback ({'parallel' if parallel else 'serial'}, int{bits} cells)", _traceback_task,
                                (parallel, scoring, bits)) for bits in (8, 16, 32) for parallel in (True, False)]
        kernels.append(("the block parser", _block_parsing_task, ()))
        kernels.append(("the parallel encoder", _encoding_task, ()))
        kernels.append(("the parallel FASTQ scan", _scanning_task, ()))
        kernels += [(f"score pass of instances alone ({'parallel' if parallel else 'serial'}, int{32 if int32 else 16} "
                     "cells)", _alone_task, (int32, parallel, scoring)) for int32 in (True, False)
                    for parallel in (True, False)]
        kernels += [(f"long traceback ({length} bp pattern, {count} hits)", _long_traceback_task,
                     (length, count, scoring)) for length in (5000, 9000) for count in (1, 2)]
        kernels += [(f"end-overlap pass: {planes} planes", _end_overlap_task, (planes, scoring))
                    for planes in range(1, END_OVERLAP_PLANES + 1)]
        if device != "gpu":
            kernels += [(f"engine kernel: {planes} planes{'' if best else ', flags only'}", _engine_task,
                         (planes, best, scoring)) for planes, best in engine_kernels(thresholds, scoring)]
            kernels += [(f"the engine's packing from {'bytes' if from_bytes else 'codes'}", _packing_task,
                         (from_bytes,)) for from_bytes in (True, False)]
        phases = [kernels, [
            # then a screen of a FASTQ file: reading, encoding, formatting and writing, the rest found cached
            command("FASTQ", str(paths["reads.fq"]), patterns, "--matched", f"{out}.m.fq.gz", "--unmatched",
                    f"{out}.u.fq", "--json", f"{out}.json")], [
            # then what only the other kinds of input use
            command("gzip'd FASTQ, one file per pattern", str(paths["reads.fq.gz"]), patterns, "--matched",
                    f"{out}.{{name}}.fq"),
            command("FASTA", str(paths["reads.fa"]), patterns, "--unmatched", f"{out}.u.fa"),
            command("paired FASTQ", str(paths["reads.fq"]), patterns, "--reads2", str(paths["reads_2.fq"]),
                    "--matched", f"{out}.m1.fq", "--matched2", f"{out}.m2.fq", "--unmatched", f"{out}.u1.fq",
                    "--unmatched2", f"{out}.u2.fq"),
            command("interleaved FASTQ", str(paths["interleaved.fq"]), patterns, "--interleaved", "--pair-filter",
                    "both", "--matched", f"{out}.mi.fq"),
            command("FASTQ, trimmed", str(paths["reads.fq"]), patterns, "--action", "trim", "--trimmed",
                    f"{out}.t.fq"),
            command("FASTQ of long reads", str(paths["long.fq"]), patterns),
            command("FASTQ of long reads, their ends", str(paths["long.fq"]), patterns, "--ends", "150"),
            command("FASTQ, trimmed on every strand screened", str(paths["reads.fq"]), patterns, "--action", "trim",
                    "--strand", "forward", "--trimmed", f"{out}.tf.fq"),
            command("FASTQ, masked", str(paths["reads.fq"]), patterns, "--action", "mask", "--matched",
                    f"{out}.mm.fq"),
        ]]
        # spawned, not forked: no thread or lock of this process is carried into them
        context = multiprocessing.get_context("spawn")
        processes = min(jobs, max(len(phase) for phase in phases))
        compiled = []
        with ProcessPoolExecutor(max_workers=processes, mp_context=context) as pool:
            for phase in phases:
                futures = [(name, pool.submit(task, *args)) for name, task, args in phase]
                for name, future in futures:
                    compiling, seconds = future.result()
                    compiled.append(compiling)
                    log(f"{name}: {seconds:.2f} s, {compiling:.2f} s of it compiling")
    return {"seconds": time.perf_counter() - started, "compiling_s": sum(compiled), "processes": processes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bpbc.prepare", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-t", "--threshold", type=int, action="append", metavar="T",
                        help=f"a threshold the runs will use (repeat for several) [default: {DEFAULT_THRESHOLDS[0]}]")
    parser.add_argument("--patterns", metavar="FASTA",
                        help="the runs' patterns: their thresholds too (from their headers, or --min-score-fraction)")
    parser.add_argument("--min-score-fraction", type=float, metavar="F",
                        help="with --patterns: each pattern's threshold is ceil(F x its best score), as in the runs")
    parser.add_argument("--match", type=int, default=2)
    parser.add_argument("--mismatch", type=int, default=3)
    parser.add_argument("--gap-open", type=int, default=5)
    parser.add_argument("--gap-extend", type=int, default=2)
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                        help="the engine the runs will use (gpu: its kernels too; the CPU engine's are skipped)")
    parser.add_argument("--jobs", "-j", type=int, metavar="N", help="processes at once [default: the usable cores]")
    parser.add_argument("--quiet", "-q", action="store_true", help="no line per step")
    args = parser.parse_args(argv)
    from .scoring import Scoring

    try:
        scoring = Scoring(args.match, args.mismatch, args.gap_open, args.gap_extend)
    except ValueError as error:
        parser.error(str(error))
    thresholds = args.threshold or list(DEFAULT_THRESHOLDS)
    if min(thresholds) < 1:
        parser.error("thresholds must be at least 1")
    if args.min_score_fraction is not None and args.patterns is None:
        parser.error("--min-score-fraction needs --patterns")
    if args.patterns is not None:
        from .errors import InputError

        try:
            thresholds += patterns_thresholds(args.patterns, scoring, thresholds[0], args.min_score_fraction)
        except InputError as error:
            print(f"bpbc.prepare: error: {error}", file=sys.stderr)
            return 1

    def log(line: str) -> None:
        if not args.quiet:
            print(f"bpbc.prepare: {line}", file=sys.stderr, flush=True)

    from .engines import set_up_process

    set_up_process()
    try:
        figures = prepare(thresholds, (scoring.match, scoring.mismatch, scoring.gap_open, scoring.gap_extend),
                          args.device, args.jobs, log)
    except (RuntimeError, OSError) as error:
        print(f"bpbc.prepare: error: {error}", file=sys.stderr)
        return 1
    log(f"kernels ready in {figures['seconds']:.2f} s ({figures['compiling_s']:.2f} s compiling in "
        f"{figures['processes']} processes at once)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
