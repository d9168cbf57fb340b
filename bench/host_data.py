"""Sequencer-like FASTQ for the host benchmarks: ``python -m bench.host_data OUT.fq[.gz] --reads N``.

Records look like an Illumina run's: ``@A00123:8:H5:1:1101:X:Y 1:N:0:ACGT``
headers, binned qualities drawn from ``F : , #`` (mostly F), random bases with
an occasional N, and in a tenth of the reads a planted adapter from
examples/adapters.fa (either strand, one substitution at times), so a
screen has hits to align and write. Written in blocks of 100k records with
numpy, compressed (``.gz``) by python-isal's threaded writer; the same seed
gives the same bytes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ADAPTERS = Path(__file__).resolve().parent.parent / "examples" / "adapters.fa"
BLOCK = 100_000
QUALITY_BINS = np.frombuffer(b"F:,#", np.uint8)
QUALITY_WEIGHTS = np.array([0.86, 0.09, 0.04, 0.01])
COMPLEMENT = bytes.maketrans(b"ACGT", b"TGCA")


def _adapters() -> list[bytes]:
    lines = ADAPTERS.read_bytes().split(b"\n")
    return [line.strip().upper() for line in lines if line and not line.startswith(b">")]


def fastq_block(rng: np.random.Generator, first: int, count: int, length: int, planted: list[bytes]) -> bytes:
    """``count`` records numbered from ``first``, each sequence and quality ``length`` long."""
    bases = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, (count, length))]
    bases[rng.random((count, length)) < 0.002] = ord("N")
    for row in np.flatnonzero(rng.random(count) < 0.1).tolist():
        adapter = planted[int(rng.integers(len(planted)))]
        if rng.random() < 0.5:
            adapter = adapter.translate(COMPLEMENT)[::-1]
        adapter = adapter[:length]
        start = int(rng.integers(0, length - len(adapter) + 1))
        bases[row, start:start + len(adapter)] = np.frombuffer(adapter, np.uint8)
        if rng.random() < 0.3:
            bases[row, start + int(rng.integers(len(adapter)))] = ord("ACGT"[int(rng.integers(4))])
    qualities = QUALITY_BINS[rng.choice(4, size=(count, length), p=QUALITY_WEIGHTS)]
    tiles = rng.integers(1101, 2679, count)
    xs = rng.integers(1000, 32000, count)
    ys = rng.integers(1000, 37000, count)
    lines = []
    for i in range(count):
        lines.append(b"@A00123:8:H5:1:%d:%d:%d 1:N:0:ACGT\n%s\n+\n%s\n"
                     % (tiles[i], xs[i], ys[i] + first + i, bases[i].tobytes(), qualities[i].tobytes()))
    return b"".join(lines)


def write_fastq(path: Path, reads: int, length: int = 150, seed: int = 1) -> Path:
    """Write ``reads`` records to ``path`` (gzip when it ends in .gz)."""
    rng = np.random.default_rng(seed)
    planted = _adapters()
    if path.suffix == ".gz":
        from isal import igzip_threaded

        out = igzip_threaded.open(path, "wb", compresslevel=2, threads=4)
    else:
        out = open(path, "wb")
    with out:
        for first in range(0, reads, BLOCK):
            out.write(fastq_block(rng, first, min(BLOCK, reads - first), length, planted))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.host_data", description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--reads", type=int, default=1_000_000)
    parser.add_argument("--length", type=int, default=150)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    write_fastq(args.out, args.reads, args.length, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
