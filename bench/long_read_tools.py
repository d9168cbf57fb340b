"""What long-read users run, beside bpbc: ``python -m bench long-read-tools [--cases ...] [options]`` (issue 41).

Each tool runs as its command runs, in fresh processes, on the same generated
reads, after an untimed run of each on the first WARM_READS of them (every
kernel the run takes compiled and cached: 20 reads of the lambda case left
the runs over 16,000 some to compile, 24 s on an H200); each row gives the
process's wall time and peak RSS and what the run found against the planted
truth. The models differ, and so can what they find:

* ``nanolyse``: dropping the reads of the lambda control. NanoLyse maps each
  read with minimap2's ``map-ont`` preset (through mappy: seeds and chains,
  one thread, as its command runs) and writes the reads that map nowhere;
  ``bpbc-screen --unmatched`` keeps the reads without a local alignment (SW,
  affine gaps) scoring T or more, at each of ``--thresholds``. The reads are
  the first ``--nanolyse-reads`` of ``bench long-reads``' lambda case (5-20
  kb, a tenth carrying a 1-20 kb piece of a random 48,502-base stand-in for
  the genome with about 5 % nanopore-like errors, either strand), the
  stand-in NanoLyse's ``--reference``. Each row: the reads removed, the
  share of the planted ones by piece length (1-2, 2-5, 5-20 kb) and the
  others removed.
* ``porechop``: trimming the ligation adapters off the ends of long reads.
  Porechop (its adapter sets, the first 10,000 reads checked for them; ends of
  150 bases aligned by SeqAn; reads with an adapter inside split; ``-t``
  every core) against ``bpbc-screen --action trim --trimmed`` with the same
  two adapters (SQK-NSK007's Y top as a 5' adapter, Y bottom as a 3' one),
  on whole reads and with ``--ends 150``. The reads (``--porechop-reads``,
  5-10 kb) carry Y top after 0-10 random bases and Y bottom before 0-10 (each
  with about 5 % nanopore-like errors), four in five each end (bpbc's
  threshold for each: half a perfect copy's score). Each row: the
  share of reads whose trimmed start and end are each within 0 and within 5
  bases of the planted ones (Porechop cuts 2 bases more by default), and the
  reads it left out. Porechop is found with ``--porechop`` (its
  ``porechop-runner.py`` or command; default ``porechop`` on the PATH).

A peer that is not installed leaves its rows out; bpbc's rows are written.

    python -m bench long-read-tools [--cases nanolyse porechop] [--device cpu|gpu] [--repeats 3] [--out DIR]

Writes ``long_read_tools_<device>.csv`` under ``--out`` with the
environment header (the host's CPU named, and the GPU with ``--device gpu``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file: the repository root on the path
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.environment import RESULTS_DIR, environment, write_csv  # noqa: E402
from bench.host_pipeline import timed  # noqa: E402
from bench.long_reads import BASES, ROOT, lambda_inputs, lambda_planted, nanopore_copy  # noqa: E402

CASES = ("nanolyse", "porechop")
#: NanoLyse as its command runs it (reads on stdin, the reads it keeps on stdout): reads, kept, reference, log
NANOLYSE = ("import sys\nsys.stdin, sys.stdout = open(sys.argv[1]), open(sys.argv[2], 'w')\n"
            "sys.argv = ['NanoLyse', '-r', sys.argv[3], '--logfile', sys.argv[4]]\n"
            "from nanolyse.NanoLyse import main\nmain()\nsys.stdout.close()")
#: the planted pieces' lengths by class, for the nanolyse case's shares
PIECE_CLASSES = ((1000, 2000), (2000, 5000), (5000, 20_001))
#: Porechop's SQK-NSK007 adapter set (porechop/adapters.py): the read's start, its end
Y_TOP, Y_BOTTOM = "AATGTACTTCGTTCAGTTACGTATTGCT", "GCAATACGTAACTGAACGAAGT"
#: bpbc's thresholds for them: half a perfect copy's score at the default scoring (2 a match). On 300 of
#: the reads, with --ends 150, 0.6 missed the adapters of 14 reads that 0.5 finds; 0.4 cut 2 reads thousands
#: of bases short (random local alignments of the Y top in a read's last 150 bases)
ADAPTERS_FASTA = (f">SQK-NSK007_Y_Top adapter=5prime threshold={len(Y_TOP)}\n{Y_TOP}\n"
                  f">SQK-NSK007_Y_Bottom adapter=3prime threshold={len(Y_BOTTOM)}\n{Y_BOTTOM}\n")
#: within how many bases of the planted cut a trimmed end counts as near
NEAR = 5
#: reads of each case's untimed first run
WARM_READS = 500


def adapter_reads(work: Path, reads: int) -> tuple[Path, np.ndarray]:
    """(reads file, planted (start, end) of each read's insert) of the
    porechop case, made once for each size."""
    reads_path, truth_path = work / f"adapters_{reads}.fq", work / f"adapters_{reads}.truth.npy"
    if reads_path.exists() and truth_path.exists():
        return reads_path, np.load(truth_path)
    rng = np.random.default_rng(4242)
    top, bottom = (np.frombuffer(a.encode(), np.uint8) for a in (Y_TOP, Y_BOTTOM))
    truth = np.zeros((reads, 2), np.int64)
    with open(reads_path, "wb") as out:
        for i in range(reads):
            insert = BASES[rng.integers(0, 4, int(rng.integers(5000, 10_001)))]
            start = end = BASES[:0]  # no adapter: nothing to cut
            if rng.random() < 0.8:
                start = np.concatenate([BASES[rng.integers(0, 4, int(rng.integers(0, 11)))], nanopore_copy(rng, top)])
            if rng.random() < 0.8:
                end = np.concatenate([nanopore_copy(rng, bottom), BASES[rng.integers(0, 4, int(rng.integers(0, 11)))]])
            read = np.concatenate([start, insert, end]).tobytes()
            truth[i] = len(start), len(start) + len(insert)
            out.write(b"@a%d\n%s\n+\n%s\n" % (i, read, b"I" * len(read)))
    np.save(truth_path, truth)
    return reads_path, truth


def trimmed_spans(reads_path: Path, trimmed_path: Path) -> dict[int, tuple[int, int]]:
    """Each read's span (start, end) in its trimmed record, by read index:
    where the trimmed sequence lies in the read (a read split in pieces:
    from its first piece's start to its last piece's end)."""
    import dnaio

    def index(name: str) -> int:  # "a12 ...", a piece of it "a12_2 ..."
        return int(name.split()[0].split("_")[0][1:])

    with dnaio.open(reads_path) as f:
        original = {index(record.name): record.sequence for record in f}
    spans: dict[int, tuple[int, int]] = {}
    with dnaio.open(trimmed_path) as f:
        for record in f:
            read = index(record.name)
            at = original[read].find(record.sequence)
            if at < 0 or not record.sequence:
                continue
            first, last = spans.get(read, (at, at + len(record.sequence)))
            spans[read] = min(first, at), max(last, at + len(record.sequence))
    return spans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench long-read-tools", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--work", type=Path, default=Path("/tmp/bpbc-long-read-tools"), help="inputs and outputs")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command (all kept)")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="bpbc's engine (default cpu)")
    parser.add_argument("--nanolyse-reads", type=int, default=16_000,
                        help="nanolyse: reads of the lambda case (default 16000: about 8 s of bpbc on an H200, "
                             "25 s of NanoLyse; bpbc's CPU engine takes about 30 ms a read on 2 cores)")
    parser.add_argument("--thresholds", type=int, nargs="+", default=[2000, 1000], metavar="T",
                        help="nanolyse: bpbc's thresholds (default 2000 1000)")
    parser.add_argument("--porechop-reads", type=int, default=2000, help="porechop: reads of 5-10 kb (default 2000)")
    parser.add_argument("--porechop", default="porechop",
                        help="porechop: its command, or its porechop-runner.py (run with this Python)")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    args.work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    rows: list[dict] = []

    def run(case: str, what: str, command: list[str], warm: list[str] | None, found, json_path: Path | None = None):
        """--repeats timed runs of ``command`` after one untimed run of
        ``warm``; each row with what ``found()`` says of its outputs."""
        if warm:
            subprocess.run(warm, env=env, cwd=ROOT, check=True, capture_output=True)
        for _ in range(args.repeats):
            wall, rss, code = timed(command, env, ROOT)
            row = {"case": case, "what": what, "process_wall_s": round(wall, 3), "peak_rss_mb": round(rss * 1000),
                   "exit": code}
            if json_path is not None:
                row["run_wall_s"] = json.loads(json_path.read_text())["wall_time_s"]
            row.update(found())
            print(f"{case:8} {what:52} {wall:7.2f} s  " + ", ".join(f"{k} {v}" for k, v in row.items()
                                                                   if k not in ("case", "what") and v != ""),
                  file=sys.stderr, flush=True)
            rows.append(row)

    def nanolyse() -> None:
        reads_path, genome_path, _ = lambda_inputs(args.work, args.nanolyse_reads, 0.1)
        planted, count = lambda_planted(reads_path), args.nanolyse_reads
        warm, kept = args.work / "nanolyse_warm.fq", args.work / "nanolyse_kept.fq"
        with open(reads_path, "rb") as source, open(warm, "wb") as out:
            out.writelines(line for _, line in zip(range(4 * WARM_READS), source))

        def removed() -> dict:
            with open(kept, "rb") as f:
                gone = set(range(count)) - {int(line[2:]) for i, line in enumerate(f) if i % 4 == 0}
            found = {"reads": count, "removed": len(gone), "unplanted_removed": sum(planted[i] == 0 for i in gone)}
            for low, high in PIECE_CLASSES:  # the share of each class's reads removed ("": none planted)
                chosen = [i for i in range(count) if low <= planted[i] < high]
                found[f"planted_{low // 1000}_{high // 1000}kb"] = len(chosen)
                found[f"removed_{low // 1000}_{high // 1000}kb"] = round(
                    sum(i in gone for i in chosen) / len(chosen), 4) if chosen else ""
            return found

        summary = args.work / "nanolyse.json"
        for threshold in args.thresholds:
            base = [sys.executable, "-m", "bpbc", "-t", str(threshold), "--device", args.device, "-q", "-o",
                    os.devnull, "--json", str(summary), "--unmatched", str(kept)]
            run("nanolyse", f"bpbc-screen --device {args.device} -t {threshold}",
                [*base, str(reads_path), str(genome_path)], [*base, str(warm), str(genome_path)], removed, summary)
        if importlib.util.find_spec("nanolyse") is None:
            print("nanolyse: NanoLyse is not installed (pip install nanolyse): its rows skipped", file=sys.stderr)
            return
        def nanolyse_on(reads: Path) -> list[str]:
            return [sys.executable, "-c", NANOLYSE, str(reads), str(kept), str(genome_path), str(args.work / "nl.log")]

        run("nanolyse", "NanoLyse -r (minimap2 map-ont, 1 thread)", nanolyse_on(reads_path), nanolyse_on(warm), removed)

    def porechop() -> None:
        reads_path, truth = adapter_reads(args.work, args.porechop_reads)
        adapters = args.work / "adapters.fa"
        adapters.write_text(ADAPTERS_FASTA)
        warm, trimmed = args.work / "adapters_warm.fq", args.work / "adapters_trimmed.fq"
        with open(reads_path, "rb") as source, open(warm, "wb") as out:
            out.writelines(line for _, line in zip(range(4 * WARM_READS), source))

        def cuts() -> dict:
            spans = trimmed_spans(reads_path, trimmed)
            found = {"reads": len(truth), "left_out": len(truth) - len(spans)}
            for near in (0, NEAR):
                good = sum(abs(spans[i][0] - truth[i][0]) <= near and abs(spans[i][1] - truth[i][1]) <= near
                           for i in spans)
                found[f"both_ends_within_{near}"] = round(good / len(truth), 4)
            return found

        summary = args.work / "porechop.json"
        for ends in ((), ("--ends", "150")):
            # -t 1: each adapter's threshold= in ADAPTERS_FASTA overrides it
            base = [sys.executable, "-m", "bpbc", "--device", args.device, "-q", "-t", "1", "--action", "trim",
                    "--strand", "forward", "-o", os.devnull, "--json", str(summary), "--trimmed", str(trimmed), *ends]
            run("porechop", f"bpbc-screen --device {args.device} --action trim {' '.join(ends)}".rstrip(),
                [*base, str(reads_path), str(adapters)], [*base, str(warm), str(adapters)], cuts, summary)
        runner = Path(args.porechop)
        command = [sys.executable, str(runner)] if runner.suffix == ".py" else [shutil.which(args.porechop) or ""]
        if not command[-1] or not Path(command[-1]).exists():
            print(f"porechop: {args.porechop} not found: its rows skipped", file=sys.stderr)
            return
        for split in ((), ("--no_split",)):
            base = [*command, "-t", str(cores), "-v", "0", "-o", str(trimmed), *split]
            run("porechop", f"Porechop -t {cores} {' '.join(split)}".rstrip(), [*base, "-i", str(reads_path)],
                [*base, "-i", str(warm)], cuts)

    for case in args.cases:
        {"nanolyse": nanolyse, "porechop": porechop}[case]()
    gpu = None
    if args.device == "gpu":
        from bench.environment import gpu_info

        gpu = gpu_info()
    path = write_csv(args.out / f"long_read_tools_{args.device}.csv", rows, environment(gpu))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
