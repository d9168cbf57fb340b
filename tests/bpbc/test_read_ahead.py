"""The raw route over a compressed stream: blocks read ahead become the chunks' buffers (bpbc.io._ReadAhead)."""

import gzip

import dnaio
import numpy as np
import pytest

import bpbc.io
from bpbc.io import SequenceSource


def _fastq(count: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    records = []
    for i in range(count):
        length = int(rng.integers(1, 180))
        sequence = "".join(rng.choice(list("ACGTN"), length))
        records.append(f"@r{i} extra\n{sequence}\n+\n{'F' * length}\n")
    return "".join(records).encode()


@pytest.mark.parametrize("chunk, share", [(7, 0.005), (500, 0.5), (4096, 0.5)])
def test_blocks_taken_whole_give_every_record_once(tmp_path, monkeypatch, chunk, share):
    """Small blocks (READ_BLOCK), two read ahead, so that chunks take a block
    read ahead as their buffer, the end of the chunk before copied in front
    of it: the records are dnaio's, in order, each once; and at least
    ``share`` of the chunks took a block (none would if every chunk copied
    its bytes out of the blocks; chunks much smaller than a block seldom
    can, as the block holds many)."""
    monkeypatch.setattr(bpbc.io, "READ_BLOCK", 1 << 12)
    monkeypatch.setattr(bpbc.io, "READ_AHEAD_BYTES", 1)
    path = tmp_path / "reads.fq.gz"
    path.write_bytes(gzip.compress(_fastq(20_000, chunk), compresslevel=1))
    taken = []
    take_block = bpbc.io._ReadAhead.take_block

    def counted(self, room):
        block = take_block(self, room)
        taken.append(block is not None)
        return block

    monkeypatch.setattr(bpbc.io._ReadAhead, "take_block", counted)
    names, sequences = [], []
    with SequenceSource(path, raw_fastq=True, threads=2) as source:
        assert isinstance(source._stream, bpbc.io._ReadAhead)
        for piece in source.chunks(chunk):
            rows = np.arange(len(piece))
            names.extend(piece.read_names(rows).strings())
            codes, lengths = piece.encode()
            sequences.extend(int(n) for n in lengths)
    with dnaio.open(path) as reader:
        expected = [(record.name.split()[0], len(record.sequence)) for record in reader]
    assert list(zip(names, sequences)) == expected
    assert sum(taken) >= share * (len(expected) // chunk)
