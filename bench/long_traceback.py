"""The host traceback of a few long hits: ``python -m bench long-traceback [options]`` (issue 41).

The lambda case's reads (``bench/long_reads.py``: reads of 5-20 kb, a tenth
carrying a 1-20 kb piece of a random 48,502-base stand-in for the lambda
genome with about 5 % errors) are screened once on the CPU (untimed), and
their hits' alignments are then timed on their own, in this process
(``--repeats`` runs after one untimed run that loads the kernels), two ways:

* ``windowed``: as the CPU run aligns them, the end cells known from the
  vector pass over the windows (``bpbc.windows.align``);
* ``whole``: as a GPU run does, the whole reads given to
  ``bpbc.traceback.align_hits`` without end cells (the score pass finds
  them first: the GPU's scores stop at the threshold's planes).

Each row has the seconds of ``align_hits`` and of its parts (the score pass
``end_cells``, the pass back ``start_boxes``, the bands ``_banded``; nested
calls counted in their caller). ``--check`` compares the whole path's scores
with parasail's 32-bit striped SW on both strands (exact: 0 wrong expected).
Written to ``long_traceback_cpu.csv`` under ``--out`` with the environment
header.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file: the repository root on the path
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.environment import RESULTS_DIR, environment, write_csv  # noqa: E402
from bench.long_reads import lambda_sequences, parasail_scores  # noqa: E402

PARTS = ("end_cells", "start_boxes", "_banded")


@contextmanager
def timed_parts(module, names) -> Iterator[dict[str, list[float]]]:
    """The functions ``names`` of ``module`` (those it has) timed while
    inside: the dict it gives fills with each one's [wall, CPU] seconds (the
    process's CPU time: every numba thread's), a call inside another of its
    name (the bands' lane-by-lane retry) counted once; clear it between runs."""
    seconds: dict[str, list[float]] = {}
    inside: set[str] = set()

    def timed(name: str, function):
        def run(*call, **named):
            if name in inside:
                return function(*call, **named)
            inside.add(name)
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*call, **named)
            finally:
                inside.discard(name)
                spent = seconds.setdefault(name, [0.0, 0.0])
                spent[0] += time.perf_counter() - wall
                spent[1] += time.process_time() - cpu
        return run

    originals = {name: getattr(module, name) for name in names if hasattr(module, name)}
    for name, function in originals.items():
        setattr(module, name, timed(name, function))
    try:
        yield seconds
    finally:
        for name, function in originals.items():
            setattr(module, name, function)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench long-traceback", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=300, help="reads of 5-20 kb (default 300: about 25 hits)")
    parser.add_argument("--threshold", type=int, default=2000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bpbc-long-reads"), help="inputs")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--csv", default="long_traceback_cpu.csv")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="the whole path's scores against parasail's")
    args = parser.parse_args(argv)
    import bpbc.traceback as tb
    from bpbc import Screener
    from bpbc.alphabet import encode_reads

    args.work.mkdir(parents=True, exist_ok=True)
    reads, genome = lambda_sequences(args.work, args.reads, 0.1)
    screener = Screener({"lambda": genome}, args.threshold, device="cpu")
    batch = screener.prepare(reads)
    hits = screener.hits(batch)
    captured = []
    align_hits = tb.align_hits

    def capture(*call, **named):
        captured.append((call, named))
        return align_hits(*call, **named)

    tb.align_hits = capture
    try:
        screener.align(batch, hits)
    finally:
        tb.align_hits = align_hits
    windowed = captured[-1]
    codes, lengths = encode_reads([reads[r] for r in hits.read])
    ks = hits.pattern * len(screener.strands) + hits.strand
    whole = ((codes, lengths, np.arange(len(hits)), ks, screener.table, screener.strands, screener.scoring), {})
    rows = []
    cores = len(os.sched_getaffinity(0))
    with timed_parts(tb, PARTS) as seconds:
        for path, (call, named) in (("windowed", windowed), ("whole", whole)):
            found = tb.align_hits(*call, **named)  # untimed: the kernels loaded
            for repeat in range(args.repeats):
                seconds.clear()
                started = time.perf_counter()
                found = tb.align_hits(*call, **named)
                total = time.perf_counter() - started
                row = {"path": path, "repeat": repeat, "hits": len(hits), "threads": cores, "seconds": round(total, 3),
                       **{f"{name}_s": round(seconds.get(name, [0.0])[0], 3) for name in PARTS}}
                print(f"{path:9} {total:7.3f} s  " + "  ".join(f"{k} {v}" for k, v in row.items() if k.endswith("_s")),
                      file=sys.stderr, flush=True)
                rows.append(row)
            if path == "whole" and args.check:
                by_read = {}
                for t in range(len(hits)):
                    by_read.setdefault(int(hits.read[t]), []).append(t)
                order = sorted(by_read)
                scores, _ = parasail_scores([reads[r] for r in order], genome, cores, "sw_striped_profile_32")
                wrong = sum(int(found.score[t]) != scores[i][int(hits.strand[t])] for i, r in enumerate(order)
                            for t in by_read[r])
                rows.append({"path": "whole", "what": "parasail sw_striped_profile_32, both strands", "hits": len(hits),
                             "wrong": wrong})
                print(f"parasail: {wrong} of {len(hits)} scores differ", file=sys.stderr, flush=True)
    path = write_csv(args.out / args.csv, rows, environment(None))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
