"""bpbc.cpu_engine's kernel cache: generated modules and their bytecode."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from bpbc import cpu_engine
from bpbc.scoring import Scoring


def test_a_generated_kernel_module_keeps_its_bytecode_beside_it(tmp_path, monkeypatch):
    """Also where Python writes none (PYTHONDONTWRITEBYTECODE): a later
    process loads the module without compiling its source."""
    monkeypatch.setenv("BPBC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    first = cpu_engine.kernel.__wrapped__(3, Scoring(), False)  # generated and imported, not compiled by numba
    sources = list(tmp_path.glob("bpbc_sw_cpu_b3_*.py"))
    assert len(sources) == 1 and first.__module__ == sources[0].stem
    with open(importlib.util.cache_from_source(str(sources[0])), "rb") as fh:
        header = fh.read(16)
    # what the import system checks before it uses the bytecode: its magic, and the source's mtime and size
    stat = os.stat(sources[0])
    assert header[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(header[4:8], "little") == 0
    assert int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
    assert int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF
    again = cpu_engine.kernel.__wrapped__(3, Scoring(), False)
    assert again.__module__ == first.__module__ and len(list(tmp_path.glob("bpbc_sw_cpu_b3_*.py"))) == 1


# ---------------------------------------------------------------- the two-pass screen's helpers

def test_stable_order_and_lexsort2_are_numpys_sorts():
    import numpy as np

    rng = np.random.default_rng(3)
    for n, n_keys in ((0, 1), (1, 1), (1000, 3), (5000, 700), (20000, 20000)):
        keys = rng.integers(0, n_keys, n)
        assert np.array_equal(cpu_engine.stable_order(keys, n_keys), np.argsort(keys, kind="stable"))
        minor = rng.integers(0, 151, n)
        assert np.array_equal(cpu_engine.lexsort2(minor, keys), np.lexsort((minor, keys)))


def test_second_pass_layout_shares_superblocks_without_more_tasks():
    """Each pattern's lanes follow the last one's unless that spans more
    superblocks than its own would: patterns never overlap, keep their
    order, and touch no more superblocks than ceil(count / lanes)."""
    import numpy as np

    rng = np.random.default_rng(4)
    lanes = 1024
    for counts in (np.ones(2000, np.int64), rng.integers(1, 3000, 300), np.array([1024, 1, 1024, 1023, 2, 5000])):
        start = cpu_engine._second_pass_layout(counts, lanes)
        assert start[0] == 0 and (start[1:] >= start[:-1] + counts[:-1]).all()
        spans = (start + counts - 1) // lanes - start // lanes + 1
        assert (spans <= -(-counts // lanes)).all()
    # 2000 patterns of one instance each: two superblocks, not 2000
    start = cpu_engine._second_pass_layout(np.ones(2000, np.int64), lanes)
    assert np.array_equal(start, np.arange(2000))


def test_pair_scores_of_many_patterns_sharing_superblocks_are_the_dense_scores():
    """The second pass with patterns of one instance, of a few, and of more
    than a superblock's lanes (repeated reads too), in any input order,
    gives each instance its dense score and flag."""
    import numpy as np

    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.patterns import PatternTable

    rng = np.random.default_rng(5)
    bases = np.frombuffer(b"ACGT", np.uint8)
    patterns = [bases[rng.integers(0, 4, int(rng.integers(5, 30)))].tobytes().decode() for _ in range(150)]
    reads = [bases[rng.integers(0, 4, int(rng.integers(0, 160)))].tobytes().decode() for _ in range(400)]
    for i in range(0, 400, 3):  # some high scores, some overflowing 5 planes
        p = patterns[i % 150]
        reads[i] = reads[i][:10] + p + reads[i][10:]
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(p) for p in patterns], ("+", "-"))
    engine = cpu_engine.CpuEngine()
    prepared = engine.prepare(codes, lengths)
    dense, dense_flag = engine.scores(prepared, table, Scoring(), 5)
    sizes = np.concatenate([[2500, 1, 1030], rng.integers(1, 40, len(table) - 3)])
    ks = np.repeat(rng.permutation(len(table)), sizes)
    instance_reads = rng.integers(0, 400, len(ks))
    shuffle = rng.permutation(len(ks))
    ks, instance_reads = ks[shuffle], instance_reads[shuffle]
    values, flags = engine.pair_scores(codes, lengths, instance_reads, ks, table, Scoring(), 5)
    assert np.array_equal(values, dense[instance_reads, ks]) and np.array_equal(flags, dense_flag[instance_reads, ks])
    assert flags.any() and (values > 10).any()
    few = rng.choice(len(ks), 300, replace=False)  # a few superblocks: packed on the calling thread
    values, flags = engine.pair_scores(codes, lengths, instance_reads[few], ks[few], table, Scoring(), 5)
    assert np.array_equal(values, dense[instance_reads[few], ks[few]])
    assert np.array_equal(flags, dense_flag[instance_reads[few], ks[few]])


@pytest.mark.parametrize("sparse", [False, True])
def test_flagged_instances_are_the_set_bits_sorted_by_read_then_pattern(sparse):
    """Every set bit of the flag words, as (read, k), against a plain
    unpacking of the bits (all 64 bit positions, a permuted lane order,
    words with many bits and none), sorted by read then k; counted per
    read, and (few bits among many reads) by sorting their keys."""
    import numpy as np

    rng = np.random.default_rng(6)
    words, count, blocks = 4, 7, 3
    lanes = blocks * words * 64
    order = rng.permutation(lanes)
    flag = rng.integers(0, 1 << 63, size=(blocks * count, words), dtype=np.int64).astype(np.uint64)
    flag[::3] &= rng.integers(0, 1 << 63, size=flag[::3].shape, dtype=np.int64).astype(np.uint64)  # sparser
    if sparse:  # a bit in one word of three or so
        flag[rng.random(flag.shape) > 0.3] = 0
        flag &= -flag  # its lowest set bit
    flag[1, 2] = np.uint64(1 << 63) | np.uint64(1)
    flag[2] = 0
    bits = (flag[:, :, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    task, w, bit = np.nonzero(bits)
    expect_reads = order[(task // count * words + w) * 64 + bit]
    expect_ks = task % count
    sort = np.lexsort((expect_ks, expect_reads))
    reads, ks = cpu_engine._flagged_instances(flag, order.astype(np.int64), count, words)
    assert np.array_equal(reads, expect_reads[sort]) and np.array_equal(ks, expect_ks[sort])
    assert (len(reads) * cpu_engine.SPARSE_FLAGS < lanes) == sparse and len(reads) > (10 if sparse else 1000)


# ---------------------------------------------------------------- packing reads

def test_reads_packed_from_their_bytes_are_the_codes_packed():
    """PreparedReads.from_bytes (bytes encoded and packed into superblock
    columns in one pass) lays out what packing the encoded reads does, for
    reads of any length (empty, under and over 64 bases, long ones), any
    letters (N, IUPAC codes, lower case, U), reads in any place of the
    buffer (at its very end too), and 8 and 16 words; None where a byte
    lies outside the alphabet."""
    import numpy as np

    from bpbc.alphabet import READ_CODE

    rng = np.random.default_rng(9)
    letters = np.frombuffer(b"ACGTacgtUuNnRYKMSWBDHV", np.uint8)
    weights = np.r_[np.full(4, 8.0), np.ones(len(letters) - 4)]
    for trial in range(24):
        n = int(rng.integers(0, 1500))
        lengths = rng.integers(0, 300, n).astype(np.int64)
        if trial % 3 == 0:
            lengths[:] = 150
        data = letters[rng.choice(len(letters), int(lengths.sum()) + 100, p=weights / weights.sum())]
        starts = rng.integers(0, len(data) - lengths + 1).astype(np.int64) if n else np.zeros(0, np.int64)
        if n and trial % 4 == 1:  # the last read ends where the buffer does
            starts[-1] = len(data) - lengths[-1]
        words = 8 if trial % 2 else 16
        prepared = cpu_engine.PreparedReads.from_bytes(data.tobytes(), starts, lengths, words=words)
        codes = np.full((n, int(lengths.max()) if n else 0), 4, np.uint8)
        for i in range(n):
            codes[i, :lengths[i]] = READ_CODE[data[starts[i]:starts[i] + lengths[i]]]
        expected = cpu_engine.PreparedReads(codes, lengths, words=words)
        assert np.array_equal(prepared.order, expected.order)
        assert np.array_equal(prepared.cols, expected.cols) and np.array_equal(prepared.block_length,
                                                                               expected.block_length)
        if n:
            data[starts[n // 2] + lengths[n // 2] - 1] = ord("X") if lengths[n // 2] else data[0]
            outside = lengths[n // 2] > 0
            assert (cpu_engine.PreparedReads.from_bytes(data.tobytes(), starts, lengths, words=words) is None) \
                == outside


def test_by_length_is_the_stable_argsort():
    import numpy as np

    from bpbc.order import length_order

    rng = np.random.default_rng(10)
    for lengths in (np.zeros(0, np.int64), np.full(1000, 150), rng.integers(0, 300, 5000), np.array([5, 0, 5, 3]),
                    rng.integers(0, 1 << 40, 50)):
        order = cpu_engine.by_length(lengths)
        assert order.dtype == np.int64 and np.array_equal(order, length_order(lengths))


def test_a_kernel_pool_replaced_by_a_larger_one_still_takes_work():
    """Two calls at once with different thread counts: the first may still
    be submitting to the pool the second replaces."""
    from bpbc import cpu_engine

    small = cpu_engine._kernel_pool(1)
    large = cpu_engine._kernel_pool(cpu_engine._pool_size + 1)
    assert large is not small and cpu_engine._kernel_pool(1) is large
    assert small.submit(lambda: 7).result(timeout=10) == 7


def test_a_forked_child_makes_its_own_kernel_pool():
    import os

    from bpbc import cpu_engine

    parent = cpu_engine._kernel_pool(2)
    if not hasattr(os, "fork"):
        return
    pid = os.fork()
    if pid == 0:  # the child: a pool of its own, that runs
        ok = cpu_engine._pool is None and cpu_engine._kernel_pool(2).submit(lambda: 7).result(timeout=10) == 7
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and cpu_engine._kernel_pool(2) is parent
