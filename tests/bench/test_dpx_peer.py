"""bench/dpx_peer.cu on the CPU: its recurrences and its chain schedule
(threads of R rows, one column behind the thread above, L + P - 1 steps per
read pair, invalid code outside the pair's columns, best reduced over the
chain) emulated step by step in Python, against the plain reference; the
kernel compiles with nvcc where nvcc is. The device check (python -m bench
dpx) compares the kernel itself with the CPU engine."""

import shutil
import subprocess

import numpy as np
import pytest

from bench import dpx_peer
from bpbc.alphabet import encode_pattern
from bpbc.reference import sw_score_codes
from bpbc.scoring import Scoring

INVALID = 4


def s16(x):
    return ((x + 0x8000) & 0xFFFF) - 0x8000


def emulate_chain(read, masks, rows, lanes, scoring):
    """One read (one 16-bit half) through a chain as dpx_sw runs it."""
    m, length = len(masks), len(read)
    oe, ex, ma, mi = scoring.first_gap, scoring.gap_extend, scoring.match, scoring.mismatch

    def score(row, code):
        mask = int(masks[row]) if row < m else 0
        return ma if code < 4 and (mask >> code) & 1 else -mi

    H = [[0] * rows for _ in range(lanes)]
    E = [[0] * rows for _ in range(lanes)]
    best = [0] * lanes
    out_h = [0] * lanes
    out_f = [0] * lanes
    prev_in_h = [0] * lanes
    for step in range(length + lanes - 1):
        in_h = [0] + out_h[:-1]  # __shfl_up_sync(..., 1, P); lane 0 gets 0
        in_f = [0] + out_f[:-1]
        new_out_h, new_out_f = list(out_h), list(out_f)
        for p in range(lanes):
            j = step - p
            code = int(read[j]) if 0 <= j < length else INVALID
            hd, f = prev_in_h[p], in_f[p]
            prev_in_h[p] = in_h[p]
            for r in range(rows):
                s = score(p * rows + r, code)
                a = s16(max(hd + s, E[p][r]))
                h = max(a, f, 0)
                hd, H[p][r] = H[p][r], h
                t = s16(h - oe)
                E[p][r] = max(E[p][r] - ex, t, 0)
                f = max(f - ex, t, 0)
                best[p] = max(best[p], h)
            new_out_h[p], new_out_f[p] = H[p][rows - 1], f
        out_h, out_f = new_out_h, new_out_f
    return max(best)


@pytest.mark.parametrize("rows, lanes", [(4, 2), (3, 4), (8, 1), (5, 2)])
def test_emulated_schedule_matches_reference(rows, lanes):
    rng = np.random.default_rng(rows * 10 + lanes)
    scoring = Scoring()
    for trial in range(12):
        m = int(rng.integers(max(1, (rows - 1) * lanes + 1), rows * lanes + 1))  # padding rows too
        pattern = "".join(rng.choice(list("ACGTRYN"), m))
        masks = encode_pattern(pattern)
        length = int(rng.integers(1, 40))
        read = rng.integers(0, 5, length).astype(np.uint8)
        if trial % 2:  # plant the pattern so that scores are not all tiny
            piece = rng.integers(0, 4, min(m, length)).astype(np.uint8)
            for k, mask in enumerate(masks[: len(piece)]):
                piece[k] = next(c for c in range(4) if (int(mask) >> c) & 1)
            read[: len(piece)] = piece
        assert emulate_chain(read, masks, rows, lanes, scoring) == sw_score_codes(read, masks, scoring)


def test_candidate_shapes_cover_the_pattern():
    for m in (24, 60, 128, 150, 5):
        shapes = dpx_peer.candidate_shapes(m)
        assert shapes, m
        for rows, lanes in shapes:
            assert rows * lanes >= m and 32 % lanes == 0 and 4 <= rows <= 32


def test_check_data_roundtrip(tmp_path, monkeypatch):
    monkeypatch.setattr(dpx_peer, "CHECK_CASES", [(24, 40, 31), (60, 70, 9)])
    path = tmp_path / "check.npz"
    dpx_peer.make_check(path)
    data = np.load(path)
    assert data["cases"].tolist() == [[24, 40, 31], [60, 70, 9]]
    for k, (m, length, n) in enumerate(data["cases"].tolist()):
        assert data[f"codes{k}"].shape == (n, length) and len(data[f"masks{k}"]) == m
        for i in range(n):
            assert data[f"scores{k}"][i] == sw_score_codes(data[f"codes{k}"][i], data[f"masks{k}"], Scoring())


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_peer_compiles_with_nvcc(tmp_path):
    source = tmp_path / "peer.cu"
    source.write_text(dpx_peer.PEER_PATH.read_text() + "".join(
        f"void* instance{k} = (void*)&{dpx_peer.expression(r, p, Scoring(), mode, u)};\n"
        for k, (r, p, mode, u) in enumerate([(16, 8, 0, 2), (15, 4, 1, 1), (24, 1, 0, 2)])))
    result = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-cubin", "-o", str(tmp_path / "peer.cubin"),
                             str(source)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
