"""What a fresh ``bpbc-screen`` process spends before and around its first reads.

Each step runs its source (``STEPS``) in a fresh interpreter, so its
figure includes interpreter start and every import that source makes
(``import bpbc.cli`` includes numpy and numba, ``import cupy`` numpy but
not bpbc); medians of ``--repeats`` runs after one that fills the caches.
Steps marked GPU run only where CuPy sees a device. Then the target rows:

* ``one-read file, CPU`` (and ``GPU``): the command, a fresh process, on the
  first read of examples/reads.fq.gz against examples/adapters.fa, T = 30;
* where that run's imports go (``-X importtime``, self time summed by
  top-level package, in ms) and how many modules it compiled from source
  (no bytecode cache: pip's ``--no-compile`` with ``PYTHONDONTWRITEBYTECODE``);
* the numba kernels it loads from the cache and what they cost (the first
  load includes numba's own set-up);
* its process wall minus its run (``--json``'s ``wall_time_s``), and where
  the process spends its time: from its start to the pipeline imported, to
  the run (``screen_files``), the run, after it (the exit handlers among
  it) and the exit (``PHASES_CHILD``: the command's own entry point with
  timestamps, medians of ``--repeats``);
* with ``--cold``: the same run with empty kernel caches (numba's, bpbc's and
  CuPy's: every kernel compiled; the command's summary leaves the compiling
  out of its rate) and right after (warm again), and ``python -m bpbc.prepare``
  on empty caches before a run.

With reads and patterns, the command itself (PAF, ``--matched`` and
``--unmatched`` as in the end-to-end rows) runs as a fresh process and
through a ``bpbc-serve`` started once for the purpose (``BPBC_SERVER``,
bpbc/server.py), beside a bare dnaio pass. Prints one line per step and
writes ``startup_<device>.csv`` to ``--out``.

    python -m bench startup [--reads FILE --patterns FASTA | --generate N] [--cold] [--out DIR] [--repeats 3]
    python -m bench startup --quick   (CI: one repeat, the one-read rows and the import rows only)

``--generate N`` writes N reads and the one 128 bp pattern of the
end-to-end rows (``python -m bench sw --only e2e``), threshold 40.

``--trees NAME=DIR ...`` compares checkouts instead (the first is the
base): ``--rounds`` rounds, each tree in turn (the order reversed every
other round, so that a drift of the machine falls on both), of
``import bpbc.cli`` and the one-read run on each device as fresh processes
(process wall, run, wall minus run); per tree the minimum, median and
maximum, and per tree the ratio base/tree of each round's pair, so that a
figure above 1 is a gain; then each tree's phases of the one-read run on
each device (medians of ``--repeats``). Writes ``startup_trees_<device>.csv``:

    python -m bench startup --trees before=/tmp/base after=. --rounds 15
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.environment import RESULTS_DIR, device_kind, environment, gpu_info, write_csv

#: (name, needs a GPU, Python source run with -c)
STEPS = [
    ("python", False, "pass"),
    ("import numpy", False, "import numpy"),
    ("import dnaio, xopen", False, "import numpy, dnaio, xopen"),
    ("import bpbc.cli", False, "import bpbc.cli"),
    ("import numba", False, "import bpbc.cli, numba"),
    # numba's first compile or cache load reads every installed distribution's entry points (its extensions)
    ("importlib.metadata.entry_points()", False, "from importlib import metadata; metadata.entry_points()"),
    ("first cached numba call", False,
     "from bench.startup import first_numba_call; first_numba_call()"),
    ("every numba kernel of a CPU run", False, "from bench.startup import warm_cpu; warm_cpu()"),
    ("import cupy", True, "import cupy"),
    ("CUDA context", True, "import cupy; cupy.zeros(1); cupy.cuda.Device().synchronize()"),
    ("GPU engine and its kernels", True, "from bench.startup import warm_gpu; warm_gpu()"),
]


def first_numba_call() -> None:
    """One cached kernel: numba's own set-up on first use, and one cache load."""
    from bpbc.chunks import scan_fastq

    buffer = np.frombuffer(b"@a\nAC\n+\nII\n", np.uint8)
    slots = [np.empty(1, np.int64) for _ in range(3)]
    scan_fastq(buffer, 0, len(buffer), 1, *slots)


def warm_cpu() -> None:
    """Screen a few reads on the CPU: every kernel of a run is loaded."""
    import bpbc

    bpbc.screen(["ACGTACGTAAGGCCTT" * 8], ["ACGTACGTAAGGCC"], threshold=10, device="cpu")


def warm_gpu() -> None:
    import bpbc

    bpbc.screen(["ACGTACGTAAGGCCTT" * 8], ["ACGTACGTAAGGCC"], threshold=10, device="gpu")


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: the one-read run's threshold (the example's adapters are 19-33 bp)
ONE_READ_THRESHOLD = 30


def write_one_read_file(path: Path) -> Path:
    """The first record of examples/reads.fq.gz as a plain FASTQ file."""
    import dnaio

    with dnaio.open(EXAMPLES / "reads.fq.gz") as reader, dnaio.open(path, mode="w") as writer:
        writer.write(next(iter(reader)))
    return path


def one_read_args(reads: Path, device: str) -> list[str]:
    """bpbc-screen's arguments for the one-read run."""
    return [str(reads), str(EXAMPLES / "adapters.fa"), "--threshold", str(ONE_READ_THRESHOLD), "-q", "--device", device]


#: run with ``-c`` and the command's arguments: bpbc-screen through its entry
#: point, as the console script runs it, printing last on stderr (JSON) the
#: time.time() at which the pipeline's import ended, the run began and ended,
#: the exit handlers began and os._exit was called. It imports nothing itself
#: (an import of its own would move the command's): the marks are set by a
#: finder that wraps bpbc.pipeline's loading, and by wrappers of screen_files,
#: atexit._run_exitfuncs and os._exit.
PHASES_CHILD = r"""
import atexit, importlib.abc, importlib.machinery, json, os, sys, time
marks = {}

class _Pipeline(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "bpbc.pipeline":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            marks["imported"] = time.time()
            screen_files = module.screen_files

            def timed(*args, **kwargs):
                marks["run"] = time.time()
                try:
                    return screen_files(*args, **kwargs)
                finally:
                    marks["ran"] = time.time()
            module.screen_files = timed
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _Pipeline())
run_exitfuncs, exit_ = atexit._run_exitfuncs, os._exit

def _run_exitfuncs():
    marks["handlers"] = time.time()
    run_exitfuncs()

def _exit(status):
    marks["exit"] = time.time()
    sys.stderr.write("\n" + json.dumps(marks) + "\n")
    sys.stderr.flush()
    exit_(status)

atexit._run_exitfuncs, os._exit = _run_exitfuncs, _exit
sys.argv[0] = "bpbc-screen"
from bpbc.server import command
command()
"""
#: (name, the mark it starts from, the mark it ends at): "start" is when the parent started the process, "end" when
#: it had ended
PHASES = [("start to the pipeline imported", "start", "imported"), ("then to the run", "imported", "run"),
          ("the run", "run", "ran"), ("after the run", "ran", "exit"), ("  of it the exit handlers", "handlers", "exit"),
          ("the exit", "exit", "end")]


def phases(args: list[str], env: dict, repeats: int, cwd: str | None = None) -> dict[str, float]:
    """Median seconds of each of :data:`PHASES` over ``repeats`` runs of
    bpbc-screen ``args`` (after one that warms the caches)."""
    figures: dict[str, list[float]] = {}
    for k in range(repeats + 1):
        started = time.time()
        done = subprocess.run([sys.executable, "-c", PHASES_CHILD, *args], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, cwd=cwd)
        ended = time.time()
        if done.returncode:
            raise SystemExit(f"bpbc-screen {' '.join(args)} failed:\n{done.stderr}")
        marks = dict(json.loads(done.stderr.splitlines()[-1]), start=started, end=ended)
        for name, begin, end in PHASES if k else []:
            figures.setdefault(name, []).append(marks[end] - marks[begin])
    return {name: float(np.median(values)) for name, values in figures.items()}


def wall_and_run(args: list[str], env: dict, summary: Path, cwd: str | None = None) -> tuple[float, float]:
    """Process wall and run (``--json``'s wall_time_s) of one fresh bpbc-screen ``args``."""
    seconds = _seconds([sys.executable, "-m", "bpbc", *args, "--json", str(summary)], env, cwd)
    return seconds, json.loads(summary.read_text())["wall_time_s"]


def module_census(argv: list[str]) -> None:
    """Run the command in this process, then print (JSON) how many of the
    modules it loaded have no bytecode cache beside their source (compiled
    from source by every process: pip's --no-compile and PYTHONDONTWRITEBYTECODE)."""
    import json

    from bpbc.cli import main

    main(argv)
    specs = [getattr(module, "__spec__", None) for module in list(sys.modules.values())]
    sources = [spec for spec in specs if spec is not None and str(spec.origin or "").endswith(".py")]
    uncached = [spec.name for spec in sources if not (spec.cached and os.path.exists(spec.cached))]
    print(json.dumps({"modules": len(sources), "from_source": len(uncached),
                      "dont_write_bytecode": sys.flags.dont_write_bytecode,
                      "packages_from_source": sorted({name.split(".")[0] for name in uncached})}))


def kernel_loads(argv: list[str]) -> None:
    """Run the command in this process and print (JSON) every numba kernel it
    loaded from the cache and what each took (numba's Cache.load_overload)."""
    import json

    from numba.core import caching

    loads: list[tuple[str, float]] = []
    real = caching.Cache.load_overload

    def timed(self, sig, target_context):
        started = time.perf_counter()
        try:
            return real(self, sig, target_context)
        finally:
            loads.append((str(getattr(self, "_name", "?")), time.perf_counter() - started))

    caching.Cache.load_overload = timed  # type: ignore[method-assign]
    from bpbc.cli import main

    main(argv)
    names = [name.split(" at ")[0].replace("<function ", "") for name, _ in loads]
    print(json.dumps({"loads": len(loads), "seconds": sum(seconds for _, seconds in loads),
                      "first_s": loads[0][1] if loads else 0.0, "kernels": names}))


def import_self_times(command: list[str], env: dict) -> dict[str, float]:
    """Seconds of ``-X importtime`` self time of a run, summed by top-level
    package, largest first, with the total under ''."""
    done = subprocess.run([command[0], "-X", "importtime", *command[1:]], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    by_package: dict[str, float] = {}
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if match:
            package = match[2].split(".")[0]
            by_package[package] = by_package.get(package, 0.0) + int(match[1]) / 1e6
    ranked = dict(sorted(by_package.items(), key=lambda item: -item[1]))
    return {"": sum(ranked.values()), **ranked}


def _json_of(command: list[str], env: dict) -> dict:
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def start_server(path: str, device: str, env: dict) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "bpbc.server", path, "--device", device], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(path):
        if server.poll() is not None:
            raise SystemExit("bpbc-serve did not start")
        time.sleep(0.05)
    return server


def _seconds(args: list[str], env: dict, cwd: str | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd)
    took = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr}")
    return took


def _show(row: dict) -> None:
    figures = [f"{float(row['seconds']):7.3f} s" if row.get("seconds") not in (None, "") else " " * 9]
    figures += [f"({row[key]})" for key in ("runs_s",) if row.get(key)]
    figures += [f"{key}={row[key]}" for key in ("min_s", "max_s", "ratio", "ratio_min", "ratio_max", "count", "compile_s",
                                                 "note") if row.get(key) not in (None, "")]
    print(f"{row['step']:52s} {'  '.join(figures)}", flush=True)


def _timed_row(name: str, command: list[str], env: dict, repeats: int) -> dict:
    _seconds(command, env)  # caches warm
    runs = [_seconds(command, env) for _ in range(repeats)]
    return {"step": name, "seconds": f"{np.median(runs):.3f}", "runs_s": " ".join(f"{r:.3f}" for r in runs)}


def one_read_rows(one_read: Path, devices: list[str], env: dict, repeats: int) -> list[dict]:
    """Where the one-read run's time goes: its process wall minus its run and
    its phases on each device; on the CPU its imports by package, the
    modules it compiles from source, the numba kernels it loads."""
    rows = []
    for device in devices:
        args = one_read_args(one_read, device)
        summary = Path(tempfile.mkdtemp()) / "summary.json"
        wall_and_run(args, env, summary)  # caches warm
        walls = [wall - run for wall, run in (wall_and_run(args, env, summary) for _ in range(repeats))]
        rows.append({"step": f"one-read run, {device.upper()}: wall minus run", "seconds": f"{np.median(walls):.3f}",
                     "runs_s": " ".join(f"{w:.3f}" for w in walls)})
        rows += [{"step": f"one-read run, {device.upper()}: {name}", "seconds": f"{seconds:.3f}"}
                 for name, seconds in phases(args, env, repeats).items()]
    args = one_read_args(one_read, "cpu")
    imports = import_self_times([sys.executable, "-m", "bpbc", *args], env)
    rows.append({"step": "one-read run, CPU: imports (self time, all)", "seconds": f"{imports.pop(''):.3f}"})
    rows += [{"step": f"  of them {package}", "seconds": f"{seconds:.3f}"} for package, seconds in list(imports.items())[:8]]
    census = _json_of([sys.executable, "-c", f"from bench.startup import module_census; module_census({args!r})"],
                      env)
    rows.append({"step": "one-read run, CPU: modules compiled from source", "count": census["from_source"],
                 "note": f"of {census['modules']}; dont_write_bytecode={census['dont_write_bytecode']}; "
                         f"{' '.join(census['packages_from_source'][:12])}"})
    loads = _json_of([sys.executable, "-c", f"from bench.startup import kernel_loads; kernel_loads({args!r})"], env)
    rows.append({"step": "one-read run, CPU: numba kernels loaded", "seconds": f"{loads['seconds']:.3f}",
                 "count": loads["loads"], "note": f"the first (numba's set-up with it) {loads['first_s']:.3f} s; "
                                                  f"{' '.join(loads['kernels'])}"})
    return rows


def compare_trees(trees: dict[str, str], rounds: int, one_read: Path, devices: list[str], env: dict,
                  repeats: int) -> list[dict]:
    """``--trees``: see the module's docstring; then each tree's phases of
    the one-read run on each device (medians of ``repeats``). The processes
    may write bytecode, as an installed package has it (this development
    machine sets PYTHONDONTWRITEBYTECODE: every run would compile every
    module of bpbc)."""
    trees = {name: str(Path(tree).resolve()) for name, tree in trees.items()}  # each process runs in its tree
    names = list(trees)
    summary = Path(tempfile.mkdtemp()) / "summary.json"
    env = {key: value for key, value in env.items() if key != "PYTHONDONTWRITEBYTECODE"}
    figures: dict[tuple[str, str], list[float]] = {}
    for k in range(rounds + 1):  # round 0 warms the caches of every tree
        for name in names if k % 2 else names[::-1]:
            tree = trees[name]
            tree_env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")])))
            measured = {"import bpbc.cli": _seconds([sys.executable, "-c", "import bpbc.cli"], tree_env, tree)}
            for device in devices:
                wall, run = wall_and_run(one_read_args(one_read, device), tree_env, summary, tree)
                measured.update({f"one-read file, {device.upper()}: process wall": wall,
                                 f"one-read file, {device.upper()}: run": run,
                                 f"one-read file, {device.upper()}: wall minus run": wall - run})
            for measure, seconds in measured.items():
                figures.setdefault((measure, name), []).extend([seconds] if k else [])
    rows = []
    for measure in dict.fromkeys(measure for measure, _ in figures):
        base = figures[measure, names[0]]
        for name in names:
            values = figures[measure, name]
            rows.append({"step": f"{measure}: {name}", "seconds": f"{np.median(values):.3f}",
                         "min_s": f"{min(values):.3f}", "max_s": f"{max(values):.3f}",
                         "runs_s": " ".join(f"{v:.3f}" for v in values)})
            if name != names[0]:
                ratios = [b / v for b, v in zip(base, values)]
                rows.append({"step": f"{measure}: {names[0]}/{name}", "ratio": f"{np.median(ratios):.3f}",
                             "ratio_min": f"{min(ratios):.3f}", "ratio_max": f"{max(ratios):.3f}"})
    for device in devices:
        for name in names:
            tree = trees[name]
            tree_env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")])))
            rows += [{"step": f"one-read run, {device.upper()}: {phase}: {name}", "seconds": f"{seconds:.3f}"}
                     for phase, seconds in phases(one_read_args(one_read, device), tree_env, repeats, tree).items()]
    return rows


def cold_rows(one_read: Path, devices: list[str], env: dict, repeats: int) -> list[dict]:
    """The one-read run with empty kernel caches (numba's, bpbc's, CuPy's),
    then again; and ``python -m bpbc.prepare`` on empty caches, then the run."""
    rows = []

    def empty_caches() -> tuple[dict, Path]:
        caches = Path(tempfile.mkdtemp(prefix="bpbc-cold-"))
        return dict(env, BPBC_CACHE_DIR=str(caches / "bpbc"), NUMBA_CACHE_DIR=str(caches / "numba"),
                    CUPY_CACHE_DIR=str(caches / "cupy")), caches / "summary.json"

    def run(name: str, device: str, run_env: dict, summary: Path, times: int = 1) -> dict:
        command = [sys.executable, "-m", "bpbc", *one_read_args(one_read, device), "--json", str(summary)]
        runs = [_seconds(command, run_env) for _ in range(times)]
        compiling = json.loads(summary.read_text())["stage_seconds"]["compile"]
        return {"step": name, "seconds": f"{np.median(runs):.3f}", "runs_s": " ".join(f"{r:.3f}" for r in runs),
                "compile_s": f"{compiling:.3f}"}

    for device in devices:
        cold_env, summary = empty_caches()
        rows.append(run(f"one-read file, {device.upper()}, empty kernel caches", device, cold_env, summary))
        rows.append(run(f"one-read file, {device.upper()}, right after", device, cold_env, summary, repeats))
    cold_env, summary = empty_caches()
    prepare = [sys.executable, "-m", "bpbc.prepare", "-t", str(ONE_READ_THRESHOLD), "--device", "cpu", "-q"]
    rows.append({"step": "python -m bpbc.prepare, empty kernel caches", "seconds": f"{_seconds(prepare, cold_env):.3f}",
                 "note": f"{os.cpu_count()} cores"})
    rows.append(run("one-read file, CPU, after prepare", "cpu", cold_env, summary, repeats))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench startup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", help="also time a bare dnaio pass, bpbc's reader and bpbc-screen on this file")
    parser.add_argument("--patterns", help="patterns for the bpbc-screen rows (FASTA)")
    parser.add_argument("--generate", type=int, metavar="N",
                        help="screen N generated reads against the end-to-end rows' 128 bp pattern")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--cold", action="store_true",
                        help="also the one-read run with empty kernel caches, and python -m bpbc.prepare (minutes)")
    parser.add_argument("--quick", action="store_true", help="CI: one repeat, the one-read and import rows only")
    parser.add_argument("--out", default=str(RESULTS_DIR))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trees", nargs="+", metavar="NAME=DIR", help="compare these checkouts (the first the base)")
    parser.add_argument("--rounds", type=int, default=15, help="with --trees: rounds, each tree once a round")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).parents[1]),
                                                                     os.environ.get("PYTHONPATH")])))
    try:
        import cupy

        gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any failure: no usable GPU
        gpu = False
    if args.trees:
        work = tempfile.mkdtemp()
        one_read = write_one_read_file(Path(work) / "one.fq")
        rows = compare_trees(dict(item.split("=", 1) for item in args.trees), args.rounds, one_read,
                             ["cpu", "gpu"] if gpu else ["cpu"], env, repeats)
        for row in rows:
            _show(row)
        device = gpu_info() if gpu else None
        write_csv(Path(args.out) / f"startup_trees_{device_kind(device)}.csv", rows, environment(device))
        return 0
    quick_steps = ("python", "import bpbc.cli")
    steps = [(name, [sys.executable, "-c", source], env) for name, needs_gpu, source in STEPS
             if (gpu or not needs_gpu) and (name in quick_steps or not args.quick)]
    if importlib.util.find_spec("scipy") is not None and not args.quick:
        steps.append(("import scipy (numba imports it where installed)", [sys.executable, "-c", "import scipy"], env))
    work = tempfile.mkdtemp()
    one_read = write_one_read_file(Path(work) / "one.fq")
    devices = ["cpu", "gpu"] if gpu else ["cpu"]
    steps += [(f"one-read file, {device.upper()}", [sys.executable, "-m", "bpbc", *one_read_args(one_read, device)],
               env) for device in devices]
    if args.generate and not args.quick:
        from bench.sw_bench import write_e2e_reads, e2e_patterns

        patterns, _ = e2e_patterns()["single_128"]
        args.reads, args.patterns = f"{work}/reads.fq.gz", f"{work}/pattern.fa"
        write_e2e_reads(args.reads, args.generate, 150, np.random.default_rng(4), patterns, 50)
        Path(args.patterns).write_text(f">p0\n{patterns[0]}\n")
    server = None
    if args.reads and not args.quick:
        from bench.sw_bench import BARE_READ_PASS, BPBC_READ_PASS

        bare = [sys.executable, "-c", BARE_READ_PASS, args.reads]
        steps.append(("bare dnaio pass", bare, env))
        steps.append(("bpbc reader alone", [sys.executable, "-c", BPBC_READ_PASS, args.reads], env))
        if args.patterns:
            screen = [sys.executable, "-m", "bpbc", args.reads, args.patterns, "--device", args.device,
                      "--threshold", "40", "--quiet", "-o", f"{work}/hits.paf", "--matched", f"{work}/m.fq.gz",
                      "--unmatched", f"{work}/u.fq.gz"]
            steps.append(("bpbc-screen", screen, env))
            socket_path = f"{work}/serve.sock"
            server = start_server(socket_path, args.device, env)
            steps.append(("bpbc-screen through bpbc-serve", screen, dict(env, BPBC_SERVER=socket_path)))
            steps.append(("bare dnaio pass, again", bare, env))
    rows = []
    for name, command, step_env in steps:
        rows.append(_timed_row(name, command, step_env, repeats))
        _show(rows[-1])
    if server is not None:
        server.terminate()
        server.wait()
    for row in one_read_rows(one_read, devices, env, repeats) + (cold_rows(one_read, devices, env, repeats)
                                                                  if args.cold else []):
        rows.append(row)
        _show(row)
    device = gpu_info() if gpu else None
    write_csv(Path(args.out) / f"startup{'_quick' if args.quick else ''}_{device_kind(device)}.csv", rows,
              environment(device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
