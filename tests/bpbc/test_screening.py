"""The library call bpbc.screen: its contract, its errors, engine choice."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import bpbc
from bpbc.engines import gpu_unavailable_reason, select_engine
from bpbc.alphabet import encode_pattern, encode_reads
from bpbc.cpu_engine import CpuEngine
from bpbc.reference import sw_score
from bpbc.screener import Screener
from bpbc.scoring import Scoring
from tests.bpbc.alignments import cigar_score
from tests.bpbc.conftest import random_read, reverse_complement_masks

ADAPTER = "AGATCGGAAGAGCACACGTCTGAACTCCAGTCA"
PRIMER = "GTGYCAGCMGCCGCGGTAA"  # degenerate (Y, M)


def revcomp(seq: str) -> str:
    return seq.translate(str.maketrans("ACGT", "TGCA"))[::-1]


@pytest.fixture(scope="module")
def reads():
    rng = np.random.default_rng(2)
    reads = [random_read(rng, int(rng.integers(0, 200))) for _ in range(400)]
    for i in range(0, 400, 5):
        reads[i] = reads[i][:30] + ADAPTER[: 20 + i % 14] + reads[i][30:]
    for i in range(2, 400, 7):
        reads[i] = reads[i][:10] + revcomp("GTGCCAGCAGCCGCGGTAA") + reads[i][10:]
    return reads


@pytest.fixture(scope="module")
def result(reads):
    return bpbc.screen(reads, [ADAPTER, PRIMER], threshold=30, device="cpu")


def test_result_shapes_and_types(result, reads):
    assert result.scores.shape == (len(reads), 2, 2)
    assert result.capped.shape == result.scores.shape and result.capped.dtype == bool
    assert result.strands == ("+", "-")
    assert result.indices.dtype == np.int64
    assert np.array_equal(result.indices, np.unique(result.indices))


def test_dense_scores_are_computed_when_first_read(reads):
    """The screen computes only what the passing instances need; the dense
    table comes from one more pass on first access, also for reads given as
    an iterator, and agrees with the screen's own hits."""
    result = bpbc.screen(iter(reads[:60]), [ADAPTER], threshold=30, device="cpu")
    assert result._scores is None and result._alignments is None
    assert result.scores.shape == (60, 1, 2) and result._dense is None
    assert np.array_equal(result.indices, np.flatnonzero((result.scores >= 30).any(axis=(1, 2))))
    aligned = {(a.read_index, result.strands.index(a.strand)): a.score for a in result.alignments}
    assert set(aligned) == set(zip(*(index.tolist() for index in np.nonzero(result.scores[:, 0, :] >= 30))))
    for (r, s), score in aligned.items():  # exact, or a lower bound where capped
        assert score == result.scores[r, 0, s] or (result.capped[r, 0, s] and score > result.scores[r, 0, s])


def test_indices_are_the_reads_with_a_passing_instance(result):
    passing = np.flatnonzero((result.scores >= 30).any(axis=(1, 2)))
    assert np.array_equal(result.indices, passing)
    planted = set(range(0, 400, 5)) | set(range(2, 400, 7))  # adapters, primers
    assert planted <= set(result.indices.tolist())


def test_scores_are_exact_where_not_capped(result, reads):
    for i in range(0, len(reads), 9):
        for p, pattern in enumerate([ADAPTER, PRIMER]):
            for s, oriented in enumerate([pattern, None]):
                masks = encode_pattern(pattern)
                true = sw_score(reads[i], pattern) if oriented else _score_rc(reads[i], masks)
                if result.capped[i, p, s]:
                    assert true >= result.scores[i, p, s] >= 30
                else:
                    assert result.scores[i, p, s] == true


def _score_rc(read, masks):
    from bpbc.reference import sw_score_codes

    codes, lengths = encode_reads([read])
    return sw_score_codes(codes[0, : lengths[0]], reverse_complement_masks(masks))


def test_one_alignment_per_passing_instance_with_exact_score(result, reads):
    passing = set(zip(*np.nonzero(result.scores >= 30)))
    found = {(a.read_index, a.pattern_index, result.strands.index(a.strand)) for a in result.alignments}
    assert found == passing
    keys = [(a.read_index, a.pattern_index, result.strands.index(a.strand)) for a in result.alignments]
    assert keys == sorted(keys)
    for a in result.alignments[:60]:
        if not result.capped[a.read_index, a.pattern_index, result.strands.index(a.strand)]:
            assert a.score == result.scores[a.read_index, a.pattern_index, result.strands.index(a.strand)]
        pattern = [ADAPTER, PRIMER][a.pattern_index]
        masks = encode_pattern(pattern)
        codes, lengths = encode_reads([reads[a.read_index]])
        read_codes = codes[0, a.read_start:a.read_end]
        if a.strand == "+":
            assert cigar_score(a.cigar, read_codes, masks[a.pattern_start:a.pattern_end]) == a.score
        else:  # the CIGAR reads along the forward pattern: rescore on the reverse-complemented read
            rc_read = (3 - read_codes[::-1]).astype(np.uint8)
            assert cigar_score(a.cigar, rc_read, masks[a.pattern_start:a.pattern_end]) == a.score


def test_exact_scores_mode_never_caps(reads):
    res = bpbc.screen(reads[:100], [ADAPTER], threshold=8, device="cpu", exact_scores=True)
    assert not res.capped.any()
    for i in range(0, 100, 7):
        assert res.scores[i, 0, 0] == sw_score(reads[i], ADAPTER)


def test_capped_scores_are_marked_and_lower_bounds(reads):
    res = bpbc.screen(reads[:100], [ADAPTER], threshold=5, device="cpu")  # 3 planes: cap 7
    assert res.capped.any()
    assert np.all(res.scores[res.capped] == 7)
    for i, _, _ in zip(*np.nonzero(res.capped[:, :, :1])):
        assert sw_score(reads[i], ADAPTER) >= 8


@pytest.mark.parametrize("threshold", [8, 30, 40, 64])
def test_two_pass_scores_equal_one_pass(reads, threshold):
    """The screen's first pass runs one plane short and recomputes the lanes
    it flags: the outcome is the one-pass outcome, lane for lane, including
    batches where most or no lanes are flagged."""
    from bpbc.patterns import PatternTable
    from bpbc.scoring import Scoring, score_planes

    engine = select_engine("cpu")
    screener = bpbc.Screener([ADAPTER, PRIMER, "ACGT" * 8], threshold, engine=engine)
    batch = screener.prepare(reads)
    scores, capped = screener.scores(batch)
    planes = score_planes(threshold)
    table = PatternTable.build([encode_pattern(p) for p in (ADAPTER, PRIMER, "ACGT" * 8)], ("+", "-"))
    one, overflow = engine.scores(batch.prepared, table, Scoring(), planes)
    one[overflow] = (1 << planes) - 1
    assert np.array_equal(scores.reshape(len(reads), -1), one)
    assert np.array_equal(capped.reshape(len(reads), -1), overflow)
    hits = screener.hits(batch)
    read, k = np.nonzero((one >= threshold) | overflow)
    assert np.array_equal(hits.read, read) and np.array_equal(hits.pattern * 2 + hits.strand, k)
    assert np.array_equal(hits.score, one[read, k]) and np.array_equal(hits.capped, overflow[read, k])


def test_long_instances_flag_in_fewer_planes_and_every_hit_is_parasails(monkeypatch):
    """Reads of 1-2 kb against a 1 kb pattern at T = 300 (9 planes): the
    flags-only pass runs at 6 planes (bpbc.scoring.cpu_flag_planes), not 8,
    and the hits and their scores are parasail's. Planted pieces of 40-240
    bases score on both sides of 2**6, 2**8 and T, so the pass flags lanes
    that one at 8 planes would not, and passes lanes from 300 up."""
    from tests.bpbc.conftest import parasail_sw

    rng = np.random.default_rng(41)
    pattern = random_read(rng, 1000)
    reads = []
    for i in range(48):
        read = list(random_read(rng, int(rng.integers(1000, 2001))))
        length = [0, 40, 80, 140, 180, 240][i % 6]
        if length:
            start = int(rng.integers(0, 1000 - length))
            piece = list(pattern[start:start + length])
            for at in rng.integers(0, length, length // 30):
                piece[at] = "ACGT"[(("ACGT".index(piece[at])) + 1) % 4]
            text = "".join(piece) if i % 2 else revcomp("".join(piece))
            at = int(rng.integers(0, len(read) - length))
            read[at:at + length] = text
        reads.append("".join(read))
    engine = CpuEngine()
    used = []
    flagged = engine.flagged
    monkeypatch.setattr(engine, "flagged", lambda prepared, table, scoring, planes: (
        used.append(planes), flagged(prepared, table, scoring, planes))[1])
    result = bpbc.screen(reads, [pattern], threshold=300, engine=engine)
    assert used == [6]
    expected = np.array([[parasail_sw(read, pattern, Scoring()), parasail_sw(revcomp(read), pattern, Scoring())]
                         for read in reads])
    assert ((expected >= 1 << 6) & (expected < 1 << 8)).any() and (expected >= 300).sum() >= 8
    passing = expected >= 300
    assert np.array_equal(result.scores[:, 0, :] >= 300, passing)
    cap = (1 << 9) - 1
    assert np.array_equal(result.scores[:, 0, :][passing], np.minimum(expected, cap)[passing])
    assert np.array_equal(result.capped[:, 0, :][passing], expected[passing] > cap)


def test_prepared_batch_gives_the_same_result(reads, result):
    engine = select_engine("cpu")
    batch = bpbc.ReadBatch.from_reads(reads, engine)
    assert len(batch) == len(reads)
    again = bpbc.screen(batch, [ADAPTER, PRIMER], threshold=30)
    assert np.array_equal(again.scores, result.scores) and np.array_equal(again.indices, result.indices)
    assert again.alignments == result.alignments
    with pytest.raises(ValueError, match="ReadBatch"):
        bpbc.screen(batch, [ADAPTER], threshold=30, engine=select_engine("cpu"))


def test_forward_strand_only_and_inputs_of_every_kind(reads):
    import dnaio

    records = [dnaio.SequenceRecord(f"r{i} extra words", seq) for i, seq in enumerate(reads[:50])]
    as_bytes = [seq.encode() for seq in reads[:50]]
    a = bpbc.screen(records, {"adapter": ADAPTER}, threshold=30, strand="forward", device="cpu")
    b = bpbc.screen(as_bytes, [ADAPTER.lower().encode()], threshold=30, strand="forward", device="cpu")
    assert a.strands == ("+",) and a.scores.shape == (50, 1, 1)
    assert np.array_equal(a.scores, b.scores)
    assert a.pattern_names == ["adapter"]


def test_empty_read_list():
    res = bpbc.screen([], [ADAPTER], threshold=30, device="cpu")
    assert res.indices.size == 0 and res.scores.shape == (0, 1, 2) and res.alignments == []


@pytest.mark.parametrize("threshold, message", [
    (0, "positive"), (-3, "positive"), (67, "best score any read can reach"),
])
def test_bad_thresholds(threshold, message):
    with pytest.raises(ValueError, match=message):
        bpbc.screen(["ACGT"], [ADAPTER], threshold=threshold, device="cpu")


def test_reachable_maximum_is_accepted():
    res = bpbc.screen([ADAPTER], [ADAPTER], threshold=66, device="cpu")
    assert list(res.indices) == [0]


@pytest.mark.parametrize("kwargs, message", [
    ({"match": 0}, "match must be a positive integer"),
    ({"gap_extend": -1}, "gap_extend must be a positive integer"),
    ({"mismatch": 1001}, "mismatch must be at most 1000"),
    ({"strand": "reverse"}, "strand"),
    ({"device": "tpu"}, "device must be one of"),
    ({"threads": 0}, "threads"),
])
def test_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bpbc.screen(["ACGT"], [ADAPTER], threshold=10, **kwargs)


def test_bad_sequences_name_the_record():
    import dnaio

    with pytest.raises(bpbc.SequenceError, match="read r2: character 'Z' at position 3"):
        bpbc.screen([dnaio.SequenceRecord("r1", "ACGT"), dnaio.SequenceRecord("r2 x", "ACZT")], [ADAPTER],
                    threshold=10, device="cpu")
    with pytest.raises(bpbc.SequenceError, match="pattern p: sequence is empty"):
        bpbc.screen(["ACGT"], {"p": ""}, threshold=10, device="cpu")


@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a GPU is usable here")
def test_gpu_without_gpu_says_why():
    with pytest.raises(RuntimeError, match="device='gpu' requested but"):
        bpbc.screen(["ACGT"], [ADAPTER], threshold=10, device="gpu")
    assert select_engine("auto").name == "cpu"  # auto falls back quietly


def test_import_is_cheap():
    code = ("import sys, bpbc\n"
            "heavy = [m for m in ('numba', 'cupy', 'dnaio', 'numpy') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_thresholds_per_pattern(reads):
    """Each pattern passes at its own threshold (and its own plane count),
    against the reference scores."""
    thresholds = [30, 20]
    res = bpbc.screen(reads[:120], [ADAPTER, PRIMER], threshold=thresholds, strand="forward", device="cpu")
    truth = np.array([[sw_score(read, pattern) for pattern in (ADAPTER, PRIMER)] for read in reads[:120]])
    expected = np.flatnonzero((truth >= np.array(thresholds)).any(axis=1))
    assert np.array_equal(res.indices, expected) and len(expected) > 5
    for a in res.alignments:
        assert a.score >= thresholds[a.pattern_index]
    with pytest.raises(ValueError, match="3 thresholds given for 2 patterns"):
        bpbc.screen(reads[:3], [ADAPTER, PRIMER], threshold=[1, 2, 3], device="cpu")
    with pytest.raises(ValueError, match="pattern primer: threshold 60 is above"):
        bpbc.screen(reads[:3], {"adapter": ADAPTER, "primer": PRIMER}, threshold=[30, 60], device="cpu")


class ScarceMemoryEngine(CpuEngine):
    """The CPU engine running out of memory above a batch size, as a GPU with
    little free memory does (preparing above 40 reads, screening above 20)."""

    def prepare(self, codes, lengths):
        if len(lengths) > 40:
            raise MemoryError
        return super().prepare(codes, lengths)

    def prepare_bytes(self, data, seq_start, lengths):
        if len(lengths) > 40:
            raise MemoryError
        return super().prepare_bytes(data, seq_start, lengths)

    def flagged(self, prepared, *args):
        if prepared.n > 20:
            raise MemoryError
        return super().flagged(prepared, *args)

    def scores(self, prepared, *args):
        if prepared.n > 20:
            raise MemoryError
        return super().scores(prepared, *args)


def test_batches_that_run_out_of_memory_are_screened_in_parts(reads):
    patterns = [ADAPTER, PRIMER]
    plain, scarce = Screener(patterns, 30, engine=CpuEngine()), Screener(patterns, 30, engine=ScarceMemoryEngine())
    batch = scarce.prepare(reads[:150])
    assert batch.prepared is None  # the encoder's preparation ran out of memory
    expected, got = plain.run(reads[:150], dense=True), scarce.run(batch, dense=True)
    for field in ("read", "pattern", "strand", "score", "capped"):
        assert np.array_equal(getattr(got.hits, field), getattr(expected.hits, field))
    assert np.array_equal(got.scores, expected.scores) and np.array_equal(got.capped, expected.capped)
    assert len(expected.hits) > 10
    assert got.alignments.to_list() == expected.alignments.to_list()


def test_out_of_memory_on_one_read_is_an_error():
    class NoMemoryEngine(CpuEngine):
        def flagged(self, prepared, *args):
            raise MemoryError

    with pytest.raises(MemoryError, match="the cpu engine ran out of memory screening a single read"):
        Screener([ADAPTER], 30, engine=NoMemoryEngine()).hits(["ACGT" * 20, "A" * 50])


def _form_reads():
    """Reads of every kind the alphabet allows, more than alphabet.GATHER_FROM
    of them: lowercase, N, U, other IUPAC codes, empty reads, hits on both strands."""
    rng = np.random.default_rng(27)
    reads = [random_read(rng, int(rng.integers(0, 180)), n_rate=0.03, lower_rate=0.1) for _ in range(1500)]
    for i in range(0, 1500, 9):
        reads[i] = reads[i][:20] + ADAPTER.lower()[: 22 + i % 12] + reads[i][20:]
    for i in range(4, 1500, 13):
        reads[i] = reads[i][:5] + revcomp(ADAPTER)[3:] + "RYKMU" + reads[i][5:]
    reads[1:4] = ["", "NNNN", "uuuu" + ADAPTER]
    return reads


def _forms(reads):
    import dnaio

    data = "".join(reads).encode()
    offsets = np.zeros(len(reads) + 1, np.int64)
    np.cumsum([len(read) for read in reads], out=offsets[1:])
    return {
        "bytes": [read.encode() for read in reads],
        "records": [dnaio.SequenceRecord(f"r{i} x", read) for i, read in enumerate(reads)],
        "fastq records": [dnaio.SequenceRecord(f"r{i}", read, "F" * len(read)) for i, read in enumerate(reads)],
        "mixed": [read if i % 3 == 0 else read.encode() if i % 3 == 1 else dnaio.SequenceRecord(f"r{i}", read)
                  for i, read in enumerate(reads)],
        "iterator": iter(reads),
        "buffer": bpbc.Reads.from_buffer(data, offsets),
        "array with a lead": bpbc.Reads.from_buffer(np.frombuffer(b"@@" + data, np.uint8), offsets + 2),
        "reads": bpbc.Reads.of(reads),
    }


def _same_result(got, expected, form: str) -> None:
    assert np.array_equal(got.indices, expected.indices), form
    assert got.alignments == expected.alignments, form


@pytest.mark.parametrize("threads", [1, 2])
def test_every_input_form_gives_the_strings_result(monkeypatch, threads):
    """A list of str, copied out on numba's threads, gives what Python's
    own join gave (today's route); every other form gives the same result,
    dense scores included."""
    from bpbc import alphabet

    reads = _form_reads()
    kwargs = dict(threshold=[24, 20], device="cpu", threads=threads)
    patterns = [ADAPTER, PRIMER]
    expected = bpbc.screen(reads, patterns, **kwargs)
    assert len(expected.indices) > 200 and {a.strand for a in expected.alignments} == {"+", "-"}
    with monkeypatch.context() as patch:
        patch.setattr(alphabet, "GATHER_FROM", 10**9)
        joined = bpbc.screen(reads, patterns, **kwargs)
    _same_result(joined, expected, "str joined in Python")
    assert np.array_equal(joined.scores, expected.scores) and np.array_equal(joined.capped, expected.capped)
    for form, given in _forms(reads).items():
        got = bpbc.screen(given, patterns, **kwargs)
        _same_result(got, expected, form)
        if form in ("buffer", "records"):
            assert np.array_equal(got.scores, expected.scores) and np.array_equal(got.capped, expected.capped)


def test_a_result_keeps_its_reads_while_later_calls_reuse_buffers():
    """The text of a list of str goes into a buffer that later calls use
    again, but not while a result still needs it (its dense scores, computed
    on first access, screen the same buffer)."""
    reads = _form_reads()
    expected = bpbc.screen(_forms(reads)["buffer"], [ADAPTER], threshold=24, device="cpu")  # the caller's buffer
    expected_scores, expected_capped = expected.scores, expected.capped
    first = bpbc.screen(reads, [ADAPTER], threshold=24, device="cpu")
    others = [read[::-1] for read in reads]  # as many bases, other text
    for _ in range(3):
        bpbc.screen(others, [ADAPTER], threshold=24, device="cpu")
    assert np.array_equal(first.scores, expected_scores) and np.array_equal(first.capped, expected_capped)
    assert (first.scores >= 24).sum() > 100


@pytest.mark.gpu
def test_every_input_form_gives_the_strings_result_on_the_gpu():
    reads = _form_reads()
    expected = bpbc.screen(reads, [ADAPTER, PRIMER], threshold=24, device="cpu")
    for form, given in {"str": reads, **_forms(reads)}.items():
        _same_result(bpbc.screen(given, [ADAPTER, PRIMER], threshold=24, device="gpu"), expected, form)


def test_screener_calls_take_every_form():
    reads = _form_reads()[:300]
    screener = Screener([ADAPTER], 24, device="cpu")
    expected = screener.run(reads, dense=True)
    for form, given in _forms(reads).items():
        got = screener.run(given, dense=True)
        assert np.array_equal(got.scores, expected.scores), form
        assert got.alignments.to_list() == expected.alignments.to_list(), form


@pytest.mark.parametrize("gather_from", [0, 10**9], ids=["copied in parallel", "joined in python"])
def test_a_bad_byte_names_its_read_in_every_form(monkeypatch, gather_from):
    import dnaio

    from bpbc import alphabet

    monkeypatch.setattr(alphabet, "GATHER_FROM", gather_from)
    reads = ["ACGT" * 10] * 40 + ["ACGT" * 5 + "ACXT", ""] + ["GG"] * 3
    data = "".join(reads).encode()
    offsets = np.zeros(len(reads) + 1, np.int64)
    np.cumsum([len(read) for read in reads], out=offsets[1:])
    cases = [
        (reads, "read read41: character 'X' at position 23 "),
        ([read.encode() for read in reads], "read read41: character 'X' at position 23 "),
        ([dnaio.SequenceRecord(f"r{i} x", read) for i, read in enumerate(reads)], "read r40: character 'X'"),
        (bpbc.Reads.from_buffer(data, offsets), "read read41: character 'X' at position 23 "),
        (bpbc.Reads.from_buffer(data, offsets, names=[f"n{i}" for i in range(45)]), "read n40: character 'X'"),
        (reads[:40] + ["ACGT" * 5 + "AC\xe9T"], "read read41: non-ASCII byte 0xc3 at position 23"),
    ]
    for given, message in cases:
        with pytest.raises(bpbc.SequenceError, match=message):
            bpbc.screen(given, [ADAPTER], threshold=24, device="cpu")


@pytest.mark.parametrize("make", [lambda: Screener([ADAPTER], 24, device="cpu"), lambda: bpbc.Reads.of(["ACGT"])],
                         ids=["Screener", "Reads.of"])
def test_library_calls_ask_for_passive_openmp_waiting_unless_told_otherwise(monkeypatch, make):
    """As the command does (bpbc.engines.set_up_process), before numba may
    first load its OpenMP runtime; a user's own setting stays."""
    import os

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    make()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    make()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_hits_of_several_plane_groups_come_sorted_and_helpers_match_numpy():
    """Patterns whose thresholds need different plane counts are screened
    in groups, whose hits the Screener merges into (read, pattern, strand)
    order; one group's come sorted already (no sort then). The hits are the
    dense scores that pass, in that order."""
    from bpbc.screener import _passing, _rows_and_local, _sorted_pairs

    rng = np.random.default_rng(12)
    patterns = ["ACGTTGCAACGGTAACGT", "GATTACAGATTACAGGGTTA", "TTGACCAGTACGGATCCATG", "CCATGGAACTTGACG"]
    reads = [random_read(rng, int(rng.integers(20, 120))) for _ in range(600)]
    for i in range(0, 600, 2):
        p = patterns[i // 2 % 4]
        reads[i] = reads[i][:7] + p[:len(p) - i // 2 % 3] + reads[i][7:]
    for thresholds in ([12, 36, 20, 28], [20, 20, 20, 20]):  # groups of 4, 5 and 6 planes; one group of 5
        screener = Screener(patterns, threshold=thresholds, device="cpu")
        hits = screener.hits(reads)
        scores, capped = screener.scores(reads)
        read, pattern, strand = np.nonzero(scores >= np.array(thresholds)[None, :, None])
        assert np.array_equal(hits.read, read) and np.array_equal(hits.pattern, pattern)
        assert np.array_equal(hits.strand, strand) and np.array_equal(hits.score, scores[read, pattern, strand])
        assert len(hits) > 300 and len(set(hits.pattern.tolist())) == 4
    for reads_ in (rng.integers(0, 50, 300), np.sort(rng.integers(0, 50, 300)), np.zeros(0, np.int64), np.array([7])):
        rows, local = _rows_and_local(reads_, 60)  # in any order, and sorted (the hits)
        expected_rows, expected_local = np.unique(reads_, return_inverse=True)
        assert np.array_equal(rows, expected_rows) and np.array_equal(local, expected_local)
    assert _sorted_pairs(np.array([0, 0, 1, 3]), np.array([1, 2, 0, 0]))
    assert not _sorted_pairs(np.array([0, 0, 1]), np.array([2, 1, 0]))
    assert not _sorted_pairs(np.array([0, 0]), np.array([1, 1]))
    assert not _sorted_pairs(np.array([1, 0]), np.array([0, 5]))
    # a plane group's passing instances: reaching their threshold, or overflowed (the cap reported); scores
    # from an engine that ran in more planes (up to 63 here) reported as a screen at 5 planes would, capped
    for top in (32, 64):
        values, overflow = rng.integers(0, top, 500).astype(np.int32), rng.random(500) < 0.1
        local, ks = rng.integers(0, 3, 500), np.array([4, 1, 6])
        thresholds, planes = np.array([10, 20, 30]), 5
        read, k, score, capped, exact = _passing(np.arange(500) * 2, local, values, overflow, thresholds, ks, planes)
        keep = overflow | (values >= thresholds[local])
        over = overflow | (values >= 32)
        assert np.array_equal(read, 2 * np.flatnonzero(keep)) and np.array_equal(k, ks[local[keep]])
        assert np.array_equal(score, np.where(over, 31, values)[keep]) and np.array_equal(capped, over[keep])
        assert np.array_equal(exact, np.where(overflow, -1, values)[keep])
        assert score.dtype == np.int32 and 0 < keep.sum() < 450 and overflow[keep].any()
        assert (values[keep & ~overflow] >= 32).any() == (top == 64)


def test_codes_of_rows_encoded_before_are_a_fresh_encoding():
    """The traceback's reads are among the second pass's: a batch hands
    out the codes it encoded for those (cut to the longest read asked
    for), the same as encoding the rows afresh, for any rows asked for
    after (a subset, others, none, unsorted)."""
    rng = np.random.default_rng(13)
    reads = [random_read(rng, int(rng.integers(0, 120)), n_rate=0.05, lower_rate=0.1) for _ in range(300)]
    batch = Screener(["ACGTTGCAACGGTAACGT"], threshold=20, device="cpu").prepare(reads)
    fresh = bpbc.Reads.of(reads)
    first = np.sort(rng.choice(300, 80, replace=False))
    for rows in (first, first[::3], first[5:6], np.zeros(0, np.int64), np.array([first[2], 299, 0]), first[::-1]):
        codes, lengths = batch.codes_of(rows)
        expected_codes, expected_lengths = fresh.subset(rows).encode()
        assert np.array_equal(codes, expected_codes) and np.array_equal(lengths, expected_lengths)
        assert codes.shape == expected_codes.shape
