"""Mutation testing of the pure-Python modules with mutmut (not in CI: tens of minutes).

    pip install mutmut==3.8.1
    python scripts/mutation.py [--modules bpbc/paf.py ...] [--tests tests/bpbc/test_paf.py ...] [--jobs N]
    python scripts/mutation.py --scope --keep DIR            (the issue's scope only; DIR kept, a later run goes on)
    python scripts/mutation.py --keep DIR --recheck 'bpbc.io.*=tests/bpbc/test_io.py' ...
                                                             (survivors against tests written since the run)
    python scripts/mutation.py --keep DIR_A --modules bpbc/paf.py ... --tests tests/bpbc/test_paf.py ... \
        --mutants 'bpbc.paf.*' ...                          (some modules against fewer tests: faster)
    python scripts/mutation.py --keep DIR --merge DIR_A DIR_B --report-only
                                                             (one report of several runs: killed in any is killed)

mutmut changes the code one mutant at a time (an operator, a constant, a
string, a call's argument; bpbc/paf.py, pairs, sinks, thresholds, patterns,
alphabet, result, reads, cli, io, gzip_reader and settings by default) and runs
the tests that reach the function changed; a mutant the tests pass is a
survivor. Numba kernels (decorated functions) are not mutated: mutmut leaves
decorated functions alone. It works in a copy of the checkout (the tracked files and
those that git does not ignore) with a setup.cfg of its own, so nothing in
the checkout changes.

The issue's scope (``in_scope``): every mutant of paf, pairs, sinks,
thresholds, patterns, alphabet, result and reads; of cli, its option checks
(the command's body, ``_screen``, and its helpers, not the Dask run or the
signal machinery); of io, its error paths, with those that moved to gzip_reader
(ParallelGzip's checks, GzipProcess's errors); of settings, strands_of (moved
from patterns). ``--scope`` runs just those.

Written to ``--out`` (bench/results): ``mutation_cpu.json`` (mutants,
killed, survived, the score per module, over the scope and outside it) and
``mutation_survivors_cpu.txt`` (every survivor with its diff, the scope's
first).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["bpbc/paf.py", "bpbc/pairs.py", "bpbc/sinks.py", "bpbc/thresholds.py", "bpbc/patterns.py",
           "bpbc/alphabet.py", "bpbc/result.py", "bpbc/reads.py", "bpbc/cli.py", "bpbc/io.py", "bpbc/gzip_reader.py",
           "bpbc/settings.py"]
#: the tests that check those modules (the whole suite takes too long per mutant)
TESTS = ["tests/bpbc/test_paf.py", "tests/bpbc/test_pairs.py", "tests/bpbc/test_sinks.py",
         "tests/bpbc/test_thresholds.py", "tests/bpbc/test_alphabet.py", "tests/bpbc/test_reads.py",
         "tests/bpbc/test_errors.py", "tests/bpbc/test_outputs.py", "tests/bpbc/test_peer_data.py",
         "tests/bpbc/test_io.py", "tests/bpbc/test_cli.py", "tests/bpbc/test_cli_options.py",
         "tests/bpbc/test_error_paths.py", "tests/bpbc/test_screening.py", "tests/bpbc/test_patterns.py",
         "tests/bpbc/test_result.py", "tests/bpbc/test_gzip_reader.py", "tests/bpbc/test_settings.py",
         # not the rest of test_many_files: its worker processes (multiprocessing's spawn) import the mutated copy
         # and fail in mutmut's statistics run ("Could not figure out where the code to mutate is")
         "tests/bpbc/test_many_files.py::test_the_command_line_screens_several_files_without_dask"]
#: the mutants in the issue's scope (a mutant's name: module.x_function__mutmut_N, a method's
#: module.xǁClassǁmethod__mutmut_N): every one of the whole modules, and of cli and io those of the option checks
#: and error paths: cli's command body (_screen: every option check and the exit status of each error) and its
#: helpers, but not the Dask run (_screen_on_dask), the signal machinery (_unsafe_to_interrupt) or the console
#: entry point (run); io's error paths (the others are the readers, the read-ahead and rapidgzip's stream), with
#: the xz checks (what xz -d accepts: _strict's decompressors) and, moved from io to gzip_reader, the parallel gzip
#: reader's checks (ParallelGzip: rapidgzip's errors made GzipError or EOFError by _open and readinto, with
#: _without_thread's message, readinto's check that the whole file was consumed, and _check_end: what rapidgzip
#: leaves unchecked at a file's end) and the error paths of its process (GzipProcess: the child's error raised here,
#: _answer; the child gone, _send, _receive and _gone); settings' check (strands_of, moved from patterns). Not
#: serve_in_child: it runs in the child process, where mutmut's statistics do not see which test reaches it
WHOLE_MODULES = ("paf", "pairs", "sinks", "thresholds", "patterns", "alphabet", "result", "reads")
CHECKS = re.compile(r"^bpbc\.(cli\.x_(?!_screen_on_dask_|_unsafe_to_interrupt_|run_)|io\.x.*(_translate|"
                    r"_describe_os_error|_find_non_ascii|_strict|_NextXzStream|_FirstXzStream|_AfterLzmaStream|"
                    r"_lzma_header_recognised|_where|write_records|_decompression_errors|_format_errors)"
                    r"[_ǁ]|gzip_reader\.x(__without_thread|ǁParallelGzipǁ(_open|readinto|_check_end)|"
                    r"ǁGzipProcessǁ(_send|_receive|_gone|_answer))__mutmut_|settings\.x_strands_of__mutmut_)")
#: what ``--scope`` runs (mutmut takes fnmatch patterns of mutant names)
SCOPE_PATTERNS = [f"bpbc.{module}.*" for module in WHOLE_MODULES] + [
    f"bpbc.cli.x_{function}__mutmut_*" for function in ("_error", "_internal_error", "_silence_stdout",
                                                        "_show_progress", "_version", "screen_command", "_screen",
                                                        "_reads_files", "_report_paths", "_screen_here",
                                                        "_screen_many_here", "main")] + [
    "bpbc.io.x*_translate__mutmut_*", "bpbc.io.x*_describe_os_error__mutmut_*",
    "bpbc.io.x*_find_non_ascii__mutmut_*", "bpbc.io.x*_strict__mutmut_*", "bpbc.io.x*_NextXzStream*",
    "bpbc.io.x*_FirstXzStream*", "bpbc.io.x*_AfterLzmaStream*", "bpbc.io.x*_lzma_header_recognised__mutmut_*",
    "bpbc.io.x*_where__mutmut_*", "bpbc.io.x*write_records__mutmut_*", "bpbc.io.x*_decompression_errors__mutmut_*",
    "bpbc.io.x*_format_errors__mutmut_*", "bpbc.gzip_reader.x__without_thread__mutmut_*"] + [
    f"bpbc.gzip_reader.xǁ{method}__mutmut_*" for method in (
        "ParallelGzipǁ_open", "ParallelGzipǁreadinto", "ParallelGzipǁ_check_end", "GzipProcessǁ_send",
        "GzipProcessǁ_receive", "GzipProcessǁ_gone", "GzipProcessǁ_answer")] + ["bpbc.settings.x_strands_of__mutmut_*"]


def in_scope(name: str) -> bool:
    module = name.split(".")[1]
    return module in WHOLE_MODULES or bool(CHECKS.match(name))


#: mutmut's exit codes. -15: the test process ended by SIGTERM. Under mutmut's default runner (a fork of
#: its main process, which had run the tests once) that was numba's OpenMP threading layer, which raises SIGTERM
#: in a forked child of a process that used OpenMP ("Terminating: fork() called from a process already using GNU
#: OpenMP, this is unsafe."): every mutant whose tests ran a parallel kernel ended so, whatever the mutant. The
#: fork server (config below) forks from a process that has only collected the tests; -15 counts as undetermined.
STATUS = {1: "killed", 3: "killed", -15: "ended by SIGTERM", 0: "survived", 5: "no tests", 33: "no tests",
          34: "skipped", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
          None: "not checked"}


def checkout_copy(target: Path) -> None:
    """The files git tracks, and the untracked ones it does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


#: a plain function compiled by numba where it is used (``njit(...)(name)``): mutmut's trampoline in it does not compile
_COMPILED_LATER = re.compile(r"njit\([^)]*\)\((\w+)\)")


def leave_compiled_alone(path: Path) -> None:
    """Mark the functions of ``path`` (the copy's) that numba compiles at run
    time for mutmut to leave alone (``# pragma: no mutate start`` / ``end``)."""
    import ast

    text = path.read_text()
    names = set(_COMPILED_LATER.findall(text))
    lines = text.split("\n")
    for node in sorted(ast.parse(text).body, key=lambda node: -node.lineno):
        if isinstance(node, ast.FunctionDef) and node.name in names:
            first = node.lineno - 1 - len(node.decorator_list)
            lines[node.end_lineno:node.end_lineno] = ["# pragma: no mutate end"]  # type: ignore[misc]
            lines[first:first] = ["# pragma: no mutate start"]
    path.write_text("\n".join(lines))


#: added to the copy's tests/conftest.py: a test that starts Python in another process (``python -m bpbc``) is
#: skipped there, since that process cannot run mutmut's mutants (it looks for their configuration in its own
#: working directory)
_SKIP_SUBPROCESSES = """

import subprocess as _subprocess

import pytest as _pytest

_popen_init = _subprocess.Popen.__init__


def _no_python_in_another_process(self, args, *more, **options):
    first = args[0] if isinstance(args, (list, tuple)) and args else args
    # GzipProcess's child (bpbc.gzip_reader.serve_in_child) runs: it imports the copy's module (the trampolines
    # read the mutant's name from the environment it inherits), and its errors are raised in this process
    if "python" in str(first) and "serve_in_child" not in " ".join(map(str, args if isinstance(args, (list, tuple))
                                                                         else [args])):
        _pytest.skip("starts Python in another process: not under mutation testing")
    _popen_init(self, args, *more, **options)


_subprocess.Popen.__init__ = _no_python_in_another_process

import signal as _signal


@_pytest.fixture(autouse=True)
def _sigint_as_at_a_terminal():
    # mutmut's fork server ignores SIGINT, and its forks inherit that: each
    # test starts with Python's default handler, as in a plain pytest run
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    yield
"""


def config(modules: list[str], tests: list[str]) -> str:
    """mutmut's setup.cfg: each list one value a line."""
    def listed(key: str, values: list[str]) -> list[str]:
        return [f"{key} = {values[0]}"] + [f"    {value}" for value in values[1:]]

    lines = ["[mutmut]", *listed("source_paths", modules), *listed("pytest_add_cli_args_test_selection", tests),
             *listed("also_copy", ["bpbc/", "tests/", "bench/", "transpose/", "examples/", "docs/", "README.md"]),
             *listed("pytest_add_cli_args", ["-p", "no:cacheprovider"]),
             # each mutant's tests in a fork of a process that has collected them and run nothing (the default
             # forks mutmut's main process, after it ran the tests: numba's OpenMP layer then ends the child)
             "process_isolation = forkserver", "forkserver_warmup = collect"]
    return "\n".join(lines) + "\n"


def results(work: Path, modules: list[str]) -> tuple[dict, list[str]]:
    """Counts per module, per status, over the issue's scope (:func:`in_scope`) and outside it; the survivors'
    names (in the scope, then outside it)."""
    by_module: dict[str, Counter] = {}
    survivors, others = [], []
    scope: Counter = Counter()
    outside: Counter = Counter()
    rechecked = _rechecked([work] + MERGED)
    for module in modules:
        counts: Counter = Counter()
        for name, code in _exit_codes([work] + MERGED, module).items():
            status = STATUS.get(code, "suspicious")
            if status == "survived" and rechecked.get(name) == 1:
                status = "killed by a test written after the run (--recheck)"
            elif status == "not checked" and rechecked.get(name) in (0, 1):  # run by --recheck only
                status = "killed by --recheck's tests" if rechecked[name] == 1 else "survived"
            counts[status] += 1
            (scope if in_scope(name) else outside)[status] += 1
            if status == "survived":
                (survivors if in_scope(name) else others).append(name)
        by_module[module] = counts
    return {"modules": by_module, "scope": scope, "outside": outside, "survivors_outside_scope": sorted(others)}, \
        sorted(survivors) + sorted(others)


#: further work directories (``--merge``) whose results count with those of ``--keep``'s: runs of some modules
#: against a narrower test selection (faster), or earlier runs
MERGED: list[Path] = []
#: which exit status wins where several runs checked one mutant: a test that fails in any run kills it
_RANK = {1: 6, 3: 6, 36: 5, 24: 5, -24: 5, 152: 5, 255: 5, 0: 2, 5: 1, 33: 1, 34: 1, None: 0}


def _exit_codes(works: list[Path], module: str) -> dict:
    """Each mutant's exit status of ``module`` over the runs in ``works``: the
    one that ranks highest (:data:`_RANK`; a crash ranks above a survivor)."""
    codes: dict = {}
    for work in works:
        path = work / "mutants" / f"{module}.meta"
        if not path.exists():
            continue
        for name, code in json.loads(path.read_text())["exit_code_by_key"].items():
            if name not in codes or _RANK.get(code, 3) > _RANK.get(codes[name], 3):
                codes[name] = code
    return codes


def _rechecked(works: list[Path]) -> dict:
    """--recheck's exit statuses over the runs in ``works`` (a kill in any wins)."""
    found: dict = {}
    for work in works:
        path = work / "rechecked.json"
        for name, code in (json.loads(path.read_text()) if path.exists() else {}).items():
            if found.get(name) != 1:
                found[name] = code
    return found


def mutant_diffs(work: Path, names: list[str]) -> list[str]:
    """Each mutant's diff against the original function, read from mutmut's
    mutated sources (``mutmut show`` starts mutmut once per mutant: seconds each)."""
    import ast
    import difflib

    functions: dict[str, str] = {}
    for module in {".".join(name.split(".")[:2]) for name in names}:
        # every run's copy of the module, the last listed winning: a function changed since an earlier run
        # (whose results for it were dropped) is shown as a later run mutated it
        for path in (each / "mutants" / (module.replace(".", "/") + ".py") for each in [work] + MERGED):
            if not path.exists():
                continue
            text = path.read_text()
            lines = text.splitlines()
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name:
                    functions[f"{module}.{node.name}"] = "\n".join(lines[node.lineno - 1:node.end_lineno])
    diffs = []
    for name in names:
        original = functions.get(re.sub(r"__mutmut_\d+$", "__mutmut_orig", name), "")
        mutated = functions.get(name, "")
        body = difflib.unified_diff(original.replace("__mutmut_orig", "").splitlines(),
                                    mutated.replace(name.split(".")[-1], name.split(".")[-1].rsplit("__mutmut_", 1)[0])
                                    .splitlines(), lineterm="", n=2)
        diffs.append(f"# {name}\n" + "\n".join(list(body)[2:]) + "\n")
    return diffs


def recheck(work: Path, names: list[str], tests: list[str], jobs: int) -> dict[str, int]:
    """Run each mutant of ``names`` against ``tests`` (pytest node ids or files, of the checkout as it is now:
    copied into the work copy, its conftest.py kept; ``PATTERN=TEST,TEST``: those tests for the mutants whose
    names match the fnmatch PATTERN) in a fresh process, up to ``jobs`` at once; the exit status of each (1:
    killed, 0: survived, 5: no test for it, -9: ended after 300 s). For survivors of a run, against the tests
    written since it began (mutmut would collect its statistics over every test again first)."""
    import fnmatch
    from concurrent.futures import ThreadPoolExecutor

    def selected(name: str) -> list[str]:
        chosen = []
        for test in tests:
            pattern, _, listed = test.partition("=") if test.startswith("bpbc.") else ("", "", test)
            if not pattern or fnmatch.fnmatch(name, pattern):
                chosen += [one for one in listed.split(",") if one not in chosen]
        return chosen

    for path in (ROOT / "tests").rglob("*.py"):
        if path.name != "conftest.py" or path.parent != ROOT / "tests":
            target = work / "mutants" / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)

    def run(name: str) -> int:
        env = dict(os.environ, MUTANT_UNDER_TEST=name)
        if not selected(name):
            return 5
        try:
            return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                   "--rootdir=.", *selected(name)], cwd=work / "mutants", env=env, capture_output=True,
                                  timeout=300).returncode
        except subprocess.TimeoutExpired:
            return -9

    import threading

    codes: dict[str, int] = {}
    saving = threading.Lock()
    earlier = json.loads((work / "rechecked.json").read_text()) if (work / "rechecked.json").exists() else {}

    def run_and_save(name: str) -> None:
        code = run(name)
        with saving:  # saved as it goes: a recheck stopped early keeps what it did
            codes[name] = code
            (work / "rechecked.json").write_text(json.dumps({**earlier, **codes}, indent=1) + "\n")

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(run_and_save, names))
    return codes


def unchecked(work: Path, modules: list[str]) -> list[str]:
    """The mutants of ``modules`` that mutmut has not run."""
    return [name for module in modules for name, code in _exit_codes([work] + MERGED, module).items() if code is None]


def score(counts: Counter) -> dict:
    tested = sum(counts.values()) - counts["skipped"] - counts["not checked"]
    killed = (counts["killed"] + counts["timeout"] + counts["killed by a test written after the run (--recheck)"]
              + counts["killed by --recheck's tests"])
    determined = tested - counts["ended by SIGTERM"] - counts["suspicious"]
    return {**dict(counts), "tested": tested,
            # those ended by SIGTERM counted as survivors
            "score": round(100 * killed / tested, 1) if tested else None,
            # those ended by SIGTERM left out (mutmut's runner ended them; neither killed nor survived)
            "score_of_determined": round(100 * killed / determined, 1) if determined else None}


def main(argv: list[str] | None = None) -> int:
    arguments = argparse.ArgumentParser(prog="python scripts/mutation.py", description=__doc__.split("\n\n")[0])
    arguments.add_argument("--modules", nargs="+", default=MODULES)
    arguments.add_argument("--tests", nargs="+", default=TESTS)
    arguments.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants run at once")
    arguments.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    arguments.add_argument("--keep", type=Path, default=None, help="work here and keep it (default: a temporary "
                           "directory, removed); an earlier run there goes on with the mutants not checked yet")
    arguments.add_argument("--report-only", action="store_true", help="with --keep: write the results of the "
                           "mutants checked there so far, without running mutmut")
    arguments.add_argument("--mutants", nargs="+", default=None, metavar="PATTERN",
                           help="run (again) only the mutants named (fnmatch patterns: 'bpbc.cli.*')")
    arguments.add_argument("--scope", action="store_true", help="run (again) the mutants of the issue's scope "
                           "only: io's readers, read-ahead and rapidgzip stream left out (each hangs to the timeout)")
    arguments.add_argument("--recheck", nargs="+", default=None, metavar="TEST", help="with --keep, after a run: "
                           "run each survivor against these tests (of the checkout as it is now); those failing "
                           "count as killed (rechecked.json in the work directory)")
    arguments.add_argument("--merge", nargs="+", type=Path, default=[], metavar="DIR", help="with --keep: count "
                           "the results of these work directories too (a mutant killed in any is killed; runs of "
                           "some modules against fewer tests, --modules and --tests, each kept in a DIR of its own)")
    arguments.add_argument("--unchecked", action="store_true", help="with --recheck: the mutants mutmut did not get "
                           "to as well (where a pattern names tests for them; killed or survived by those alone)")
    args = arguments.parse_args(argv)
    MERGED[:] = args.merge
    work = args.keep or Path(tempfile.mkdtemp(prefix="bpbc-mutation-"))
    started = time.time()
    try:
        if not (work / "mutants").exists():
            checkout_copy(work)
            for module in args.modules:
                leave_compiled_alone(work / module)
            with open(work / "tests" / "conftest.py", "a") as conftest:
                conftest.write(_SKIP_SUBPROCESSES)
            (work / "setup.cfg").write_text(config(args.modules, args.tests))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH")])))
        names = (args.mutants or []) + (SCOPE_PATTERNS if args.scope else [])
        done = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs), *names],
                              cwd=work, env=env, stdout=subprocess.DEVNULL) if not (args.report_only or args.recheck) \
            else None
        if done is not None and done.returncode != 0:
            print(f"mutation: mutmut ended with status {done.returncode} (in {work})", file=sys.stderr)
        if args.recheck:
            _, survivors = results(work, args.modules)
            if args.unchecked:
                survivors = survivors + unchecked(work, args.modules)
            done_before = json.loads((work / "rechecked.json").read_text()) if (work / "rechecked.json").exists() else {}
            codes = recheck(work, [name for name in survivors if in_scope(name) and done_before.get(name) != 1],
                            args.recheck, args.jobs)
            (work / "rechecked.json").write_text(json.dumps({**done_before, **codes}, indent=1) + "\n")
        found, survivors = results(work, args.modules)
        diffs = mutant_diffs(work, survivors)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    total: Counter = Counter()
    for counts in found["modules"].values():
        total.update(counts)
    from importlib.metadata import version

    figures = {
        "command": "python scripts/mutation.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "mutmut": version("mutmut"), "cpu_cores": os.cpu_count(), "jobs": args.jobs,
        "elapsed_s": round(time.time() - started, 1), "tests": args.tests,
        "scope": score(found["scope"]), "outside_scope": score(found["outside"]), "all": score(total),
        "modules": {module: score(counts) for module, counts in found["modules"].items()},
        "survivors": [name for name in survivors if in_scope(name)],
        "survivors_outside_scope": found["survivors_outside_scope"],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "mutation_cpu.json").write_text(json.dumps(figures, indent=2) + "\n")
    (args.out / "mutation_survivors_cpu.txt").write_text("".join(diffs))
    print(f"mutation: {figures['all']} -> {args.out / 'mutation_cpu.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
