"""--action trim and mask (bpbc.trimming): the end-overlap DP against a plain
reference and parasail, the edits, the outputs, golden files, bad input.

Golden files: tests/data/expected_trim*.fq and expected_mask*.fq were written
by the real command, from the repository root (X is trim or mask)::

    python -m bpbc tests/data/reads.fq tests/data/patterns.fa --min-score-fraction 0.8 --action X \\
        --trimmed tests/data/expected_X.fq -o /dev/null -q
    python -m bpbc tests/data/reads_1.fq -2 tests/data/reads_2.fq tests/data/patterns.fa \\
        --min-score-fraction 0.8 --action X --trimmed tests/data/expected_X_1.fq \\
        --trimmed2 tests/data/expected_X_2.fq -o /dev/null -q

tests/bpbc/test_outputs.py checks them, both mates, against the independent
oracle of tests/oracle.py.
"""

from __future__ import annotations

import json
import threading
from fractions import Fraction
from pathlib import Path

import dnaio
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpbc.alphabet import READ_CODE, encode_pattern
from bpbc import trimming
from bpbc.cli import main
from bpbc.scoring import Scoring
from bpbc.chunks import RawFastqChunk
from bpbc.trimming import _CODE_IDENTITY, _END3, _END5, EditedFastqChunk, EndTasks, end_overlaps, overlap_slack, \
    overlap_thresholds
from tests import oracle
from tests.oracle import end_overlap_scores
from tests.bpbc.conftest import SCORINGS, _parasail_matrix, mutate, parasail_pattern_text, parasail_read_text, \
    pattern_texts, random_pattern, random_read, read_texts, scoring_id

DATA = Path(__file__).resolve().parents[1] / "data"
READS, READS_1, READS_2, PATTERNS = (DATA / name for name in ("reads.fq", "reads_1.fq", "reads_2.fq", "patterns.fa"))
GOLDEN_OPTIONS = ["--min-score-fraction", "0.8"]


# --- the plain reference ------------------------------------------------------

def reference_scores(read_codes, pattern_masks, end: int, scoring: Scoring) -> tuple[list, list]:
    """The end-overlap DP of bpbc.trimming's docstring, plainly (tests/oracle.py):
    (H[n][L], start row of its alignment) for L = 0..m-1 (the DP on the
    reversed read and pattern for a 5' end); -inf where no alignment exists."""
    read = [int(c) for c in read_codes]
    sets = [frozenset(b for b in range(4) if (int(mask) >> b) & 1) for mask in pattern_masks]
    if end == _END5:
        read, sets = read[::-1], sets[::-1]
    return end_overlap_scores(read, sets[:-1], oracle.Scoring(scoring.match, scoring.mismatch, scoring.gap_open,
                                                               scoring.gap_extend))


def reference_overlap(read_codes, pattern_masks, end: int, thresholds, min_overlap: int, scoring: Scoring):
    """(score, cut, overlap) of the best passing end overlap, or None."""
    scores, starts = reference_scores(read_codes, pattern_masks, end, scoring)
    best = None
    for length in range(min_overlap, len(scores)):
        value, start = scores[length], starts[length]
        if value >= thresholds[length] and (best is None or value > best[0] or (value == best[0] and start < best[1])):
            best = (int(value), start, length)
    if best is None:
        return None
    n = len(read_codes)
    return best[0], best[1] if end == _END3 else n - best[1], best[2]


def one_task(masks: np.ndarray, end: int, thresholds: np.ndarray, scoring: Scoring) -> EndTasks:
    dp = masks[:-1] if end == _END3 else masks[::-1][:-1]
    return EndTasks(np.zeros(1, np.int64), np.zeros(1, np.int64), np.array([end], np.int64),
                    np.ascontiguousarray(dp, np.uint8), np.array([0, len(dp)], np.int64),
                    np.array([overlap_slack(thresholds, scoring)], np.int64), thresholds.reshape(1, -1).copy())


def kernel_overlaps(reads: list[str], masks: np.ndarray, end: int, thresholds, min_overlap: int, scoring: Scoring):
    """The kernel's result per read, from the sequence bytes."""
    data = "".join(reads).encode()
    lengths = np.array([len(read) for read in reads], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    score, cut, overlap = end_overlaps(np.frombuffer(data, np.uint8), starts, lengths, READ_CODE,
                                       one_task(masks, end, thresholds, scoring), min_overlap, scoring)
    return [None if score[r, 0] == 0 else (int(score[r, 0]), int(cut[r, 0]), int(overlap[r, 0]))
            for r in range(len(reads))]


def codes_of(read: str) -> np.ndarray:
    return READ_CODE[np.frombuffer(read.encode(), np.uint8)]


def planted_reads(rng, pattern: str, end: int, count: int, max_flank: int = 90) -> list[str]:
    """Reads whose end (3') or start (5') holds a mutated piece of the pattern's prefix (suffix), some not."""
    reads = []
    for _ in range(count):
        flank = random_read(rng, int(rng.integers(0, max_flank)), n_rate=0.05)
        length = int(rng.integers(1, len(pattern) + 1))
        concrete = "".join("ACGT"[int(np.argmax([(m >> b) & 1 for b in range(4)]))]
                           for m in encode_pattern(pattern))
        piece = concrete[:length] if end == _END3 else concrete[len(concrete) - length:]
        piece = mutate(rng, piece, float(rng.choice([0.0, 0.05, 0.2])))
        if rng.random() < 0.1:
            piece = ""
        reads.append(flank + piece if end == _END3 else piece + flank)
    return reads


# --- the end-overlap DP -------------------------------------------------------

@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
def test_reference_scores_are_parasails_semi_global_scores(scoring):
    """Every overlap length's score: parasail's semi-global alignment with
    free leading read bases (sg_db: gaps at the database's beginning) for a 3'
    end, free trailing read bases (sg_de) for a 5' end. The chosen cut admits
    an alignment of that score (parasail's global nw from the cut)."""
    import parasail

    rng = np.random.default_rng(30)
    matrix = _parasail_matrix(scoring)
    first_gap = scoring.gap_open + scoring.gap_extend
    for _ in range(60):
        pattern = random_pattern(rng, int(rng.integers(2, 30)), iupac_rate=0.2)
        masks = encode_pattern(pattern)
        m = len(pattern)
        for end in (_END3, _END5):
            for read in planted_reads(rng, pattern, end, 4, max_flank=40):
                if not read:
                    continue
                scores, _ = reference_scores(codes_of(read), masks, end, scoring)
                for length in range(1, m):
                    piece = pattern[:length] if end == _END3 else pattern[m - length:]
                    align = parasail.sg_db if end == _END3 else parasail.sg_de
                    expected = align(parasail_pattern_text(piece), parasail_read_text(read), first_gap,
                                     scoring.gap_extend, matrix).score
                    if end == _END5:  # sg_de's best end leaves out column 0: the piece deleted before the read
                        expected = max(expected, -(scoring.gap_open + length * scoring.gap_extend))
                    assert scores[length] == expected, (read, pattern, end, length)
                thresholds = overlap_thresholds(Fraction(1, 2), scoring.match, m)
                found = reference_overlap(codes_of(read), masks, end, thresholds, 1, scoring)
                if found is not None:
                    score, cut, length = found
                    piece = pattern[:length] if end == _END3 else pattern[m - length:]
                    rest = read[cut:] if end == _END3 else read[:cut]
                    assert rest, (read, pattern, end, found)
                    assert parasail.nw(parasail_pattern_text(piece), parasail_read_text(rest), first_gap,
                                       scoring.gap_extend, matrix).score == score


@pytest.mark.parametrize("second_pass", ["serial", "parallel"])
@pytest.mark.parametrize("scoring", SCORINGS, ids=scoring_id)
@pytest.mark.parametrize("end", [_END3, _END5], ids=["3prime", "5prime"])
def test_kernel_matches_the_reference(scoring, end, second_pass, monkeypatch):
    """Score, cut and overlap of every read: short reads (padded lanes), long
    ones (the window and the band), N, IUPAC patterns, indels, every
    fraction and minimum overlap; more than 256 reads take the first pass's
    parallel kernel, and the second pass runs on its serial twin or (as on
    more than 2 threads from 16,384 flagged reads) on its parallel kernel."""
    if second_pass == "parallel":
        monkeypatch.setattr(trimming, "_SECOND_PARALLEL_FROM", 1)
        monkeypatch.setattr(trimming, "_SECOND_PARALLEL_THREADS", 1)
    rng = np.random.default_rng(end * 10 + SCORINGS.index(scoring))
    found = 0
    for trial in range(12):
        pattern = random_pattern(rng, int(rng.integers(2, 40)), iupac_rate=0.1)
        masks = encode_pattern(pattern)
        m = len(pattern)
        fraction = Fraction(int(rng.integers(3, 11)), 10)
        thresholds = overlap_thresholds(fraction, scoring.match, m)
        min_overlap = int(rng.integers(1, m + 1))
        reads = planted_reads(rng, pattern, end, 300 if trial == 0 else 40)
        got = kernel_overlaps(reads, masks, end, thresholds, min_overlap, scoring)
        for read, result in zip(reads, got):
            expected = reference_overlap(codes_of(read), masks, end, thresholds, min_overlap, scoring)
            assert result == expected, (read, pattern, fraction, min_overlap)
            found += expected is not None
    assert found > 50  # the planted pieces are found


@settings(max_examples=80, deadline=None)
@given(pattern=pattern_texts(min_size=1, max_size=25), reads=st.lists(read_texts(max_size=40), min_size=1,
                                                                     max_size=20),
       end=st.sampled_from([_END3, _END5]), numerator=st.integers(1, 10), min_overlap=st.integers(1, 25))
def test_kernel_matches_the_reference_on_any_input(pattern, reads, end, numerator, min_overlap):
    scoring = Scoring()
    masks = encode_pattern(pattern)
    thresholds = overlap_thresholds(Fraction(numerator, 10), scoring.match, len(pattern))
    got = kernel_overlaps(reads, masks, end, thresholds, min_overlap, scoring)
    for read, result in zip(reads, got):
        assert result == reference_overlap(codes_of(read), masks, end, thresholds, min_overlap, scoring)


def test_codes_and_sequence_bytes_give_the_same_overlaps():
    """Reads given as codes (FASTA, pairs) take the identity table."""
    rng = np.random.default_rng(5)
    pattern = "AGATCGGAAGAGCACACGTCTGAACT"
    masks = encode_pattern(pattern)
    thresholds = overlap_thresholds(Fraction(4, 5), 2, len(pattern))
    reads = planted_reads(rng, pattern, _END3, 50)
    width = max(len(read) for read in reads)
    codes = np.full((len(reads), width), 4, np.uint8)
    for r, read in enumerate(reads):
        codes[r, :len(read)] = codes_of(read)
    lengths = np.array([len(read) for read in reads], np.int64)
    tasks = one_task(masks, _END3, thresholds, Scoring())
    from_codes = end_overlaps(codes.reshape(-1), np.arange(len(reads), dtype=np.int64) * width, lengths,
                              _CODE_IDENTITY, tasks, 3, Scoring())
    data = "".join(reads).encode()
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    from_bytes = end_overlaps(np.frombuffer(data, np.uint8), starts, lengths, READ_CODE, tasks, 3, Scoring())
    for a, b in zip(from_codes, from_bytes):
        assert np.array_equal(a, b)


def test_thresholds_and_slack():
    assert overlap_thresholds(Fraction(4, 5), 2, 6).tolist() == [0, 2, 4, 5, 7, 8]  # ceil(1.6 L)
    # a 1-base insertion costs open + extend = 7: a passing 3-base overlap (5 of 6) cannot pay it
    assert overlap_slack(overlap_thresholds(Fraction(4, 5), 2, 6), Scoring()) == 0
    # a 32-base overlap needs 52 of 64: 12 to spare, 5 + 2 x 3 <= 12: three inserted bases at most
    assert overlap_slack(overlap_thresholds(Fraction(4, 5), 2, 33), Scoring()) == 3


# --- edited records ------------------------------------------------------------

class Scratch:
    """What EditedFastqChunk.write needs of a ReadsOutput."""

    def __init__(self):
        self.written = b""

    def scratch(self, size: int) -> np.ndarray:
        return np.full(size + 7, 255, np.uint8)

    def write_bytes(self, data) -> None:
        self.written += bytes(data)


def test_edited_fastq_records_are_rebuilt_exactly():
    rng = np.random.default_rng(8)
    names, sequences, qualities = [], [], []
    for r in range(200):
        n = int(rng.integers(0, 30))
        names.append(f"r{r} comment {r}" if r % 3 else f"r{r}")
        sequences.append(random_read(rng, n))
        qualities.append("".join(chr(33 + int(q)) for q in rng.integers(0, 40, n)))
    data = "".join(f"@{a}\n{s}\n+\n{q}\n" for a, s, q in zip(names, sequences, qualities)).encode()
    rec_start, seq_start, position = [], [], 0
    for a, s in zip(names, sequences):
        rec_start.append(position)
        seq_start.append(position + len(a) + 2)
        position += len(a) + 2 * len(s) + 6
    lengths = np.array([len(s) for s in sequences], np.int64)
    chunk = RawFastqChunk(data, np.array(rec_start, np.int64), np.array(rec_start[1:] + [position], np.int64),
                          np.array(seq_start, np.int64), lengths)
    keep_start = np.array([int(rng.integers(0, n + 1)) for n in lengths], np.int64)
    keep_end = np.array([int(rng.integers(a, n + 1)) for a, n in zip(keep_start, lengths)], np.int64)
    spans = [[sorted(pair) for pair in rng.integers(0, n + 1, (int(rng.integers(0, 3)), 2)).tolist()]
             for n in lengths]
    span_first = np.concatenate([[0], np.cumsum([len(s) for s in spans])]).astype(np.int64)
    span_start = np.array([a for read_spans in spans for a, _ in read_spans], np.int64)
    span_end = np.array([b for read_spans in spans for _, b in read_spans], np.int64)
    expected = []
    for r in range(len(names)):
        sequence = list(sequences[r])
        for a, b in spans[r]:
            sequence[a:b] = "N" * (b - a)
        a, b = keep_start[r], keep_end[r]
        expected.append(f"@{names[r]}\n{''.join(sequence[a:b])}\n+\n{qualities[r][a:b]}\n".encode())
    edited = EditedFastqChunk(chunk, keep_start, keep_end, span_first, span_start, span_end)
    rows = np.sort(rng.choice(len(names), 60, replace=False))
    for chosen, written in ((np.arange(len(names)), edited), (rows, edited), (np.arange(60), edited.subset(rows))):
        output = Scratch()
        written.write(output, chosen)
        picked = rows[chosen] if written is not edited else chosen
        assert output.written == b"".join(expected[r] for r in picked.tolist())


# --- the command ----------------------------------------------------------------

def run_cli(capsys, *args) -> tuple[int, str, str]:
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def records(path) -> list[tuple[str, str, str | None]]:
    with dnaio.open(path) as reader:
        return [(r.name, r.sequence, r.qualities) for r in reader]


def write_fastq(path: Path, reads: list[tuple[str, str]]) -> Path:
    path.write_text("".join(f"@{name}\n{sequence}\n+\n{'I' * len(sequence)}\n" for name, sequence in reads))
    return path


@pytest.mark.parametrize("chunk_size", [None, 3])
@pytest.mark.parametrize("action", ["trim", "mask"])
def test_golden_files(capsys, tmp_path, action, chunk_size):
    extra = [] if chunk_size is None else ["--chunk-size", chunk_size]
    status, _, err = run_cli(capsys, READS, PATTERNS, *GOLDEN_OPTIONS, "--action", action, "--trimmed",
                             tmp_path / "t.fq", "-o", tmp_path / "o.paf", *extra, "-q")
    assert (status, err) == (0, "")
    assert (tmp_path / "t.fq").read_bytes() == (DATA / f"expected_{action}.fq").read_bytes()
    status, _, err = run_cli(capsys, READS_1, "-2", READS_2, PATTERNS, *GOLDEN_OPTIONS, "--action", action,
                             "--trimmed", tmp_path / "t_1.fq", "--trimmed2", tmp_path / "t_2.fq", "-o",
                             tmp_path / "o.paf", *extra, "-q")
    assert (status, err) == (0, "")
    for mate in "12":
        assert (tmp_path / f"t_{mate}.fq").read_bytes() == (DATA / f"expected_{action}_{mate}.fq").read_bytes()


def test_edits_are_made_in_the_trimmers_thread(capsys, tmp_path, monkeypatch):
    """With threads to spare, a chunk's edits are made in the trimmer's
    thread, not in the writer's (which only writes), and give the golden
    file."""
    threads = set()
    real_edit = trimming.Trimmer.edit

    def recording_edit(self, *args):
        threads.add(threading.current_thread().name.split("_")[0])
        return real_edit(self, *args)

    monkeypatch.setattr(trimming.Trimmer, "edit", recording_edit)
    status, _, err = run_cli(capsys, READS, PATTERNS, *GOLDEN_OPTIONS, "--action", "trim", "--trimmed",
                             tmp_path / "t.fq", "-o", tmp_path / "o.paf", "--chunk-size", 3, "--threads", 2, "-q")
    assert (status, err) == (0, "")
    assert threads == {"bpbc-trim"}
    assert (tmp_path / "t.fq").read_bytes() == (DATA / "expected_trim.fq").read_bytes()


def test_interleaved_and_fasta_inputs_trim_the_same(capsys, tmp_path):
    status, _, _ = run_cli(capsys, DATA / "reads_interleaved.fq", "--interleaved", PATTERNS, *GOLDEN_OPTIONS,
                           "--action", "trim", "--trimmed", tmp_path / "t.fq", "-o", tmp_path / "o.paf", "-q")
    assert status == 0
    mates = [records(DATA / f"expected_trim_{mate}.fq") for mate in "12"]
    assert records(tmp_path / "t.fq") == [record for pair in zip(*mates) for record in pair]
    fasta = tmp_path / "reads.fa"
    with dnaio.FastaWriter(fasta) as writer:
        for name, sequence, _ in records(READS):
            writer.write(dnaio.SequenceRecord(name, sequence))
    status, _, _ = run_cli(capsys, fasta, PATTERNS, *GOLDEN_OPTIONS, "--action", "trim", "--trimmed",
                           tmp_path / "t.fa", "-o", tmp_path / "o.paf", "-q")
    assert status == 0
    assert [(n, s) for n, s, _ in records(tmp_path / "t.fa")] == [(n, s) for n, s, _ in
                                                                  records(DATA / "expected_trim.fq")]


@pytest.mark.parametrize("action", ["trim", "mask"])
def test_matched_gets_the_edited_passing_reads_and_unmatched_the_others_unchanged(capsys, tmp_path, action):
    status, _, _ = run_cli(capsys, READS, PATTERNS, *GOLDEN_OPTIONS, "--action", action, "--matched",
                           tmp_path / "m.fq", "--unmatched", tmp_path / "u.fq", "--json", tmp_path / "s.json",
                           "-o", tmp_path / "o.paf", "-q")
    assert status == 0
    originals, edited = records(READS), records(DATA / f"expected_{action}.fq")
    matched, unmatched = records(tmp_path / "m.fq"), records(tmp_path / "u.fq")
    summary = json.loads((tmp_path / "s.json").read_text())
    assert len(matched) + len(unmatched) == len(originals)
    assert set(unmatched) <= set(originals)
    assert set(matched) <= set(edited)
    # every read edited is matched (the partial adapters too: r07, r14), as is every read with a hit
    changed = {e for e, o in zip(edited, originals) if e != o}
    assert changed <= set(matched) and {"r07", "r14"} <= {name.split()[0] for name, _, _ in changed}
    with_hits = {line.split("\t")[0] for line in (tmp_path / "o.paf").read_text().splitlines()}
    assert {name.split()[0] for name, _, _ in matched} == with_hits | {name.split()[0] for name, _, _ in changed}
    assert summary["action"] == action and summary["reads_trimmed"] == len(changed)
    bases = sum(len(o[1]) - len(e[1]) if action == "trim" else sum(a != b for a, b in zip(o[1], e[1]))
                for e, o in zip(edited, originals))
    # a masked span may hold bases that were N already (r11)
    unseen = 0 if action == "trim" else sum(o[1].upper().count("N") for o in originals)
    assert bases <= summary["bases_trimmed"] <= bases + unseen
    assert sum(p["trimmed_bases"] for p in summary["patterns"]) >= bases
    assert summary["reads_passing"] == len(with_hits)  # the screen's figures stay the screen's


def test_action_none_json_has_no_trimming_keys(capsys, tmp_path):
    status, _, _ = run_cli(capsys, READS, PATTERNS, "-t", "20", "--json", tmp_path / "s.json", "-q")
    summary = json.loads((tmp_path / "s.json").read_text())
    assert status == 0 and "action" not in summary and "trimmed_reads" not in summary["patterns"][0]


def adapter_run(capsys, tmp_path, reads, patterns: str, *options):
    reads_path = write_fastq(tmp_path / "r.fq", reads)
    (tmp_path / "p.fa").write_text(patterns)
    status, out, err = run_cli(capsys, reads_path, tmp_path / "p.fa", "--action", "trim", "--strand", "forward",
                               "--min-score-fraction", "0.8", "--trimmed", tmp_path / "t.fq", "--json",
                               tmp_path / "s.json", "-o", tmp_path / "o.paf", "-q", *options)
    assert (status, err) == (0, ""), err
    return [sequence for _, sequence, _ in records(tmp_path / "t.fq")], json.loads((tmp_path / "s.json").read_text())


ADAPTER = "AGATCGGAAGAGCACACGTCTGAACTCCAGTCA"
INSERT = "CCTTGGCATTACCGGTTAGCCATGCAAGTTCG"


def test_three_five_and_anywhere_adapters(capsys, tmp_path):
    reads = [
        ("three", INSERT + ADAPTER + "TTTT"),
        ("three_first_base_substituted", INSERT + "C" + ADAPTER[1:] + "TT"),
        ("three_partial", INSERT + ADAPTER[:7]),
        ("five", ADAPTER + INSERT),
        ("five_partial", ADAPTER[-6:] + INSERT),
        ("none", INSERT),
    ]
    patterns = f">a3\n{ADAPTER}\n"
    trimmed, summary = adapter_run(capsys, tmp_path, reads, patterns)
    assert trimmed == [INSERT, INSERT, INSERT, "", ADAPTER[-6:] + INSERT, INSERT]
    assert summary["patterns"][0]["trimmed_reads"] == 4 and summary["too_short"] == 0
    trimmed, _ = adapter_run(capsys, tmp_path, reads, patterns.replace("a3", "a5 adapter=5prime"))
    assert trimmed == ["TTTT", "TT", INSERT + ADAPTER[:7], INSERT, INSERT, INSERT]
    trimmed, _ = adapter_run(capsys, tmp_path, reads, patterns, "--adapter-kind", "5prime")
    assert trimmed == ["TTTT", "TT", INSERT + ADAPTER[:7], INSERT, INSERT, INSERT]
    # anywhere: 5' where the adapter reaches the read's start, else 3'; partial at either end
    trimmed, _ = adapter_run(capsys, tmp_path, reads, patterns.replace("a3", "a adapter=anywhere"))
    assert trimmed == [INSERT, INSERT, INSERT, INSERT, INSERT, INSERT]


def test_min_overlap_and_the_partial_threshold(capsys, tmp_path):
    reads = [(f"r{k}", INSERT + ADAPTER[:k]) for k in range(1, 12)]
    trimmed, _ = adapter_run(capsys, tmp_path, reads, f">a\n{ADAPTER}\n")
    assert trimmed == [INSERT + ADAPTER[:k] for k in (1, 2)] + [INSERT] * 9
    trimmed, _ = adapter_run(capsys, tmp_path, reads, f">a\n{ADAPTER}\n", "--min-overlap", "5")
    assert trimmed == [INSERT + ADAPTER[:k] for k in (1, 2, 3, 4)] + [INSERT] * 7
    # a substitution in a 10-base overlap: 9 x 2 - 3 = 15 < ceil(0.8 x 2 x 10) = 16
    substituted = [("s", INSERT + ADAPTER[:4] + "T" + ADAPTER[5:10])]
    trimmed, _ = adapter_run(capsys, tmp_path, substituted, f">a\n{ADAPTER}\n")
    assert trimmed == [INSERT + ADAPTER[:4] + "T" + ADAPTER[5:10]]
    trimmed, _ = adapter_run(capsys, tmp_path, substituted, f">a\n{ADAPTER}\n", "--min-score-fraction", "0.7")
    assert trimmed == [INSERT]


def test_the_leftmost_cut_of_several_patterns_wins_and_is_credited(capsys, tmp_path):
    other = "TTGACCGAGGCATACCTAGGAC"
    reads = [("both", INSERT + other + INSERT + ADAPTER), ("one", INSERT + ADAPTER + other)]
    trimmed, summary = adapter_run(capsys, tmp_path, reads, f">a\n{ADAPTER}\n>b\n{other}\n")
    assert trimmed == [INSERT, INSERT]
    a, b = summary["patterns"]
    assert (a["trimmed_reads"], a["trimmed_bases"]) == (1, len(ADAPTER + other))
    assert (b["trimmed_reads"], b["trimmed_bases"]) == (1, len(other + INSERT + ADAPTER))


def test_reverse_strand_hits_only_with_trim_strand_both(capsys, tmp_path):
    reverse = ADAPTER[::-1].translate(str.maketrans("ACGT", "TGCA"))
    reads = [("minus", INSERT + reverse + "GG")]
    trimmed, _ = adapter_run(capsys, tmp_path, reads, f">a\n{ADAPTER}\n", "--strand", "both")
    assert trimmed == [INSERT + reverse + "GG"]
    trimmed, _ = adapter_run(capsys, tmp_path, reads, f">a\n{ADAPTER}\n", "--strand", "both", "--trim-strand",
                             "both")
    assert trimmed == [INSERT]


def test_mask_keeps_lengths_names_and_qualities(capsys, tmp_path):
    reads = [("r1 comment", INSERT + ADAPTER + "TTTT"), ("r2", INSERT + ADAPTER[:5])]
    trimmed, summary = adapter_run(capsys, tmp_path, reads, f">a\n{ADAPTER}\n", "--action", "mask")
    assert trimmed == [INSERT + "N" * len(ADAPTER) + "TTTT", INSERT + "NNNNN"]
    assert [name for name, _, _ in records(tmp_path / "t.fq")] == ["r1 comment", "r2"]
    assert summary["bases_trimmed"] == len(ADAPTER) + 5


def test_empty_records_stay_unless_min_length_drops_the_pair(capsys, tmp_path):
    pairs = [("p1", ADAPTER + INSERT, INSERT), ("p2", INSERT + ADAPTER, INSERT), ("p3", INSERT, INSERT)]
    first = write_fastq(tmp_path / "r_1.fq", [(f"{n}/1", s) for n, s, _ in pairs])
    second = write_fastq(tmp_path / "r_2.fq", [(f"{n}/2", s) for n, _, s in pairs])
    (tmp_path / "p.fa").write_text(f">a\n{ADAPTER}\n")
    common = ["--action", "trim", "--min-score-fraction", "0.8", "-o", tmp_path / "o.paf", "-q"]
    outputs = ["--trimmed", tmp_path / "t_1.fq", "--trimmed2", tmp_path / "t_2.fq", "--matched", tmp_path / "m_1.fq",
               "--matched2", tmp_path / "m_2.fq", "--json", tmp_path / "s.json"]
    status, _, _ = run_cli(capsys, first, "-2", second, tmp_path / "p.fa", *common, *outputs)
    assert status == 0
    assert [s for _, s, _ in records(tmp_path / "t_1.fq")] == ["", INSERT, INSERT]
    status, _, _ = run_cli(capsys, first, "-2", second, tmp_path / "p.fa", *common, *outputs, "--min-length", "1")
    assert status == 0
    assert [n for n, _, _ in records(tmp_path / "t_1.fq")] == ["p2/1", "p3/1"]
    assert [n for n, _, _ in records(tmp_path / "t_2.fq")] == ["p2/2", "p3/2"]
    assert [n for n, _, _ in records(tmp_path / "m_2.fq")] == ["p2/2"]
    assert json.loads((tmp_path / "s.json").read_text())["too_short"] == 1


def test_a_read_with_only_a_partial_adapter_is_demultiplexed_to_it(capsys, tmp_path):
    reads_path = write_fastq(tmp_path / "r.fq", [("full", INSERT + ADAPTER), ("partial", INSERT + ADAPTER[:6]),
                                                 ("none", INSERT)])
    (tmp_path / "p.fa").write_text(f">a\n{ADAPTER}\n>b\nTTGACCGAGGCATACCTAGGAC\n")
    status, _, _ = run_cli(capsys, reads_path, tmp_path / "p.fa", "--action", "trim", "--min-score-fraction", "0.8",
                           "--matched", tmp_path / "{name}.fq", "--unmatched", tmp_path / "u.fq", "-q")
    assert status == 0
    assert records(tmp_path / "a.fq") == [("full", INSERT, "I" * len(INSERT)), ("partial", INSERT, "I" * len(INSERT))]
    assert [n for n, _, _ in records(tmp_path / "u.fq")] == ["none"] and not (tmp_path / "b.fq").exists()


def _no_host_pass(*args, **kwargs):
    raise AssertionError("the host's bit-sliced first pass ran in a GPU run")


@pytest.mark.gpu
@pytest.mark.parametrize("action", ["trim", "mask"])
def test_gpu_trims_as_the_cpu(capsys, tmp_path, monkeypatch, action):
    """The golden pairs: the same trimmed (masked) files from both devices;
    the GPU run decides the end overlaps on the GPU, over the screen's copy
    of the reads (the host's bit-sliced pass never runs)."""
    from bpbc.end_overlap import Decision

    outputs = {}
    for device in ("cpu", "gpu"):
        if device == "gpu":
            monkeypatch.setattr(Decision, "flags", _no_host_pass)
        status, _, err = run_cli(capsys, READS_1, "-2", READS_2, PATTERNS, *GOLDEN_OPTIONS, "--action", action,
                                 "--device", device, "--trimmed", tmp_path / f"{device}_1.fq", "--trimmed2",
                                 tmp_path / f"{device}_2.fq", "-o", tmp_path / "o.paf", "-q")
        assert (status, err) == (0, "")
        outputs[device] = [(tmp_path / f"{device}_{mate}.fq").read_bytes() for mate in "12"]
    assert outputs["cpu"] == outputs["gpu"]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["3prime", "5prime", "anywhere"])
def test_gpu_trims_planted_reads_as_the_cpu(capsys, tmp_path, monkeypatch, kind):
    """20,000 planted reads in batches of 3,000 (a partial last one), FASTQ
    and FASTA (reads from codes), trimmed and masked, both strands: every
    output and the JSON figures the same from both devices, the end overlaps
    decided on the GPU."""
    from bench.trimming import planted_reads

    from bpbc.end_overlap import Decision

    data, _, _ = planted_reads(20_000, 150, 20, seed=11)
    (tmp_path / "r.fq").write_bytes(data)
    lines = data.split(b"\n")
    (tmp_path / "r.fa").write_bytes(b"".join(b">" + lines[k][1:] + b"\n" + lines[k + 1] + b"\n"
                                             for k in range(0, len(lines) - 1, 4)))
    (tmp_path / "p.fa").write_text(f">a adapter={kind}\n{ADAPTER}\n>b adapter={kind}\n{ADAPTER[:12]}\n"
                                   f">c\nGTGYCAGCMGCCGCGGTAA\n")
    for reads in ("r.fq", "r.fa"):
        for action in ("trim", "mask"):
            outputs = {}
            for device in ("cpu", "gpu"):
                with monkeypatch.context() as patched:
                    if device == "gpu":
                        patched.setattr(Decision, "flags", _no_host_pass)
                    out = tmp_path / device
                    out.mkdir(exist_ok=True)
                    status, _, err = run_cli(
                        capsys, tmp_path / reads, tmp_path / "p.fa", "--action", action, "--min-score-fraction",
                        "0.8", "--trim-strand", "both", "--device", device, "--chunk-size", "3000", "--trimmed",
                        out / "t", "--matched", out / "m", "--unmatched", out / "u", "-o", out / "o.paf", "--json",
                        out / "s.json", "-q")
                    assert (status, err) == (0, "")
                    summary = json.loads((out / "s.json").read_text())
                    outputs[device] = ([(out / name).read_bytes() for name in ("t", "m", "u", "o.paf")],
                                       summary["patterns"], summary["reads_trimmed"], summary["bases_trimmed"])
            assert outputs["cpu"] == outputs["gpu"], (reads, action)
            assert outputs["cpu"][2] > 1000


# --- bad input --------------------------------------------------------------------

BAD = {
    "unknown adapter kind": (">a adapter=3p\nACGTACGTAC\n", ["--action", "trim"],
                             ["p.fa: pattern 'a' (record 1)", "adapter=3p", "3prime, 5prime, anywhere"]),
    "min overlap 0": (None, ["--action", "trim", "--min-overlap", "0"], ["--min-overlap must be at least 1"]),
    "min overlap 0 without action": (None, ["--min-overlap", "0"], ["--min-overlap must be at least 1"]),
    "min overlap above a pattern": (None, ["--action", "mask", "--min-overlap", "20"],
                                    ["--min-overlap 20", "'primer_iupac' (19 bp)"]),
    "trim strand both, forward screen": (None, ["--action", "trim", "--strand", "forward", "--trim-strand", "both"],
                                         ["--trim-strand both needs --strand both"]),
    "trimmed without action": (None, ["--trimmed", "TRIMMED"], ["--trimmed needs --action"]),
    "min length without action": (None, ["--min-length", "5"], ["--min-length needs --action"]),
    "min length negative": (None, ["--action", "trim", "--min-length", "-1"], ["--min-length must be at least 0"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_one_line_error_exit_1_no_output(capsys, tmp_path, case):
    patterns, options, fragments = BAD[case]
    patterns_path = tmp_path / "p.fa"
    patterns_path.write_bytes(PATTERNS.read_bytes() if patterns is None else patterns.encode())
    inputs = sorted(tmp_path.iterdir())
    options = [tmp_path / "t.fq" if option == "TRIMMED" else option for option in options]
    status, out, err = run_cli(capsys, READS, patterns_path, "-t", "20", *options, "-o", tmp_path / "o.paf",
                               "--matched", tmp_path / "m.fq", "--json", tmp_path / "s.json")
    assert (status, out) == (1, "")
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("bpbc-screen: error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment.replace("p.fa", str(patterns_path)) in lines[0], err
    assert sorted(tmp_path.iterdir()) == inputs


def test_dask_refuses_trimming(capsys, tmp_path):
    status, _, err = run_cli(capsys, READS, PATTERNS, "--action", "trim", "--dask", "local:1")
    assert status == 1 and "not with --dask" in err


def test_importing_trimming_leaves_the_screens_modules_for_later():
    """The command imports bpbc.trimming before the reading starts: without
    bpbc.traceback and bpbc.cpu_engine (about 18 ms, the screen's), which the
    screen imports later, beside the reading."""
    import subprocess
    import sys

    code = "import sys, bpbc.trimming; print(sorted(m for m in sys.modules if m.startswith('bpbc')))"
    listed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[2]).stdout
    assert "bpbc.trimming" in listed
    assert "bpbc.traceback" not in listed and "bpbc.cpu_engine" not in listed, listed


@pytest.mark.parametrize("kind", ["3prime", "5prime", "anywhere"])
def test_skipping_overlaps_behind_an_earlier_cut_changes_nothing(capsys, tmp_path, monkeypatch, kind):
    """Trimming computes the end overlaps only of reads whose hits leave the
    end uncut (Trimmer._overlaps_needed, where edit computes them: --threads
    1): every read's cut and credit stay, so the trimmer's thread, which
    computes every read's, trims the same."""
    from bench.trimming import planted_reads

    from bpbc.trimming import Trimmer

    data, _, _ = planted_reads(3000, 150, 20, seed=7)
    reads_path = tmp_path / "r.fq"
    reads_path.write_bytes(data)
    # the adapter, and a second pattern that is the adapter's first 12 bases
    (tmp_path / "p.fa").write_text(f">a adapter={kind}\n{ADAPTER}\n>b adapter={kind}\n{ADAPTER[:12]}\n"
                                   f">c adapter={kind}\n{ADAPTER[::-1]}\n")
    outputs = {}
    for skipping in (True, False):
        if not skipping:
            monkeypatch.setattr(Trimmer, "_overlaps_needed", lambda self, lengths, *rest: np.arange(len(lengths)))
        status, _, _ = run_cli(capsys, reads_path, tmp_path / "p.fa", "--action", "trim", "--min-score-fraction",
                               "0.8", "--strand", "forward", "--trimmed", tmp_path / "t.fq", "--json",
                               tmp_path / "s.json", "-o", tmp_path / "o.paf", "-q", "--threads", "1")
        assert status == 0
        summary = json.loads((tmp_path / "s.json").read_text())
        outputs[skipping] = ((tmp_path / "t.fq").read_bytes(), summary["patterns"], summary["bases_trimmed"])
    assert outputs[True] == outputs[False]
    # and the trimmer's thread (every read's overlaps) trims the same
    status, _, _ = run_cli(capsys, reads_path, tmp_path / "p.fa", "--action", "trim", "--min-score-fraction", "0.8",
                           "--strand", "forward", "--trimmed", tmp_path / "t.fq", "-q", "-o", tmp_path / "o.paf")
    assert status == 0 and (tmp_path / "t.fq").read_bytes() == outputs[True][0]
