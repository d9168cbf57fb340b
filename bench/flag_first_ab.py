"""The GPU engine's two-pass hits end to end: ``bpbc-screen --device gpu`` on
the end-to-end panel case (N reads of 150 bp against the 96 x 24 bp panel,
T = 36, PAF, --matched, --unmatched, --json) with ``BPBC_GPU_FLAG_FIRST=0``
(hits in one pass) and unset (the default), alternating three times after a
warm-up; prints and writes one JSON row per run (wall, stage seconds, PAF
digest) to DIR/e2e_ab.jsonl.

``python -m bench.flag_first_ab N DIR`` (a CUDA machine; bench/device_env.sh).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .sw_bench import _write_e2e_reads, e2e_patterns, write_fastq_gz

SETTINGS = {"one_pass": {"BPBC_GPU_FLAG_FIRST": "0"}, "default": {}}


def main(n: int, out_dir: Path, repeats: int = 3) -> list[dict]:
    patterns, threshold = e2e_patterns()["panel_96x24"]
    rng = np.random.default_rng(4)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        reads, pats, warm = (os.path.join(work, name) for name in ("r.fq.gz", "p.fa", "w.fq.gz"))
        _write_e2e_reads(reads, n, 150, rng, patterns, 3)
        write_fastq_gz(warm, 20000, 150, rng, plant=patterns, every=3)
        Path(pats).write_text("".join(f">p{k}\n{p}\n" for k, p in enumerate(patterns)))

        def run(label: str, source: str) -> tuple[float, str, str]:
            env = {key: value for key, value in os.environ.items() if key != "BPBC_GPU_FLAG_FIRST"}
            env.update(SETTINGS[label])
            paf, summary = os.path.join(work, f"{label}.paf"), os.path.join(work, f"{label}.json")
            command = [sys.executable, "-m", "bpbc", source, pats, "--threshold", str(threshold), "--device", "gpu",
                       "-o", paf, "--matched", os.path.join(work, "m.fq.gz"), "--unmatched",
                       os.path.join(work, "u.fq.gz"), "--json", summary, "--quiet"]
            began = time.perf_counter()
            subprocess.run(command, env=env, check=True)
            return time.perf_counter() - began, paf, summary

        for label in SETTINGS:  # compilation and caches
            run(label, warm)
        for _ in range(repeats):
            for label in SETTINGS:
                wall, paf, summary = run(label, reads)
                stages = json.loads(Path(summary).read_text())
                row = {"method": label, "reads": n, "wall_s": round(wall, 3),
                       "paf_md5": hashlib.md5(Path(paf).read_bytes()).hexdigest(),
                       "alignments": stages["alignments"],
                       **{f"{stage}_s": round(value, 3) for stage, value in stages["stage_seconds"].items()}}
                rows.append(row)
                print(json.dumps(row), flush=True)
    (out_dir / "e2e_ab.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    print("PAF identical:", len({row["paf_md5"] for row in rows}) == 1)
    return rows


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
