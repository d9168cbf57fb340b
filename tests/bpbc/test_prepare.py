"""python -m bpbc.prepare: the kernels a run needs, compiled ahead in several processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bpbc.compile_watch import COMPILE_NOTICE
from bpbc.prepare import engine_kernels
from tests.bpbc.test_cli import PACKAGE_ROOT, READS, run_subprocess


def test_engine_kernels_are_those_of_the_thresholds_plane_counts():
    # 40 and 63 take 6 planes: flags in 5 first, then scores in 6; 7 takes 3, in one pass
    assert engine_kernels([40, 63]) == [(5, False), (6, True)]
    assert engine_kernels([7, 30]) == [(3, True), (4, False), (5, True)]
    assert engine_kernels([40], exact_scores=True) == [(6, True)]
    # long instances are flagged in fewer planes (bpbc.scoring.cpu_flag_planes): every count they may take
    assert engine_kernels([300]) == [(5, False), (6, False), (7, False), (9, True)]
    assert engine_kernels([300], (1, 1, 1, 1)) == [(5, False), (6, False), (9, True)]


def test_after_prepare_a_run_compiles_nothing(tmp_path):
    """In a fresh engine kernel cache: prepare compiles (here the engine's
    kernels for threshold 24's 5 planes), then the command at that threshold
    finds every kernel cached: no notice, no seconds compiling."""
    env = dict(os.environ, BPBC_CACHE_DIR=str(tmp_path / "kernels"),
               PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "bpbc.prepare", "-t", "24", "--device", "cpu", "--jobs", "2"],
                          capture_output=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.decode().splitlines()
    assert any(line.startswith("bpbc.prepare: engine kernel: 5 planes:") for line in lines), lines
    assert lines[-1].startswith("bpbc.prepare: kernels ready in ")
    patterns = tmp_path / "p.fa"
    patterns.write_text(">a\nACGTTGCAAGGCTTAACG\n>b\nTTGACCAGGTACAGT\n")
    summary = tmp_path / "s.json"
    run = run_subprocess(READS, patterns, "-t", "24", "--device", "cpu", "--json", summary, cwd=tmp_path,
                         env={"BPBC_CACHE_DIR": env["BPBC_CACHE_DIR"]})
    assert run.returncode == 0, run.stderr
    assert COMPILE_NOTICE not in run.stderr.decode()
    assert json.loads(summary.read_text())["stage_seconds"]["compile"] == 0
    # trimming on every strand screened hands the trimmer strided columns (0.3 s compiling before prepare ran it)
    trimmed = run_subprocess(READS, patterns, "-t", "24", "--device", "cpu", "--action", "trim", "--strand", "forward",
                             "--trimmed", tmp_path / "t.fq", "--json", summary, cwd=tmp_path,
                             env={"BPBC_CACHE_DIR": env["BPBC_CACHE_DIR"]})
    assert trimmed.returncode == 0, trimmed.stderr
    assert json.loads(summary.read_text())["stage_seconds"]["compile"] == 0


def test_prepare_runs_the_kernels_that_only_large_batches_reach(monkeypatch):
    """The parallel CIGAR writer (from 4000 hits a batch), the CPU engine's
    parallel packing of a second pass (from 64 groups of lanes) and the
    parallel encoder (from 2000 reads, with more than one numba thread), with
    the arguments a run gives them: a run on many hits compiled the first
    for 2.3-2.8 s after prepare (session 32)."""
    import numba
    import numpy as np

    from bpbc import chunks, prepare, traceback

    calls: dict[str, list] = {"cigars": [], "encode": []}

    def spy(name, kernel):
        def called(*args):
            calls[name].append(tuple(numba.typeof(arg) for arg in args))
            return kernel(*args)
        return called

    monkeypatch.setattr(traceback, "_cigars_parallel", spy("cigars", traceback._cigars_parallel))
    prepare._traceback_task(True, (2, 3, 5, 2), 16)
    assert len(calls["cigars"]) == 1
    # the CPU engine's packing of a second pass of many reads, in parallel
    from bpbc import cpu_engine

    calls["pack"] = []
    monkeypatch.setattr(cpu_engine, "_pack_lanes", spy("pack", cpu_engine._pack_lanes))
    prepare._packing_task(False)
    assert [types[:3] for types in calls["pack"]] == [(numba.typeof(np.zeros((2, 2), np.uint8)),
                                                       numba.typeof(np.zeros(2, np.int64)),
                                                       numba.typeof(np.zeros(2, np.int64)))]
    if numba.get_num_threads() > 1:  # one thread: no run takes the parallel encoder either
        monkeypatch.setattr(chunks, "_encode_spans", spy("encode", chunks._encode_spans))
        prepare._encoding_task()
        data = np.frombuffer(bytearray(b"ACGT"), np.uint8)  # a chunk's buffer: writable
        assert calls["encode"] == [(numba.typeof(data), numba.typeof(np.zeros(2, np.int64)),
                                    numba.typeof(np.zeros(2, np.int64)), numba.typeof(chunks.READ_CODE),
                                    numba.typeof(np.zeros((2, 2), np.uint8)))]


def test_prepare_calls_the_end_overlap_pass_as_trimming_does(monkeypatch):
    """prepare's end-overlap task passes the kernel what Decision.flags passes
    it in a trimming run (the types numba compiles for), the reads' bytes
    aside (a run's chunk buffer is writable, as prepare's; the test's is not)."""
    from fractions import Fraction

    import numba

    from bpbc import end_overlap, prepare
    from bpbc.scoring import Scoring
    from bpbc.trimming import _END3
    from tests.bpbc.test_end_overlap import decided, tasks_of

    calls: list[tuple] = []
    kernel_module = end_overlap.kernel_module

    def spying(planes, scoring):
        module = kernel_module(planes, scoring)

        class Spy:
            def first_pass(self, *args):
                calls.append((planes, tuple(numba.typeof(arg) for arg in args[1:])))
                return module.first_pass(*args)
        return Spy()

    monkeypatch.setattr(end_overlap, "kernel_module", spying)
    scoring = Scoring(2, 3, 5, 2)
    decided(["ACGTTTAGATCGGAAGAGC"], tasks_of(["AGATCGGAAGAGCACACGTCTGAACTCCAGTCA"], [_END3], [Fraction(4, 5)],
                                              scoring), 3, scoring)
    (planes, trimming), = calls
    prepare._end_overlap_task(planes, (2, 3, 5, 2))
    assert calls[1] == (planes, trimming)


def test_the_thresholds_of_a_runs_patterns(tmp_path):
    """--patterns: the thresholds the runs will screen them at, from the
    fraction (each length its own) or their headers; a bad file is one line
    and exit 1."""
    from bpbc.prepare import patterns_thresholds
    from bpbc.scoring import Scoring

    patterns = tmp_path / "adapters.fa"
    patterns.write_text(">a\n" + "A" * 20 + "\n>b\n" + "C" * 33 + "\n>c threshold=50\n" + "G" * 40 + "\n")
    scoring = Scoring(2, 3, 5, 2)
    assert patterns_thresholds(patterns, scoring, 36, 0.8) == [32, 50, 53]  # ceil(0.8 x 2 x 20), header, 0.8 x 66
    assert patterns_thresholds(patterns, scoring, 36) == [36, 50]
    (tmp_path / "plain.fa").write_text(">a\nACGT\n")
    assert patterns_thresholds(tmp_path / "plain.fa", scoring, 36) == [36]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
    (tmp_path / "bad.fa").write_text(">a\nAC*GT\n")
    done = subprocess.run([sys.executable, "-m", "bpbc.prepare", "--patterns", str(tmp_path / "bad.fa")],
                          capture_output=True, env=env, timeout=120)
    assert done.returncode == 1 and done.stderr.decode().count("\n") == 1 and b"bad.fa" in done.stderr


def test_bad_options_are_usage_errors():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
    for args in (["-t", "0"], ["--match", "0"], ["--min-score-fraction", "0.8"]):
        done = subprocess.run([sys.executable, "-m", "bpbc.prepare", *args], capture_output=True, env=env,
                              timeout=120)
        assert done.returncode == 2 and done.stderr.decode().count("\n") >= 1 and b"Traceback" not in done.stderr
