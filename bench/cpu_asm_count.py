"""Instructions per cell-word of the CPU SW kernel's word loop (x86-64 asm).

``python -m bench.cpu_asm_count [--planes 6 5] [--shapes SHAPE ...]``: the
kernel is compiled again without numba's cache (cached code cannot be
inspected), the hot block is found (the basic block with the most vector
instructions: the vectorised loop of a pass, even and odd columns alike, or
the whole pass where the word loop was unrolled; the 'lut3' kernel's pass of
one vector), and its instructions are counted by class and divided by the
cell-words it covers (a vector's words, or the superblock's, times the rows
per pass).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

CLASSES = ("ternlog", "logic", "load", "store", "spill", "move", "other")


def _classify(line: str) -> str:
    op, _, rest = line.strip().partition("\t")
    operands = rest.split(", ") if rest else []
    if "rsp" in rest:
        return "spill"
    if op.startswith("vpternlog"):
        return "ternlog"
    if re.fullmatch(r"vp(and|andn|or|xor)[dq]?", op):
        return "logic"
    if op.startswith("vmov"):
        memory = ["(" in o for o in operands]
        if memory and memory[0]:
            return "load"
        if memory and memory[-1]:
            return "store"
        return "move"
    return "other"


def hot_block(asm: str, shape) -> tuple[list[str], int]:
    """(instructions of the hot block, the cell-words it covers). The hot
    block: the loop with the most vector instructions where it has at least
    half as many as the biggest block (a word loop: one vector of each of the
    pass's rows per iteration), else the biggest block (the whole pass: the
    word loop was unrolled)."""
    blocks: list[tuple[str, list[str]]] = [("", [])]
    for line in asm.splitlines():
        label = re.match(r"^(\.?L?BB\d+_\d+):", line)
        if label:
            blocks.append((label.group(1), []))
        elif line.startswith("\t") and not line.startswith("\t.") and line.strip():
            blocks[-1][1].append(line.strip())

    def vectors(block):
        return sum(("ymm" in i or "zmm" in i) for i in block[1])

    def loops(block):
        return any(re.match(rf"j\w+\s+{re.escape(block[0])}$", i) for i in block[1])

    biggest = max(blocks, key=vectors)
    loop = max((b for b in blocks if loops(b)), key=vectors, default=None)
    if loop is not None and 2 * vectors(loop) >= vectors(biggest):
        width = 8 if any("zmm" in i for i in loop[1]) else 4
        return loop[1], width * shape.rows
    if shape.gates == "lut3" and any("zmm" in i for i in biggest[1]):
        return biggest[1], 8 * shape.rows  # the 'lut3' kernel's pass: one vector of each row
    return biggest[1], shape.words * shape.rows


def parse_shape(text: str):
    """The KernelShape of ``words,rows,gates,loads[,vector[,stripe_bytes]]``
    (``--shapes`` here and in bench/cpu_cell_ab.py)."""
    from bpbc.cpu_engine import KernelShape

    words, rows, gates, loads, *rest = text.split(",")
    return KernelShape(int(words), int(rows), gates, loads, *(int(v) for v in rest))


def count_kernel(planes, scoring, track_best, shape) -> dict:
    """Instructions per cell-word by class (and the total) of the kernel's word loop."""
    import numpy as np
    from numba import njit

    from bpbc.alphabet import encode_pattern
    from bpbc.cpu_engine import CpuEngine, PreparedReads, kernel
    from bpbc.patterns import PatternTable

    cached = kernel(planes, scoring, track_best, shape)
    fresh = njit(nogil=True)(cached.py_func)
    engine = CpuEngine(threads=1, shape=shape)
    prepared = PreparedReads(np.zeros((64, 8), np.uint8), np.full(64, 8), words=shape.words)
    table = PatternTable.of([encode_pattern("ACGTACGT")])
    task_block, task_pattern = engine._all_tasks(prepared, table)
    best = np.zeros((len(task_block), planes if track_best else 0, shape.words), np.uint64)
    flag = np.zeros((len(task_block), shape.words), np.uint64)
    fresh(prepared.cols, prepared.block_length, table.masks.astype(np.int64), table.starts, task_block,
          task_pattern, best, flag, np.zeros(1, np.int64))
    asm = fresh.inspect_asm(fresh.signatures[0])
    block, words = hot_block(asm, shape)
    counts = Counter(_classify(i) for i in block)
    row = {f"asm_{c}": f"{counts[c] / words:.2f}" for c in CLASSES}
    row["asm_total"] = f"{len(block) / words:.2f}"
    row["asm_cell_words"] = words
    return row


def main(argv: list[str] | None = None) -> int:
    from bpbc.cpu_engine import kernel_shape
    from bpbc.scoring import Scoring

    parser = argparse.ArgumentParser(prog="python -m bench.cpu_asm_count", description=__doc__.split("\n\n")[0])
    parser.add_argument("--planes", type=int, nargs="+", default=[6, 5])
    parser.add_argument("--shapes", nargs="+", default=None)
    args = parser.parse_args(argv)
    shapes = [parse_shape(s) for s in args.shapes] if args.shapes else [kernel_shape()]
    for planes in args.planes:
        for shape in shapes:
            row = count_kernel(planes, Scoring(), planes != 5, shape)
            print(f"planes={planes} track_best={planes != 5} shape={shape} "
                  + " ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
