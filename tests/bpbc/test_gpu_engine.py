"""GPU engine: compile checks (need only nvcc) and CPU parity (need a GPU).

The shared engine tests run on the GPU through TestGpuEngine in
test_engines.py; these add bulk bit-identity with the CPU engine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import bpbc
from bpbc.gpu_engine import KERNEL_PATH, THREADS_PER_BLOCK, chain_shape
from tests.bpbc.conftest import mutate, random_pattern, random_read, related_pair

#: (B, R, P, MA, MI, OE, EX, CELL, BEST, STRIPED): synthesised cells (B = 6, 9
#: at the default scoring, CELL 1), the hand-written one asked for (CELL 0) and
#: as the fallback where no circuit exists (CELL 1, other B or scoring); with
#: the best score (BEST 1), the flag-only first pass (BEST 0), end cells (BEST 2) and the best with
#: where each thread's lies (BEST 3, synthesised and hand-written); without the stripe boundary's code
#: (STRIPED 0), the stripes in turn (1) and in parallel (2)
INSTANTIATIONS = [(6, 4, 32, 2, 3, 7, 2, 1, 1, 0), (6, 8, 16, 2, 3, 7, 2, 0, 1, 1), (9, 8, 16, 2, 3, 7, 2, 1, 1, 0),
                  (1, 1, 32, 2, 3, 7, 2, 1, 1, 1), (11, 8, 8, 5, 4, 11, 3, 1, 1, 2), (3, 5, 4, 1, 9, 20, 9, 0, 1, 0),
                  (5, 8, 16, 2, 3, 7, 2, 1, 0, 0), (5, 8, 16, 2, 3, 7, 2, 0, 0, 2), (10, 8, 8, 5, 4, 11, 3, 1, 0, 1),
                  (11, 8, 32, 2, 3, 7, 2, 1, 0, 2), (11, 8, 32, 2, 3, 7, 2, 1, 1, 2), (11, 8, 32, 2, 3, 7, 2, 1, 2, 2),
                  (6, 4, 32, 2, 3, 7, 2, 1, 2, 0), (5, 8, 16, 2, 3, 7, 2, 0, 2, 1), (9, 4, 32, 2, 3, 7, 2, 1, 3, 2),
                  (16, 3, 32, 2, 3, 7, 2, 1, 3, 2), (11, 4, 8, 5, 4, 11, 3, 0, 3, 1)]


def test_block_size_is_the_kernels_launch_bound():
    """The engine launches sw_screen and wordwise_second_pass with the block size sw.cu promises the compiler."""
    assert re.findall(r"__launch_bounds__\((\w+)\)", Path(KERNEL_PATH).read_text()) == [str(THREADS_PER_BLOCK)] * 2


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_sw_kernel_compiles_for_sm90(tmp_path):
    args = ("const unsigned*, const int*, const unsigned char*, const long long*, unsigned*, unsigned*, unsigned*, "
            "unsigned*, const int*, const int*, int, int, int, int, int, unsigned*, unsigned*, const unsigned*, "
            "unsigned long long*, unsigned*, unsigned*, int")
    source = tmp_path / "instantiate.cu"
    source.write_text(f'#include "{KERNEL_PATH}"\n' + "".join(
        f"template __global__ void sw_screen<{','.join(map(str, t))}>({args});\n" for t in INSTANTIATIONS)
        + "template __global__ void wordwise_second_pass<32, 2, 3, 7, 2>(const unsigned*, const int*, const int*, "
          "const unsigned*, const unsigned char*, const long long*, uint2*, unsigned*, unsigned*, int, int, int, int*, "
          "unsigned long long*);\n")
    result = subprocess.run(
        ["nvcc", "-arch=sm_90", "-std=c++17", "-Werror", "all-warnings", "-cubin", "-o", str(tmp_path / "sw.cubin"),
         str(source)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("length", [1, 4, 20, 31, 33, 60, 128, 129, 256, 300, 1000])
def test_chain_shape_covers_the_pattern(length):
    rows, lanes, stripes = chain_shape(length)
    assert 32 % lanes == 0 and 1 <= rows <= 8
    assert rows * lanes * stripes >= length
    assert rows * lanes * (stripes - 1) < length  # no empty stripe


@pytest.mark.parametrize("second_pass", [False, True])
@pytest.mark.parametrize("groups", [10, 1000, 160_000])
def test_expand_hits_reads_the_records_lane_by_lane(second_pass, groups):
    """The host side of hits: each set lane of a hit record as (read,
    pattern, score, overflow), against a plain loop over the bits, sorted by
    read then pattern, whatever the order of the records; sort keys (read x
    patterns + pattern) below 2^11, 2^22 and 2^33: one, two and three passes
    of the radix sort."""
    from bpbc.gpu_engine import RADIX_BITS, expand_hits

    rng = np.random.default_rng(2)
    planes, patterns = 6, 3
    assert RADIX_BITS == 11 and [groups * 32 * patterns < 1 << bits for bits in (11, 22)] == {
        10: [True, True], 1000: [False, True], 160_000: [False, False]}[groups]
    n = groups * 32 - 7
    order = rng.permutation(n)  # batch position -> read
    words = np.sort(rng.choice(patterns * groups, 9, replace=False))
    if second_pass:  # words: new groups of patterns 0, 0, 1, 2, ...; lanes from anywhere in the batch
        group_pattern = np.sort(rng.integers(0, patterns, len(words)))
        words = np.arange(len(words))
        positions = rng.permutation(n)[:len(words) * 32].reshape(-1, 32)  # each lane once
    else:  # and one group under every pattern: its reads tie, and the sort keeps them in pattern order
        words = np.union1d(words, words[0] % groups + groups * np.arange(patterns))
        group_pattern = np.zeros(0, np.int64)
        positions = np.zeros((len(words), 0), np.int64)
    masks = rng.integers(0, 1 << 32, len(words), dtype=np.uint64).astype(np.uint32)
    masks[0], masks[-1] = 0xFFFFFFFF, 0x80000001
    if not second_pass:  # no lane past the batch's end
        masks = np.where(words % groups == groups - 1, masks & np.uint32((1 << (n % 32)) - 1), masks)
    flags = rng.integers(0, 1 << 32, len(words), dtype=np.uint64).astype(np.uint32)
    best = rng.integers(0, 1 << 32, (len(words), planes), dtype=np.uint64).astype(np.uint32)
    records = np.concatenate([words[:, None], masks[:, None], flags[:, None], best, positions], axis=1).astype(np.uint32)
    expected = []
    for i, word in enumerate(words.tolist()):
        for lane in range(32):
            if (int(masks[i]) >> lane) & 1:
                if second_pass:
                    k, position = int(group_pattern[word]), int(positions[i, lane])
                else:
                    k, position = word // groups, (word % groups) * 32 + lane
                value = sum(((int(best[i, b]) >> lane) & 1) << b for b in range(planes))
                expected.append((int(order[position]), k, value, bool((int(flags[i]) >> lane) & 1)))
    expected.sort()
    for shuffled in (records, records[rng.permutation(len(records))]):  # the device appends them in no set order
        reads, ks, values, overflow = expand_hits(shuffled, planes, 1 if second_pass else groups, order, group_pattern)
        assert reads.dtype == ks.dtype == np.int64 and values.dtype == np.int32 and overflow.dtype == bool
        assert list(zip(reads.tolist(), ks.tolist(), values.tolist(), overflow.tolist())) == expected
    assert len(expected) > 32
    empty = expand_hits(records[:0], planes, groups, order, group_pattern)
    assert all(column.shape == (0,) for column in empty)


def test_latency_shape_trades_rows_for_lanes_and_still_covers_the_pattern():
    """The second pass's chains over few word groups: at most 4 rows per
    lane unless a warp has no room for more lanes, the same stripes; fewer
    where the planes of more would spill."""
    from bpbc.gpu_engine import LATENCY_ROW_BITS, chain_shape, latency_shape

    assert latency_shape((8, 16, 1)) == (4, 32, 1)
    assert latency_shape((8, 8, 1)) == (4, 16, 1)
    assert latency_shape((5, 32, 2)) == (5, 32, 2)
    # where a warp has no room and more rows would spill: fewer rows, the stripes that cover the pattern
    assert latency_shape((8, 32, 190), 48_502, 16) == (3, 32, 506)
    assert latency_shape((4, 32, 379), 48_502, 16) == (3, 32, 506)
    assert latency_shape((8, 32, 190), 48_502, 11) == (4, 32, 379)
    assert latency_shape((8, 32, 190), 48_502, 7) == (8, 32, 190)
    assert latency_shape((8, 32, 2), 500, 8) == (4, 32, 4)
    for length in range(1, 700):
        shape = chain_shape(length)
        for planes in (0, 16):
            rows, lanes, stripes = latency_shape(shape, length, planes)
            assert 32 % lanes == 0 and rows * lanes * stripes >= length
            assert stripes == shape[2] or planes and stripes * rows * lanes - length < rows * lanes
            assert rows <= 4 or lanes == 32
            assert rows * planes <= LATENCY_ROW_BITS


def _random_workload(rng, n_reads):
    reads = []
    for i in range(n_reads):
        if i % 4 == 0:
            reads.append(related_pair(rng, int(rng.integers(20, 301)), 60, rate=0.2, n_rate=0.02)[0])
        else:
            reads.append(random_read(rng, int(rng.integers(0, 301)), n_rate=0.02))
    return reads


@pytest.mark.gpu
@pytest.mark.parametrize("scoring, threshold, exact", [
    ((2, 3, 5, 2), 40, False),
    ((2, 3, 5, 2), 25, True),
    ((1, 1, 1, 1), 12, False),
    ((3, 2, 4, 1), 64, False),
    ((5, 4, 8, 3), 7, False),
])
def test_gpu_matches_cpu_bit_for_bit(scoring, threshold, exact):
    """25,000 reads x 2 patterns x 2 strands = 10^5 instances per scoring."""
    rng = np.random.default_rng(threshold)
    reads = _random_workload(rng, 25_000)
    patterns = [random_pattern(rng, 60, iupac_rate=0.1), random_pattern(rng, int(rng.integers(15, 140)))]
    match, mismatch, gap_open, gap_extend = scoring
    kwargs = dict(threshold=threshold, match=match, mismatch=mismatch, gap_open=gap_open,
                  gap_extend=gap_extend, exact_scores=exact)
    cpu = bpbc.screen(reads, patterns, device="cpu", **kwargs)
    gpu = bpbc.screen(reads, patterns, device="gpu", **kwargs)
    assert np.array_equal(cpu.scores, gpu.scores)
    assert np.array_equal(cpu.capped, gpu.capped)
    assert np.array_equal(cpu.indices, gpu.indices)
    assert cpu.alignments == gpu.alignments


@pytest.mark.gpu
@pytest.mark.parametrize("scoring, threshold", [
    ((2, 3, 5, 2), 40),  # B = 6: a synthesised cell
    ((2, 3, 5, 2), 12),  # B = 4: a synthesised cell, many overflows
    ((2, 3, 5, 2), 2000),  # B = 11: no circuit, the hand-written fallback
    ((3, 2, 4, 1), 64),  # no circuit for this scoring: the fallback
])
def test_synthesised_and_hand_cells_give_the_same_scores(monkeypatch, scoring, threshold):
    """BPBC_GPU_CELL=hand against the default (synthesised where a circuit
    exists): the same scores and flags on every instance, and the CPU's."""
    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.gpu_engine import GpuEngine, PreparedReads
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring, score_planes

    rng = np.random.default_rng(threshold)
    reads = _random_workload(rng, 6000)
    patterns = [random_pattern(rng, 60, iupac_rate=0.1), random_pattern(rng, 140), random_pattern(rng, 300)]
    codes, lengths = encode_reads(reads)
    table = PatternTable.of([encode_pattern(p) for p in patterns])
    scoring_ = Scoring(*scoring)
    planes = score_planes(threshold)
    results = {}
    for cell in ("synth", "hand"):
        engine = GpuEngine(cell=cell)
        prepared = PreparedReads.from_codes(codes, lengths, "swap")
        results[cell] = engine.scores(prepared, table, scoring_, planes)
    assert np.array_equal(results["synth"][0], results["hand"][0])
    assert np.array_equal(results["synth"][1], results["hand"][1])
    monkeypatch.setenv("BPBC_GPU_CELL", "hand")
    kwargs = dict(threshold=min(threshold, 200), match=scoring[0], mismatch=scoring[1], gap_open=scoring[2],
                  gap_extend=scoring[3])
    cpu = bpbc.screen(reads, patterns, device="cpu", **kwargs)
    gpu_hand = bpbc.screen(reads, patterns, device="gpu", **kwargs)
    monkeypatch.setenv("BPBC_GPU_CELL", "synth")
    gpu_synth = bpbc.screen(reads, patterns, device="gpu", **kwargs)
    for gpu in (gpu_hand, gpu_synth):
        assert np.array_equal(cpu.scores, gpu.scores)
        assert np.array_equal(cpu.capped, gpu.capped)
        assert np.array_equal(cpu.indices, gpu.indices)


def test_the_engine_knows_sw_cus_constants():
    """flag_first_pays counts the columns a stripe runs behind the one above;
    latency_shape, where the kernel's registers hold two buffers."""
    from bpbc import gpu_engine

    source = Path(KERNEL_PATH).read_text()
    assert re.findall(r"#define PUBLISH_EVERY (\d+)", source) == [str(gpu_engine.PUBLISH_EVERY)]
    assert re.findall(r"PIN_MASKS = B \* R <= (\d+);", source) == [str(gpu_engine.PINNED_MASK_BITS)]


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["parallel", "turn"])
@pytest.mark.parametrize("pattern_length", [300, 520])
def test_long_patterns_use_stripes(pattern_length, mode, monkeypatch):
    """Scores of a pattern of 2 and of 3 stripes against the CPU's, the
    stripes in parallel (a warp each) and in turn."""
    from bpbc import gpu_engine

    monkeypatch.setenv(gpu_engine.STRIPES_ENV, mode)
    rng = np.random.default_rng(pattern_length)
    assert chain_shape(pattern_length)[2] > 1
    reads = _random_workload(rng, 3000)
    patterns = [random_pattern(rng, pattern_length, iupac_rate=0.05)]
    reads += [random_read(rng, 30) + patterns[0][50:250] + random_read(rng, 30) for _ in range(50)]
    cpu = bpbc.screen(reads, patterns, threshold=60, device="cpu", exact_scores=True)
    gpu = bpbc.screen(reads, patterns, threshold=60, device="gpu", exact_scores=True)
    assert np.array_equal(cpu.scores, gpu.scores)
    assert len(gpu.indices) >= 50


@pytest.mark.gpu
def test_ballot_and_swap_transposes_give_the_same_scores():
    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.gpu_engine import GpuEngine
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring

    rng = np.random.default_rng(5)
    codes, lengths = encode_reads(_random_workload(rng, 5000))
    masks = encode_pattern(random_pattern(rng, 40, iupac_rate=0.1))
    results = []
    for method in ("ballot", "swap"):
        engine = GpuEngine(transpose=method)
        results.append(engine.scores(engine.prepare(codes, lengths), PatternTable.of([masks]), Scoring(), 6))
    assert np.array_equal(results[0][0], results[1][0])
    assert np.array_equal(results[0][1], results[1][1])


@pytest.mark.gpu
def test_cli_end_to_end_on_gpu_matches_cpu(tmp_path):
    """The CLI with --device gpu on real reads when scripts/gpu_check.sh
    carried them (.devdata), else on the shipped example."""
    from bpbc.cli import main

    root = Path(__file__).resolve().parents[2]
    real = root / ".devdata" / "illumina.fastq.gz"
    reads = real if real.exists() else root / "examples" / "reads.fq.gz"
    adapters = tmp_path / "adapters.fa"
    adapters.write_text((root / ("examples" if not real.exists() else ".devdata") / "adapters.fa").read_text()
                        # the adapter the cutadapt test reads actually carry
                        + ">cutadapt_test_adapter\nGCCTAACTTCTTAGACTGCCTTAAGGACGT\n")
    outputs = {}
    for device in ("cpu", "gpu"):
        out = tmp_path / f"{device}.paf"
        assert main([str(reads), str(adapters), "--threshold", "20", "--device", device, "-o", str(out), "--quiet"]) == 0
        outputs[device] = out.read_text()
    assert outputs["cpu"] == outputs["gpu"]
    assert outputs["gpu"].count("\n") > 0


@pytest.mark.gpu
def test_paired_per_pattern_thresholds_and_demultiplexing_on_gpu_match_cpu(tmp_path):
    """Paired reads, header and fraction thresholds, {name} files: GPU = CPU, file for file."""
    from bpbc.cli import main

    data = Path(__file__).resolve().parents[1] / "data"
    patterns = tmp_path / "p.fa"
    patterns.write_text((data / "patterns.fa").read_text().replace(">primer_iupac", ">primer_iupac threshold=25"))
    outputs = {}
    for device in ("cpu", "gpu"):
        out = tmp_path / device
        out.mkdir()
        assert main([str(data / "reads_1.fq"), "-2", str(data / "reads_2.fq"), str(patterns), "--device", device,
                     "--min-score-fraction", "0.7", "--pair-filter", "both", "-o", str(out / "hits.paf"), "--quiet",
                     "--matched", str(out / "{name}_1.fq"), "--matched2", str(out / "{name}_2.fq"),
                     "--unmatched", str(out / "u_1.fq"), "--unmatched2", str(out / "u_2.fq")]) == 0
        outputs[device] = {path.name: path.read_bytes() for path in out.iterdir()}
    assert outputs["cpu"] == outputs["gpu"]
    assert outputs["gpu"]["hits.paf"].count(b"\n") > 0 and len(outputs["gpu"]) > 5


@pytest.mark.gpu
def test_batch_over_the_memory_pool_limit_is_screened_in_parts():
    """With CuPy's pool capped below what the batch needs, the Screener
    splits it; the hits are those of the uncapped run."""
    import cupy

    from bpbc.screener import Screener

    rng = np.random.default_rng(4)
    adapter = random_pattern(rng, 33)
    reads = [random_read(rng, 150) for _ in range(40000)]
    for i in range(0, len(reads), 37):
        reads[i] = reads[i][:20] + adapter + reads[i][53:]
    expected = Screener([adapter], 40, device="gpu").hits(reads)
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    limit = pool.get_limit()
    pool.set_limit(size=2 << 20)
    try:
        screener = Screener([adapter], 40, device="gpu")
        batch = screener.prepare(reads)
        got = screener.hits(batch)
    finally:
        pool.set_limit(size=limit)
    assert batch.prepared is None  # 40000 reads do not fit in 2 MiB
    for field in ("read", "pattern", "strand", "score", "capped"):
        assert np.array_equal(getattr(got, field), getattr(expected, field))
    assert len(expected) > 1000


@pytest.mark.gpu
def test_cli_finishes_while_another_process_holds_most_gpu_memory(tmp_path):
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c", "import cupy, sys\nfree, _ = cupy.cuda.runtime.memGetInfo()\n"
         "held = cupy.empty(free - (1 << 30), cupy.uint8)\nprint('held', flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        from bpbc.cli import main

        root = Path(__file__).resolve().parents[2]
        out = {}
        for device in ("gpu", "cpu"):
            out[device] = tmp_path / f"{device}.paf"
            assert main([str(root / "examples" / "reads.fq.gz"), str(root / "examples" / "adapters.fa"), "-t", "30",
                         "--device", device, "-q", "-o", str(out[device])]) == 0
        assert out["gpu"].read_bytes() == out["cpu"].read_bytes()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
        holder.stdout.close()


@pytest.mark.gpu
@pytest.mark.parametrize("planes", [4, 5, 6, 9])
def test_hits_in_two_passes_are_the_one_pass_hits(planes):
    """GPU hits with the flag-only first pass and the flagged lanes gathered
    for the second (flag_first) against hits in one pass and against the CPU
    engine: random reads of lengths that are not multiples of 32, a panel of
    patterns of different lengths on both strands, one of them in several
    stripes; thresholds where the first pass flags many lanes, few, and
    none; and with buffers too short for the second pass and the hit records
    (the engine goes again with more room). At 9 planes the first pass takes
    fewer than 8 (flag_pass_planes)."""
    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.cpu_engine import CpuEngine
    from bpbc.gpu_engine import GpuEngine
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring, flag_pass_planes

    rng = np.random.default_rng(planes)
    patterns = [random_pattern(rng, n, iupac_rate=0.05) for n in (9, 33, 70, 300)]
    assert chain_shape(300)[2] > 1
    reads = _random_workload(rng, 5000)
    concrete = [p.translate(str.maketrans("RYSWKMBDHVNU", "ACGTGACAAAGT")) for p in patterns]
    for i in range(0, len(reads), 7):  # pieces of the patterns, so that many instances are flagged
        piece = concrete[i % len(concrete)]
        start = int(rng.integers(0, len(piece)))
        reads[i] = reads[i][:40] + piece[start:start + int(rng.integers(5, 120))] + reads[i][40:]
    codes, lengths = encode_reads(reads)
    assert (lengths % 32 != 0).any() and len(reads) % 32 != 0
    table = PatternTable.build([encode_pattern(p) for p in patterns], ("+", "-"))
    scoring = Scoring()
    cpu, two_pass, one_pass = CpuEngine(), GpuEngine(flag_first=True), GpuEngine(flag_first=False)
    if planes == 9:
        assert flag_pass_planes(scoring, int(lengths.max()) * 300, planes) < planes - 1
    scores, overflow = cpu.scores(cpu.prepare(codes, lengths), table, scoring, planes)
    low = 1 << (planes - 1)
    for thresholds in (np.full(len(table), low), np.linspace(low, (1 << planes) - 1, len(table)).astype(np.int64),
                       np.full(len(table), (1 << planes) - 1)):
        expected_reads, expected_ks = np.nonzero((scores >= thresholds) | overflow)
        short = [GpuEngine(flag_first=flag_first) for flag_first in (True, False)]
        for engine in short:
            engine._second_pass_words = engine._record_capacity = 1
        results = [engine.hits(engine.prepare(codes, lengths), table, scoring, planes, thresholds)
                   for engine in (two_pass, one_pass, *short)]
        for reads_, ks, values, flags in results:
            assert np.array_equal(reads_, expected_reads) and np.array_equal(ks, expected_ks)
            assert np.array_equal(values, scores[reads_, ks]) and np.array_equal(flags, overflow[reads_, ks])
    flagged_reads, flagged_ks = np.nonzero(scores >= low)
    if planes < 9:  # the first pass flagged many lanes of several patterns, the striped one (k 6, 7) too
        assert 100 < len(flagged_reads) < len(reads) * len(table)
        assert len(np.unique(flagged_ks)) >= 3 and (flagged_ks >= 6).any()
    else:  # none: the second pass has nothing to do
        assert len(flagged_reads) == 0
    empty = two_pass.hits(two_pass.prepare(codes[:40] * 0 + 4, lengths[:40]), table, scoring, planes,
                          np.full(len(table), low))
    assert all(column.shape == (0,) for column in empty)


@pytest.mark.gpu
@pytest.mark.parametrize("planes", [5, 6, 9])
def test_chains_that_walk_many_groups_match_the_cpu(planes):
    """With the engine told of one multiprocessor, each chain walks dozens of
    word groups of different lengths, 1 column among them: the group ends,
    the resets before the next group and the next group's length (loaded a
    group ahead) all run many times per chain. Scores and hits (both passes)
    against the CPU engine, on a pattern of one stripe and one of several."""
    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.cpu_engine import CpuEngine
    from bpbc.gpu_engine import GpuEngine
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring

    rng = np.random.default_rng(100 + planes)
    reads = _random_workload(rng, 6000) + [random_read(rng, int(rng.integers(1, 3))) for _ in range(100)]
    patterns = [random_pattern(rng, 40, iupac_rate=0.05), random_pattern(rng, 300, iupac_rate=0.05)]
    concrete = [p.translate(str.maketrans("RYSWKMBDHVNU", "ACGTGACAAAGT")) for p in patterns]
    for j in range(1200):  # pieces of the patterns, on both strands: hits at every plane count
        piece = concrete[j % 2]
        start = int(rng.integers(0, len(piece) // 3))
        piece = piece[start:start + int(rng.integers(10, 240))]
        if j // 2 % 2:
            piece = piece[::-1].translate(str.maketrans("ACGT", "TGCA"))
        reads[5 * j] = reads[5 * j][:20] + piece + reads[5 * j][20:]
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(p) for p in patterns], ("+", "-"))
    scoring = Scoring()
    cpu = CpuEngine()
    scores, overflow = cpu.scores(cpu.prepare(codes, lengths), table, scoring, planes)
    thresholds = np.full(len(table), 1 << (planes - 1))
    expected_reads, expected_ks = np.nonzero((scores >= thresholds) | overflow)
    assert {2, 3} <= set(expected_ks.tolist())  # hits of the striped pattern on both strands
    for flag_first in (True, False):
        engine = GpuEngine(flag_first=flag_first)
        engine.multiprocessors = 1
        prepared = engine.prepare(codes, lengths)
        # one multiprocessor holds a few blocks of 128 threads: a few dozen
        # chains of 8 lanes (40 bp, 2 strands) or 32 (300 bp), several groups each
        assert prepared.groups >= 150
        got_scores, got_overflow = engine.scores(prepared, table, scoring, planes)
        assert np.array_equal(got_scores, scores) and np.array_equal(got_overflow, overflow)
        reads_, ks, values, flags = engine.hits(prepared, table, scoring, planes, thresholds)
        assert np.array_equal(reads_, expected_reads) and np.array_equal(ks, expected_ks)
        assert np.array_equal(values, scores[reads_, ks]) and np.array_equal(flags, overflow[reads_, ks])


def test_the_warm_up_never_raises_where_no_gpu_is_usable(monkeypatch):
    """The command starts the GPU's warm-up before it knows whether there is
    one: without CuPy (or a device) it ends quietly, for the engine to report."""
    import sys

    from bpbc import gpu_engine

    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    thread = gpu_engine.warm_up_in_background()
    thread.join(timeout=60)
    assert not thread.is_alive()


def test_the_warm_up_starts_the_driver_before_cupys_first_call(monkeypatch):
    """CuPy's first call starts CUDA holding the GIL: the warm-up has started it already, without."""
    import sys
    import types

    from bpbc import cuda_driver, gpu_engine

    events = []
    runtime = types.SimpleNamespace(getDeviceCount=lambda: events.append("cupy getDeviceCount") or 1)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime)))
    monkeypatch.setattr(cuda_driver, "start", lambda: events.append("driver started") or 1)
    monkeypatch.setattr(gpu_engine, "_warm_up_device", lambda device: events.append(f"device {device}"))
    gpu_engine._warm_up()
    assert events == ["driver started", "cupy getDeviceCount", "device 0"]


@pytest.mark.gpu
def test_the_warm_up_loads_what_every_screen_uses_and_a_screen_follows():
    from bpbc import gpu_engine

    gpu_engine.warm_up_in_background().join(timeout=300)
    assert gpu_engine._helpers.cache_info().currsize == 1
    assert all(gpu_engine._helpers().get_function(name) is not None for name in gpu_engine.HELPER_KERNELS)
    reads = ["ACGTACGTTTGACCAGT" * 6, "TTTTTTTTTT"]
    on_gpu, on_cpu = (bpbc.screen(reads, ["ACGTACGTTTGACC"], threshold=20, device=device) for device in ("gpu", "cpu"))
    assert on_gpu.alignments == on_cpu.alignments and len(on_gpu.alignments) > 0


@pytest.mark.gpu
def test_a_devices_set_up_runs_to_its_end():
    """The warm-up lets every failure pass (a run on a broken GPU meets it and
    says so), so a bug in it would only make runs slower, unseen: its work on a
    device, without that guard, raises nothing."""
    from bpbc import gpu_engine

    gpu_engine._set_up_device(0)


def test_chains_per_pattern_fills_the_device_in_whole_rounds():
    from bpbc.gpu_engine import chains_per_pattern

    resident = 132 * 4 * THREADS_PER_BLOCK
    # one pattern over many groups: one round of chains, each a short stretch of groups
    one = chains_per_pattern(1, 32, 125_000, resident)
    assert one * 32 <= resident and -(-125_000 // one) <= 2 * 125_000 * 32 // resident
    # 10^4 patterns of 4 lanes: one chain each would leave 40 % of the device idle; the
    # chains chosen fill about whole rounds, and never more than there are groups
    many = chains_per_pattern(10_000, 4, 3125, resident)
    threads = 10_000 * many * 4
    assert many > 1 and threads / resident / -(-threads // resident) > 0.9
    assert chains_per_pattern(10_000, 4, 3, resident) <= 3
    assert chains_per_pattern(10**6, 32, 10, resident) == 1


@pytest.mark.parametrize("stripes, groups", [(190, 500), (506, 60), (20, 1), (3, 125_000)])
def test_parallel_stripes_over_long_reads_take_a_chain_per_group_at_the_least_cost(stripes, groups):
    """With the stripes in parallel over long reads a chain per group (so that
    a chain's stripes do not run side by side), and no launch of more rounds x
    groups a chain than the fewest chains that cost least; short reads keep those."""
    from bpbc.gpu_engine import ONE_GROUP_COLUMNS, chains_per_pattern

    resident = 132 * 256
    per_chain = 2 * stripes * 32  # two oriented patterns, 32 lanes a chain

    def cost(chains):
        return -(-chains * per_chain // resident) * -(-groups // chains)

    fewest = chains_per_pattern(2 * stripes, 32, groups, resident)
    assert chains_per_pattern(2 * stripes, 32, groups, resident, ONE_GROUP_COLUMNS) == groups
    assert cost(groups) == cost(fewest)
    assert chains_per_pattern(2 * stripes, 32, groups, resident, ONE_GROUP_COLUMNS - 1) == fewest


@pytest.mark.gpu
def test_resident_threads_are_the_drivers_occupancy_figure(monkeypatch):
    """The chains of a launch are sized by the driver's figure for the kernel's
    CUDA function (RawKernel has no handle of its own: an estimate from its
    registers stood in for it, unnoticed, until session 31)."""
    import cupy

    from bpbc.gpu_engine import GpuEngine, _kernel
    from bpbc.scoring import Scoring

    engine = GpuEngine()
    kernel = _kernel(5, 8, 16, Scoring(), engine.cell, 0, 0, engine.device)  # 128 bp patterns' flag pass
    occupancy = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor
    asked = []

    def spy(function, block, shared):
        asked.append(function)
        return occupancy(function, block, shared)

    monkeypatch.setattr(cupy.cuda.driver, "occupancyMaxActiveBlocksPerMultiprocessor", spy)
    threads = engine._resident_threads(kernel)
    assert asked == [kernel.kernel.ptr]
    blocks = occupancy(kernel.kernel.ptr, THREADS_PER_BLOCK, 0)
    assert threads == engine.multiprocessors * blocks * THREADS_PER_BLOCK
    assert blocks * THREADS_PER_BLOCK * kernel.num_regs <= 65536  # an H100's or H200's register file per SM


def test_striped_launches_are_cut_to_the_stripe_buffer_budget(monkeypatch):
    from bpbc import gpu_engine

    assert gpu_engine._launch_parts(50, 1, 10**6, 150, 9) == [(0, 50)]  # no stripes: no buffers
    per_pattern = 4 * 3125 * (150 * 2 * 9 + 10)
    monkeypatch.setattr(gpu_engine, "STRIPE_BUFFER_BYTES", 3 * per_pattern)
    parts = gpu_engine._launch_parts(10, 3, 3125, 150, 9)
    assert parts == [(0, 3), (3, 6), (6, 9), (9, 10)]
    monkeypatch.setattr(gpu_engine, "STRIPE_BUFFER_BYTES", 1)
    assert gpu_engine._launch_parts(2, 3, 3125, 150, 9) == [(0, 1), (1, 2)]


@pytest.mark.gpu
@pytest.mark.parametrize("budget", [None, 1])
def test_panels_of_many_patterns_and_many_long_ones_match_the_cpu(monkeypatch, budget):
    """A panel of 600 short patterns (warps whose chains belong to several
    patterns) and 24 long ones of 2-5 stripes (several striped patterns per
    launch, each with its stripe buffers; with ``budget`` 1, one per launch),
    both strands: scores, and hits in one and two passes, against the CPU."""
    from bpbc import gpu_engine
    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.cpu_engine import CpuEngine
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring

    if budget is not None:
        monkeypatch.setattr(gpu_engine, "STRIPE_BUFFER_BYTES", budget)
    rng = np.random.default_rng(28)
    patterns = ([random_pattern(rng, int(rng.integers(8, 41)), iupac_rate=0.05) for _ in range(600)]
                + [random_pattern(rng, int(rng.integers(260, 1200))) for _ in range(24)])
    assert len({chain_shape(len(p)) for p in patterns[600:]}) < 24  # launches of several striped patterns
    reads = _random_workload(rng, 2500)
    for i in range(0, len(reads), 3):
        piece = patterns[int(rng.integers(len(patterns)))].translate(str.maketrans("RYSWKMBDHVNU", "ACGTGACAAAGT"))
        start = int(rng.integers(0, len(piece)))
        reads[i] = reads[i][:30] + piece[start:start + int(rng.integers(8, 150))] + reads[i][30:]
    codes, lengths = encode_reads(reads)
    table = PatternTable.build([encode_pattern(p) for p in patterns], ("+", "-"))
    scoring, planes = Scoring(), 6
    cpu = CpuEngine()
    scores, overflow = cpu.scores(cpu.prepare(codes, lengths), table, scoring, planes)
    thresholds = np.full(len(table), 36)
    expected_reads, expected_ks = np.nonzero((scores >= thresholds) | overflow)
    assert len(np.unique(expected_ks)) > 100 and (expected_ks >= 1200).any()
    for flag_first in (True, False):
        engine = gpu_engine.GpuEngine(flag_first=flag_first)
        prepared = engine.prepare(codes, lengths)
        got_scores, got_overflow = engine.scores(prepared, table, scoring, planes)
        assert np.array_equal(got_scores, scores) and np.array_equal(got_overflow, overflow)
        reads_, ks, values, flags = engine.hits(prepared, table, scoring, planes, thresholds)
        assert np.array_equal(reads_, expected_reads) and np.array_equal(ks, expected_ks)
        assert np.array_equal(values, scores[reads_, ks]) and np.array_equal(flags, overflow[reads_, ks])


@pytest.mark.gpu
def test_every_visible_gpu_screens_and_the_output_is_one_gpus(tmp_path):
    """--device gpu on a host with several GPUs spreads the chunks over all
    of them (CUDA_VISIBLE_DEVICES chooses) and writes what one GPU writes,
    byte for byte; JSON says how many screened."""
    import json
    import subprocess
    import sys

    import cupy

    gpus = cupy.cuda.runtime.getDeviceCount()
    if gpus < 2:
        pytest.skip("one GPU visible")
    rng = np.random.default_rng(2)
    patterns = [random_pattern(rng, int(rng.integers(12, 300))) for _ in range(40)]
    reads = _random_workload(rng, 30_000)
    for i in range(0, len(reads), 5):
        piece = patterns[i % 40]
        reads[i] = reads[i][:20] + piece[: int(rng.integers(10, 120))] + reads[i][20:]
    (tmp_path / "reads.fa").write_text("".join(f">r{i}\n{r}\n" for i, r in enumerate(reads)))
    (tmp_path / "patterns.fa").write_text("".join(f">p{i}\n{p}\n" for i, p in enumerate(patterns)))
    outputs = {}
    for visible in ("0", ",".join(map(str, range(gpus)))):
        out = tmp_path / visible.replace(",", "_")
        out.mkdir()
        subprocess.run([sys.executable, "-m", "bpbc", str(tmp_path / "reads.fa"), str(tmp_path / "patterns.fa"),
                        "--device", "gpu", "-t", "30", "--chunk-size", "2000", "-o", str(out / "hits.paf"),
                        "--matched", str(out / "matched.fa"), "--json", str(out / "summary.json"), "--quiet"],
                       check=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": visible})
        outputs[visible] = out
    one, every = outputs.values()
    for name in ("hits.paf", "matched.fa"):
        assert (one / name).read_bytes() == (every / name).read_bytes()
    assert (one / "hits.paf").read_text().count("\n") > 1000
    assert json.loads((one / "summary.json").read_text())["devices"] == 1
    assert json.loads((every / "summary.json").read_text())["devices"] == gpus


@pytest.mark.gpu
@pytest.mark.parametrize("pack_on_host", [False, True])
def test_batches_prepared_and_screened_beside_each_other_give_the_cpu_hits(pack_on_host):
    """Batches are prepared on a stream of their own, through pinned memory
    (GpuEngine._prepared), packed on the device or on the host
    (pack_on_host), beside another batch's screen; screens called from
    several threads at once run one after the other on the device
    (GpuEngine._in_device_order). From the reads' bytes and from codes:
    every hit is the CPU engine's."""
    from concurrent.futures import ThreadPoolExecutor

    from bpbc.screener import ReadBatch, Screener

    rng = np.random.default_rng(17)
    patterns = [random_pattern(rng, 24) for _ in range(300)]
    parts = [_random_workload(rng, 20_000) for _ in range(3)]
    for part in parts:
        part += [random_read(rng, 40) + patterns[k] + random_read(rng, 40) for k in range(0, 300, 7)]
    gpu = Screener(patterns, threshold=40, device="gpu")
    gpu.engine.pack_on_host = pack_on_host
    cpu = Screener(patterns, threshold=40, device="cpu")
    with ThreadPoolExecutor(3) as pool:
        screens = [pool.submit(gpu.hits, gpu.prepare(parts[0]))]
        screens.append(pool.submit(gpu.hits, gpu.prepare(parts[1])))  # from the reads' bytes
        third = ReadBatch.from_codes(*bpbc.Reads.of(parts[2]).encode(), gpu.engine)  # from codes
        screens.append(pool.submit(gpu.hits, third))
        hits = [screen.result() for screen in screens]
    for got, part in zip(hits, parts):
        expected = cpu.hits(part)
        for field in ("read", "pattern", "strand", "score", "capped"):
            assert np.array_equal(getattr(got, field), getattr(expected, field)), field
        assert len(got) >= 300 // 7


@pytest.mark.gpu
def test_pinned_staging_uploads_every_array_as_it_is():
    """The engine's uploads go through pinned memory (_PinnedStaging): arrays
    of several types and shapes, an empty one, and a second, larger set
    (the memory grows) arrive unchanged; the memory it grew out of is
    freed, not left pinned in CuPy's pool."""
    import cupy

    from bpbc.gpu_engine import _PinnedStaging

    rng = np.random.default_rng(3)
    pool = cupy.get_default_pinned_memory_pool()
    pool.free_all_blocks()
    staging = _PinnedStaging()
    stream = cupy.cuda.Stream(non_blocking=True)
    for size in (1000, 300_000):
        arrays = [rng.integers(0, 256, size).astype(np.uint8), rng.integers(-5, 5, (size // 7, 3)).astype(np.int64),
                  np.zeros(0, np.int32), rng.integers(0, 1 << 30, 33).astype(np.int32)]
        copies = staging.upload(arrays, stream)
        stream.synchronize()
        for array, copy in zip(arrays, copies):
            assert copy.dtype == array.dtype and copy.shape == array.shape
            assert np.array_equal(copy.get(), array)
    assert pool.n_free_blocks() == 0


@pytest.mark.gpu
def test_flagged_lanes_counts_each_patterns_lanes_and_ranks_each_word():
    """_flagged_lanes (the two passes' bookkeeping, also run by the warm-up):
    rank[k, g] is pattern k's flagged lanes in the words before word g,
    counts[k] its flagged lanes in all, counts[K] = 0."""
    import cupy

    from bpbc.gpu_engine import _flagged_lanes

    rng = np.random.default_rng(5)
    flag = rng.integers(0, 1 << 32, (7, 40), dtype=np.uint64).astype(np.uint32)
    flag[rng.random(flag.shape) < 0.4] = 0
    rank, counts = _flagged_lanes(cupy.asarray(flag))
    lanes = np.vectorize(lambda word: bin(int(word)).count("1"))(flag).astype(np.int64)
    assert np.array_equal(rank.get(), np.cumsum(lanes, axis=1) - lanes)
    assert np.array_equal(counts.get(), np.append(lanes.sum(axis=1), 0).astype(np.uint64))


@pytest.mark.gpu
def test_the_engine_screens_off_the_default_stream(monkeypatch):
    """Beside a screen on CUDA's default stream every copy to the device
    waits for its kernels (GpuEngine's docstring): the engine's SW kernels
    run on the calling thread's screening stream, a non-blocking one."""
    import cupy

    from bpbc import gpu_engine
    from bpbc.screener import Screener

    streams = []
    loaded = gpu_engine._kernel

    class Recording:
        def __init__(self, kernel):
            self.wrapped = kernel

        def __getattr__(self, name):  # the RawKernel's own (its CUDA function: .kernel)
            return getattr(self.wrapped, name)

        def __call__(self, *args):
            streams.append(cupy.cuda.get_current_stream().ptr)
            return self.wrapped(*args)

    monkeypatch.setattr(gpu_engine, "_kernel", lambda *args: Recording(loaded(*args)))
    screener = Screener([b"ACGTACGTAC"], threshold=10, device="gpu")
    hits = screener.hits([b"TTACGTACGTACTT", b"GGGG"])
    assert set(hits.read.tolist()) == {0}
    assert streams and set(streams) == {screener.engine.screening_stream().ptr} != {cupy.cuda.Stream.null.ptr}


@pytest.mark.gpu
def test_packing_on_the_host_gives_the_devices_planes():
    """GpuEngine.pack_on_host: the same planes, order and word-group lengths
    as packing on the device; a byte outside the alphabet gives None."""
    from bpbc.gpu_engine import GpuEngine

    rng = np.random.default_rng(23)
    reads = bpbc.Reads.of([random_read(rng, int(n)) for n in rng.integers(1, 300, 1000)])
    on_device, on_host = GpuEngine(), GpuEngine()
    on_host.pack_on_host = True
    expected = on_device.prepare_bytes(reads.data, reads.seq_start, reads.lengths)
    got = on_host.prepare_bytes(reads.data, reads.seq_start, reads.lengths)
    assert np.array_equal(got.order, expected.order)
    assert np.array_equal(got.planes.get(), expected.planes.get())
    assert np.array_equal(got.group_length.get(), expected.group_length.get())
    bad = np.array(reads.data, np.uint8)
    bad[int(reads.seq_start[5])] = ord("X")
    assert on_host.prepare_bytes(bad, reads.seq_start, reads.lengths) is None


def _reads_with_pieces(rng, pattern: str, count: int) -> list[str]:
    """Reads of 300-3000 bases, most carrying a mutated piece of ``pattern``
    on either strand, every fifth the same piece twice (two end cells at the
    best score: the tie rule picks the first)."""
    concrete = pattern.translate(str.maketrans("RYSWKMBDHVNU", "ACGTGACAAAGT"))
    reads = []
    for i in range(count):
        read = random_read(rng, int(rng.integers(300, 3000)), n_rate=0.005)
        if i % 4:
            start = int(rng.integers(0, len(concrete) - 100))
            piece = mutate(rng, concrete[start:start + int(rng.integers(100, 600))], 0.05)
            if i % 2:
                piece = piece[::-1].translate(str.maketrans("ACGT", "TGCA"))
            at = int(rng.integers(0, len(read)))
            read = read[:at] + piece + (piece if i % 5 == 0 else "") + read[at:]
        reads.append(read)
    return reads


class _OnDevice(np.ndarray):
    """A numpy array standing in for a CuPy one where only ``get`` is called."""

    def get(self):
        return np.asarray(self)


def test_the_ends_the_second_pass_finds_are_looked_up():
    """The host side of the second pass's end cells (no GPU):
    gpu_engine._known_ends keeps, per scoring and oriented pattern, each
    exact lane's end cell (the key end_cells_of_blocks gives: (read end) <<
    32 | pattern end), and _looked_up_ends finds it for the same lane,
    pattern and score only."""
    from bpbc import gpu_engine
    from bpbc.alphabet import encode_pattern
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring
    from transpose import pack_flags, pack_values

    table = PatternTable.build([encode_pattern("ACGTT" * 400), encode_pattern("TTGCA" * 20)], ("+", "-"))
    scoring, planes = Scoring(), 13
    rng = np.random.default_rng(3)
    groups = 3  # of 4: the last is past the pass's groups
    word_pattern = np.array([0, 0, 3, 0], np.int32)  # pattern 0 (+) twice, the second pattern (-)
    positions = rng.permutation(1000)[:4 * 32].astype(np.int32)
    positions[[5, 40]] = -1  # empty lanes
    read_ends, pattern_ends = rng.integers(1, 5000, 4 * 32), rng.integers(1, 2000, 4 * 32)
    keys = (read_ends.astype(np.uint64) << np.uint64(32)) | pattern_ends.astype(np.uint64)
    keys[[7, 70]] = np.iinfo(np.uint64).max  # no end cell found
    scores = rng.integers(100, 5000, 4 * 32)
    overflow = np.zeros(4 * 32, bool)
    overflow[9] = True
    known = gpu_engine._known_ends(
        table, scoring, groups, keys.reshape(4, 32).view(_OnDevice), word_pattern.view(_OnDevice),
        positions.view(_OnDevice), pack_values(scores, planes, 32).view(_OnDevice),
        pack_flags(overflow, 32).view(_OnDevice))
    assert set(known) == {(scoring, table.oriented(0).tobytes()), (scoring, table.oriented(3).tobytes())}
    kept = np.arange(3 * 32)
    kept = kept[(positions[kept] >= 0) & (keys[kept] != np.iinfo(np.uint64).max) & ~overflow[kept]]
    ks = np.repeat(word_pattern, 32)[kept].astype(np.int64)
    prepared = type("Prepared", (), {"known_ends": known})()
    found = gpu_engine._looked_up_ends(prepared, table, scoring, positions[kept].astype(np.int64), ks, scores[kept])
    np.testing.assert_array_equal(found, np.stack([scores[kept], read_ends[kept], pattern_ends[kept]], axis=1))
    # another score, pattern, scoring, or a lane the pass did not keep: not found
    others = [(scores[kept] + 1, ks, scoring), (scores[kept], np.where(ks == 0, 1, 2), scoring),
              (scores[kept], ks, Scoring(1, 1, 1, 1))]
    for other_scores, other_ks, other_scoring in others:
        found = gpu_engine._looked_up_ends(prepared, table, other_scoring, positions[kept].astype(np.int64),
                                           other_ks, other_scores)
        assert (found == -1).all()
    dropped = np.array([7, 9, 3 * 32 + 1])  # no end cell, overflowed, past the pass's groups
    found = gpu_engine._looked_up_ends(prepared, table, scoring, positions[dropped].astype(np.int64),
                                       np.zeros(3, np.int64), scores[dropped])
    assert (found == -1).all()


@pytest.mark.gpu
@pytest.mark.parametrize("mode, length, exact_planes", [("parallel", 700, 11), ("turn", 700, 11), ("parallel", 300, 10)])
def test_the_second_pass_finds_the_tracebacks_end_cells(mode, length, exact_planes, monkeypatch):
    """GpuEngine.hits in two passes with planes enough for every score (as
    the Screener asks where end cells follow) finds each hit's end cell on
    the way (sw.cu BEST = 3, end_cells_of_blocks): every one is
    bpbc.traceback.end_cells' (the first cell at the score in (read,
    pattern) order; pieces twice give ties), and end_cells takes them from
    there without searching. At 11 planes the hand-written cell, at 10 the
    synthesised one (whose rises are found from the best's bits)."""
    from bpbc import gpu_engine
    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.gpu_engine import GpuEngine
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring
    from bpbc.traceback import end_cells

    monkeypatch.setenv(gpu_engine.STRIPES_ENV, mode)
    monkeypatch.setenv(gpu_engine.FLAG_FIRST_ENV, "1")
    rng = np.random.default_rng(8)
    pattern = random_pattern(rng, length, iupac_rate=0.02)
    codes, lengths = encode_reads(_reads_with_pieces(rng, pattern, 160))
    table = PatternTable.build([encode_pattern(pattern)], ("+", "-"))
    scoring, threshold = Scoring(), 64
    assert scoring.max_score(length) < 1 << exact_planes
    engine = GpuEngine()
    prepared = engine.prepare(codes, lengths)
    reads, ks, scores, overflow = engine.hits(prepared, table, scoring, 7, np.full(2, threshold),
                                              exact_planes=exact_planes)
    assert len(reads) > 100 and not overflow.any() and scores.max() >= 1 << 7
    expected = end_cells(codes, lengths, reads, table, ks, scoring)
    np.testing.assert_array_equal(expected[:, 0], scores)
    searched = []
    monkeypatch.setattr(GpuEngine, "_searched_ends", lambda self, *args: searched.append(args) or None)
    np.testing.assert_array_equal(engine.end_cells(prepared, table, scoring, exact_planes, reads, ks, scores),
                                  expected)
    assert not searched


def test_the_second_pass_is_wordwise_over_long_patterns_at_many_planes(monkeypatch):
    """wordwise_pays: on compute capability 9.0 and later, at
    WORDWISE_MIN_PLANES planes or more, against patterns of at least a
    word-wise stripe's rows; $BPBC_GPU_WORDWISE forces either way."""
    from bpbc import gpu_engine
    from bpbc.gpu_engine import WORDWISE_MIN_PLANES, WORDWISE_MIN_ROWS, wordwise_pays
    from bpbc.patterns import PatternTable

    monkeypatch.delenv(gpu_engine.WORDWISE_ENV, raising=False)
    long = PatternTable.of([np.ones(WORDWISE_MIN_ROWS, np.uint8)] * 2)
    mixed = PatternTable.of([np.ones(WORDWISE_MIN_ROWS, np.uint8), np.ones(WORDWISE_MIN_ROWS - 1, np.uint8)])
    assert wordwise_pays(long, WORDWISE_MIN_PLANES, 90)
    assert not wordwise_pays(long, WORDWISE_MIN_PLANES - 1, 90)
    assert not wordwise_pays(long, 16, 80)
    assert not wordwise_pays(mixed, 16, 90)
    monkeypatch.setenv(gpu_engine.WORDWISE_ENV, "1")
    assert wordwise_pays(mixed, 6, 80)
    monkeypatch.setenv(gpu_engine.WORDWISE_ENV, "0")
    assert not wordwise_pays(long, 16, 90)


@pytest.mark.gpu
@pytest.mark.parametrize("scoring_values, pattern_lengths", [((2, 3, 5, 2), (1500,)), ((1, 1, 1, 1), (1500,)),
                                                     ((40, 30, 50, 20), (1500,)), ((100, 100, 100, 50), (1500,)),
                                                     ((2, 3, 5, 2), (1500, 3100))])
def test_the_wordwise_second_pass_is_the_bit_sliced_one(scoring_values, pattern_lengths, monkeypatch):
    """The second pass word-wise (sw.cu's wordwise_second_pass, DPX) gives
    the bit-sliced pass's hits, scores and flags, and every hit's end cell
    is bpbc.traceback.end_cells' (ties: pieces twice), found on the way:
    1,500 rows are two stripes of 1,024 (the second part padding), reads
    hold N, the pattern IUPAC codes; with a second pattern of 3,100 rows,
    the first's stripes end before the launch's last. Values are 16-bit,
    less a floor: at 40 a match pieces score past 32767, at 100 past what
    the halves hold, and those batches run bit-sliced again (counted), with
    the same results."""
    from bpbc import gpu_engine
    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.gpu_engine import GpuEngine, wordwise_top
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring, score_planes
    from bpbc.traceback import end_cells

    monkeypatch.setenv(gpu_engine.FLAG_FIRST_ENV, "1")
    rng = np.random.default_rng(11)
    patterns = [random_pattern(rng, length, iupac_rate=0.02) for length in pattern_lengths]
    codes, lengths = encode_reads([read for pattern in patterns for read in _reads_with_pieces(rng, pattern, 160)])
    table = PatternTable.build([encode_pattern(p) for p in patterns], ("+", "-"))
    scoring = Scoring(*scoring_values)
    threshold = 40 * scoring.match
    planes, exact_planes = score_planes(threshold), scoring.max_score(max(pattern_lengths)).bit_length()
    wrapped = []
    wordwise = gpu_engine._wordwise_second_pass

    def counted(*args):
        found = wordwise(*args)
        wrapped.append(found[3])
        return found

    monkeypatch.setattr(gpu_engine, "_wordwise_second_pass", counted)
    found = {}
    for setting in ("0", "1"):
        monkeypatch.setenv(gpu_engine.WORDWISE_ENV, setting)
        engine = GpuEngine()
        prepared = engine.prepare(codes, lengths)
        found[setting] = engine.hits(prepared, table, scoring, planes, np.full(len(table), threshold),
                                     exact_planes=exact_planes)
        if setting == "1":
            reads, ks, scores, overflow = found[setting]
            searched = []
            monkeypatch.setattr(GpuEngine, "_searched_ends", lambda self, *args: searched.append(args) or None)
            np.testing.assert_array_equal(engine.end_cells(prepared, table, scoring, exact_planes, reads, ks, scores),
                                          end_cells(codes, lengths, reads, table, ks, scoring))
            assert not searched
    for bit_sliced, word_wise in zip(found["0"], found["1"]):
        np.testing.assert_array_equal(bit_sliced, word_wise)
    reads, ks, scores, overflow = found["1"]
    assert len(reads) > 100 and not overflow.any()
    assert wrapped and any(int(count.get()[0]) > 0 for count in wrapped) == (scores.max() > wordwise_top(scoring))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["parallel", "turn"])
def test_end_cells_are_the_tracebacks(mode, monkeypatch):
    """GpuEngine.end_cells against bpbc.traceback.end_cells (the first cell at
    the score in (read, pattern) order) on every instance of 160 reads
    against a 700 bp pattern (3 stripes) on both strands: pieces of it,
    some twice, and the unrelated strand's low scores (many cells tie);
    with every score known, and with a third unknown (capped)."""
    from bpbc import gpu_engine
    from bpbc.alphabet import encode_pattern, encode_reads
    from bpbc.gpu_engine import GpuEngine
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring
    from bpbc.traceback import end_cells

    monkeypatch.setenv(gpu_engine.STRIPES_ENV, mode)
    rng = np.random.default_rng(5)
    pattern = random_pattern(rng, 700, iupac_rate=0.02)
    assert chain_shape(700)[2] == 3
    codes, lengths = encode_reads(_reads_with_pieces(rng, pattern, 160))
    table = PatternTable.build([encode_pattern(pattern)], ("+", "-"))
    scoring = Scoring()
    rows, ks = np.repeat(np.arange(len(lengths)), 2), np.tile([0, 1], len(lengths))
    expected = end_cells(codes, lengths, rows, table, ks, scoring)
    assert expected[:, 0].max() > 400 and expected[:, 0].min() < 40
    engine = GpuEngine()
    prepared = engine.prepare(codes, lengths)
    np.testing.assert_array_equal(engine.end_cells(prepared, table, scoring, 11, rows, ks, expected[:, 0]), expected)
    unknown = expected[:, 0].copy()
    unknown[::3] = -1  # capped by the screen: the scores are found first
    np.testing.assert_array_equal(engine.end_cells(prepared, table, scoring, 11, rows, ks, unknown), expected)


@pytest.mark.gpu
@pytest.mark.parametrize("flag_first", ["1", "0"])
def test_alignments_from_the_gpus_end_cells_are_the_cpus(flag_first, monkeypatch):
    """The screen's alignments on the GPU, which starts the traceback of long
    instances from the GPU's end cells, equal those without them and the
    CPU engine's. In two passes the second scores every hit in planes enough
    for it, so the end cells are asked with every score known; in one pass
    the hits past the threshold's planes are capped (their scores unknown)."""
    from bpbc import gpu_engine
    from bpbc.gpu_engine import GpuEngine
    from bpbc.traceback import banded

    monkeypatch.setenv(gpu_engine.FLAG_FIRST_ENV, flag_first)
    rng = np.random.default_rng(6)
    pattern = random_pattern(rng, 3000, iupac_rate=0.01)
    reads = _reads_with_pieces(rng, pattern, 200)
    assert banded(np.array([len(r) for r in reads]), 3000).sum() > 100
    found_by_gpu, unknown, kept = [], [], []
    end_cells = GpuEngine.end_cells

    def counted(self, *args):
        found = end_cells(self, *args)
        found_by_gpu.append(int((found[:, 0] >= 0).sum()))
        unknown.append(int((args[-1] < 0).sum()))
        kept.append(sum(len(ends[0]) for ends in args[0].known_ends.values()))  # the second pass's
        return found

    monkeypatch.setattr(GpuEngine, "end_cells", counted)
    found = bpbc.screen(reads, [pattern], threshold=150, device="gpu")
    assert sum(found_by_gpu) > 100
    assert (sum(unknown) == 0) == (flag_first == "1")
    assert (sum(kept) > 100) == (flag_first == "1")
    cpu = bpbc.screen(reads, [pattern], threshold=150, device="cpu")
    monkeypatch.setattr(GpuEngine, "end_cells", None)
    searched = bpbc.screen(reads, [pattern], threshold=150, device="gpu")
    assert len(found.alignments) > 100
    assert found.alignments == searched.alignments == cpu.alignments
