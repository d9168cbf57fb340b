"""The whole command on the host: ``python -m bench.host_pipeline [--reads N] [--cases ...] [--trees NAME=DIR ...]``.

Times fresh ``bpbc-screen`` processes end to end (wall, peak RSS, the
``--json`` stages) beside the floors and peers of the same host, in one run:

* ``rapidgzip -d -c -P <cores>`` of the same file to /dev/null, and a bare
  dnaio pass counting the bases: the I/O floors;
* ``cutadapt -j <cores>`` with every pattern as a 3' adapter (edit distance,
  error rate 0.1, not local SW: another model) and sassy (``sassy-rs``, SIMD
  edit distance: the whole pattern within k = 3 errors, also another model),
  reading included: the peers of the CPU rows.

Reads come from :mod:`bench.host_data` (sequencer-like headers and binned
qualities), made once in ``--work``. ``--trees`` runs the command from
several checkouts (``base=/path/to/old``) alternating, so a before/after
pair shares one run; the commands of the trees named in ``--report-trees``
also write ``--report`` and ``--multiqc`` (one checkout may be named twice,
``plain=DIR report=DIR``). Writes ``host_pipeline_<device>.csv`` under ``--out``
with the environment header; each row carries its ratio to the rapidgzip
floor and to the dnaio pass of its input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .environment import RESULTS_DIR, device_kind, environment, gpu_info, write_csv

ROOT = Path(__file__).resolve().parent.parent
CASES = ("floors", "gpu_one", "gpu_panel", "gpu_plain", "gpu_1m", "start", "cpu_panel", "cpu_threads", "peers")
DNAIO_PASS = ("import dnaio, sys\nn = 0\nwith dnaio.open(sys.argv[1]) as f:\n"
              "    for r in f: n += len(r.sequence)\nprint(n)")
SASSY_PASS = ("import dnaio, sassy, sys\npatterns = [l.strip().encode() for l in open(sys.argv[2]) if l[0] != '>']\n"
              "with dnaio.open(sys.argv[1]) as f: texts = [r.sequence.encode() for r in f]\n"
              "hits = sassy.Searcher('iupac', rc=True).search_many(patterns, texts, 3, int(sys.argv[3]), 'batch_texts')\n"
              "print(len({h.text_idx for h in hits}))")


def timed(command: list[str], env: dict | None = None, cwd=None) -> tuple[float, float, int]:
    """(wall s, peak RSS GB, exit status) of one fresh process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    code = process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen waits no more
    assert process.stderr is not None
    with process.stderr:
        stderr = process.stderr.read().decode(errors="replace")
    if code:
        print(f"  exit {code}: {' '.join(command)}\n{stderr[-2000:]}", file=sys.stderr)
    return wall, usage.ru_maxrss / 1e6, code


def random_patterns(path: Path, count: int, length: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    bases = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, (count, length))]
    path.write_text("".join(f">p{i}\n{row.tobytes().decode()}\n" for i, row in enumerate(bases)))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.host_pipeline", description=__doc__)
    parser.add_argument("--reads", type=int, default=10_000_000, help="reads of the large file (default 10M)")
    parser.add_argument("--small", type=int, default=1_000_000, help="reads of the CPU and fresh-process rows (1M)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bpbc-host"), help="inputs (made once) and outputs")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "host")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--trees", nargs="+", default=[f"new={ROOT}"], help="NAME=DIR: checkouts whose bpbc runs")
    parser.add_argument("--report-trees", nargs="+", default=[], metavar="NAME",
                        help="trees whose commands also write --report and --multiqc (docs/report.md)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, nargs="+", default=None,
                        help="cpu_threads: --threads values (default: the usable cores)")
    args = parser.parse_args(argv)

    cores = len(os.sched_getaffinity(0))
    args.threads = args.threads or [cores]
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    gz = work / f"reads_{args.reads}.fq.gz"
    small = work / f"reads_{args.small}.fq.gz"
    warm = work / "reads_20000.fq.gz"
    for path, count in ((gz, args.reads), (small, args.small), (warm, 20_000)):
        if not path.exists():  # in a process of its own: this one stays small (its size is in every child's RSS)
            subprocess.run([sys.executable, "-m", "bench.host_data", str(path), "--reads", str(count), "--seed",
                            str(count)], check=True, cwd=ROOT)
    plain = work / f"reads_{args.reads}.fq"
    if "gpu_plain" in args.cases and not plain.exists():
        subprocess.run(f"rapidgzip -d -c -P {cores} {gz} > {plain}", shell=True, check=True)
    one = work / "one.fq"
    one.write_bytes(b"".join(open_lines(small, 4)))
    pattern = random_patterns(work / "one_128.fa", 1, 128, 7)
    panel = random_patterns(work / "panel_96x24.fa", 96, 24, 8)
    trees = dict(item.split("=", 1) for item in args.trees)
    gpu = gpu_info()
    rows: list[dict] = []

    def bpbc(tree: str, *arguments) -> tuple[list[str], dict, str]:
        """The command, its environment and its directory: the tree's (``python -m`` looks there first)."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([trees[tree], os.environ.get("PYTHONPATH", "")])}
        if tree in args.report_trees:
            arguments += ("--report", work / "report.html", "--multiqc", work / "run_mqc.json")
        return [sys.executable, "-m", "bpbc", *map(str, arguments)], env, trees[tree]

    def row(case: str, what: str, command: list[str], env=None, cwd=None, reads_file: Path | None = None,
            **extra) -> dict:
        stages: dict = {}
        json_path = work / "summary.json"
        json_path.unlink(missing_ok=True)
        wall, rss, code = timed(command, env, cwd)
        if json_path.exists():
            summary = json.loads(json_path.read_text())
            stages = {f"stage_{k}": v for k, v in summary["stage_seconds"].items()}
            stages["json_wall_s"] = summary["wall_time_s"]
            stages["reads"] = summary["reads"]
        result = {"case": case, "what": what, "wall_s": round(wall, 3), "peak_rss_gb": round(rss, 3), "exit": code,
                  "input": reads_file.name if reads_file else "", **extra, **stages}
        print(f"{case:12} {what:44} {wall:8.2f} s  rss {rss:5.2f} GB", file=sys.stderr, flush=True)
        rows.append(result)
        return result

    outputs = ["-o", work / "out.paf", "--matched", work / "m.fq.gz", "--unmatched", work / "u.fq.gz",
               "--json", work / "summary.json", "--quiet"]
    # kernels compiled and cached (numba, NVRTC) before anything is timed: on
    # reads with hits, so that the kernels of the second pass and the traceback are too
    for tree in trees:
        for patterns, threshold in ((pattern, 40), (panel, 36)):
            for device in ("cpu", "gpu") if gpu else ("cpu",):
                timed(*bpbc(tree, warm, patterns, "-t", threshold, "--device", device, "--quiet", "-o", work / "warm.paf"))
    plain_outputs = ["-o", work / "out.paf", "--matched", work / "m.fq", "--unmatched", work / "u.fq",
                     "--json", work / "summary.json", "--quiet"]
    for _repeat in range(args.repeats):
        if "floors" in args.cases:
            for path in (gz, small):
                row("floor", f"rapidgzip -d -P {cores}", ["sh", "-c", f"rapidgzip -d -c -P {cores} {path} > /dev/null"],
                    reads_file=path)
                row("floor", "dnaio pass", [sys.executable, "-c", DNAIO_PASS, str(path)], reads_file=path)
        for tree in trees:
            if "gpu_one" in args.cases:
                row("gpu_one", f"{tree}: 1 x 128 bp, T=40", *bpbc(tree, gz, pattern, "-t", 40, "--device", "gpu", *outputs),
                    reads_file=gz, tree=tree)
            if "gpu_panel" in args.cases:
                row("gpu_panel", f"{tree}: 96 x 24 bp, T=36", *bpbc(tree, gz, panel, "-t", 36, "--device", "gpu", *outputs),
                    reads_file=gz, tree=tree)
            if "gpu_plain" in args.cases:
                row("gpu_plain", f"{tree}: plain in and out, panel", *bpbc(tree, plain, panel, "-t", 36, "--device", "gpu",
                                                                           *plain_outputs),
                    reads_file=plain, tree=tree, input_gb=round(plain.stat().st_size / 1e9, 3))
            if "gpu_1m" in args.cases:
                row("gpu_1m", f"{tree}: 1M, panel, fresh process", *bpbc(tree, small, panel, "-t", 36, "--device", "gpu",
                                                                         *outputs), reads_file=small, tree=tree)
            if "start" in args.cases:
                for device in ("cpu", "gpu") if gpu else ("cpu",):
                    row("start", f"{tree}: one read, {device}", *bpbc(tree, one, panel, "-t", 36, "--device", device,
                                                                      "--quiet"), tree=tree)
            if "cpu_panel" in args.cases:
                row("cpu_panel", f"{tree}: 1M, panel, default threads", *bpbc(tree, small, panel, "-t", 36, "--device",
                                                                              "cpu", *outputs), reads_file=small, tree=tree)
            if "cpu_threads" in args.cases:
                for threads in args.threads:
                    row("cpu_threads", f"{tree}: 1M, panel, --threads {threads}",
                        *bpbc(tree, small, panel, "-t", 36, "--device", "cpu", "--threads", threads, *outputs),
                        reads_file=small, tree=tree, threads=threads)
        if "peers" in args.cases:
            adapters = [f"-a{line.strip()}" for line in panel.read_text().splitlines() if not line.startswith(">")]
            row("peers", f"cutadapt -j {cores}, panel, e=0.1", ["cutadapt", "-j", str(cores), "-e", "0.1", *adapters,
                                                               "-o", str(work / "cut.fq.gz"), str(small)],
                reads_file=small)
            row("peers", f"sassy k=3, {cores} threads, reading included",
                [sys.executable, "-c", SASSY_PASS, str(small), str(panel), str(cores)], reads_file=small)
    floors = {(r["input"], r["what"].split()[0]): r["wall_s"] for r in rows if r["case"] == "floor"}
    for r in rows:
        for floor in ("rapidgzip", "dnaio"):
            base = min((v for (name, kind), v in floors.items() if name == r["input"] and kind == floor), default=None)
            if base and r["case"] != "floor":
                r[f"x_{floor}"] = round(r["wall_s"] / base, 3)
    env = environment(gpu)
    path = write_csv(args.out / f"host_pipeline_{device_kind(gpu)}.csv", rows, env)
    print(f"{len(rows)} rows -> {path}", file=sys.stderr)
    return 0


def open_lines(path: Path, count: int) -> list[bytes]:
    from xopen import xopen

    with xopen(path, "rb") as stream:
        return [stream.readline() for _ in range(count)]


if __name__ == "__main__":
    raise SystemExit(main())
