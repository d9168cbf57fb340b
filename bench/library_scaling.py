"""The library call on every core: ``python -m bench.library_scaling [--quick] [--reads N ...] [--threads T ...]``.

Times ``bpbc.screen`` (CPU engine; one random 128 bp pattern, forward
strand, T = 40; 150 bp reads, one in 50 holding 100 bp of the pattern) on
the same reads given three ways:

* ``str``: a list of Python strings;
* ``buffer``: ``bpbc.Reads.from_buffer(data, offsets)``, one ``bytes`` of
  the sequences back to back (made outside the timed call: it is the user's);
* ``records``: a list of ``dnaio.SequenceRecord`` with names and qualities.

For each form and read count, every thread count runs once per round,
rounds repeated (the thread counts interleaved, so a slow spell of a shared
machine falls on all of them); a row gives the median and the best of its
rounds and ``ratio_to_1_thread``, the 1-thread median over its own. The
timed call returns the complete result (indices and the alignment table);
``list_s`` is the median time ``.alignments`` then takes to build its
list of Python objects, on one thread, outside the timed call
(``ratio_with_list_to_1_thread`` counts it in). Every form's result is
checked against the str form's, per thread count: the benchmark fails
rather than time a wrong answer.

``cpu_s`` is the median CPU time of the process during the call (user +
system, all threads): above ``threads`` x ``seconds`` nothing waits, far
below it threads wait on something serial.

``--phases`` (on by default; ``--no-phases`` leaves it out) then times each
thread count's calls once more, split into the call's phases: ``convert``
(the objects' text into one buffer, ``Reads.of``), ``pack`` (encoding and
bit-transposing, the engine's ``prepare``), ``pass1`` (the screen of every
read, ``CpuEngine.flagged``/``hits``), ``pass2`` (the flagged instances
again with scores, ``Screener._pair_scores``), ``align`` (the traceback,
``Screener.align``) and ``other`` (the rest of the call): which of them
stops scaling on a host. The timers wrap those methods for these rounds
only (the calls' results are checked as before).

Writes ``library_scaling_cpu.csv`` (``--quick``: ``library_scaling_quick_cpu.csv``)
and ``library_scaling_phases_cpu.csv`` under ``--out`` with the environment
header, which names the CPU's topology (logical CPUs, cores, sockets, as
the system shows them) and the transparent huge page setting. A checkout without
``bpbc.Reads`` (before it existed) runs the str and records rows only:
``PYTHONPATH=/path/to/old python -m bench.library_scaling``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file: the repository root on the path, after any PYTHONPATH
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.environment import RESULTS_DIR, environment, write_csv  # noqa: E402

PATTERN_LENGTH, READ_LENGTH, THRESHOLD, HIT_EVERY = 128, 150, 40, 50
FORMS = ("str", "buffer", "records")


def make_reads(n: int, seed: int = 8) -> tuple[str, list[str]]:
    """A random pattern and n random reads, every HIT_EVERY-th holding 100 bases of it."""
    rng = np.random.default_rng(seed)
    pattern = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, PATTERN_LENGTH)].tobytes().decode()
    letters = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, (n, READ_LENGTH))]
    reads = [row.tobytes().decode() for row in letters]
    for k in range(0, n, HIT_EVERY):
        reads[k] = reads[k][:10] + pattern[:100] + reads[k][110:]
    return pattern, reads


def make_input(form: str, reads: list[str]):
    """The reads in ``form``, and a function giving the call's argument (for
    ``buffer``, wrapping the user's bytes is part of the call)."""
    import bpbc

    if form == "str":
        return lambda: reads
    if form == "buffer":
        data = "".join(reads).encode()
        offsets = np.zeros(len(reads) + 1, np.int64)
        np.cumsum([len(read) for read in reads], out=offsets[1:])
        return lambda: bpbc.Reads.from_buffer(data, offsets)
    if form == "records":
        import dnaio

        quality = "F" * READ_LENGTH
        records = [dnaio.SequenceRecord(f"A00123:8:H5:1:1101:{i}:1 1:N:0:ACGT", read, quality)
                   for i, read in enumerate(reads)]
        return lambda: records
    raise ValueError(form)


def result_key(result) -> tuple:
    """Everything the call returns, as comparable values."""
    return result.indices.tolist(), result.alignments


def default_threads(cores: int) -> list[int]:
    counts = [t for t in (1, 2, 4, 8, 16, 32, 64, 128) if t <= cores]
    return counts + ([cores] if cores not in counts else [])


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


#: phase -> (module, class, method) whose calls it times
PHASES = {
    "convert": [("bpbc.reads", "Reads", "of")],
    "pack": [("bpbc.cpu_engine", "CpuEngine", "prepare"), ("bpbc.cpu_engine", "CpuEngine", "prepare_bytes")],
    "pass1": [("bpbc.cpu_engine", "CpuEngine", "flagged"), ("bpbc.cpu_engine", "CpuEngine", "hits")],
    "pass2": [("bpbc.screener", "Screener", "_pair_scores")],
    "align": [("bpbc.screener", "Screener", "align")],
}


@contextlib.contextmanager
def phase_timers(spent: dict[str, float]):
    """Inside the block, the methods of :data:`PHASES` add their wall time to
    ``spent[phase]`` (an outer call only, where one calls another)."""
    import importlib

    saved = []
    depth = [0]

    def timed(phase, method):
        @functools.wraps(method)
        def wrapper(*args, **kwargs):
            if depth[0]:
                return method(*args, **kwargs)
            depth[0] += 1
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - start
                depth[0] -= 1
        return wrapper

    try:
        for phase, places in PHASES.items():
            for module, owner, name in places:
                cls = getattr(importlib.import_module(module), owner)
                if name not in vars(cls):  # an older checkout
                    continue
                raw = vars(cls)[name]
                saved.append((cls, name, raw))
                if isinstance(raw, classmethod):
                    setattr(cls, name, classmethod(timed(phase, raw.__func__)))
                else:
                    setattr(cls, name, timed(phase, raw))
        yield
    finally:
        for cls, name, raw in saved:
            setattr(cls, name, raw)


def measure(n: int, forms: list[str], threads: list[int], rounds: int, phases: bool) -> tuple[list[dict], list[dict]]:
    import bpbc

    pattern, reads = make_reads(n)

    def screen(argument, t: int):
        return bpbc.screen(argument, [pattern], threshold=THRESHOLD, strand="forward", device="cpu", threads=t)

    rows, phase_rows = [], []
    expected = None
    for form in forms:
        if form == "buffer" and not hasattr(bpbc, "Reads"):
            print(f"  {form}: skipped (this bpbc has no Reads)", file=sys.stderr)
            continue
        argument = make_input(form, reads)
        for t in threads:  # warm-up (compilation, caches) and the check against the str form
            key = result_key(screen(argument(), t))
            expected = key if expected is None else expected
            if key != expected:
                raise AssertionError(f"{n} reads, {form}, {t} threads: the result differs from the str form's")
        times: dict[int, list[float]] = {t: [] for t in threads}
        cpu_times: dict[int, list[float]] = {t: [] for t in threads}
        list_times: dict[int, list[float]] = {t: [] for t in threads}
        for _ in range(max(1, rounds)):
            for t in threads:
                cpu = _cpu_seconds()
                start = time.perf_counter()
                result = screen(argument(), t)
                times[t].append(time.perf_counter() - start)
                cpu_times[t].append(_cpu_seconds() - cpu)
                start = time.perf_counter()
                assert len(result.alignments) == len(expected[1])
                list_times[t].append(time.perf_counter() - start)
        cells = n * READ_LENGTH * PATTERN_LENGTH
        one = float(np.median(times[threads[0]])) if threads[0] == 1 else float("nan")
        one_with_list = one + float(np.median(list_times[threads[0]])) if threads[0] == 1 else float("nan")
        for t in threads:
            median = float(np.median(times[t]))
            listing = float(np.median(list_times[t]))
            rows.append({
                "reads": n, "form": form, "threads": t, "read_length": READ_LENGTH, "pattern_length": PATTERN_LENGTH,
                "alignments": len(expected[1]) if expected else "", "seconds": f"{median:.6g}",
                "best_seconds": f"{min(times[t]):.6g}", "gcups": f"{cells / median / 1e9:.4g}",
                "ratio_to_1_thread": f"{one / median:.3f}", "cpu_s": f"{float(np.median(cpu_times[t])):.4g}",
                "list_s": f"{listing:.4g}",
                "ratio_with_list_to_1_thread": f"{one_with_list / (median + listing):.3f}",
                "rounds": len(times[t]), "seconds_all": " ".join(f"{x:.4g}" for x in times[t]),
            })
            print(f"  {n:>8} reads  {form:8} {t:>3} threads  {median * 1e3:9.2f} ms  {cells / median / 1e9:7.2f} GCUPS  "
                  f"x{one / median:5.2f}  cpu {float(np.median(cpu_times[t])) * 1e3:8.2f} ms  "
                  f"(list {listing * 1e3:.1f} ms)", file=sys.stderr, flush=True)
        if phases:
            phase_rows += measure_phases(n, form, argument, screen, threads, rounds)
    return rows, phase_rows


def measure_phases(n: int, form: str, argument, screen, threads: list[int], rounds: int) -> list[dict]:
    """Rows of the phases' median and best times per thread count (:data:`PHASES`)."""
    spent_all: dict[int, dict[str, list[float]]] = {t: defaultdict(list) for t in threads}
    spent: dict[str, float] = defaultdict(float)
    with phase_timers(spent):
        for _ in range(max(1, rounds)):
            for t in threads:
                spent.clear()
                start = time.perf_counter()
                screen(argument(), t)
                total = time.perf_counter() - start
                for phase in PHASES:
                    spent_all[t][phase].append(spent[phase])
                spent_all[t]["other"].append(total - sum(spent.values()))
                spent_all[t]["total"].append(total)
    rows = []
    for phase in [*PHASES, "other", "total"]:
        one = float(np.median(spent_all[threads[0]][phase])) if threads[0] == 1 else float("nan")
        cells = []
        for t in threads:
            median = float(np.median(spent_all[t][phase]))
            rows.append({"reads": n, "form": form, "threads": t, "phase": phase, "seconds": f"{median:.5g}",
                         "best_seconds": f"{min(spent_all[t][phase]):.5g}",
                         "ratio_to_1_thread": f"{one / median:.3f}" if median > 0 else "",
                         "rounds": len(spent_all[t][phase])})
            cells.append(f"{median * 1e3:8.2f}")
        print(f"  {n:>8} reads  {form:8} {phase:8} ms on {'/'.join(map(str, threads))} threads: {' '.join(cells)}",
              file=sys.stderr, flush=True)
    return rows


def cpu_topology() -> dict:
    """Logical CPUs, cores and sockets as the system shows them, and the
    transparent huge page setting (a VM's vCPUs may share physical cores
    the guest cannot see)."""
    cores, sockets, cpus = set(), set(), 0
    base = Path("/sys/devices/system/cpu")
    for cpu in sorted(base.glob("cpu[0-9]*")):
        try:
            core = (cpu / "topology" / "core_id").read_text().strip()
            socket = (cpu / "topology" / "physical_package_id").read_text().strip()
        except OSError:
            continue
        cpus += 1
        cores.add((socket, core))
        sockets.add(socket)
    info = {"cpu_topology": f"{cpus} logical CPUs, {len(cores)} cores, {len(sockets)} sockets" if cpus else "unknown"}
    try:
        info["transparent_hugepage"] = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    except OSError:
        pass
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
        info["hypervisor"] = "yes" if " hypervisor" in flags else "no"
    except (OSError, StopIteration):
        pass
    return info


def run_environment() -> dict:
    import numba

    import bpbc

    info = environment(None)
    try:
        from bpbc.cpu_engine import cpu_target, kernel_shape

        target = cpu_target()
        info.update({"cpu_target": target.label, "kernel_shape": str(kernel_shape(target))})
    except Exception as error:  # an older checkout
        info["cpu_target"] = f"unknown ({type(error).__name__})"
    info.update({"usable_cores": str(len(os.sched_getaffinity(0))), "numba_threads": str(numba.config.NUMBA_NUM_THREADS),
                 "numba_threading_layer": numba.config.THREADING_LAYER, "bpbc_path": str(Path(bpbc.__file__).parent),
                 "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(unset)")})
    info.update(cpu_topology())
    try:
        info["numba_threading_layer_used"] = numba.threading_layer()
    except ValueError:  # no parallel kernel ran
        pass
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.library_scaling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2000 reads, 1 and 2 threads, one round (a smoke test)")
    parser.add_argument("--reads", type=int, nargs="+", default=None, help="read counts (default 40000 400000)")
    parser.add_argument("--threads", type=int, nargs="+", default=None,
                        help="thread counts, 1 first (default 1 2 4 8 16 up to the usable cores, and their number)")
    parser.add_argument("--forms", nargs="+", choices=FORMS, default=list(FORMS))
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 7; --quick 1)")
    parser.add_argument("--phases", action=argparse.BooleanOptionalAction, default=True,
                        help="also time the call's phases per thread count (default on)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)

    cores = len(os.sched_getaffinity(0))
    reads = args.reads or ([2000] if args.quick else [40_000, 400_000])
    threads = args.threads or ([1, 2] if args.quick else default_threads(cores))
    rounds = args.rounds or (1 if args.quick else 7)
    print(f"bpbc.screen on {cores} usable cores", file=sys.stderr)
    rows, phase_rows = [], []
    for n in reads:
        more, more_phases = measure(n, args.forms, threads, rounds, args.phases)
        rows += more
        phase_rows += more_phases
    env = run_environment()  # after the calls: the OpenMP setting they ran under
    quick = "_quick" if args.quick else ""
    path = write_csv(args.out / f"library_scaling{quick}_cpu.csv", rows, env)
    print(f"wrote {path}", file=sys.stderr)
    if phase_rows:
        path = write_csv(args.out / f"library_scaling{quick}_phases_cpu.csv", phase_rows, env)
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
