"""Scale-out over Dask: ``bpbc-screen --dask`` on 1, 2, 4 GPUs against one GPU, in one run.

Reads: n reads of 150 bp (default 10M) against the 96 x 24 bp panel (T = 36,
a third of the reads carry a pattern), FASTQ.gz, written as four quarter files
whose gzip members, concatenated, make the halves and the whole file: the
reads of the parts in order are the reads of the whole, so the parts' PAF
files, concatenated, must equal the whole file's PAF byte for byte (checked).

Rows, every command a new process (``python -m bpbc``) writing PAF,
``--matched``, ``--unmatched`` (gzip) and ``--json``:

* ``single``: ``bpbc-screen whole.fq.gz --device gpu``, one process, one GPU:
  the reference of every ratio;
* ``cluster_files``: many files, one task per file, N quarter or half files
  over a running cluster of N GPU workers (``--dask ADDRESS``), N = 1, 2, 4 as
  far as there are GPUs; ``cluster_one_file``: the whole file over the same
  cluster, cut into parts that the workers read (``split``: the ``--json``
  plan's ``dask``, ``N parts``; ``chunks`` where the client read it);
  ``cluster_one_member``: the same reads as one gzip member (what gzip and
  pigz write), cut through rapidgzip's index of it, which a worker makes
  first (counted). The cluster is started once per N
  (``dask_cuda.LocalCUDACluster``, else one Nanny per GPU with its
  CUDA_VISIBLE_DEVICES) and warmed up on a small file, so these rows time
  screening, not the cluster's start: the throughput of a running cluster;
* ``local``: ``bpbc-screen PARTS... --dask local:N --device gpu``, the whole
  command, the cluster's start included; ``local_one_file``: the whole file
  so (in parts, a worker per GPU of this host).

``ratio_to_single`` = reads/s over the single run's reads/s (``target_ratio``:
>= 1.8 on 2 GPUs, >= 3.4 on 4). The stage columns come from the command's
``--json`` (many files: the slowest file's; one file in parts: the parts'
seconds added up); ``read_share`` near 1 in chunks is the client's
decompression and parsing bounding the run. ``--quick``: CPU workers, 4000 reads, about a minute (CI).
``--serve``: every command, the single run's too, goes through one
``bpbc-serve`` started for the purpose (``BPBC_SERVER``, bpbc/server.py), so
no row pays a process start: the rows then compare screening throughput.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from . import error_text, say
from .sw_bench import write_e2e_reads, e2e_patterns


def _md5(paths) -> str:
    digest = hashlib.md5()
    for path in paths:
        with open(path, "rb") as fh:
            while block := fh.read(1 << 24):
                digest.update(block)
    return digest.hexdigest()


def _gunzip_md5(paths) -> str:
    import gzip

    digest = hashlib.md5()
    for path in paths:
        with gzip.open(path, "rb") as fh:
            while block := fh.read(1 << 24):
                digest.update(block)
    return digest.hexdigest()


def _concatenate(parts, path) -> None:
    with open(path, "wb") as out:
        for part in parts:
            with open(part, "rb") as fh:
                shutil.copyfileobj(fh, out, 1 << 24)


def gpu_count() -> int:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - no cupy, no driver: no GPU
        return 0


@contextmanager
def running_cluster(workers: int, device: str):
    """(scheduler address, kind) of a cluster of ``workers`` on this host:
    CPU processes, or one GPU each (dask-cuda, else a Nanny per GPU with its
    CUDA_VISIBLE_DEVICES), closed on exit."""
    import logging

    import distributed

    if device == "cpu":
        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                      dashboard_address=None, silence_logs=logging.ERROR) as cluster:
            yield cluster.scheduler_address, "distributed.LocalCluster"
        return
    try:
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(workers)), dashboard_address=None,
                                   silence_logs=logging.ERROR)
        kind = "dask_cuda.LocalCUDACluster"
    except ImportError as error:
        say(f"bench dask: dask_cuda cannot be imported ({error}); one Nanny per GPU instead")
        specs = {k: {"cls": distributed.Nanny, "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": str(k)}}}
                 for k in range(workers)}
        cluster = distributed.SpecCluster(workers=specs, scheduler={"cls": distributed.Scheduler, "options": {
            "dashboard_address": None}}, silence_logs=logging.ERROR)
        kind = f"Nanny per GPU (dask_cuda: {error_text(error)})"
    with cluster:
        with distributed.Client(cluster) as client:
            client.wait_for_workers(workers, timeout=300)
        yield cluster.scheduler_address, kind


def _run(command: list, what: str, env: dict | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run([str(part) for part in command], capture_output=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{what}: exit {done.returncode}: {done.stderr.decode()[-800:]}")
    return seconds


def _stage_columns(summaries: list[dict]) -> dict:
    """The stage seconds and shares of the slowest run among ``summaries``."""
    slowest = max(summaries, key=lambda summary: summary["wall_time_s"])
    return {**{f"{stage}_s": f"{value:.4g}" for stage, value in slowest["stage_seconds"].items()},
            **{f"{stage}_share": f"{value:.3f}" for stage, value in slowest["stage_shares"].items()}}


def run(n: int = 10_000_000, quick: bool = False, counts=None, repeats: int = 1, check_reads: bool = False,
        keep: Path | None = None, serve: bool = False) -> list[dict]:
    cores = os.cpu_count() or 1
    device = "cpu" if quick else "gpu"
    available = cores if quick else gpu_count()
    if device == "gpu" and available == 0:
        raise SystemExit("bench dask: no GPU (cupy and a CUDA device are needed; --quick runs on the CPU)")
    counts = [c for c in (counts or ((1, 2) if quick else (1, 2, 4))) if c <= max(available, 1)]
    patterns, threshold = e2e_patterns()["panel_96x24"]
    rows: list[dict] = []
    work = Path(tempfile.mkdtemp(prefix="bpbc-dask-bench-", dir=keep))
    server = None
    try:
        quarter = n // 4
        n = 4 * quarter
        say(f"bench dask: writing {n} reads in four files under {work}")
        rng = np.random.default_rng(11)
        quarters = [work / f"q{k}.fq.gz" for k in range(4)]
        for path in quarters:
            write_e2e_reads(str(path), quarter, 150, rng, patterns, 3)
        halves = [work / "h0.fq.gz", work / "h1.fq.gz"]
        _concatenate(quarters[:2], halves[0])
        _concatenate(quarters[2:], halves[1])
        whole = work / "whole.fq.gz"
        _concatenate(quarters, whole)
        one_member = work / "one.fq.gz"  # the same reads as one gzip member, as gzip and pigz write them
        _one_member(whole, one_member, cores)
        warm = work / "warm.fq.gz"
        write_e2e_reads(str(warm), 2000 if quick else 20000, 150, rng, patterns, 3)
        (work / "panel.fa").write_text("".join(f">p{k}\n{p}\n" for k, p in enumerate(patterns)))
        base = [sys.executable, "-m", "bpbc", "--threshold", threshold, "--device", device, "--quiet"]
        env = None
        if serve:
            from bench.startup import start_server

            socket_path = str(work / "serve.sock")
            server = start_server(socket_path, device, dict(os.environ))
            env = dict(os.environ, BPBC_SERVER=socket_path)
        via = " through bpbc-serve" if serve else ""
        if quick:
            base += ["--chunk-size", "500"]
        out = work / "out"

        def outputs(template: bool) -> list:
            name = "{stem}" if template else "whole"
            return ["-o", out / f"{name}.paf", "--matched", out / f"{name}.m.fq.gz", "--unmatched",
                    out / f"{name}.u.fq.gz", "--json", out / f"{name}.json"]

        def fresh_out() -> None:
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()

        reference: dict = {}

        def measure(case: str, method: str, command: list, files: list[Path], workers: int, **extra) -> None:
            times = []
            try:
                for _ in range(max(1, repeats)):
                    fresh_out()
                    times.append(_run(command, f"{case} {method}", env))
                stems = [path.name.split(".")[0] for path in files]  # {stem}: q0, h0, whole
                summaries = [json.loads((out / f"{s}.json").read_text()) for s in stems]
                paf = _md5([out / f"{s}.paf" for s in stems])
                reads = sum(summary["reads"] for summary in summaries)
                row = {"case": case, "method": method, "workers": workers, "read_length": 150, "reads": reads,
                       "files": len(files), "patterns": len(patterns), "threshold": threshold, "basis": "measured",
                       "seconds": f"{float(np.median(times)):.4g}", "repeats": " ".join(f"{t:.3f}" for t in times),
                       "reads_per_s": f"{reads / float(np.median(times)):.4g}",
                       "paf_lines": sum(summary["alignments"] for summary in summaries),
                       "reads_passing": sum(summary["reads_passing"] for summary in summaries),
                       "split": summaries[0]["plan"].get("dask", ""), **extra,
                       **_stage_columns(summaries)}
                if check_reads:
                    row["reads_md5"] = _gunzip_md5([out / f"{s}.m.fq.gz" for s in stems]) + "/" + _gunzip_md5(
                        [out / f"{s}.u.fq.gz" for s in stems])
                if case == "single":
                    reference.update(paf=paf, seconds=float(np.median(times)), reads_md5=row.get("reads_md5"),
                                     passing=row["reads_passing"])
                else:
                    row["paf_identical_to_single"] = paf == reference.get("paf")
                    if check_reads:
                        row["reads_identical_to_single"] = row["reads_md5"] == reference.get("reads_md5")
                    if reference.get("seconds"):
                        row["ratio_to_single"] = f"{reference['seconds'] / float(np.median(times)):.3f}"
                        row["target_ratio"] = {2: 1.8, 4: 3.4}.get(workers, "")
            except Exception as error:  # noqa: BLE001 - a row that failed says why; the others go on
                row = {"case": case, "method": method, "workers": workers, "basis": "error",
                       "error": error_text(error)}
            rows.append(row)
            say(f"bench dask: {row}")

        # the reference: one process, one GPU (a first run on the small file fills the kernel caches)
        fresh_out()
        _run(base + [warm, work / "panel.fa", "-o", out / "warm.paf"], "warm-up", env)
        measure("single", f"bpbc-screen --device {device}{via}", base + [whole, work / "panel.fa"] + outputs(False),
                [whole], 1)
        for workers in counts:
            files = {1: [whole], 2: halves, 4: quarters}.get(workers, quarters)
            threads = ["--threads", str(max(1, cores // workers))]
            try:
                with running_cluster(workers, device) as (address, kind):
                    dask = ["--dask", address] + threads
                    fresh_out()
                    _run(base + dask + [warm, work / "panel.fa", "-o", out / "warm.paf"], "cluster warm-up", env)
                    many = files if len(files) > 1 else [whole]
                    measure("cluster_files", f"bpbc-screen FILES... --dask ADDRESS ({kind}){via}",
                            base + dask + ["--reads-from", _listing(work, many), work / "panel.fa"] + outputs(True),
                            many, workers, cluster=kind, threads_per_worker=threads[1])
                    measure("cluster_one_file", f"bpbc-screen whole.fq.gz --dask ADDRESS ({kind}){via}",
                            base + dask + [whole, work / "panel.fa"] + outputs(False), [whole], workers,
                            cluster=kind, threads_per_worker=threads[1])
                    measure("cluster_one_member", f"bpbc-screen one.fq.gz --dask ADDRESS ({kind}){via}",
                            base + dask + [one_member, work / "panel.fa"] + outputs(True), [one_member], workers,
                            cluster=kind, threads_per_worker=threads[1])
            except Exception as error:  # noqa: BLE001
                rows.append({"case": "cluster", "workers": workers, "basis": "error", "error": error_text(error)})
                say(f"bench dask: {rows[-1]}")
            many = files if len(files) > 1 else [whole]
            measure("local", f"bpbc-screen FILES... --dask local:{workers} --device {device} (cluster start included){via}",
                    base + ["--dask", f"local:{workers}", "--reads-from", _listing(work, many), work / "panel.fa"]
                    + outputs(True), many, workers)
            measure("local_one_file", f"bpbc-screen whole.fq.gz --dask local:{workers} --device {device} (cluster "
                    f"start included){via}", base + ["--dask", f"local:{workers}", whole, work / "panel.fa"]
                    + outputs(False), [whole], workers)
    finally:
        if server is not None:
            server.terminate()
            server.wait()
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return rows


def _one_member(source: Path, path: Path, threads: int) -> None:
    """``source``'s data as one gzip member (python-isal's threaded writer makes one)."""
    from isal import igzip, igzip_threaded

    with igzip.open(source, "rb") as data, igzip_threaded.open(path, "wb", threads=threads) as out:
        shutil.copyfileobj(data, out, 1 << 24)


def _listing(work: Path, files: list[Path]) -> Path:
    path = work / f"list{len(files)}.txt"
    path.write_text("".join(f"{file}\n" for file in files))
    return path
