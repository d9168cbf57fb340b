"""The CPU kernel's 'lut3' cells (bpbc.cpu_engine, bpbc.cpu_vector), CPU only.

The generated statements of a pass run with numpy words in place of vectors:
the synthesised LUT3 networks (bpbc/sw_cell_circuits.py, each proven equal to
the GPU's hand cell) against the CPU's own 2-input cells, on random words,
garbage states included, for every network, both column parities, with and
without the best planes, one and several rows per pass: every state word
(but the F that goes to the next row in registers), best plane and flag
equal, bit for bit.
The compiled kernels are checked against the reference in test_engines.py.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from bpbc import cpu_engine, sw_cells
from bpbc.cpu_engine import KernelShape
from bpbc.scoring import Scoring
from bpbc.sw_cell_circuits import CIRCUITS

LANES = cpu_engine.VECTOR_WORDS
WORDS = 16


def _vload(array, index, lanes=LANES):
    return np.stack(array[index:index + lanes])


def _vstore(array, index, value):
    for k in range(len(value)):
        array[index + k] = value[k]


def _lut3(table, a, b, c):
    return sw_cells.lut3(table, a, b, c)


def _state(rng, size, lanes=32):
    array = np.empty(size, dtype=object)
    for i in range(size):
        array[i] = rng.integers(0, np.iinfo(np.uint64).max, lanes, dtype=np.uint64, endpoint=True)
    return array


def _run_pass(lines, ns, step):
    code = compile("\n".join(lines), "<pass>", "exec")
    for w in range(0, WORDS, step):
        exec(code, ns | {"w": w})


@pytest.mark.parametrize("key", sorted(CIRCUITS), ids=lambda k: f"b{k[0]}")
def test_lut3_pass_equals_the_binary_pass(key):
    planes = key[0]
    scoring = Scoring(*key[1:])
    rng = np.random.default_rng(planes)
    f_slot = 3 * planes * WORDS  # F of a row, in the binary layout
    row_words = cpu_engine._row_words(planes, WORDS)
    for rows in (1, 2, 3):
        for track_best in (True, False):
            for parity in (0, 1):
                state = _state(rng, (rows + 1) * row_words)
                best = _state(rng, planes * WORDS)
                flag = _state(rng, WORDS)
                masks = {f"m{r}": _state(rng, WORDS) for r in range(rows)}
                binary = {"rows": state.copy(), "best": best.copy(), "flag": flag.copy(), "z": np.uint64(0)} | masks
                _run_pass(cpu_engine._pass_statements(planes, scoring, parity, track_best,
                                                      KernelShape(WORDS, rows, "binary"), rows), binary, 1)
                # the lut3 pass takes F of the row above, the best planes and
                # the flag as variables and leaves them there (the kernel
                # carries them in registers)
                lut3 = {"rows": state.copy(), "best": best.copy(), "flag": flag.copy()}
                carried = [f"f{k}" for k in range(planes)] + ["fl"] + (
                    [f"bs{k}" for k in range(planes)] if track_best else [])
                code = compile("\n".join(cpu_engine._lut3_pass_statements(CIRCUITS[key], planes, parity, track_best,
                                                                          WORDS, rows)), "<pass>", "exec")
                # where the binary pass keeps them (F: of the row above the pass; out: of its last row)
                homes = {f"f{k}": ("rows", f_slot + k * WORDS) for k in range(planes)} | {"fl": ("flag", 0)} \
                    | {f"bs{k}": ("best", k * WORDS) for k in range(planes)}
                for w in range(0, WORDS, LANES):
                    ns = {"w": w, "rows": lut3["rows"], "vload": _vload, "vstore": _vstore, "lut3": _lut3} | masks
                    ns |= {name: _vload(lut3[homes[name][0]], homes[name][1] + w) for name in carried}
                    exec(code, ns)
                    for name in carried:
                        array, at = homes[name]
                        _vstore(lut3[array], at + w + (rows * row_words if array == "rows" else 0), ns[name])
                # the binary pass stores F of every row; the lut3 pass of
                # none (above: its last row's, which no cell reads from memory)
                for row in range(rows - 1):
                    at = f_slot + (row + 1) * row_words
                    binary["rows"][at:at + planes * WORDS] = lut3["rows"][at:at + planes * WORDS]
                for name in ("rows", "flag") + (("best",) if track_best else ()):
                    assert all(np.array_equal(x, y) for x, y in zip(lut3[name], binary[name])), \
                        (rows, track_best, parity, name)


def test_lut3_shape_falls_back_to_binary_gates_without_a_network():
    shape = KernelShape(16, 2, "lut3")
    source = cpu_engine._generate_kernel_source(6, Scoring(), True, shape, "t")
    assert "lut3(0x" in source and "vpternlog" not in source
    other = Scoring(match=1, mismatch=4, gap_open=6, gap_extend=1)
    source = cpu_engine._generate_kernel_source(6, other, True, shape, "t")
    assert "lut3" not in source and "gates=binary" in source
    odd_words = cpu_engine._generate_kernel_source(6, Scoring(), True, KernelShape(12, 1, "lut3"), "t")
    assert "lut3" not in odd_words


def test_lut3_is_for_avx512_targets_only(monkeypatch, tmp_path):
    """On a target without AVX-512 a 'lut3' shape compiles with 2-input gates."""
    monkeypatch.setenv("BPBC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cpu_engine, "cpu_target", lambda: cpu_engine.CpuTarget("haswell", "+avx2", "x86_64"))
    cpu_engine.kernel.cache_clear()
    try:
        run = cpu_engine.kernel(5, Scoring(), False, KernelShape(16, 1, "lut3"))
        assert "lut3" not in run.py_func.__globals__
    finally:
        cpu_engine.kernel.cache_clear()


def test_vector_binary_pass_equals_the_scalar_pass():
    """The 'binary' cell written on explicit 4-word vectors (the AVX2 shape:
    vload/vstore/vzero, operators on vectors) computes what the scalar one
    does, word for word, for scorings with and without constant folds."""
    scorings = [Scoring(), Scoring(match=1, mismatch=4, gap_open=6, gap_extend=1),
                Scoring(match=40, mismatch=70, gap_open=60, gap_extend=40)]
    rng = np.random.default_rng(3)
    for scoring in scorings:
        for planes, rows, track_best, parity in ((5, 1, False, 0), (6, 1, True, 1), (5, 2, True, 0)):
            state = _state(rng, (rows + 1) * cpu_engine._row_words(planes, WORDS), lanes=4)
            best = _state(rng, planes * WORDS, lanes=4)
            flag = _state(rng, WORDS, lanes=4)
            masks = {f"m{r}": _state(rng, WORDS, lanes=4) for r in range(rows)}
            outputs = []
            for vector, step in ((0, 1), (4, 4)):
                shape = KernelShape(WORDS, rows, "binary", vector=vector)
                lines = cpu_engine._pass_statements(planes, scoring, parity, track_best, shape, rows)
                assert ("vload(" in "\n".join(lines)) == bool(vector)
                # numpy arrays stand for words here: ``x |= y`` would change
                # an array another name shares (``fl = m``), where the
                # kernel's words are values
                lines = [re.sub(r"^(\w+) ([&|^])= (.*)$", r"\1 = \1 \2 (\3)", line) for line in lines]
                ns = {"rows": state.copy(), "best": best.copy(), "flag": flag.copy(), "z": np.zeros(4, np.uint64),
                      "vload": lambda a, i: _vload(a, i, 4), "vstore": _vstore,
                      "vzero": lambda: np.zeros((4, 4), np.uint64)} | masks
                _run_pass(lines, ns, step)
                outputs.append(ns)
            for name in ("rows", "flag", "best"):
                assert all(np.array_equal(x, y) for x, y in zip(outputs[0][name], outputs[1][name])), \
                    (scoring, planes, rows, name)
