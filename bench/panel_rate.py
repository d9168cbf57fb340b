"""Panels at the one-pattern rate: ``python -m bench panel-rate [--device cpu|gpu] [options]`` (issue 28).

Asks whether a panel of many short patterns costs what its cells cost:
cells/s (reads x read length x pattern length x strands / seconds) of one
128 bp pattern against panels of random 24 bp patterns (96 and 1000 by
default; ``--panels`` takes any ``COUNTxLENGTH``), 150 bp random reads,
T = 40, both strands. Every panel gets about the same number of cells
(``--cells``), so its reads are ``cells / (150 x length x count x 2)``,
rounded down to a multiple of 1024.

Three kinds of rows, each panel's rounds interleaved with the others' (a
slow spell of a shared machine falls on all of them); a row gives the median
and the best round, and ``ratio_to_one`` its median rate over the first
panel's (the one-pattern row) of the same kind:

* ``library``: ``Screener(..., device=DEVICE).hits(batch)``, the batches
  prepared beforehand (at most 2**30 instances each, as the command's
  chunks; the screen alone: kernels, second pass, hit lists);
* ``e2e``: ``bpbc-screen READS.fq PANEL.fa --device DEVICE --json`` on a
  plain FASTQ of the same reads (``-o /dev/null``, ``--chunk-size``), the
  process's wall, the JSON's ``wall_time_s`` and its device stage: rates
  from each;
* ``traceback`` (``--hits``): reads carrying planted exact copies of the
  panel's patterns (``--planted`` a read, on random strands), so a chunk
  gives many hits; ``Screener.hits`` and ``Screener.align`` (the traceback
  of every hit) timed apart at each ``--hits-threads`` count: the screen's
  cells/s with that many hits, the traceback's hits/s, and its speed-up
  over the first thread count.

Writes ``panel_rate_<device>.csv`` (``--quick``: ``panel_rate_quick_<device>.csv``)
under ``--out`` with the environment header (the host's CPU named).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file: the repository root on the path
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.environment import RESULTS_DIR, environment, gpu_info, write_csv  # noqa: E402

READ_LENGTH, THRESHOLD, STRANDS = 150, 40, 2
#: instances (read, pattern, strand) per library call at most, as bpbc.pipeline's chunks
MAX_INSTANCES = 1 << 30
BASES = np.frombuffer(b"ACGT", np.uint8)
COMPLEMENT = bytes.maketrans(b"ACGT", b"TGCA")


def parse_panel(text: str) -> tuple[int, int]:
    count, _, length = text.lower().partition("x")
    return int(count), int(length)


def random_sequences(rng, count: int, length: int) -> list[str]:
    return [row.tobytes().decode() for row in BASES[rng.integers(0, 4, (count, length))]]


def panel_patterns(panel: tuple[int, int], seed: int) -> list[str]:
    return random_sequences(np.random.default_rng([seed, *panel]), *panel)


def reads_for(panel: tuple[int, int], cells: float, max_reads: int) -> int:
    """About ``cells`` cells' worth of reads, a multiple of 1024 (the CPU
    engine's superblock: a partial last one would cost a small panel's rate
    up to a tenth, 5555 reads in 6 superblocks)."""
    count, length = panel
    return int(max(1024, min(max_reads, cells / (READ_LENGTH * length * count * STRANDS))) // 1024 * 1024)


def parse_hits_panel(text: str) -> tuple[int, int, int]:
    """``COUNTxLENGTH`` or ``COUNTxLOW-HIGH`` (lengths drawn uniformly from LOW to HIGH): (count, low, high)."""
    count, _, lengths = text.lower().partition("x")
    low, _, high = lengths.partition("-")
    return int(count), int(low), int(high or low)


def ranged_patterns(count: int, low: int, high: int, seed: int) -> list[str]:
    """``count`` random patterns of lengths drawn from ``low`` to ``high`` (a
    vector or contaminant collection: 100 bp to 10 kb)."""
    rng = np.random.default_rng([seed, count, low, high])
    return [row.tobytes().decode() for row in (BASES[rng.integers(0, 4, int(length))]
                                               for length in rng.integers(low, high + 1, count))]


def mutated(rng, piece: str, rate: float = 0.02) -> str:
    """``piece`` with about ``rate`` of its bases substituted, and as many
    1-3 base insertions and deletions, half each."""
    out, i = [], 0
    while i < len(piece):
        roll = rng.random()
        if roll < rate:
            out.append("ACGT"[int(rng.integers(4))])
            i += 1
        elif roll < rate * 1.5:
            i += int(rng.integers(1, 4))
        elif roll < rate * 2:
            out.append("".join("ACGT"[c] for c in rng.integers(0, 4, int(rng.integers(1, 4)))))
        else:
            out.append(piece[i])
            i += 1
    return "".join(out)


def planted_pieces(rng, patterns: list[str], n: int, planted: int) -> list[str]:
    """n random reads, each with ``planted`` pieces of READ_LENGTH / planted
    bases from random places of random patterns (either strand), with
    substitutions and small indels (:func:`mutated`), side by side from a
    random start: reads of a vector or contaminant, against patterns longer
    than the reads."""
    reads = random_sequences(rng, n, READ_LENGTH)
    size = READ_LENGTH // planted
    out = []
    for read in reads:
        pieces = []
        for p in rng.integers(0, len(patterns), planted):
            pattern = patterns[p]
            start = int(rng.integers(0, max(1, len(pattern) - size + 1)))
            piece = mutated(rng, pattern[start:start + size])
            pieces.append(piece[::-1].translate(COMPLEMENT) if rng.integers(2) else piece)
        copies = "".join(pieces)[:READ_LENGTH]
        start = int(rng.integers(0, READ_LENGTH - len(copies) + 1))
        out.append(read[:start] + copies + read[start + len(copies):])
    return out


def planted_reads(rng, patterns: list[str], n: int, planted: int) -> list[str]:
    """n random reads, each with ``planted`` exact copies of random patterns
    (either strand), side by side from a random start where they fit."""
    reads = random_sequences(rng, n, READ_LENGTH)
    length = len(patterns[0])
    fit = min(planted, READ_LENGTH // length)
    out = []
    for read in reads:
        picks = rng.integers(0, len(patterns), fit)
        flips = rng.integers(0, 2, fit)
        copies = "".join(patterns[p][::-1].translate(COMPLEMENT) if f else patterns[p] for p, f in zip(picks, flips))
        start = int(rng.integers(0, READ_LENGTH - len(copies) + 1))
        out.append(read[:start] + copies + read[start + len(copies):])
    return out


def write_fastq(path: Path, reads: list[str]) -> None:
    quality = "I" * READ_LENGTH
    with open(path, "w") as fh:
        fh.writelines(f"@r{i}\n{read}\n+\n{quality}\n" for i, read in enumerate(reads))


def write_fasta(path: Path, patterns: list[str]) -> None:
    with open(path, "w") as fh:
        fh.writelines(f">p{i}\n{pattern}\n" for i, pattern in enumerate(patterns))


def summary(times: list[float]) -> tuple[float, float]:
    return float(np.median(times)), float(min(times))


def library_rows(panels, pool: list[str], cells: float, max_reads: int, device: str, threads, rounds: int,
                 seed: int) -> list[dict]:
    from bpbc.screener import Screener

    setups = []
    for panel in panels:
        n = reads_for(panel, cells, max_reads)
        patterns = panel_patterns(panel, seed)
        screener = Screener(patterns, threshold=THRESHOLD, device=device, threads=threads)
        # batches of at most MAX_INSTANCES (read, pattern, strand), as the command's chunks
        step = max(1, min(n, MAX_INSTANCES // (panel[0] * STRANDS)))
        batches = [screener.prepare(pool[start:min(n, start + step)]) for start in range(0, n, step)]
        hits = sum(len(screener.hits(batch)) for batch in batches)  # warm-up: compiles, loads, caches
        setups.append((panel, n, screener, batches, hits))
    times: dict[tuple[int, int], list[float]] = {panel: [] for panel in panels}
    for _ in range(rounds):
        for panel, _, screener, batches, _ in setups:
            start = time.perf_counter()
            for batch in batches:
                screener.hits(batch)
            times[panel].append(time.perf_counter() - start)
    rows = []
    for panel, n, _, _, hits in setups:
        count, length = panel
        cells = n * READ_LENGTH * count * length * STRANDS
        median, best = summary(times[panel])
        rows.append({"kind": "library", "panel": f"{count}x{length}", "patterns": count, "pattern_length": length,
                     "reads": n, "cells": cells, "hits": hits, "seconds": f"{median:.4g}", "best_seconds": f"{best:.4g}",
                     "gcups": f"{cells / median / 1e9:.4g}", "best_gcups": f"{cells / best / 1e9:.4g}",
                     "seconds_all": " ".join(f"{t:.4g}" for t in times[panel])})
    return with_ratios(rows, "gcups")


def with_ratios(rows: list[dict], column: str) -> list[dict]:
    if rows:
        one = float(rows[0][column])
        for row in rows:
            row["ratio_to_one"] = f"{float(row[column]) / one:.3f}"
    return rows


def e2e_rows(panels, pool: list[str], cells: float, max_reads: int, device: str, threads, rounds: int, seed: int,
             chunk_size: int | None, workdir: Path) -> list[dict]:
    setups = []
    for panel in panels:
        n = reads_for(panel, cells, max_reads)
        reads_path = workdir / f"reads_{n}.fq"
        if not reads_path.exists():
            write_fastq(reads_path, pool[:n])
        patterns_path = workdir / f"panel_{panel[0]}x{panel[1]}.fa"
        write_fasta(patterns_path, panel_patterns(panel, seed))
        setups.append((panel, n, reads_path, patterns_path))

    def run(reads_path: Path, patterns_path: Path) -> tuple[float, dict]:
        summary_path = workdir / "summary.json"
        # the command (``python -m bpbc`` is bpbc-screen) of this interpreter: no installed entry point needed
        command = [sys.executable, "-m", "bpbc", str(reads_path), str(patterns_path), "-t", str(THRESHOLD),
                   "--device", device, "-q", "-o", os.devnull, "--json", str(summary_path)]
        if chunk_size:
            command += ["--chunk-size", str(chunk_size)]
        if threads:
            command += ["--threads", str(threads)]
        start = time.perf_counter()
        subprocess.run(command, check=True)
        wall = time.perf_counter() - start
        return wall, json.loads(summary_path.read_text())

    for _, _, reads_path, patterns_path in setups:  # warm-up: kernels compiled and cached, files in the page cache
        run(reads_path, patterns_path)
    results: dict[tuple[int, int], list[tuple[float, dict]]] = {panel: [] for panel in panels}
    for _ in range(rounds):
        for panel, _, reads_path, patterns_path in setups:
            results[panel].append(run(reads_path, patterns_path))
    rows = []
    for panel, n, _, _ in setups:
        count, length = panel
        cells = n * READ_LENGTH * count * length * STRANDS
        walls = [wall for wall, _ in results[panel]]
        json_walls = [info["wall_time_s"] for _, info in results[panel]]
        devices = [info["stage_seconds"]["device"] for _, info in results[panel]]
        stages = {stage: float(np.median([info["stage_seconds"].get(stage, 0.0) for _, info in results[panel]]))
                  for stage in ("setup", "read", "encode", "device", "traceback", "write", "compile")}
        wall, best = summary(walls)
        json_wall = float(np.median(json_walls))
        device_s = float(np.median(devices))
        rows.append({"kind": "e2e", "panel": f"{count}x{length}", "patterns": count, "pattern_length": length,
                     "reads": n, "cells": cells, "hits": results[panel][0][1]["alignments"],
                     "chunk_size": chunk_size or "", "seconds": f"{wall:.4g}", "best_seconds": f"{best:.4g}",
                     "gcups": f"{cells / wall / 1e9:.4g}", "json_wall_s": f"{json_wall:.4g}",
                     "json_wall_gcups": f"{cells / json_wall / 1e9:.4g}", "device_s": f"{device_s:.4g}",
                     "device_gcups": f"{cells / device_s / 1e9:.4g}",
                     "stages": " ".join(f"{k}={v:.3g}" for k, v in stages.items()),
                     "seconds_all": " ".join(f"{t:.4g}" for t in walls)})
    rows = with_ratios(rows, "gcups")
    if rows:
        one = float(rows[0]["device_gcups"])
        for row in rows:
            row["device_ratio_to_one"] = f"{float(row['device_gcups']) / one:.3f}"
    return rows


def traceback_rows(panel, n: int, planted: int, device: str, thread_counts: list[int], rounds: int,
                   seed: int, whole: bool = False) -> list[dict]:
    """The screen and the traceback of reads full of hits, the thread counts
    interleaved round by round (a slow spell falls on all of them). panel:
    (count, low, high); patterns of one length get exact copies planted
    (:func:`planted_reads`), a range of lengths mutated pieces
    (:func:`planted_pieces`). ``whole``: each round also runs the traceback
    with every pattern's whole width in the pointer pass (no score pass and
    windows: bpbc.traceback._WINDOW_FROM infinite), rows of its own,
    interleaved with the others; outputs compared."""
    from bpbc import traceback as tb
    from bpbc.engines import numba_threads
    from bpbc.screener import Screener

    count_, low, high = panel
    if low == high:
        patterns = panel_patterns((count_, low), seed)
        reads = planted_reads(np.random.default_rng(seed + 1), patterns, n, planted)
    else:
        patterns = ranged_patterns(count_, low, high, seed)
        reads = planted_pieces(np.random.default_rng(seed + 1), patterns, n, planted)
    label = f"{count_}x{low}" if low == high else f"{count_}x{low}-{high}"
    modes = [(threads, False) for threads in thread_counts] + ([(t, True) for t in thread_counts] if whole else [])
    window_from = tb._WINDOW_FROM

    def align(screener, batch, hits, whole_width):
        tb._WINDOW_FROM = float("inf") if whole_width else window_from
        try:
            return screener.align(batch, hits)
        finally:
            tb._WINDOW_FROM = window_from

    setups = []
    reference = None
    for threads, whole_width in modes:
        screener = Screener(patterns, threshold=THRESHOLD, device=device, threads=threads)
        batch = screener.prepare(reads)
        with numba_threads(threads):
            hits = screener.hits(batch)
            alignments = align(screener, batch, hits, whole_width)  # warm-up
        key = (alignments.score.tobytes(), alignments.pattern_start.tobytes(), alignments.read_start.tobytes(),
               alignments.cigars.buffer.tobytes())
        reference = reference or key
        if key != reference:
            raise AssertionError(f"the traceback on {threads} threads (whole={whole_width}) differs from the first's")
        setups.append((threads, whole_width, screener, batch, len(hits)))
    screen_times = {mode: [] for mode in modes}
    align_times = {mode: [] for mode in modes}
    for _ in range(rounds):
        for threads, whole_width, screener, batch, _ in setups:
            with numba_threads(threads):
                start = time.perf_counter()
                hits = screener.hits(batch)
                middle = time.perf_counter()
                align(screener, batch, hits, whole_width)
                screen_times[threads, whole_width].append(middle - start)
                align_times[threads, whole_width].append(time.perf_counter() - middle)
    rows = []
    first_median, first_best = summary(align_times[modes[0]])
    cells = n * READ_LENGTH * sum(map(len, patterns)) * STRANDS
    for threads, whole_width, _, _, count in setups:
        mode = (threads, whole_width)
        screen_s, screen_best = summary(screen_times[mode])
        align_s, align_best = summary(align_times[mode])
        rows.append({"kind": "traceback_whole" if whole_width else "traceback", "panel": label, "patterns": count_,
                     "pattern_length": low if low == high else f"{low}-{high}", "reads": n, "planted": planted,
                     "threads": threads, "hits": count,
                     "screen_s": f"{screen_s:.4g}", "seconds": f"{align_s:.4g}", "best_seconds": f"{align_best:.4g}",
                     "hits_per_s": f"{count / align_s:.4g}", "best_hits_per_s": f"{count / align_best:.4g}",
                     "screen_hits_per_s": f"{count / screen_s:.4g}", "screen_gcups": f"{cells / screen_s / 1e9:.4g}",
                     "best_screen_gcups": f"{cells / screen_best / 1e9:.4g}",
                     "speedup_to_first": f"{first_median / align_s:.3f}",
                     "best_speedup_to_first": f"{first_best / align_best:.3f}",
                     "seconds_all": " ".join(f"{t:.4g}" for t in align_times[mode])})
        whole = " (whole patterns)" if whole_width else ""
        print(f"  traceback{whole} {label} {threads:>3} threads  {count} hits  screen {screen_s:.3f} s "
              f"({cells / screen_s / 1e9:.1f} GCUPS)  align {align_s:.3f} s  {count / align_s / 1e6:.3f} M hits/s "
              f"(best {count / align_best / 1e6:.3f}, x{first_best / align_best:.2f})", file=sys.stderr, flush=True)
    return rows


def print_rows(rows: list[dict]) -> None:
    for row in rows:
        extra = f"  device {row['device_gcups']} GCUPS (x{row['device_ratio_to_one']})" if row["kind"] == "e2e" else ""
        print(f"  {row['kind']:9} {row['panel']:>9} {row['reads']:>9} reads  {float(row['seconds']):8.3f} s  "
              f"{row['gcups']:>8} GCUPS  x{row['ratio_to_one']}  hits {row['hits']}{extra}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench panel-rate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--panels", nargs="+", default=["1x128", "96x24", "1000x24"],
                        help="COUNTxLENGTH, the one-pattern panel first (default 1x128 96x24 1000x24)")
    parser.add_argument("--cells", type=float, default=None,
                        help="cells per panel (default 2e11 on the CPU, 4e12 on the GPU; --quick 5e9)")
    parser.add_argument("--max-reads", type=int, default=4_000_000, help="reads per panel at most (default 4000000)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 5; --quick 1)")
    parser.add_argument("--threads", type=int, default=None, help="library and e2e: CPU threads (default all)")
    parser.add_argument("--parts", nargs="+", choices=("library", "e2e", "traceback"),
                        default=["library", "e2e", "traceback"])
    parser.add_argument("--chunk-size", type=int, default=None, help="e2e: bpbc-screen --chunk-size (default its own)")
    parser.add_argument("--hits-panel", default="96x24",
                        help="traceback: the panel, COUNTxLENGTH (exact copies planted) or COUNTxLOW-HIGH (lengths "
                             "drawn from LOW to HIGH, pieces with substitutions and indels planted) (default 96x24)")
    parser.add_argument("--whole", action="store_true",
                        help="traceback: also time it with every pattern's whole width in the pointer pass (no score "
                             "pass and windows), interleaved")
    parser.add_argument("--hits-reads", type=int, default=None, help="traceback: reads (default 100000; --quick 2000)")
    parser.add_argument("--planted", type=int, default=5, help="traceback: pattern copies per read (default 5)")
    parser.add_argument("--hits-threads", type=int, nargs="+", default=None,
                        help="traceback: thread counts (default 1 and every usable core)")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--quick", action="store_true", help="small sizes, one round (a smoke test)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)

    from bpbc.engines import set_up_process, usable_cores

    set_up_process()
    panels = [parse_panel(text) for text in args.panels]
    cells = args.cells or (5e9 if args.quick else 2e11 if args.device == "cpu" else 4e12)
    rounds = args.rounds or (1 if args.quick else 5)
    cores = usable_cores()
    max_reads = max(reads_for(panel, cells, args.max_reads) for panel in panels)
    pool = random_sequences(np.random.default_rng(args.seed), max_reads, READ_LENGTH)
    print(f"panel-rate on {args.device}, {cores} usable cores, {cells:.3g} cells a panel", file=sys.stderr)
    rows: list[dict] = []
    if "library" in args.parts:
        part = library_rows(panels, pool, cells, args.max_reads, args.device, args.threads, rounds, args.seed)
        print_rows(part)
        rows += part
    if "e2e" in args.parts:
        with tempfile.TemporaryDirectory(prefix="bpbc-panel-rate-") as workdir:
            part = e2e_rows(panels, pool, cells, args.max_reads, args.device, args.threads, rounds, args.seed,
                            args.chunk_size, Path(workdir))
        print_rows(part)
        rows += part
    if "traceback" in args.parts:
        hits_reads = args.hits_reads or (2000 if args.quick else 100_000)
        thread_counts = args.hits_threads or sorted({1, cores})
        rows += traceback_rows(parse_hits_panel(args.hits_panel), hits_reads, args.planted, args.device,
                               thread_counts, rounds, args.seed, args.whole)
    gpu = gpu_info() if args.device == "gpu" else None
    env = environment(gpu)
    try:
        from bpbc.cpu_engine import cpu_target, kernel_shape

        env.update({"cpu_target": cpu_target().label, "kernel_shape": str(kernel_shape())})
    except Exception as error:  # an older checkout
        env["cpu_target"] = f"unknown ({type(error).__name__})"
    env.update({"usable_cores": str(cores), "command": " ".join(["python -m bench panel-rate", *(argv or sys.argv[1:])])})
    name = f"panel_rate{'_quick' if args.quick else ''}_{args.device if args.device == 'cpu' else 'gpu'}"
    if gpu:
        from bench.environment import device_kind

        name = f"panel_rate{'_quick' if args.quick else ''}_{device_kind(gpu)}"
    path = write_csv(args.out / f"{name}.csv", rows, env)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
