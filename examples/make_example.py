"""Write the small example data set: examples/reads.fq.gz and examples/adapters.fa.

    python examples/make_example.py            # rewrites both files (deterministic)

3000 reads of 150 bp, random bases (seeded), with Illumina-like binned
qualities. About a third carry one of four well-known adapters/primers,
forward or reverse complemented, with 0-2 random edits (substitutions,
insertions, deletions), at a random position or running off the read's 3'
end (adapter read-through). The header comment says what was planted, so
the screen's hits can be checked by eye, e.g.::

    @ex000042 planted=TruSeq_adapter strand=- start=61 edits=1

Only the standard library is used, and only calls whose output is fixed for
a given seed (random.Random.random/randrange/choice), so the files come out
byte-identical on every run.
"""

from __future__ import annotations

import gzip
import io
import random
from pathlib import Path

SEED = 20240611
N_READS = 3000
READ_LENGTH = 150
PLANT_FRACTION = 0.35

#: name -> sequence; the 16S primers use IUPAC codes (Y, M, N, V, W)
ADAPTERS = {
    "TruSeq_adapter": "AGATCGGAAGAGCACACGTCTGAACTCCAGTCA",  # Illumina TruSeq read 1 3' adapter
    "Nextera_transposase": "CTGTCTCTTATACACATCT",  # Nextera/Tn5 mosaic end
    "16S_515F": "GTGYCAGCMGCCGCGGTAA",  # Parada et al. 2016
    "16S_806R": "GGACTACNVGGGTWTCTAAT",  # Apprill et al. 2015
}
#: IUPAC code -> the bases it stands for
IUPAC = {
    "A": "A", "C": "C", "G": "G", "T": "T", "R": "AG", "Y": "CT", "S": "CG", "W": "AT",
    "K": "GT", "M": "AC", "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG", "N": "ACGT",
}
COMPLEMENT = str.maketrans("ACGT", "TGCA")
#: NovaSeq-style binned qualities (Phred 37, 25, 11) and their weights
QUALITY_BINS = ("F", ":", ",")
QUALITY_WEIGHTS = (0.88, 0.10, 0.02)


def reverse_complement(seq: str) -> str:
    return seq.translate(COMPLEMENT)[::-1]


def random_bases(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("ACGT") for _ in range(n))


def weighted(rng: random.Random, items, weights):
    x = rng.random() * sum(weights)
    for item, weight in zip(items, weights):
        x -= weight
        if x < 0:
            return item
    return items[-1]


def instantiate(rng: random.Random, pattern: str) -> str:
    """One concrete sequence matched by an IUPAC pattern."""
    return "".join(rng.choice(IUPAC[c]) for c in pattern)


def mutate(rng: random.Random, seq: str, edits: int) -> str:
    """Apply ``edits`` random substitutions/insertions/deletions."""
    bases = list(seq)
    for _ in range(edits):
        kind = weighted(rng, ("sub", "ins", "del"), (0.6, 0.2, 0.2))
        position = rng.randrange(len(bases))
        if kind == "sub":
            bases[position] = rng.choice([b for b in "ACGT" if b != bases[position]])
        elif kind == "ins":
            bases.insert(position, rng.choice("ACGT"))
        else:
            del bases[position]
    return "".join(bases)


def make_reads(rng: random.Random) -> list[tuple[str, str, str]]:
    names = list(ADAPTERS)
    reads = []
    for k in range(1, N_READS + 1):
        seq = random_bases(rng, READ_LENGTH)
        comment = "planted=none"
        if rng.random() < PLANT_FRACTION:
            name = rng.choice(names)
            strand = rng.choice("+-")
            edits = weighted(rng, (0, 1, 2), (0.5, 0.35, 0.15))
            insert = mutate(rng, instantiate(rng, ADAPTERS[name]), edits)
            if strand == "-":
                insert = reverse_complement(insert)
            if rng.random() < 0.25:
                # read-through: the insert starts near the 3' end and is cut off
                start = READ_LENGTH - rng.randrange(12, len(insert) + 1)
            else:
                start = rng.randrange(0, READ_LENGTH - len(insert) + 1)
            end = min(READ_LENGTH, start + len(insert))
            seq = seq[:start] + insert[: end - start] + seq[end:]
            comment = f"planted={name} strand={strand} start={start} edits={edits}"
        quality = "".join(weighted(rng, QUALITY_BINS, QUALITY_WEIGHTS) for _ in range(READ_LENGTH))
        reads.append((f"ex{k:06d} {comment}", seq, quality))
    return reads


def write_gzip(path: Path, text: str) -> None:
    """gzip without a timestamp or file name, so the bytes are reproducible."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as f:
        f.write(text.encode("ascii"))
    path.write_bytes(buffer.getvalue())


def write_example(directory: Path) -> tuple[Path, Path]:
    """Write reads.fq.gz and adapters.fa into ``directory``; returns their paths."""
    rng = random.Random(SEED)
    reads = make_reads(rng)
    reads_path, adapters_path = directory / "reads.fq.gz", directory / "adapters.fa"
    write_gzip(reads_path, "".join(f"@{h}\n{s}\n+\n{q}\n" for h, s, q in reads))
    adapters_path.write_text("".join(f">{name}\n{seq}\n" for name, seq in ADAPTERS.items()))
    planted = sum(1 for h, _, _ in reads if "planted=none" not in h)
    print(f"wrote {reads_path} ({len(reads)} reads, {planted} with a planted adapter/primer) "
          f"and {adapters_path} ({len(ADAPTERS)} patterns)")
    return reads_path, adapters_path


def main() -> None:
    write_example(Path(__file__).resolve().parent)


if __name__ == "__main__":
    main()
