"""Long reads and long patterns: ``python -m bench long-reads [--cases ...] [options]`` (issue 41).

Fresh ``bpbc-screen --device cpu`` processes on generated reads (random
bases, patterns planted with about 1.5 % substitutions), each timed with its
peak RSS and the stage seconds of its ``--json``, kernels compiled and
cached beforehand; the peers run on the same reads, their models named:

* ``pair``: one 50 kb read x one 5 kb pattern, T = 1000; parasail's striped
  saturating SW (``sw_striped_profile_sat``, local SW with affine gaps, the
  same scoring) on the same pair, both strands;
* ``batch``: 400 reads of 5-10 kb x one 5 kb pattern, a tenth carrying a
  1-5 kb part of it, T = 2000: bpbc's cells/s per core (read bases x pattern
  bases x 2 strands over the run's wall, traceback included) against
  parasail's on the same cells with as many threads; every read's best
  score on each strand is parasail's (``wrong`` counts the reads whose PAF
  lines differ from parasail's scores: a score, or a read passing or not);
  with ``--threads N ...`` at each of those thread counts (bpbc's
  ``--threads N``, parasail's N threads: how both grow with the cores),
  else on every core with bpbc's default;
* ``ends``: 2000 reads of 5-10 kb, a third carrying a 24 bp barcode of the
  panel (96 x 24 bp) within 100 bases of an end, T = 36: the whole reads, and
  ``--ends 150``, each in fresh processes and through a ``bpbc-serve``
  started for the purpose; sassy (``sassy-rs``: edit distance, k = 3, both
  strands, as many threads: another model) on the whole reads;
* ``long-pair`` (only when named): one 200 kb read x one 20 kb pattern with
  a hit, T = 1000 (scores past int16), and parasail's striped saturating SW on
  it (one thread), bpbc's score checked against it;
* ``big`` (only when named): one 1 Mb read x one 100 kb pattern with a hit,
  T = 1000, and parasail's 32-bit striped SW on it (one thread);
* ``lambda`` (only when named; ``--device gpu`` by default): ``--lambda-reads``
  reads (default 100,000) of 5-20 kb against a random 48,502-base sequence
  standing in for the lambda genome (both strands, T = ``--lambda-threshold``,
  default 2000), ``--lambda-planted`` of them (default 10 %) carrying a
  1-20 kb piece of it with about 5 % errors (substitutions, insertions and
  deletions: nanopore-like), either strand: the device stage's cells a
  second (read bases x 48,502 x 2 over ``stage_seconds.device``), the
  encode stage's bases a second beside it, peak RSS; the first
  ``--lambda-check`` reads (default 20) and the first as many that pass are
  checked against parasail's 32-bit striped SW on the host. One untimed run on the first 2,000 reads first (kernels
  compiled and cached). Written to ``long_reads_lambda_<device>.csv``.

Writes ``long_reads_cpu.csv`` (``--csv``) under ``--out`` with the
environment header (the host's CPU named).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file: the repository root on the path
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.environment import RESULTS_DIR, environment, write_csv  # noqa: E402
from bench.host_pipeline import timed  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CASES = ("pair", "batch", "ends", "big", "lambda", "long-pair")
LAMBDA_LENGTH = 48_502  #: bases of the lambda phage genome (NC_001416), the stand-in's length
BASES = np.frombuffer(b"ACGT", np.uint8)
COMPLEMENT = str.maketrans("ACGT", "TGCA")
SASSY = ("import dnaio, sassy, sys\npatterns = [l.strip().encode() for l in open(sys.argv[2]) if l[0] != '>']\n"
         "with dnaio.open(sys.argv[1]) as f: texts = [r.sequence.encode() for r in f]\n"
         "hits = sassy.Searcher('iupac', rc=True).search_many(patterns, texts, 3, int(sys.argv[3]), 'batch_texts')\n"
         "print(len({h.text_idx for h in hits}))")


def random_bases(rng, length: int) -> str:
    return BASES[rng.integers(0, 4, length)].tobytes().decode()


def substituted(rng, piece: str, rate: float = 0.015) -> str:
    letters = np.frombuffer(piece.encode(), np.uint8).copy()
    where = rng.random(len(letters)) < rate
    letters[where] = BASES[(np.searchsorted(BASES, letters[where]) + rng.integers(1, 4, int(where.sum()))) % 4]
    return letters.tobytes().decode()


def write_fastq(path: Path, reads: list[str]) -> Path:
    with open(path, "w") as out:
        for i, read in enumerate(reads):
            out.write(f"@r{i}\n{read}\n+\n{'I' * len(read)}\n")
    return path


def write_fasta(path: Path, patterns: list[str]) -> Path:
    path.write_text("".join(f">p{i}\n{p}\n" for i, p in enumerate(patterns)))
    return path


def planted(rng, length: int, piece: str) -> str:
    at = int(rng.integers(0, length - len(piece) + 1))
    piece = piece if rng.random() < 0.5 else piece.translate(COMPLEMENT)[::-1]
    return random_bases(rng, at) + piece + random_bases(rng, length - at - len(piece))


def inputs(work: Path, case: str) -> tuple[Path, Path, list[str], list[str]]:
    """(reads file, patterns file, reads, patterns) of a case, made once."""
    rng = np.random.default_rng(["pair", "batch", "ends", "big", "long-pair"].index(case) + 41)
    if case in ("pair", "big", "long-pair"):
        m, n = {"pair": (5000, 50_000), "big": (100_000, 1_000_000), "long-pair": (20_000, 200_000)}[case]
        patterns = [random_bases(rng, m)]
        reads = [planted(rng, n, substituted(rng, patterns[0]))]
    elif case == "batch":
        patterns = [random_bases(rng, 5000)]
        reads = []
        for i in range(400):
            length = int(rng.integers(5000, 10_001))
            if i % 10 == 0:
                part = int(rng.integers(1000, 5001))
                start = int(rng.integers(0, 5000 - part + 1))
                reads.append(planted(rng, length, substituted(rng, patterns[0][start:start + part])))
            else:
                reads.append(random_bases(rng, length))
    else:
        patterns = [random_bases(rng, 24) for _ in range(96)]
        reads = []
        for i in range(2000):
            read = random_bases(rng, int(rng.integers(5000, 10_001)))
            if i % 3 == 0:
                barcode = substituted(rng, patterns[int(rng.integers(96))], 0.02)
                at = int(rng.integers(0, 100 - 24)) if i % 2 else len(read) - int(rng.integers(24, 100))
                read = read[:at] + barcode + read[at + 24:]
            reads.append(read)
    reads_path, patterns_path = work / f"{case}.fq", work / f"{case}.fa"
    if not reads_path.exists():
        write_fastq(reads_path, reads)
        write_fasta(patterns_path, patterns)
    return reads_path, patterns_path, reads, patterns


def nanopore_copy(rng, piece: np.ndarray, rate: float = 0.05) -> np.ndarray:
    """``piece`` (uint8 bases) with about ``rate`` errors, a third each
    substitutions, deletions and insertions of one base."""
    kind = rng.random(len(piece))
    out = piece.copy()
    substituted = kind < rate / 3
    out[substituted] = BASES[(np.searchsorted(BASES, out[substituted]) + rng.integers(1, 4, int(substituted.sum()))) % 4]
    inserted = np.flatnonzero(kind > 1 - rate / 3)
    out = np.insert(out, inserted, BASES[rng.integers(0, 4, len(inserted))])
    deleted = np.flatnonzero((kind >= rate / 3) & (kind < 2 * rate / 3))
    return np.delete(out, deleted + np.searchsorted(inserted, deleted, side="right"))


def lambda_inputs(work: Path, reads: int, planted_fraction: float) -> tuple[Path, Path, np.ndarray]:
    """(reads file, genome file, read lengths) of the lambda case, made once
    for each size and fraction: reads of 5-20 kb, ``planted_fraction`` of
    them carrying a 1-20 kb piece of the genome (nanopore_copy), either
    strand, written in blocks of 1000 reads; each read's planted piece's
    length (0: none) beside them (:func:`lambda_planted`)."""
    rng = np.random.default_rng(4141)
    genome = BASES[rng.integers(0, 4, LAMBDA_LENGTH)]
    genome_path = work / "lambda.fa"
    if not genome_path.exists():
        genome_path.write_text(f">lambda_stand_in random {LAMBDA_LENGTH} bases\n{genome.tobytes().decode()}\n")
    stem = f"lambda_{reads}" if planted_fraction == 0.1 else f"lambda_{reads}_planted{planted_fraction:g}"
    reads_path, lengths_path, planted_path = (work / f"{stem}{suffix}"
                                              for suffix in (".fq", ".lengths.npy", ".planted.npy"))
    if reads_path.exists() and lengths_path.exists() and planted_path.exists():
        return reads_path, genome_path, np.load(lengths_path)
    complement = np.zeros(256, np.uint8)
    complement[BASES] = BASES[::-1]  # A C G T -> T G C A
    lengths, planted = [], []
    with open(reads_path, "wb") as out:
        for first in range(0, reads, 1000):
            block = []
            for i in range(first, min(reads, first + 1000)):
                read = BASES[rng.integers(0, 4, int(rng.integers(5000, 20_001)))]
                size = 0
                if rng.random() < planted_fraction:
                    size = int(rng.integers(1000, min(len(read), 20_000) + 1))
                    at = int(rng.integers(0, LAMBDA_LENGTH - size + 1))
                    piece = nanopore_copy(rng, genome[at:at + size])
                    if rng.random() < 0.5:
                        piece = complement[piece[::-1]]
                    where = int(rng.integers(0, max(len(read) - len(piece), 0) + 1))
                    read = np.concatenate([read[:where], piece, read[where + len(piece):]])
                lengths.append(len(read))
                planted.append(size)
                block.append(b"@r%d\n%s\n+\n%s\n" % (i, read.tobytes(), b"I" * len(read)))
            out.write(b"".join(block))
    np.save(lengths_path, np.array(lengths, np.int64))
    np.save(planted_path, np.array(planted, np.int64))
    return reads_path, genome_path, np.array(lengths, np.int64)


def lambda_planted(reads_path: Path) -> np.ndarray:
    """Each read's planted piece's length (the genome's bases it copies; 0:
    none) in a reads file of :func:`lambda_inputs`."""
    return np.load(reads_path.with_suffix(".planted.npy"))


def lambda_sequences(work: Path, reads: int, planted_fraction: float) -> tuple[list[str], str]:
    """The lambda case's reads (lambda_inputs) and its genome stand-in, as strings."""
    import dnaio

    reads_path, genome_path, _ = lambda_inputs(work, reads, planted_fraction)
    with dnaio.open(reads_path) as f:
        sequences = [record.sequence for record in f]
    with dnaio.open(genome_path) as f:
        return sequences, next(iter(f)).sequence


def parasail_scores(reads: list[str], pattern: str, threads: int,
                    function: str = "sw_striped_profile_sat") -> tuple[list[tuple[int, int]], float]:
    """Each read's parasail striped SW scores (+ strand, - strand) against
    ``pattern`` (default scoring; saturating: 8-bit cells, widened where a
    score saturates), reads over ``threads`` threads, and the seconds."""
    import parasail

    matrix = parasail.matrix_create("ACGT", 2, -3)
    strands = [pattern, pattern.translate(COMPLEMENT)[::-1]]
    make = parasail.profile_create_sat if function.endswith("_sat") else parasail.profile_create_32
    profiles = [make(p, matrix) for p in strands]
    align = getattr(parasail, function)

    def score(read: str) -> tuple[int, int]:
        return tuple(align(profile, read, 7, 2).score for profile in profiles)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        scores = list(pool.map(score, reads))
    return scores, time.perf_counter() - started


def paf_scores(path: Path) -> dict[tuple[int, str], int]:
    """(read index, strand) -> AS of each PAF line."""
    found = {}
    for line in path.read_text().splitlines():
        fields = line.split("\t")
        score = next(int(f[5:]) for f in fields if f.startswith("AS:i:"))
        found[(int(fields[0][1:]), fields[4])] = score
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench long-reads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=["pair", "batch", "ends"])
    parser.add_argument("--work", type=Path, default=Path("/tmp/bpbc-long-reads"), help="inputs and outputs")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command (all kept; the fastest marked)")
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                        help="no untimed run first (kernels already cached: the big case's run is minutes)")
    parser.add_argument("--csv", default="long_reads_cpu.csv", help="the file written under --out")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="gpu", help="lambda: the engine (default gpu)")
    parser.add_argument("--threads", type=int, nargs="+", metavar="N",
                        help="batch: bpbc (--threads N) and parasail at each of these thread counts "
                             "(default: every core, bpbc's default)")
    parser.add_argument("--lambda-reads", type=int, default=100_000,
                        help="lambda: reads of 5-20 kb (default 100000; 10000 runs in about 3 minutes on one H200)")
    parser.add_argument("--lambda-planted", type=float, default=0.1, help="lambda: the fraction carrying a piece")
    parser.add_argument("--lambda-threshold", type=int, default=2000, help="lambda: T (default 2000)")
    parser.add_argument("--lambda-check", type=int, default=20,
                        help="lambda: the first N reads, and the first N that pass, whose scores are checked "
                             "against parasail (default 20)")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    args.work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    rows: list[dict] = []

    def bpbc(case: str, what: str, reads: Path, patterns: Path, threshold: int, *options, cells: float = 0.0,
             served: str | None = None, threads: int | None = None):
        command = [sys.executable, "-m", "bpbc", str(reads), str(patterns), "-t", str(threshold), "--device", "cpu",
                   "-q", "-o", str(args.work / f"{case}.paf"), "--json", str(args.work / "summary.json"),
                   *map(str, options)]
        run_env = env if served is None else {**env, "BPBC_SERVER": served}
        if args.warm_up:  # kernels compiled and cached (and, through a server, loaded in it)
            subprocess.run(command, env=run_env, cwd=ROOT, check=True, capture_output=True)
        for _ in range(args.repeats):
            wall, rss, code = timed(command, run_env, ROOT)
            summary = json.loads((args.work / "summary.json").read_text())
            run = summary["wall_time_s"]
            row = {"case": case, "what": what, "process_wall_s": round(wall, 3), "run_wall_s": run,
                   "peak_rss_mb": round(rss * 1000) if served is None else "", "exit": code, "reads": summary["reads"],
                   "reads_passing": summary["reads_passing"],
                   **{f"stage_{k}_s": v for k, v in summary["stage_seconds"].items()}}
            if cells:
                row["gcups_per_core"] = round(cells / run / (threads or cores) / 1e9, 2)
            print(f"{case:6} {what:44} {wall:7.2f} s (run {run:.2f} s)  rss {rss * 1000:6.0f} MB", file=sys.stderr,
                  flush=True)
            rows.append(row)
        return rows[-1]

    def peer(case: str, what: str, seconds: float, cells: float = 0.0, threads: int | None = None, **extra) -> None:
        row = {"case": case, "what": what, "run_wall_s": round(seconds, 3), **extra}
        if cells:
            row["gcups_per_core"] = round(cells / seconds / (threads or cores) / 1e9, 2)
        print(f"{case:6} {what:44} {seconds:7.2f} s", file=sys.stderr, flush=True)
        rows.append(row)

    def median(what: str, key: str) -> float:
        values = sorted(row[key] for row in rows if row["what"] == what)
        return values[len(values) // 2]

    def ends_runs(reads_path: Path, patterns_path: Path) -> None:
        """The panel on whole reads and with --ends 150, in fresh processes
        and through a bpbc-serve started for it (the process's start, numba's
        kernels loaded once: what a run of many files pays once); sassy on
        the whole reads; the ratios of medians."""
        from bench.startup import start_server

        case, whole, ends = "ends", "bpbc-screen, whole reads", "bpbc-screen --ends 150"
        bpbc(case, whole, reads_path, patterns_path, 36)
        bpbc(case, ends, reads_path, patterns_path, 36, "--ends", 150)
        rows[-1]["ratio_to_whole"] = round(median(whole, "run_wall_s") / median(ends, "run_wall_s"), 1)
        socket_path = str(args.work / "bpbc-serve.sock")
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        server = start_server(socket_path, "cpu", env)
        try:
            bpbc(case, f"{whole}, through bpbc-serve", reads_path, patterns_path, 36, served=socket_path)
            bpbc(case, f"{ends}, through bpbc-serve", reads_path, patterns_path, 36, "--ends", 150, served=socket_path)
        finally:
            server.terminate()
            server.wait()
        rows[-1]["ratio_to_whole"] = round(median(f"{whole}, through bpbc-serve", "run_wall_s")
                                           / median(f"{ends}, through bpbc-serve", "run_wall_s"), 1)
        for _ in range(args.repeats):
            wall, rss, code = timed([sys.executable, "-c", SASSY, str(reads_path), str(patterns_path), str(cores)])
            # sassy's process wall over --ends' median process wall, fresh and through the server
            peer(case, f"sassy k=3, {cores} threads, whole reads (edit distance)", wall,
                 peak_rss_mb=round(rss * 1000), ratio_to_peer=round(wall / median(ends, "process_wall_s"), 2),
                 ratio_to_served=round(wall / median(f"{ends}, through bpbc-serve", "process_wall_s"), 2))

    def lambda_run() -> None:
        """The lambda case: one untimed run on the first 2,000 reads, then
        --repeats timed runs on them all, each row with the device stage's
        TCUPS and the encode stage's Gbases/s; the PAF's scores of the first
        --lambda-check reads, and of the first as many that pass, against parasail's."""
        reads_path, genome_path, lengths = lambda_inputs(args.work, args.lambda_reads, args.lambda_planted)
        cells = float(lengths.sum()) * LAMBDA_LENGTH * 2
        threshold = args.lambda_threshold
        warm = args.work / "lambda_warm.fq"
        with open(reads_path, "rb") as source, open(warm, "wb") as out:
            out.writelines(line for _, line in zip(range(4 * min(2000, args.lambda_reads)), source))
        base = [sys.executable, "-m", "bpbc", "-t", str(threshold), "--device", args.device, "-q",
                "--json", str(args.work / "lambda.json"), str(genome_path)]
        subprocess.run([*base[:-1], str(warm), base[-1], "-o", str(args.work / "lambda_warm.paf")], env=env, cwd=ROOT,
                       check=True, capture_output=True)
        paf = args.work / "lambda.paf"
        for _ in range(args.repeats):
            wall, rss, code = timed([*base[:-1], str(reads_path), base[-1], "-o", str(paf)], env, ROOT)
            summary = json.loads((args.work / "lambda.json").read_text())
            stage = summary["stage_seconds"]
            row = {"case": "lambda", "what": f"bpbc-screen --device {args.device}", "reads": summary["reads"],
                   "read_bases": int(lengths.sum()), "cells": f"{cells:.4g}", "process_wall_s": round(wall, 3),
                   "run_wall_s": summary["wall_time_s"], "peak_rss_mb": round(rss * 1000), "exit": code,
                   "reads_passing": summary["reads_passing"],
                   "device_tcups": round(cells / stage["device"] / 1e12, 3) if stage.get("device") else "",
                   "encode_gbases_per_s": round(lengths.sum() / stage["encode"] / 1e9, 3) if stage.get("encode")
                   else "", **{f"stage_{k}_s": v for k, v in stage.items()}}
            print(f"lambda {row['what']:30} {wall:7.2f} s (run {row['run_wall_s']:.2f} s, device "
                  f"{stage.get('device', 0):.2f} s: {row['device_tcups']} TCUPS)  rss {rss * 1000:6.0f} MB",
                  file=sys.stderr, flush=True)
            rows.append(row)
        check = min(args.lambda_check, args.lambda_reads)
        if check:
            # the PAF's scores against parasail's (both strands, passing or not) of the first reads,
            # and of the first reads that pass (a tenth carry a piece: the first few may hold none)
            found_all = paf_scores(paf)
            chosen = sorted(set(range(check)) | set(sorted({read for read, _ in found_all})[:check]))
            wanted, reads = set(chosen), []
            with open(reads_path) as source:
                for i, (_, sequence, _, _) in enumerate(zip(source, source, source, source)):
                    if i in wanted:
                        reads.append(sequence.strip())
                    if len(reads) == len(chosen):
                        break
            genome = genome_path.read_text().split("\n")[1]
            scores, seconds = parasail_scores(reads, genome, cores, "sw_striped_profile_32")
            found = {key: score for key, score in found_all.items() if key[0] in wanted}
            expected = {(i, strand): s for i, pair in zip(chosen, scores) for strand, s in zip("+-", pair)
                        if s >= threshold}
            wrong = len({key[0] for key in set(found.items()) ^ set(expected.items())})
            what = f"the first {check} reads and the first {check} passing"
            rows.append({"case": "lambda", "what": f"parasail sw_striped_profile_32, {cores} threads, {what}",
                         "run_wall_s": round(seconds, 3), "wrong": wrong, "hits": len(expected)})
            print(f"lambda parasail on {what} ({len(chosen)} reads): {wrong} reads differ ({len(expected)} hits)",
                  file=sys.stderr, flush=True)

    for case in args.cases:
        if case == "lambda":
            lambda_run()
            continue
        reads_path, patterns_path, reads, patterns = inputs(args.work, case)
        cells = float(sum(map(len, reads))) * len(patterns[0]) * 2 if case != "ends" else 0.0
        if case in ("pair", "big", "long-pair"):
            bpbc(case, f"bpbc-screen, {cores} threads", reads_path, patterns_path, 1000, cells=cells)
            if case == "pair":
                scores, seconds = parasail_scores(reads, patterns[0], 1)
                peer(case, "parasail sw_striped_profile_sat, 1 thread", seconds, cells, score=max(scores[0]))
            else:  # scores above int16, and bpbc's score checked against parasail's
                function = "sw_striped_profile_32" if case == "big" else "sw_striped_profile_sat"
                scores, seconds = parasail_scores(reads, patterns[0], 1, function)
                found = paf_scores(args.work / f"{case}.paf")
                expected = {(0, strand): s for strand, s in zip("+-", scores[0]) if s >= 1000}
                peer(case, f"parasail {function}, 1 thread", seconds, cells, score=max(scores[0]),
                     wrong=int(found != expected))
        elif case == "batch":
            for threads in args.threads or [None]:
                n = threads or cores
                on = f"{n} thread{'s' if n > 1 else ''}"
                what = f"bpbc-screen, {on}"
                options = () if threads is None else ("--threads", threads)
                bpbc(case, what, reads_path, patterns_path, 2000, *options, cells=cells, threads=n)
                scores, seconds = parasail_scores(reads, patterns[0], n)
                found = paf_scores(args.work / f"{case}.paf")
                expected = {(i, strand): s for i, pair in enumerate(scores) for strand, s in zip("+-", pair)
                            if s >= 2000}
                wrong = len({key[0] for key in set(found.items()) ^ set(expected.items())})
                peer(case, f"parasail sw_striped_profile_sat, {on}", seconds, cells, threads=n, wrong=wrong,
                     hits=len(expected))
                # side by side: bpbc's median run over parasail's time, on the same cells with as many threads
                rows[-1]["ratio_to_peer"] = round(seconds / median(what, "run_wall_s"), 2)
        else:
            ends_runs(reads_path, patterns_path)
    gpu = None
    if "lambda" in args.cases and args.device == "gpu":
        from bench.environment import gpu_info

        gpu = gpu_info()
    csv = f"long_reads_lambda_{args.device}.csv" if args.cases == ["lambda"] else args.csv
    path = write_csv(args.out / csv, rows, environment(gpu))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
