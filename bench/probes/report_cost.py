"""What the report's statistics and files cost a run, timed inside it:
``python -m bench.probes.report_cost READS.fq.gz PATTERNS.fa [-t 30] [--device cpu]``.

One ``bpbc.pipeline.screen_files`` run with every call of the per-batch hook
(``Statistics.add_batch``, in the writing thread) timed, then the HTML report
and the MultiQC file written and timed. The seconds (and the hook's thread's
CPU seconds, which leave out its waits for the GIL and a core) are work the
run did for the report: added to its wall where the writing thread bounds
the run, hidden beside the screen where it does not. A side-by-side of whole
processes (with and without ``--report``) answers the same question from
outside, but on a machine shared with other work its spread (10-15 %) hides
a 1 % cost; this probe depends far less on the load.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bpbc import summary as summary_module
from bpbc.engines import usable_cores
from bpbc.pipeline import ScreenSettings, screen_files
from bpbc.report import RunInfo, multiqc_data, report_html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probes.report_cost", description=__doc__)
    parser.add_argument("reads")
    parser.add_argument("patterns")
    parser.add_argument("-t", "--threshold", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    hook = summary_module.Statistics.add_batch
    spent = {"seconds": 0.0, "cpu": 0.0, "calls": 0}

    def timed_hook(self, *arguments, **keywords):
        start, cpu = time.perf_counter(), time.thread_time()
        hook(self, *arguments, **keywords)
        spent["seconds"] += time.perf_counter() - start
        spent["cpu"] += time.thread_time() - cpu
        spent["calls"] += 1

    summary_module.Statistics.add_batch = timed_hook  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory)
        summary = screen_files(args.reads, args.patterns, ScreenSettings(threshold=args.threshold, device=args.device),
                               output=out / "hits.paf")
        start = time.perf_counter()
        page = report_html(RunInfo.now("bpbc-screen (probe)", usable_cores()), [summary])
        (out / "report.html").write_bytes(page)
        (out / "run_mqc.json").write_text(json.dumps(multiqc_data([summary])))
        files = time.perf_counter() - start
    wall = summary.wall_time_s
    print(f"{summary.reads} reads, {summary.alignments} alignments, {summary.device}, wall {wall:.2f} s")
    print(f"per-batch statistics: {spent['seconds']:.3f} s in {spent['calls']} batches "
          f"({1000 * spent['seconds'] / max(1, spent['calls']):.2f} ms each), {100 * spent['seconds'] / wall:.2f} % "
          f"of the wall; its thread's CPU time {spent['cpu']:.3f} s ({100 * spent['cpu'] / wall:.2f} %: the rest "
          "of its seconds it waited for the GIL or a core)")
    print(f"report ({len(page) / 1e6:.1f} MB) and MultiQC file: {files:.3f} s, {100 * files / wall:.2f} % of the wall")
    print(f"together: {100 * (spent['seconds'] + files) / wall:.2f} % of the wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
