"""Smith-Waterman benchmarks: the paper's Table II setting and the read-screening case.

Table II: pattern 128, 32768 instances, read length 1024..65536; rows are the
bpbc CPU engine (all cores), parasail striped sat (all cores, threads: the
ctypes calls release the GIL), a word-wise GPU baseline (baseline_sw.cu) and
the BPBC GPU kernel. Only the SW computation is timed (reads already encoded
and, for the bit-sliced engines, already transposed: Table I times that).
Slow methods are measured on fewer instances (a time budget per case) and
their time for the full instance count is extrapolated linearly; the
``basis`` column says which.
"""

from __future__ import annotations

import functools
from functools import cache
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dnaio
import numpy as np

from . import error_text, gpu_unavailable, median_seconds_cpu, median_seconds_gpu, progress_bar, say
from .gpu_kernel import time_sw_kernel
from .inputs import pattern_panel, random_codes, random_pattern, random_prepared
from .logic_ceiling import AboveLogicCeiling, LogicCeiling

PAPER_RATIO = {"bpbc_cpu": "8.54 (CPU/BPBC, paper)", "gpu_wordwise": "2.47 (existing GPU/BPBC, paper)"}
BASELINE_PATH = Path(__file__).with_name("baseline_sw.cu")


# ---------------------------------------------------------------- methods

@cache
def baseline_kernel():
    import cupy

    return cupy.RawModule(code=BASELINE_PATH.read_text()).get_function("sw_wordwise")


def baseline_scores(codes_gpu, pattern_masks, scoring):
    """Scores (int32 cupy) of every read row of ``codes_gpu`` (N, L) uint8."""
    import cupy

    n, length = codes_gpu.shape
    m = len(pattern_masks)
    if m > 1024:
        raise ValueError("the word-wise baseline takes patterns of at most 1024 bases (one thread per row)")
    out = cupy.zeros(n, cupy.int32)
    masks = cupy.asarray(np.asarray(pattern_masks, np.uint8))
    threads = -(-m // 32) * 32
    baseline_kernel()((n,), (threads,), (codes_gpu, np.int64(length), masks, np.int32(m), np.int32(scoring.match),
                                        np.int32(scoring.mismatch), np.int32(scoring.first_gap),
                                        np.int32(scoring.gap_extend), out), shared_mem=16 * m)
    return out


def parasail_scores(read_strings, pattern, scoring, threads):
    """parasail sw_striped_profile_sat scores, reads split over ``threads`` threads."""
    import parasail

    matrix = parasail.matrix_create("ACGT", scoring.match, -scoring.mismatch)
    profile = parasail.profile_create_sat(pattern, matrix)
    first_gap, extend = scoring.first_gap, scoring.gap_extend

    def work(chunk):
        return [parasail.sw_striped_profile_sat(profile, read, first_gap, extend).score for read in chunk]

    chunks = [read_strings[k::threads] for k in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(work, chunks))
    scores = np.empty(len(read_strings), np.int64)
    for k, part in enumerate(parts):
        scores[k::threads] = part
    return scores


def codes_to_strings(codes):
    letters = np.frombuffer(b"ACGTN", np.uint8)[np.minimum(codes, 4)]
    return [row.tobytes().decode() for row in letters]


def verify_baseline(scoring, rng) -> str:
    """Baseline scores must equal the CPU engine's exact scores on a sample."""
    import cupy

    from bpbc.alphabet import encode_pattern
    from bpbc.cpu_engine import CpuEngine
    from bpbc.patterns import PatternTable
    from bpbc.scoring import score_planes

    codes = random_codes(rng, 256, 300)
    pattern = random_pattern(rng, 128, 0.05)
    # plant pattern pieces so that scores spread above the noise floor
    for k in range(0, 256, 3):
        piece = np.frombuffer(pattern[10:100].replace("R", "A").replace("Y", "C").replace("S", "G")
                              .replace("W", "T").replace("K", "G").replace("M", "A").replace("B", "C")
                              .replace("D", "A").replace("H", "T").replace("V", "G").replace("N", "A")
                              .encode(), np.uint8)
        codes[k, 50:140] = np.searchsorted(np.frombuffer(b"ACGT", np.uint8), piece)
    masks = encode_pattern(pattern)
    engine = CpuEngine()
    planes = score_planes(2 * len(masks))
    expected = engine.scores(engine.prepare(codes, np.full(len(codes), codes.shape[1])), PatternTable.of([masks]),
                             scoring, planes)[0][:, 0]
    got = baseline_scores(cupy.asarray(codes), masks, scoring).get()
    if not np.array_equal(got, expected):
        bad = int(np.flatnonzero(got != expected)[0])
        raise RuntimeError(f"baseline disagrees with the CPU engine: read {bad}: {got[bad]} != {expected[bad]}")
    return f"baseline == CPU engine on 256 reads (scores {expected.min()}..{expected.max()})"


# ---------------------------------------------------------------- Table II

def _sized(n_target, n_step, cells_per_instance, rate, budget_s):
    """Instances to measure: the target if it fits the budget at ``rate``
    (cells/s), else a multiple of ``n_step`` that does; 0 to skip."""
    if rate is None:
        return min(n_target, n_step)
    fits = int(budget_s * rate / cells_per_instance) // n_step * n_step
    if fits >= n_target:
        return n_target
    return fits if fits >= n_step else 0


def table2_rows(lengths, n_target, m, repeats, use_gpu, budgets, advance, cores) -> list[dict]:
    from bpbc.alphabet import encode_pattern
    from bpbc.cpu_engine import CpuEngine
    from bpbc.scoring import Scoring, score_planes

    scoring = Scoring()
    rng = np.random.default_rng(2)
    pattern = random_pattern(rng, m)
    masks = encode_pattern(pattern)
    planes = score_planes(scoring.max_score(m))  # exact scores, as in the paper
    cpu = CpuEngine()
    rates: dict[str, float | None] = {}
    methods = ["bpbc_cpu", "parasail_sat"] + (["gpu_wordwise", "bpbc_gpu"] if use_gpu else [])
    steps = {"bpbc_cpu": cpu.lanes * cores, "parasail_sat": 64 * cores, "gpu_wordwise": 4096, "bpbc_gpu": n_target}
    rows = []
    for length in lengths:
        cells = length * m
        times = {}
        for method in methods:
            advance.start(f"{method} L={length}")
            row = {"case": "table2", "method": method, "pattern_length": m, "read_length": length,
                   "instances": n_target, "planes": planes}
            try:
                n = _sized(n_target, steps[method], cells, rates.get(method), budgets[method])
                if n == 0:
                    row.update(basis="skipped: over the time budget", seconds="")
                    rows.append(row)
                    continue
                seconds = _time_method(method, n, length, masks, pattern, scoring, planes, repeats, rng, cpu, cores,
                                       warm=method in rates)
                rates[method] = n * cells / seconds
                full = seconds * n_target / n
                times[method] = full
                row.update(instances_measured=n, seconds_measured=f"{seconds:.6g}", seconds=f"{full:.6g}",
                           basis="measured" if n == n_target else f"extrapolated from {n} instances",
                           gcups=f"{n * cells / seconds / 1e9:.4g}")
            except AboveLogicCeiling:
                raise
            except Exception as error:
                row.update(basis="error", error=error_text(error))
            rows.append(row)
            advance(f"{method} L={length}")
        reference = "bpbc_gpu" if use_gpu else "bpbc_cpu"
        for row in rows:
            if row["read_length"] == length and row.get("case") == "table2":
                row["reference_method"] = reference
                if row["method"] in times and reference in times:
                    row["ratio_to_reference"] = f"{times[row['method']] / times[reference]:.4f}"
                row["paper_ratio"] = PAPER_RATIO.get(row["method"], "") if use_gpu else ""
    return rows


def _time_method(method, n, length, masks, pattern, scoring, planes, repeats, rng, cpu, cores, warm):
    """Median seconds of one SW pass of ``method`` over n random reads."""
    from bpbc.patterns import PatternTable

    warmup = 0 if warm else 1
    if method == "bpbc_cpu":
        codes = random_codes(rng, n, length)
        prepared = cpu.prepare(codes, np.full(n, length))
        table = PatternTable.of([masks])
        return median_seconds_cpu(lambda: cpu.scores(prepared, table, scoring, planes), repeats, warmup)
    if method == "parasail_sat":
        reads = codes_to_strings(random_codes(rng, n, length))
        return median_seconds_cpu(lambda: parasail_scores(reads, pattern, scoring, cores), repeats, warmup)
    import cupy

    if method == "gpu_wordwise":
        codes = cupy.random.default_rng(int(rng.integers(1 << 30))).integers(0, 4, size=(n, length), dtype=cupy.uint8)
        seconds = median_seconds_gpu(lambda: baseline_scores(codes, masks, scoring), repeats, warmup)
        del codes
        return seconds
    if method == "bpbc_gpu":
        return bpbc_gpu_seconds(f"sw table2: bpbc_gpu, {n} reads of {length} bp against {len(masks)} bp", n, length,
                                PatternTable.of([masks]), scoring, planes, repeats, warmup, int(rng.integers(1 << 30)))
    raise ValueError(method)


@cache
def _gpu():
    """The run's GPU engine and its device's logic ceiling."""
    from bpbc.gpu_engine import GpuEngine

    engine = GpuEngine()
    return engine, LogicCeiling.of_device(engine.device)


def bpbc_gpu_seconds(figure, n, length, table, scoring, planes, repeats, warmup=1, seed=0) -> float:
    """Median seconds of bpbc's GPU kernel over ``n`` random reads
    (time_sw_kernel), its rate checked against the GPU's logic ceiling
    (``figure`` names it in the error)."""
    import cupy

    engine, ceiling = _gpu()
    prepared = random_prepared(n, length, seed=seed)
    seconds = time_sw_kernel(engine, prepared, table, scoring, planes, repeats, warmup)
    del prepared
    cupy.get_default_memory_pool().free_all_blocks()
    ceiling.rate(figure, n * length * int(table.lengths.sum()), seconds, planes)
    return seconds


# ---------------------------------------------------------------- screening

def screening_rows(read_counts, panel_counts, cpu_counts, length, repeats, use_gpu, advance, cores, panel_size):
    from bpbc.alphabet import encode_pattern
    from bpbc.cpu_engine import CpuEngine
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring, score_planes

    scoring = Scoring()
    threshold = 40
    planes = score_planes(threshold)
    rng = np.random.default_rng(3)
    single = random_pattern(rng, 128)
    panel = pattern_panel(rng, panel_size)
    cases = [("single_128", [single], read_counts), (f"panel_{panel_size}x20-60", panel, panel_counts)]
    rows = []
    cpu = CpuEngine()
    for label, patterns, counts in cases:
        masks = [encode_pattern(p) for p in patterns]
        table = PatternTable.of(masks)  # every pattern in one engine call
        cells_per_read = length * sum(len(m) for m in masks)
        for n in sorted(set(counts) | set(cpu_counts)):
            methods = (["bpbc_cpu"] + (["parasail_sat"] if label.startswith("single") else [])) if n in cpu_counts else []
            methods += ["bpbc_gpu"] if use_gpu and n in counts else []
            for method in methods:
                advance.start(f"{label} {method} N={n}")
                row = {"case": f"screen_{label}", "method": method, "pattern_length": "/".join(
                    str(len(m)) for m in masks) if len(masks) == 1 else f"{len(masks)} patterns",
                    "read_length": length, "instances": n, "threshold": threshold, "planes": planes,
                    "strands": "one orientation"}
                try:
                    if method == "bpbc_gpu":
                        reps = repeats if n <= 4_000_000 else max(1, repeats // 2)
                        seconds = bpbc_gpu_seconds(f"sw screen: bpbc_gpu, {n} reads of {length} bp, {label}", n,
                                                   length, table, scoring, planes, reps, seed=n)
                    elif method == "bpbc_cpu":
                        prepared = cpu.prepare(random_codes(rng, n, length), np.full(n, length))
                        seconds = median_seconds_cpu(
                            lambda: cpu.scores(prepared, table, scoring, planes), repeats)
                    else:
                        reads = codes_to_strings(random_codes(rng, n, length))
                        seconds = median_seconds_cpu(lambda: parasail_scores(reads, single, scoring, cores), 1)
                    row.update(basis="measured", seconds=f"{seconds:.6g}", gcups=f"{n * cells_per_read / seconds / 1e9:.4g}",
                               reads_per_s=f"{n / seconds:.4g}")
                except AboveLogicCeiling:
                    raise
                except Exception as error:
                    row.update(basis="error", error=error_text(error))
                rows.append(row)
                advance(f"{label} {method} N={n}")
    return rows


def write_fastq_gz(path, n, length, rng, plant=(), every=50):
    """Random reads; every ``every``-th carries one of the ``plant`` sequences
    (cycling; on either strand, with about one substitution in 30 bases when
    there are several), so the PAF output is not empty."""
    complement = np.frombuffer(b"TGCA", np.uint8)
    index = np.zeros(256, np.uint8)
    index[np.frombuffer(b"ACGT", np.uint8)] = np.arange(4)
    pieces = [np.frombuffer(p.encode()[:length], np.uint8) for p in plant]
    with gzip.open(path, "wb", compresslevel=1) as fh:
        for start in range(0, n, 100_000):
            count = min(100_000, n - start)
            letters = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, size=(count, length), dtype=np.uint8)]
            for row in range(-start % every, count, every) if pieces else ():
                piece = pieces[(start + row) // every % len(pieces)].copy()
                if len(pieces) > 1:
                    if rng.random() < 0.5:
                        piece = complement[index[piece]][::-1]
                    mutated = rng.random(len(piece)) < 1 / 30
                    piece[mutated] = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, int(mutated.sum()))]
                at = int(rng.integers(0, length - len(piece) + 1))
                letters[row, at:at + len(piece)] = piece
            quality = b"I" * length
            fh.write(b"".join(b"@r%d\n%s\n+\n%s\n" % (start + k, row.tobytes(), quality)
                              for k, row in enumerate(letters)))


BARE_READ_PASS = "import sys, dnaio\nwith dnaio.open(sys.argv[1]) as f:\n    for record in f:\n        pass\n"
#: bpbc's own reader alone (decompress, parse into chunks), and with every
#: record written back to a gzip file as --unmatched writes it: the floors of
#: a run that reads (and copies) the whole input
BPBC_READ_PASS = """
import sys
from bpbc.io import AtomicOutput, ReadsOutput, SequenceSource
with SequenceSource(sys.argv[1], raw_fastq=True) as source:
    output = AtomicOutput(sys.argv[2], "reads") if len(sys.argv) > 2 else None
    sink = None if output is None else ReadsOutput(output, source)
    for chunk in source.chunks(100_000, ramp=8):
        if sink is not None:
            chunk.write(sink, range(len(chunk)))
    if output is not None:
        output.commit()
"""


def _run_timed(args, quiet: bool = False) -> float:
    """Seconds ``args`` ran (``quiet``: its output is dropped)."""
    start = time.perf_counter()
    subprocess.run(args, check=True, **({"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL} if quiet else {}))
    return time.perf_counter() - start


def library_rows(n, length, repeats, cores) -> list[dict]:
    """The library call ``bpbc.screen`` (encoding, both passes, traceback of
    the hits, the list of alignments: what it returns) on n reads against one
    128 bp pattern, forward strand, T = 40, and a row with its dense score
    table read too (``.scores``: one more pass, every score kept), beside
    parasail's striped saturating SW on the same reads with the same threads,
    in the same run: the repeats of the methods are interleaved, so a slower
    spell of a shared machine falls on all of them. Every row says which numba CPU target the process compiled
    for and the kernel shape it chose (``cpu_target``, ``kernel_shape``)."""
    import bpbc
    from bpbc.cpu_engine import cpu_target, kernel_shape
    from bpbc.scoring import Scoring

    rng = np.random.default_rng(8)
    pattern = random_pattern(rng, 128)
    reads = codes_to_strings(random_codes(rng, n, length))
    for k in range(0, n, 50):  # some hits, so the traceback is in the time too
        reads[k] = reads[k][:10] + pattern[:100] + reads[k][110:]
    # parasail's own speed without its per-call cost: the same cells as reads 32 times longer
    long_reads = ["".join(reads[k:k + 32]) for k in range(0, n, 32)]

    def screen(threads=cores):
        return bpbc.screen(reads, [pattern], threshold=40, strand="forward", device="cpu", threads=threads)

    # method: (call, threads it runs on)
    calls = {
        # what the call returns: the passing reads and their alignments
        "bpbc.screen": (lambda: screen().alignments, cores),
        "bpbc.screen, 1 thread": (lambda: screen(1).alignments, 1),
        # and the dense score table too (computed when first read)
        "bpbc.screen + .scores": (lambda: screen().scores, cores),
        # parasail's Python calls hold the GIL between alignments: on more
        # threads its rate per core falls (here 2 threads took 1.5-2x the time
        # of 1), so it runs on one thread too and the better rate per core is
        # the reference
        "parasail_sat, 1 thread": (lambda: parasail_scores(reads, pattern, Scoring(), 1), 1),
        "parasail_sat": (lambda: parasail_scores(reads, pattern, Scoring(), cores), cores),
        "parasail_sat reads joined 32 to 1": (lambda: parasail_scores(long_reads, pattern, Scoring(), cores), cores),
    }
    times: dict[str, list[float]] = {method: [] for method in calls}
    for call, _ in calls.values():  # warm-up: compilation, caches
        call()
    for _ in range(max(1, repeats)):
        for method, (call, _) in calls.items():
            start = time.perf_counter()
            call()
            times[method].append(time.perf_counter() - start)
    seconds = {method: float(np.median(values)) for method, values in times.items()}
    cells = n * length * 128
    per_core = {method: cells / seconds[method] / 1e9 / threads for method, (_, threads) in calls.items()}
    reference = max(per_core["parasail_sat"], per_core["parasail_sat, 1 thread"])
    target = cpu_target()
    rows = []
    for method, value in seconds.items():
        rows.append({"case": "library_single_128", "method": method, "pattern_length": 128, "read_length": length,
                     "instances": n, "threshold": 40, "strands": "forward", "basis": "measured", "threads": calls[method][1],
                     "seconds": f"{value:.6g}", "gcups": f"{cells / value / 1e9:.4g}",
                     "gcups_per_core": f"{per_core[method]:.4g}",
                     "reference_method": "parasail_sat, the better per core of 1 and all threads",
                     "ratio_to_reference": f"{per_core[method] / reference:.4f}",
                     "ratio_to_parasail_joined_reads": f"{per_core[method] / per_core['parasail_sat reads joined 32 to 1']:.4f}",
                     "repeats": len(times[method]), "seconds_all": " ".join(f"{t:.4g}" for t in times[method]),
                     "cpu_target": target.label, "kernel_shape": str(kernel_shape(target))})
    return rows


#: numba CPU targets the library row runs under besides the machine's own
#: ("native"): an AVX2 machine, as numba compiles for one when told so
#: (numba's NUMBA_CPU_NAME and NUMBA_CPU_FEATURES); x86-64 hosts only
EMULATED_TARGETS = {
    "haswell": {"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": "+avx2,+fma,+bmi2,+popcnt,+sse4.2"},
}


def cpu_targets() -> dict[str, dict[str, str]]:
    """Target name -> the environment that selects it, for this host."""
    import platform

    targets = {"native": {}}
    if platform.machine().lower() in ("x86_64", "amd64"):
        targets.update(EMULATED_TARGETS)
    return targets


_LIBRARY_CHILD = ("import json, sys\n"
                  "from bench.sw_bench import library_rows\n"
                  "print(json.dumps(library_rows(*map(int, sys.argv[1:]))))\n")


def library_target_rows(n, length, repeats, cores, targets=None) -> list[dict]:
    """``library_rows`` once per numba CPU target (``cpu_targets()``), each in
    a process of its own with kernel caches of its own (fresh directories for
    ``BPBC_CACHE_DIR`` and ``NUMBA_CACHE_DIR``), so nothing compiled for one
    target is reused by another; each row's ratio to parasail comes from its
    own process. Rows get ``cpu_target_name`` (native, haswell, ...)."""
    import json

    rows = []
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="bpbc-bench-targets-") as caches:
        for name, settings in (targets or cpu_targets()).items():
            env = {key: value for key, value in os.environ.items()
                   if key not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
            env.update(settings, BPBC_CACHE_DIR=os.path.join(caches, name, "bpbc"),
                       NUMBA_CACHE_DIR=os.path.join(caches, name, "numba"))
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(root), env.get("PYTHONPATH"))))
            try:
                done = subprocess.run([sys.executable, "-c", _LIBRARY_CHILD, str(n), str(length), str(repeats),
                                       str(cores)], env=env, cwd=root, capture_output=True, text=True, check=True)
                for row in json.loads(done.stdout.strip().splitlines()[-1]):
                    rows.append({**row, "cpu_target_name": name})
            except (subprocess.CalledProcessError, ValueError, IndexError) as error:
                detail = getattr(error, "stderr", "") or ""
                rows.append({"case": "library_single_128", "cpu_target_name": name, "basis": "error",
                             "error": error_text(RuntimeError(f"{error}: {detail[-200:]}"))})
            say(f"bench sw: library row, target {name}: "
                + ", ".join(f"{r.get('method')} {r.get('seconds')} s (x{r.get('ratio_to_reference')})"
                            for r in rows if r.get("cpu_target_name") == name))
    return rows


#: the end-to-end inputs hold at most this many distinct reads; larger ones repeat them
DISTINCT_READS = 1 << 20


def write_e2e_reads(path, n, length, rng, patterns, every):
    """n reads as FASTQ.gz; above DISTINCT_READS the file is that many reads
    written once and repeated (concatenated gzip members), which keeps
    writing 10M reads to seconds."""
    if n <= DISTINCT_READS:
        write_fastq_gz(path, n, length, rng, plant=patterns, every=every)
        return
    unit = f"{path}.unit"
    write_fastq_gz(unit, DISTINCT_READS, length, rng, plant=patterns, every=every)
    tail = f"{path}.tail"
    write_fastq_gz(tail, n % DISTINCT_READS, length, rng, plant=patterns, every=every)
    with open(path, "wb") as out:
        for part in [unit] * (n // DISTINCT_READS) + [tail]:
            with open(part, "rb") as fh:
                while block := fh.read(1 << 24):
                    out.write(block)
    os.unlink(unit)
    os.unlink(tail)


def end_to_end_row(label, n, length, patterns, threshold, device, threads=None, check_cpu=False, repeats=1):
    """``bpbc-screen`` as a user runs it (a new process: FASTQ.gz in, PAF,
    --matched and --unmatched (gzip) and --json out, both strands) beside a
    bare dnaio read pass over the same file (the I/O floor), in the same run.
    Stage seconds are the command's own (``--json``); peak memory is the
    process's maximum resident set. A first run on up to 20000 reads fills the
    kernel caches, so compilation is not timed. The bare pass and the command
    alternate ``repeats`` times; the row holds their medians (and every time). With ``check_cpu`` the same
    command runs with ``--device cpu`` too and the PAF outputs are compared."""
    import hashlib
    import json
    import resource

    rng = np.random.default_rng(4)
    row = {"case": f"end_to_end_{label}", "method": f"bpbc-screen --device {device}", "read_length": length,
           "instances": n, "threshold": threshold, "strands": "both", "pattern_length": f"{len(patterns)} patterns"}
    every = 50 if len(patterns) == 1 else 3
    with tempfile.TemporaryDirectory() as work:
        reads, pats, warm_up = (os.path.join(work, name) for name in ("reads.fq.gz", "patterns.fa", "warm_up.fq.gz"))
        write_e2e_reads(reads, n, length, rng, patterns, every)
        write_fastq_gz(warm_up, min(n, 20000), length, rng, plant=patterns, every=every)
        Path(pats).write_text("".join(f">p{k}\n{p}\n" for k, p in enumerate(patterns)))
        out = {name: os.path.join(work, name) for name in ("out.paf", "m.fq.gz", "u.fq.gz", "s.json")}
        command = [sys.executable, "-m", "bpbc", reads, pats, "--threshold", str(threshold), "--device", device,
                   "-o", out["out.paf"], "--matched", out["m.fq.gz"], "--unmatched", out["u.fq.gz"],
                   "--json", out["s.json"], "--quiet"] + (["--threads", str(threads)] if threads else [])
        _run_timed([*command[:3], warm_up, *command[4:]])
        bares, walls = [], []
        for _ in range(repeats):  # alternating: a slow spell of a shared host falls on both
            bares.append(_run_timed([sys.executable, "-c", BARE_READ_PASS, reads]))
            walls.append(_run_timed(command))
        bare, wall = float(np.median(bares)), float(np.median(walls))
        row["bare_read_runs_s"] = " ".join(f"{t:.3f}" for t in bares)
        row["runs_s"] = " ".join(f"{t:.3f}" for t in walls)
        # where the rest goes: bpbc's reader alone, reading and writing every
        # record back, the command without the reads outputs
        row["bpbc_read_s"] = f"{_run_timed([sys.executable, '-c', BPBC_READ_PASS, reads]):.4g}"
        row["bpbc_read_write_s"] = (
            f"{_run_timed([sys.executable, '-c', BPBC_READ_PASS, reads, os.path.join(work, 'copy.fq.gz')]):.4g}")
        paf_only = [arg for arg in command if arg not in (out["m.fq.gz"], out["u.fq.gz"], "--matched", "--unmatched")]
        summary = json.loads(Path(out["s.json"]).read_text())  # the full command's (paf_only rewrites it)
        row["paf_only_s"] = f"{_run_timed(paf_only):.4g}"
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if check_cpu:
            paf_digest = hashlib.md5(Path(out["out.paf"]).read_bytes()).hexdigest()
            cpu_command = [*command]
            cpu_command[cpu_command.index("--device") + 1] = "cpu"
            _run_timed([*cpu_command[:3], warm_up, *cpu_command[4:]])
            row["cpu_seconds"] = f"{_run_timed(cpu_command):.4g}"
            row["paf_identical_to_cpu"] = hashlib.md5(Path(out["out.paf"]).read_bytes()).hexdigest() == paf_digest
    row.update(basis="measured", seconds=f"{wall:.6g}", reads_per_s=f"{n / wall:.4g}",
               paf_lines=summary["alignments"], reads_passing=summary["reads_passing"],
               bare_read_s=f"{bare:.4g}", ratio_to_bare_read=f"{wall / bare:.3f}", peak_rss_mb=f"{peak:.0f}",
               **{f"{stage}_s": f"{value:.4g}" for stage, value in summary["stage_seconds"].items()},
               **{f"{stage}_share": f"{value:.3f}" for stage, value in summary["stage_shares"].items()})
    return row


def pairs_rows(n, length, single, panel, device, repeats) -> list[dict]:
    """The users' features against the runs they extend, in the same run:
    paired reads (n pairs, two FASTQ.gz files, all four read outputs) against
    the single-end run of the first file (one 128 bp pattern, T = 40), and
    demultiplexing (``--matched '{name}.fq.gz'``, 96 files) against one
    matched file (96 x 24 bp panel, T = 36). Each command runs ``repeats``
    times, the pair alternating, after a warm-up; medians are reported."""
    rng = np.random.default_rng(9)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        path = functools.partial(os.path.join, work)
        for name, patterns, every in (("r1", single[0], 50), ("r2", single[0], 50), ("panel", panel[0], 3)):
            write_e2e_reads(path(f"{name}.fq.gz"), n, length, rng, patterns, every)
        for name, patterns in (("single.fa", single[0]), ("panel.fa", panel[0])):
            Path(path(name)).write_text("".join(f">p{k}\n{p}\n" for k, p in enumerate(patterns)))
        os.mkdir(path("demux"))
        base = [sys.executable, "-m", "bpbc", "--device", device, "--quiet", "-o", path("out.paf")]
        comparisons = {
            "paired_128": (
                [path("r1.fq.gz"), path("single.fa"), "-t", str(single[1]), "--matched", path("m.fq.gz"),
                 "--unmatched", path("u.fq.gz")],
                [path("r1.fq.gz"), "-2", path("r2.fq.gz"), path("single.fa"), "-t", str(single[1]),
                 "--matched", path("m1.fq.gz"), "--matched2", path("m2.fq.gz"), "--unmatched", path("u1.fq.gz"),
                 "--unmatched2", path("u2.fq.gz")],
                "single-end, first file", "paired-end, both files", 2.1),
            "demux_96x24": (
                [path("panel.fq.gz"), path("panel.fa"), "-t", str(panel[1]), "--matched", path("m.fq.gz"),
                 "--unmatched", path("u.fq.gz")],
                [path("panel.fq.gz"), path("panel.fa"), "-t", str(panel[1]), "--matched",
                 path("demux", "{name}.fq.gz"), "--unmatched", path("u.fq.gz")],
                "one --matched file", "--matched {name}.fq.gz (one file per pattern)", 1.1),
        }
        for label, (reference, feature, reference_name, feature_name, target) in comparisons.items():
            times = {reference_name: [], feature_name: []}
            for args in (reference, feature):
                _run_timed(base + args)  # warm-up: kernel caches, page cache
            for _ in range(repeats):
                times[reference_name].append(_run_timed(base + reference))
                times[feature_name].append(_run_timed(base + feature))
            reference_s = float(np.median(times[reference_name]))
            for method, values in times.items():
                seconds = float(np.median(values))
                rows.append({"case": label, "method": f"bpbc-screen --device {device}: {method}",
                             "read_length": length, "instances": n, "strands": "both", "basis": "measured",
                             "seconds": f"{seconds:.6g}", "reads_per_s": f"{n / seconds:.4g}",
                             "reference_method": reference_name, "ratio_to_reference": f"{seconds / reference_s:.3f}",
                             "target_ratio": target if method == feature_name else "",
                             "repeats": " ".join(f"{value:.3f}" for value in values)})
            if label == "demux_96x24":
                rows[-1]["files_written"] = len(os.listdir(path("demux")))
    return rows


_RUN_REPORTING_PEAK = ("import resource, sys, time\nfrom bpbc.cli import main\nstatus = main(sys.argv[1:])\n"
                       "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(status)\n")


def stream_row(n, length, patterns, threshold, device) -> dict:
    """``bpbc-screen -`` reading n reads of plain FASTQ from a pipe (a feeder
    repeating a file of DISTINCT_READS reads), PAF to a file: throughput and
    the screening process's own peak resident set, which must not grow with n."""
    import json

    rng = np.random.default_rng(10)
    with tempfile.TemporaryDirectory() as work:
        path = functools.partial(os.path.join, work)
        unit_reads = min(n, DISTINCT_READS)
        write_fastq_gz(path("unit.fq.gz"), unit_reads, length, rng, plant=patterns, every=50)
        with gzip.open(path("unit.fq.gz"), "rb") as packed, open(path("unit.fq"), "wb") as plain:
            while block := packed.read(1 << 24):
                plain.write(block)
        Path(path("p.fa")).write_text("".join(f">p{k}\n{p}\n" for k, p in enumerate(patterns)))
        repeats = -(-n // unit_reads)
        command = [sys.executable, "-c", _RUN_REPORTING_PEAK, "-", path("p.fa"), "-t", str(threshold), "--device",
                   device, "-q", "-o", path("out.paf"), "--json", path("s.json")]
        start = time.perf_counter()
        feeder = subprocess.Popen(["sh", "-c", f'for i in $(seq {repeats}); do cat "{path("unit.fq")}"; done'],
                                  stdout=subprocess.PIPE)
        done = subprocess.run(command, stdin=feeder.stdout, capture_output=True, check=True)
        feeder.stdout.close()
        feeder.wait()
        wall = time.perf_counter() - start
        summary = json.loads(Path(path("s.json")).read_text())
    peak_mb = int(done.stderr.split()[-1]) / 1024
    return {"case": "stream_stdin_single_128", "method": f"bpbc-screen - --device {device}", "read_length": length,
            "instances": summary["reads"], "threshold": threshold, "strands": "both", "basis": "measured",
            "seconds": f"{wall:.6g}", "reads_per_s": f"{summary['reads'] / wall:.4g}",
            "paf_lines": summary["alignments"], "peak_rss_mb": f"{peak_mb:.0f}"}


# ---------------------------------------------------------------- entry

def _tool(name: str, env: str) -> str | None:
    """The command ``name``: $``env`` if set, else on PATH (None: not found)."""
    return os.environ.get(env) or shutil.which(name)


def tools_rows(single_reads, panel_reads, patterns, threads, repeats) -> list[dict]:
    """``bpbc-screen --device cpu --threads T`` against the screeners people
    use, on the same FASTQ.gz, alternating, medians of ``repeats``:

    * BBDuk (``bbduk.sh k=23 hdist=1 threads=T``, $BBDUK or on PATH; a k-mer
      screen, both strands) against bpbc on ``single_reads`` reads and one 128
      bp pattern (T = 40, both strands), matched reads written by both, PAF by
      bpbc;
    * cutadapt (``-j T -b file:panel.fa -e 0.1 -O 20 --revcomp --action none``,
      matched and unmatched reads; $CUTADAPT or on PATH) against bpbc on
      ``panel_reads`` reads and the 96 x 24 bp panel (T = 36, both strands,
      PAF, --matched and --unmatched). cutadapt searches by edit distance
      with partial overlaps, bpbc by local SW score: the models differ.

    A row per tool with both commands' times, ratio_to_reference = tool /
    bpbc (above 1: bpbc faster), and the reads each kept."""
    rows = []
    cases = [("bbduk", "BBDUK", single_reads, "single_128"), ("cutadapt", "CUTADAPT", panel_reads, "panel_96x24")]
    for tool, env, n, label in cases:
        row = {"case": f"tools_{tool}", "method": f"bpbc-screen --device cpu --threads {threads}", "read_length": 150,
               "instances": n, "strands": "both", "threads": threads}
        command = _tool("bbduk.sh" if tool == "bbduk" else tool, env)
        if command is None:
            rows.append({**row, "basis": "skipped", "error": f"{tool} not found (set ${env})"})
            continue
        sequences, threshold = patterns[label]
        with tempfile.TemporaryDirectory() as work:
            reads, pats = os.path.join(work, "reads.fq.gz"), os.path.join(work, "patterns.fa")
            write_e2e_reads(reads, n, 150, np.random.default_rng(4), sequences, 50 if len(sequences) == 1 else 3)
            Path(pats).write_text("".join(f">p{k}\n{p}\n" for k, p in enumerate(sequences)))
            out = {name: os.path.join(work, name) for name in ("o.paf", "m.fq.gz", "u.fq.gz", "tm.fq.gz", "tu.fq.gz")}
            bpbc = [sys.executable, "-m", "bpbc", reads, pats, "--threshold", str(threshold), "--device", "cpu",
                    "--threads", str(threads), "-o", out["o.paf"], "--matched", out["m.fq.gz"], "--quiet"]
            if tool == "bbduk":
                described = f"bbduk.sh k=23 hdist=1 threads={threads} outm=..."
                other = [command, f"in={reads}", f"ref={pats}", "k=23", "hdist=1", f"threads={threads}",
                         f"outm={out['tm.fq.gz']}", "overwrite=t"]
            else:
                bpbc += ["--unmatched", out["u.fq.gz"]]
                described = (f"cutadapt -j {threads} -b file:panel.fa -e 0.1 -O 20 --revcomp --action none"
                             " -o matched --untrimmed-output unmatched")
                other = [command, "-j", str(threads), "-b", f"file:{pats}", "-e", "0.1", "-O", "20", "--revcomp",
                         "--action", "none", "-o", out["tm.fq.gz"], "--untrimmed-output", out["tu.fq.gz"], reads]
            _run_timed([*bpbc[:3], reads, *bpbc[4:]])  # fills the kernel caches
            ours, theirs = [], []
            for _ in range(repeats):  # alternating: a slow spell of a shared machine falls on both
                ours.append(_run_timed(bpbc))
                theirs.append(_run_timed(other, quiet=True))
            kept = {name: sum(1 for _ in dnaio.open(out[name])) for name in ("m.fq.gz", "tm.fq.gz")}
        mine, tool_s = float(np.median(ours)), float(np.median(theirs))
        rows.append({**row, "basis": "measured", "seconds": f"{mine:.4g}", "runs_s": " ".join(f"{t:.3f}" for t in ours),
                     "reference_method": described,
                     "reference_s": f"{tool_s:.4g}", "reference_runs_s": " ".join(f"{t:.3f}" for t in theirs),
                     "ratio_to_reference": f"{tool_s / mine:.3f}", "reads_passing": kept["m.fq.gz"],
                     "reference_reads_kept": kept["tm.fq.gz"]})
    return rows


def e2e_patterns() -> dict:
    """The end-to-end cases' patterns and thresholds: one 128 bp pattern (T = 40)
    and the panel of 96 x 24 bp (T = 36)."""
    rng = np.random.default_rng(6)
    return {"single_128": ([random_pattern(rng, 128)], 40),
            "panel_96x24": ([random_pattern(rng, 24) for _ in range(96)], 36)}


def run(quick: bool = False, repeats: int = 3, large=(1 << 20,), only=None, check_cpu=False, pairs_reads=1 << 20,
        stream_reads=(), stream_device="cpu", tools_reads=(1 << 20, 100_000)):
    from bpbc.cpu_engine import CpuEngine

    cores = os.cpu_count() or 1
    reason = "--quick: CPU only" if quick else gpu_unavailable()
    use_gpu = reason is None
    if reason:
        say(f"bench sw: GPU part skipped ({reason})")
    rows = []
    if quick:
        lengths, n_target, budgets = [256, 512], CpuEngine().lanes * cores, dict.fromkeys(("bpbc_cpu", "parasail_sat"), 5.0)
        screen_args = dict(read_counts=[], panel_counts=[], cpu_counts=[4096], panel_size=20)
        e2e = [("single_128", 2000, "cpu")]
    else:
        lengths = [1024 << k for k in range(7)]
        n_target = 32768
        budgets = {"bpbc_cpu": 6.0, "parasail_sat": 6.0, "gpu_wordwise": 10.0, "bpbc_gpu": 30.0}
        screen_args = dict(read_counts=[1 << 20, 4 << 20, 16 << 20], panel_counts=[1 << 20, 4 << 20, 16 << 20],
                           cpu_counts=[1 << 20], panel_size=100)
        device = "gpu" if use_gpu else "cpu"
        e2e = [("single_128", n, device) for n in large] + [("panel_96x24", n, device) for n in large]
    parts = set(only or ("table2", "library", "screen", "e2e", "pairs", "stream"))
    steps = len(lengths) * (4 if use_gpu else 2) + 20 + len(e2e)
    with progress_bar(steps, "sw") as advance:
        if use_gpu and "table2" in parts:
            try:
                say(f"bench sw: {verify_baseline(__import__('bpbc.scoring').scoring.Scoring(), np.random.default_rng(5))}")
            except Exception as error:
                say(f"bench sw: baseline check FAILED, its rows are not trustworthy: {error_text(error)}")
                rows.append({"case": "baseline_check", "method": "gpu_wordwise", "basis": "error",
                             "error": error_text(error)})
        if "table2" in parts:
            rows += table2_rows(lengths, n_target, 128, repeats, use_gpu, budgets, advance, cores)
        if "library" in parts:
            if quick:  # in this process, on its target: no per-target compilation in CI
                rows += [{**row, "cpu_target_name": "current"} for row in library_rows(4096, 150, repeats, cores)]
            else:
                rows += library_target_rows(40_000, 150, repeats, cores)
        if "screen" in parts:
            rows += screening_rows(length=150, repeats=repeats, use_gpu=use_gpu, advance=advance, cores=cores,
                                   **screen_args)
        patterns = e2e_patterns()
        for label, n, device in e2e if "e2e" in parts else ():
            advance.start(f"end-to-end {label}")
            try:
                rows.append(end_to_end_row(label, n, 150, *patterns[label], device, check_cpu=check_cpu,
                                           repeats=1 if quick else repeats))
                say(f"bench sw: {rows[-1]}")
            except Exception as error:
                rows.append({"case": f"end_to_end_{label}", "basis": "error", "error": error_text(error)})
            advance(f"end-to-end {label}")
        if "pairs" in parts:
            advance.start("paired and demultiplexed runs")
            rows += pairs_rows(2000 if quick else pairs_reads, 150, patterns["single_128"], patterns["panel_96x24"],
                               "gpu" if use_gpu else "cpu", 1 if quick else repeats)
            say(f"bench sw: {rows[-4:]}")
            advance("paired and demultiplexed runs")
        if "tools" in parts:
            advance.start("BBDuk and cutadapt")
            rows += tools_rows(4000 if quick else tools_reads[0], 2000 if quick else tools_reads[1], patterns,
                               min(cores, 2) if quick else cores, 1 if quick else repeats)
            say(f"bench sw: {rows[-2:]}")
            advance("BBDuk and cutadapt")
        for n in [3000] if quick else stream_reads if "stream" in parts else ():
            advance.start(f"stream of {n} reads")
            rows.append(stream_row(n, 150, *patterns["single_128"], "cpu" if quick else stream_device))
            say(f"bench sw: {rows[-1]}")
            advance(f"stream of {n} reads")
    _screening_ratios(rows, "bpbc_gpu" if use_gpu else "bpbc_cpu")
    return rows, use_gpu


def _screening_ratios(rows, reference):
    """ratio_to_reference = seconds / seconds of ``reference`` in the same case and N."""
    times = {(r["case"], r["instances"]): float(r["seconds"]) for r in rows
             if str(r.get("case", "")).startswith("screen_") and r.get("method") == reference and r.get("seconds")}
    for row in rows:
        key = (row.get("case"), row.get("instances"))
        if key in times and row.get("seconds"):
            row["reference_method"] = reference
            row["ratio_to_reference"] = f"{float(row['seconds']) / times[key]:.4f}"
