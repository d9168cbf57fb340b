"""The command's stages in this process under variants of the host settings:
``python -m bench.probes.host_variants READS PATTERNS [--device gpu] [--repeats 2]``.

Each variant sets module constants of bpbc (rapidgzip's chunk size,
rapidgzip read in the parsing thread instead of a thread ahead of it,
compression threads an output, one ISA-L thread instead of rapidgzip) and
screens READS to PAF, matched and unmatched ``.gz`` outputs through
:func:`bpbc.pipeline.screen_files`, variants alternating; prints the wall time
and stage seconds of each run (no process start: the stages alone). Asks
which settings keep the decompressor busy on a many-core host.
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import bpbc.gzip_reader
import bpbc.io
import bpbc.resources
from bpbc.engines import set_up_process
from bpbc.pipeline import ScreenSettings, screen_files

VARIANTS = {
    "as is": {},
    "rapidgzip 4 MiB chunks": {(bpbc.gzip_reader, "PARALLEL_GZIP_CHUNK"): 4 << 20},
    "rapidgzip read in place": {(bpbc.io, "_READ_IN_PLACE"): (bpbc.gzip_reader.ParallelGzip, io.FileIO)},
    "4 compression threads": {(bpbc.resources, "COMPRESSION_THREADS"): 4},
    "isal, one thread": {(bpbc.io, "PARALLEL_GZIP_MIN_THREADS"): 1 << 20},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probes.host_variants", description=__doc__)
    parser.add_argument("reads", type=Path)
    parser.add_argument("patterns", type=Path)
    parser.add_argument("--threshold", type=int, default=40)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args(argv)
    set_up_process()
    settings = ScreenSettings(threshold=args.threshold, device=args.device)
    with tempfile.TemporaryDirectory() as work:
        out = Path(work)
        screen_files(args.reads, args.patterns, settings, output=out / "warm.paf")  # kernels loaded
        for repeat in range(args.repeats):
            for name in args.variants:
                saved = {(module, key): getattr(module, key) for module, key in VARIANTS[name]}
                for (module, key), value in VARIANTS[name].items():
                    setattr(module, key, value)
                start = time.perf_counter()
                summary = screen_files(args.reads, args.patterns, settings, output=out / "x.paf",
                                       matched=out / "m.fq.gz", unmatched=out / "u.fq.gz")
                wall = time.perf_counter() - start
                for (module, key), value in saved.items():
                    setattr(module, key, value)
                stages = " ".join(f"{k} {v:.2f}" for k, v in summary.stage_seconds.items())
                print(f"{repeat} {name:24} {wall:6.2f} s (outputs closed); {stages}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
