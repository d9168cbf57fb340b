"""How well and how fast ``--action trim`` cuts a planted 3' adapter, against cutadapt.

Reads of ``--length`` bases (150) hold a random insert followed by the
adapter (TruSeq, 33 bp) and random bases, so the read ends a random 3 to
110 bases into that tail: overlaps of 3-32 bp are partial adapters cut off by
the read's end, longer ones hold the whole adapter. A third of the reads
with an overlap of at least ``--substitution-from`` bases (20) carry one
substitution inside the adapter part; a tenth of all reads carry no adapter.

Figures, each beside its target (docs/trimming.md):

* the share of reads cut exactly where the adapter was planted by
  ``bpbc-screen --action trim --strand forward --min-overlap 3
  --min-score-fraction 0.8``, per class: whole adapters without errors, partial
  ones of 3-19 bp and of 20-32 bp, reads with one substitution (the other
  substituted overlaps, 13-19 bp, are counted where ``--substitution-from``
  says so), and the share of adapter-free reads left whole;
* the share of all reads given the same trimmed length as ``cutadapt -a
  ADAPTER -e 0.1 -O 3``;
* the seconds of that trimming run against the same screen without
  ``--action`` (both write the PAF to /dev/null and the matched and
  unmatched reads), medians of ``--repeats`` runs after one warm-up run: the
  run's own wall time from ``--json``, the process's wall time and its CPU
  time (user + system: what the trimming adds where other work shares the
  cores); then the same on as many reads without any adapter;
* the end-overlap decision alone (does a read end in a partial adapter?), in
  process, over all the reads as one batch, median of ``--repeats``: the
  host's bit-sliced pass on one thread, and with ``--device gpu`` the GPU's
  planes kernel over the batch as the GPU engine prepares it for the screen
  (launch to flags in input order, as a GPU run takes it).

    python -m bench trimming [--reads 400000] [--device cpu|gpu] [--repeats 3] [--out DIR]

Writes ``trimming_<device>.csv`` to ``--out`` (bench/results): ``cpu``, or
the GPU's kind (``h100``, ``h200``).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.environment import RESULTS_DIR, device_kind, environment, gpu_info, write_csv

ADAPTER = "AGATCGGAAGAGCACACGTCTGAACTCCAGTCA"
BASES = np.frombuffer(b"ACGT", np.uint8)
MIN_OVERLAP, MAX_OVERLAP = 3, 110
#: (class, target share cut exactly); None: reported without a target
TARGETS = {
    "whole adapter, no errors": 0.995,
    "partial 3-19 bp, no errors": 0.95,
    "partial 20-32 bp, no errors": None,
    "one substitution": 0.99,
    "no adapter, left whole": None,
}
CUTADAPT_TARGET = 0.95
TIME_TARGET = 1.10


def planted_reads(count: int, length: int, substitution_from: int, seed: int = 30, adapters: bool = True):
    """(FASTQ bytes, overlap per read (0: no adapter), substituted per read);
    without ``adapters`` no read holds one."""
    rng = np.random.default_rng(seed)
    overlap = rng.integers(MIN_OVERLAP, MAX_OVERLAP + 1, count)
    overlap[rng.random(count) < 0.1] = 0
    if not adapters:
        overlap[:] = 0
    substituted = (overlap >= substitution_from) & (rng.random(count) < 1 / 3)
    sequences = BASES[rng.integers(0, 4, (count, length))]
    adapter = np.frombuffer(ADAPTER.encode(), np.uint8)
    for r in np.flatnonzero(overlap).tolist():
        start = length - int(overlap[r])
        part = adapter[:min(int(overlap[r]), len(adapter))]
        sequences[r, start:start + len(part)] = part
        if substituted[r]:
            position = start + int(rng.integers(0, len(part)))
            sequences[r, position] = BASES[(np.flatnonzero(BASES == sequences[r, position])[0]
                                            + int(rng.integers(1, 4))) % 4]
    names = [f"@r{r} overlap={overlap[r]}{' substituted' if substituted[r] else ''}\n".encode()
             for r in range(count)]
    quality = b"+\n" + b"I" * length + b"\n"
    data = b"".join(name + row.tobytes() + b"\n" + quality for name, row in zip(names, sequences))
    return data, overlap, substituted


def trimmed_lengths(path: Path, count: int) -> np.ndarray:
    """Each read's length in a FASTQ file holding every read in order (record i is r<i>)."""
    import dnaio

    lengths = np.full(count, -1, np.int64)
    with dnaio.open(path) as reader:
        for record in reader:
            lengths[int(record.id[1:])] = len(record.sequence)
    assert (lengths >= 0).all(), "a read is missing from the trimmed output"
    return lengths


def command(*args) -> list[str]:
    return [sys.executable, "-m", "bpbc", *map(str, args)]


def timed(args: list[str], json_path: Path) -> tuple[float, float, float]:
    """(the run's wall seconds from --json, the process's wall seconds, its CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    process = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return json.loads(json_path.read_text())["wall_time_s"], process, cpu


def decision_seconds(reads: Path, patterns: Path, device: str, repeats: int) -> dict[str, float]:
    """Seconds of the end-overlap decision over every read of ``reads`` in
    one batch, as ``--action trim --min-overlap 3 --min-score-fraction 0.8
    --strand forward`` sets it up (medians of ``repeats``): 'host' the
    bit-sliced pass on one thread, and for the GPU 'gpu' the planes kernel
    over the batch the engine prepared (not counted: preparing it, which the
    screen does anyway)."""
    import numba

    from bpbc.alphabet import READ_CODE
    from bpbc.end_overlap import bit_table
    from bpbc.io import SequenceSource, read_patterns
    from bpbc.pipeline import ScreenSettings, make_screener
    from bpbc.trimming import Trimmer

    records = read_patterns(patterns)
    screener = make_screener(ScreenSettings(strand="forward", min_score_fraction=0.8, device=device), records)
    trimmer = Trimmer("trim", screener, records, str(patterns), min_overlap=MIN_OVERLAP, min_score_fraction=0.8)
    decision = trimmer.decision
    with SequenceSource(reads, kind="reads", raw_fastq=True) as source:
        chunk = next(iter(source.chunks(1 << 30)))
    lengths = np.asarray(chunk.lengths, np.int64)
    buffer = np.frombuffer(chunk.data, np.uint8)
    rows = np.arange(len(lengths), dtype=np.int64)
    table = bit_table(READ_CODE)
    numba.set_num_threads(1)
    times: dict[str, list[float]] = {"host": []}
    flags = np.zeros((len(lengths), len(decision.starts) - 1), np.int32)
    for repeat in range(repeats + 1):
        flags[:] = 0
        started = time.perf_counter()
        decision.flags(buffer, chunk.seq_start, lengths, table, rows, flags)
        if repeat:
            times["host"].append(time.perf_counter() - started)
    if device == "gpu":
        engine = screener.engine
        prepared = engine.prepare_bytes(chunk.data, chunk.seq_start, lengths)
        times["gpu"] = []
        for repeat in range(repeats + 1):
            started = time.perf_counter()
            on_gpu = engine.end_overlap_flags(prepared, lengths, decision).result()
            if repeat:
                times["gpu"].append(time.perf_counter() - started)
        assert np.array_equal(on_gpu, flags > 0), "the GPU's decision is not the host's"
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench trimming", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", type=int, default=400_000)
    parser.add_argument("--length", type=int, default=150)
    parser.add_argument("--substitution-from", type=int, default=20,
                        help="the shortest overlap that may carry a substitution (default 20)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    if args.length < MAX_OVERLAP + 1:
        parser.error(f"--length must be above {MAX_OVERLAP}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bpbc-trim-") as scratch:
        work = Path(scratch)
        data, overlap, substituted = planted_reads(args.reads, args.length, args.substitution_from)
        reads = work / "reads.fq"
        reads.write_bytes(data)
        patterns = work / "adapter.fa"
        patterns.write_text(f">truseq\n{ADAPTER}\n")
        screen = [reads, patterns, "--strand", "forward", "--min-score-fraction", "0.8", "--device", args.device,
                  "-o", work / "hits.paf", "--matched", work / "m.fq", "--unmatched", work / "u.fq", "-q"]
        trim = ["--action", "trim", "--min-overlap", str(MIN_OVERLAP)]
        # exactness: every read written, trimmed where an adapter was found
        subprocess.run(command(*screen, *trim, "--trimmed", work / "t.fq"), check=True)
        ours = trimmed_lengths(work / "t.fq", args.reads)
        expected = np.where(overlap > 0, args.length - overlap, args.length)
        exact = ours == expected
        planted = overlap > 0
        classes = {
            "whole adapter, no errors": planted & ~substituted & (overlap >= len(ADAPTER)),
            "partial 3-19 bp, no errors": planted & ~substituted & (overlap <= 19),
            "partial 20-32 bp, no errors": planted & ~substituted & (overlap >= 20) & (overlap < len(ADAPTER)),
            "one substitution": substituted,
            "no adapter, left whole": ~planted,
        }
        for name, chosen in classes.items():
            share = float(exact[chosen].mean()) if chosen.any() else float("nan")
            target = TARGETS[name]
            rows.append({"figure": f"cut exactly: {name}", "reads": int(chosen.sum()), "value": round(share, 5),
                         "target": "" if target is None else f">= {target}",
                         "met": "" if target is None else share >= target})
        # cutadapt on the same reads
        cutadapt = shutil.which("cutadapt") or str(Path(sys.executable).with_name("cutadapt"))
        started = time.perf_counter()
        subprocess.run([cutadapt, "-a", ADAPTER, "-e", "0.1", "-O", str(MIN_OVERLAP), "-j", "0", "-o",
                        str(work / "c.fq"), str(reads)], check=True, capture_output=True)
        cutadapt_seconds = time.perf_counter() - started
        theirs = trimmed_lengths(work / "c.fq", args.reads)
        agree = float((ours == theirs).mean())
        rows.append({"figure": "same trimmed length as cutadapt -e 0.1 -O 3", "reads": args.reads,
                     "value": round(agree, 5), "target": f">= {CUTADAPT_TARGET}", "met": agree >= CUTADAPT_TARGET})
        rows.append({"figure": "cutadapt exact cuts (all planted reads)", "reads": int(planted.sum()),
                     "value": round(float((theirs == expected)[planted].mean()), 5), "target": "", "met": ""})
        rows.append({"figure": "cutadapt: no adapter, left whole", "reads": int((~planted).sum()),
                     "value": round(float((theirs == expected)[~planted].mean()), 5), "target": "", "met": ""})
        # speed: the screen alone against the same screen trimming, on these reads and on reads without adapters
        clean = work / "clean.fq"
        clean.write_bytes(planted_reads(args.reads, args.length, args.substitution_from, adapters=False)[0])
        for label, path in (("", reads), ("reads without adapters, ", clean)):
            runs: dict[str, list[tuple[float, float, float]]] = {"screen": [], "trim": []}
            for repeat in range(args.repeats + 1):
                for name, extra in (("screen", []), ("trim", trim)):
                    result = timed(command(path, *screen[1:], *extra, "--json", work / "s.json"), work / "s.json")
                    if repeat:  # the first round warms the caches
                        runs[name].append(result)
            for k, what in enumerate(("run wall time (--json)", "process wall time", "process CPU time")):
                screen_s = statistics.median(r[k] for r in runs["screen"])
                trim_s = statistics.median(r[k] for r in runs["trim"])
                ratio = trim_s / screen_s
                target = k == 0 and not label
                rows.append({"figure": f"trim / screen, {label}{what}", "reads": args.reads,
                             "value": round(ratio, 4), "target": f"<= {TIME_TARGET}" if target else "",
                             "met": ratio <= TIME_TARGET if target else "", "screen_s": round(screen_s, 4),
                             "trim_s": round(trim_s, 4)})
        rows.append({"figure": "cutadapt process wall time (-j 0)", "reads": args.reads,
                     "value": round(cutadapt_seconds, 4), "target": "", "met": ""})
        # the decision alone, in this process (last: it sets numba to one thread)
        for label, path in (("", reads), ("reads without adapters, ", clean)):
            seconds = decision_seconds(path, patterns, args.device, args.repeats)
            for key, pass_name in (("host", "host bit-sliced pass, one thread"), ("gpu", "GPU planes kernel")):
                if key in seconds:
                    rows.append({"figure": f"end-overlap decision, {label}{pass_name} (ms)", "reads": args.reads,
                                 "value": round(1e3 * seconds[key], 3), "target": "", "met": ""})
    for row in rows:
        times = f"  (screen {row['screen_s']} s, trim {row['trim_s']} s)" if "screen_s" in row else ""
        print(f"{row['figure']:<60} {row['value']:>10}  {row['target']:<8} {row['met']!s:<5} "
              f"n={row['reads']}{times}")
    gpu = gpu_info() if args.device == "gpu" else None
    env = environment(gpu)
    env.update({"device": args.device, "reads": str(args.reads), "length": str(args.length), "adapter": ADAPTER,
                "repeats": str(args.repeats)})
    path = write_csv(args.out / f"trimming_{device_kind(gpu)}.csv", rows, env)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
