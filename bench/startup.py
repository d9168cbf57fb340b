"""What a fresh ``bpbc-screen`` process spends before and around its first reads.

Each step runs its source (``STEPS``) in a fresh interpreter, so its
figure includes interpreter start and every import that source makes
(``import bpbc.cli`` includes numpy and numba, ``import cupy`` numpy but
not bpbc); medians of ``--repeats`` runs. Steps
marked GPU run only where CuPy sees a device. With reads and patterns, the
command itself (PAF, ``--matched`` and ``--unmatched`` as in the end-to-end
rows) runs as a fresh process and through a ``bpbc-serve`` started once for
the purpose (``BPBC_SERVER``, bpbc/server.py), beside a bare dnaio pass.
Prints one line per step and writes ``startup_<device>.csv`` to ``--out``.

    python -m bench.startup [--reads FILE --patterns FASTA | --generate N] [--out DIR] [--repeats 3]

``--generate N`` writes N reads and the one 128 bp pattern of the
end-to-end rows (``python -m bench sw --only e2e``), threshold 40.
"""

from __future__ import annotations

import argparse
import os
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
    ("first cached numba call", False,
     "from bench.startup import _first_numba_call; _first_numba_call()"),
    ("every numba kernel of a CPU run", False, "from bench.startup import _warm_cpu; _warm_cpu()"),
    ("import cupy", True, "import cupy"),
    ("CUDA context", True, "import cupy; cupy.zeros(1); cupy.cuda.Device().synchronize()"),
    ("GPU engine and its kernels", True, "from bench.startup import _warm_gpu; _warm_gpu()"),
]


def _first_numba_call() -> None:
    """One cached kernel: numba's own set-up on first use, and one cache load."""
    from bpbc.chunks import scan_fastq

    buffer = np.frombuffer(b"@a\nAC\n+\nII\n", np.uint8)
    slots = [np.empty(1, np.int64) for _ in range(3)]
    scan_fastq(buffer, 0, len(buffer), 1, *slots)


def _warm_cpu() -> None:
    """Screen a few reads on the CPU: every kernel of a run is loaded."""
    import bpbc

    bpbc.screen(["ACGTACGTAAGGCCTT" * 8], ["ACGTACGTAAGGCC"], threshold=10, device="cpu")


def _warm_gpu() -> None:
    import bpbc

    bpbc.screen(["ACGTACGTAAGGCCTT" * 8], ["ACGTACGTAAGGCC"], threshold=10, device="gpu")


def start_server(path: str, device: str, env: dict) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "bpbc.server", path, "--device", device], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(path):
        if server.poll() is not None:
            raise SystemExit("bpbc-serve did not start")
        time.sleep(0.05)
    return server


def _seconds(args: list[str], env: dict) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr}")
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench startup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", help="also time a bare dnaio pass, bpbc's reader and bpbc-screen on this file")
    parser.add_argument("--patterns", help="patterns for the bpbc-screen rows (FASTA)")
    parser.add_argument("--generate", type=int, metavar="N",
                        help="screen N generated reads against the end-to-end rows' 128 bp pattern")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", default=str(RESULTS_DIR))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).parents[1]),
                                                                     os.environ.get("PYTHONPATH")])))
    try:
        import cupy

        gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any failure: no usable GPU
        gpu = False
    steps = [(name, [sys.executable, "-c", source], env) for name, needs_gpu, source in STEPS if gpu or not needs_gpu]
    work = tempfile.mkdtemp()
    if args.generate:
        from bench.sw_bench import _write_e2e_reads, e2e_patterns

        patterns, _ = e2e_patterns()["single_128"]
        args.reads, args.patterns = f"{work}/reads.fq.gz", f"{work}/pattern.fa"
        _write_e2e_reads(args.reads, args.generate, 150, np.random.default_rng(4), patterns, 50)
        Path(args.patterns).write_text(f">p0\n{patterns[0]}\n")
    if args.reads:
        from bench.sw_bench import _BARE_READ_PASS, _BPBC_READ_PASS

        bare = [sys.executable, "-c", _BARE_READ_PASS, args.reads]
        steps.append(("bare dnaio pass", bare, env))
        steps.append(("bpbc reader alone", [sys.executable, "-c", _BPBC_READ_PASS, args.reads], env))
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
        _seconds(command, step_env)  # caches warm
        runs = [_seconds(command, step_env) for _ in range(args.repeats)]
        rows.append({"step": name, "seconds": f"{np.median(runs):.3f}", "runs_s": " ".join(f"{r:.3f}" for r in runs)})
        print(f"{name:34s} {np.median(runs):7.3f} s   ({rows[-1]['runs_s']})", flush=True)
    if args.reads and args.patterns:
        server.terminate()
        server.wait()
    device = gpu_info() if gpu else None
    write_csv(Path(args.out) / f"startup_{device_kind(device)}.csv", rows, environment(device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
