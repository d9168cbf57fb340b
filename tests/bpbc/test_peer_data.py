"""The test files of dnaio and cutadapt (tests/data/peers: their sources,
commits and licences) as reads files of ``bpbc-screen``.

Every file goes through the command. Where dnaio reads a file and every
sequence holds nucleotide letters only, the command succeeds and writes the
reads dnaio reads, split into matched and unmatched as the oracle of
tests/oracle.py splits them; where dnaio reads it but a sequence holds
another letter (cutadapt's files of protein-like names such as SEQUENCE1),
and where dnaio rejects it, the command ends with one line, exit 1, naming
the file. No file ends in a traceback or exit 3 (an aligned BAM file of
dnaio's did: dnaio's NotImplementedError was an internal error; so did
one of unaligned reads without base qualities, written to FASTQ reads
files).
"""

from __future__ import annotations

from pathlib import Path

import dnaio
import pytest

from bpbc.cli import main
from tests.oracle import IUPAC_BASES, Options, Record, expected, load, summary_of

DATA = Path(__file__).resolve().parents[1] / "data"
PEERS = DATA / "peers"
FILES = sorted(path for path in PEERS.glob("*/*") if path.name != "LICENSE")
ALIGNED_BAM = PEERS / "dnaio" / "project.NIST_NIST7035_H7AP8ADXX_TAAGGCGA_1_NA12878.bwa.markDuplicates.bam"


def dnaio_records(path: Path) -> list[Record] | None:
    """The records as dnaio reads them (format and compression its own
    guess), or None where it rejects the file."""
    try:
        with dnaio.open(path) as reader:
            return [Record(r.name, r.sequence, None if fasta(reader) else r.qualities) for r in reader]
    except Exception:  # noqa: BLE001 - any rejection by dnaio
        return None


def fasta(reader) -> bool:
    return type(reader).__name__ == "FastaReader"


def test_every_peer_file_is_here_with_its_licence():
    assert len(FILES) == 26 + 72  # every file of dnaio's and cutadapt's tests/data
    for peer in ("dnaio", "cutadapt"):
        assert "Permission is hereby granted" in (PEERS / peer / "LICENSE").read_text()
        assert f"https://github.com/marcelm/{peer} " in (PEERS / "README.md").read_text()


@pytest.mark.parametrize("path", FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_a_peers_test_file_as_reads(capsys, tmp_path, path):
    out = {name: tmp_path / name for name in ("m", "u", "s.json")}
    status = main([str(path), str(DATA / "patterns.fa"), "-t", "20", "-q", "--device", "cpu", "-o",
                   str(tmp_path / "o.paf"), "--matched", str(out["m"]), "--unmatched", str(out["u"]), "--json",
                   str(out["s.json"])])
    err = capsys.readouterr().err
    records = dnaio_records(path)
    nucleotides = records is not None and all(set(r.sequence.upper()) <= set(IUPAC_BASES) for r in records)
    if nucleotides and any(r.qualities is None for r in records) and not path.name.endswith((".fa", ".fasta")):
        # a BAM record without base qualities (dnaio/missing_quals.bam): the PAF can be written, FASTQ reads not
        assert status == 1 and err.startswith(f"bpbc-screen: error: {path}: read ") and err.endswith(
            "has no base qualities, which a FASTQ reads file needs (the PAF alone can be written)\n"), err
        assert sorted(p.name for p in tmp_path.iterdir()) == []
        assert main([str(path), str(DATA / "patterns.fa"), "-t", "20", "-q", "--device", "cpu", "-o",
                     str(tmp_path / "o.paf")]) == 0
        return
    if nucleotides:
        assert (status, err) == (0, "")
        want = expected(records, load(DATA / "patterns.fa"), Options(threshold=20))
        for kind, name in (("matched", "m"), ("unmatched", "u")):
            assert dnaio_records(out[name]) == [unit[0] for unit in want.units[kind]]
        assert (tmp_path / "o.paf").read_text() == want.paf
        assert summary_of(out["s.json"]) == want.summary
        return
    assert status == 1 and "Traceback" not in err
    assert err.startswith(f"bpbc-screen: error: {path}: ") and err.count("\n") == 1, err
    if records is not None:
        assert "is not an IUPAC nucleotide code" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_aligned_bam_says_to_convert_it(capsys):
    """dnaio reads BAM of unaligned single reads only: the others get a
    line that says what to do."""
    status = main([str(ALIGNED_BAM), str(DATA / "patterns.fa"), "-t", "20", "-q", "--device", "cpu"])
    captured = capsys.readouterr()
    assert status == 1 and captured.out == ""
    assert captured.err == (f"bpbc-screen: error: {ALIGNED_BAM}: a BAM file of aligned (or paired) reads: only "
                            f"unaligned single reads are read from BAM; convert it first, e.g. samtools fastq "
                            f"{ALIGNED_BAM} > reads.fq\n")
