"""A/B of the GPU engine's two ways in for reads, in one run on a CUDA host.

'bytes': a chunk's raw FASTQ bytes are uploaded and encoded, sorted and
transposed on the GPU (``GpuEngine.prepare_bytes``, the default);
'codes': the host encodes and packs them first (the route before, taken when
an engine has no ``prepare_bytes``). Each repeat runs both, alternating, as
``bpbc-screen --device gpu`` with PAF, --matched and --unmatched, and prints
the wall time and the command's stage seconds (also appended to
$OUT/ab.txt). A third argument profiles the routes named there (comma
separated) with py-spy into $OUT/spy_<case>_<route>.txt.

    python -m bench.bytes_route_ab single_128|panel_96x24 READS [bytes,codes]
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

from bench.sw_bench import _write_e2e_reads, e2e_patterns

#: runs the CLI with or without the engine's bytes route (first argument: bytes or codes)
_COMMAND = ("import sys, bpbc.gpu_engine as g\n"
            "if sys.argv.pop(1) == 'codes':\n"
            "    del g.GpuEngine.prepare_bytes\n"
            "from bpbc.cli import run\n"
            "run()\n")


def main() -> None:
    label, n = sys.argv[1], int(sys.argv[2])
    out = os.environ.get("OUT", "/tmp/out")
    patterns, threshold = e2e_patterns()[label]
    work = "/tmp/bytes_route_ab"
    os.makedirs(work, exist_ok=True)
    reads = f"{work}/{label}_{n}.fq.gz"
    if not os.path.exists(reads):
        _write_e2e_reads(reads, n, 150, np.random.default_rng(4), patterns, 50 if len(patterns) == 1 else 3)
    with open(f"{work}/patterns.fa", "w") as fh:
        fh.write("".join(f">p{k}\n{p}\n" for k, p in enumerate(patterns)))

    def command(route, profile=None):
        args = [sys.executable, "-c", _COMMAND, route, reads, f"{work}/patterns.fa", "--threshold", str(threshold),
                "--device", "gpu", "-o", f"{work}/o.paf", "--matched", f"{work}/m.fq.gz", "--unmatched",
                f"{work}/u.fq.gz", "--json", f"{work}/s.json", "--quiet"]
        if profile is None:
            return args
        return ["py-spy", "record", "-r", "200", "-f", "raw", "--threads", "-o", profile, "--", *args]

    subprocess.run(command("bytes"), check=True)  # fills the kernel caches
    for _ in range(int(os.environ.get("AB_REPEATS", 2))):
        for route in ("bytes", "codes"):
            start = time.perf_counter()
            subprocess.run(command(route), check=True)
            wall = time.perf_counter() - start
            stages = json.loads(open(f"{work}/s.json").read())["stage_seconds"]
            line = f"{label} {route} {wall:.2f} " + str({k: round(v, 3) for k, v in stages.items()})
            print(line, flush=True)
            with open(f"{out}/ab.txt", "a") as fh:
                fh.write(line + "\n")
    for route in sys.argv[3].split(",") if len(sys.argv) > 3 else ():
        subprocess.run(command(route, f"{out}/spy_{label}_{route}.txt"), check=True)


if __name__ == "__main__":
    main()
