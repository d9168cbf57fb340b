#!/usr/bin/env python3
"""Synthesise the GPU kernel's cell update (bpbc/sw.cu) into 3-input LUTs (offline).

Writes two checked-in, generated files (never edit them by hand):

* ``bpbc/sw_cell_circuits.py``: the gate lists, per (planes, scoring), as
  data (tests simulate them with numpy; ``bpbc.gpu_engine`` reads which
  variants exist);
* ``bpbc/sw_cells.cuh``: the same gate lists as CUDA, one ``lop3.b32``
  (inline PTX) per LUT, specialisations of ``SwCell<B, MA, MI, OE, EX>``
  that ``sw.cu`` uses when ``available`` (else its hand-written cell).

Users never run this script and need no synthesis tools. It needs ABC
(Debian's ``berkeley-abc`` or ``yosys-abc``).

For each variant:

1. The specification is the hand-written cell of ``sw.cu`` (the same
   adder, borrow-chain comparators, selects and constant subtractions,
   gate for gate, see :func:`reference_cell`) as a gate network. Inputs
   hd<k> (H diagonal), e<k> (E of this row), f<k> (F from the row above),
   bs<k> (best), fl (overflow flag) and m (match word); outputs H<k>,
   E<k>, F<k>, BS<k>, FL. Written as BLIF.
2. ABC maps it to 3-input LUTs with several scripts (after ``read_lut`` of
   a 3-LUT library); the smallest network whose nodes *all* have at most
   3 inputs wins (mfs2/lutpack can leave 4-input nodes: those are rejected).
3. ABC ``cec`` proves the mapped network equal to the specification (a
   variant that fails is not written), and the emitted gate list is run
   with numpy on random words against the specification network.

Usage: python scripts/synthesize_gpu_cells.py [--planes 4 5 6 7 8 9 10] [--abc berkeley-abc]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bpbc.scoring import Scoring  # noqa: E402
from bpbc.sw_cells import render_cuda, run_gates  # noqa: E402

PY_OUTPUT = ROOT / "bpbc" / "sw_cell_circuits.py"
CUDA_OUTPUT = ROOT / "bpbc" / "sw_cells.cuh"

#: scorings synthesised (match, mismatch, gap_open, gap_extend): the default first
SCORINGS = [Scoring()]
PLANES = [4, 5, 6, 7, 8, 9, 10]

#: ABC scripts tried on every variant (after read_lut of a 3-LUT library and
#: reading the specification); the smallest valid result is kept
ABC_SCRIPTS = [
    "strash; if -K 3 -a",
    "strash; dch -f; if -K 3 -a",
    "&get -n; &st; &if -K 3 -a; &mfs; &put",
    "&get -n; &st; &if -K 3 -a -C 32 -F 4 -A 8 -m; &mfs -W 5 -a; &put",
    "&get -n; &st; &if -K 3 -a; &mfs -a -W 5; &st; &if -K 3 -a; &mfs -a; &put",
    "&get -n; &st; &synch2; &if -K 3 -a; &mfs; &put",
    "&get -n; &st; &dch -f; &if -K 3 -a; &mfs; &put",
    "&get -n; &st; &dch -f; &if -K 3 -a; &mfs -a -W 5; &st; &dch -f; &if -K 3 -a; &mfs -a; &put",
    "strash; if -K 3 -a; mfs2 -a -W 4 -e; lutpack -N 3 -S 3",
]


# ------------------------------------------------------------ specification

class Network:
    """A gate network (and/or/xor/not over inputs and constants), hashed,
    with constants folded."""

    def __init__(self):
        self.gates: list[tuple] = []  # (op, a, b): op in in/const/not/and/or/xor
        self.index: dict[tuple, int] = {}
        self.zero = self.node(("const", 0, None))
        self.one = self.node(("const", 1, None))

    def node(self, key) -> "Signal":
        if key not in self.index:
            self.index[key] = len(self.gates)
            self.gates.append(key)
        return Signal(self, self.index[key])

    def input(self, name) -> "Signal":
        return self.node(("in", name, None))


class Signal:
    def __init__(self, net: Network, i: int):
        self.net, self.i = net, i

    def const(self):
        op, value, _ = self.net.gates[self.i]
        return value if op == "const" else None

    def _binary(self, op, other):
        x, y = self.const(), other.const()
        net = self.net
        if x is not None and y is not None:
            value = {"and": x & y, "or": x | y, "xor": x ^ y}[op]
            return net.one if value else net.zero
        if x is not None:
            return other._binary(op, self)
        if y is not None:
            if op == "and":
                return self if y else net.zero
            if op == "or":
                return net.one if y else self
            return ~self if y else self
        if self.i == other.i:
            return {"and": self, "or": self, "xor": net.zero}[op]
        a, b = sorted((self.i, other.i))
        return net.node((op, a, b))

    def __and__(self, other):
        return self._binary("and", other)

    def __or__(self, other):
        return self._binary("or", other)

    def __xor__(self, other):
        return self._binary("xor", other)

    def __invert__(self):
        x = self.const()
        if x is not None:
            return self.net.zero if x else self.net.one
        op, a, _ = self.net.gates[self.i]
        if op == "not":
            return Signal(self.net, a)
        return self.net.node(("not", self.i, None))


def reference_cell(planes: int, scoring: Scoring):
    """The hand-written cell of ``sw.cu`` (the body of its row loop), gate
    for gate: (net, input names, {output name: signal})."""
    B = planes
    MA, MI, OE, EX = scoring.match, scoring.mismatch, scoring.first_gap, scoring.gap_extend
    net = Network()
    inputs = ["m"] + [f"{p}{k}" for p in ("hd", "e", "f", "bs") for k in range(B)] + ["fl"]
    sig = {name: net.input(name) for name in inputs}
    ones, zero = net.one, net.zero
    hd = [sig[f"hd{k}"] for k in range(B)]
    E = [sig[f"e{k}"] for k in range(B)]
    f = [sig[f"f{k}"] for k in range(B)]
    best = [sig[f"bs{k}"] for k in range(B)]
    flag, match = sig["fl"], sig["m"]

    def greater(x, y):  # x > y: the borrow out of y - x
        borrow = ~y[0] & x[0]
        for k in range(1, B):
            borrow = (~y[k] & (x[k] | borrow)) | (x[k] & borrow)
        return borrow

    def select(x, y, mask):  # mask ? x : y
        return [y[k] ^ ((x[k] ^ y[k]) & mask) for k in range(B)]

    def subtract_const(x, c):  # (x - c mod 2^B, all-ones where x < c)
        borrow = zero
        out = []
        for k in range(B):
            ck = ones if (c >> k) & 1 else zero
            out.append(x[k] ^ ck ^ borrow)
            borrow = (~x[k] & (ck | borrow)) | (ck & borrow)
        return out, (ones if c >= (1 << B) else borrow)

    limit = (1 << B) - 1
    match_big = MA >= (1 << B)
    mismatch_ok = MI < (1 << B)
    add_match = MA & limit
    add_mismatch = (((1 << B) - MI) & limit) if mismatch_ok else add_match
    d, carry = [], zero
    for k in range(B):
        a, b = (add_match >> k) & 1, (add_mismatch >> k) & 1
        s = (ones if b else match) if a else (~match if b else zero)
        d.append(hd[k] ^ s ^ carry)
        carry = (hd[k] & s) | (carry & (hd[k] ^ s))
    flag = flag | (match & (ones if match_big else carry))
    diag_ok = (match | carry) if mismatch_ok else match
    t = select(d, E, greater(d, E) & diag_ok)
    h = select(t, f, greater(t, f))
    best = select(h, best, greater(h, best))
    hoe, hoe_borrow = subtract_const(h, OE)
    hoe = [x & ~hoe_borrow for x in hoe]
    ye, e_borrow = subtract_const(E, EX)
    yf, f_borrow = subtract_const(f, EX)
    e_new = select(ye, hoe, greater(ye, hoe) & ~e_borrow)
    f_new = select(yf, hoe, greater(yf, hoe) & ~f_borrow)
    outputs = {}
    for k in range(B):
        outputs[f"H{k}"] = h[k]
    for k in range(B):
        outputs[f"E{k}"] = e_new[k]
    for k in range(B):
        outputs[f"F{k}"] = f_new[k]
    for k in range(B):
        outputs[f"BS{k}"] = best[k]
    outputs["FL"] = flag
    return net, inputs, outputs


def evaluate(net: Network, inputs: list[str], outputs: dict, values: dict) -> dict:
    """Run the network on numpy words."""
    like = next(iter(values.values()))
    full = np.array(~np.zeros_like(like))
    val: list = []
    for op, a, b in net.gates:
        if op == "in":
            val.append(values[a])
        elif op == "const":
            val.append(full if a else np.zeros_like(like))
        elif op == "not":
            val.append(~val[a])
        elif op == "and":
            val.append(val[a] & val[b])
        elif op == "or":
            val.append(val[a] | val[b])
        else:
            val.append(val[a] ^ val[b])
    return {name: val[s.i] for name, s in outputs.items()}


def to_blif(net: Network, inputs: list[str], outputs: dict) -> str:
    names = {}
    lines = [".model cell", ".inputs " + " ".join(inputs), ".outputs " + " ".join(outputs)]
    for i, (op, a, b) in enumerate(net.gates):
        if op == "in":
            names[i] = a
            continue
        names[i] = out = f"g{i}"
        if op == "const":
            lines += [f".names {out}"] + (["1"] if a else [])
        elif op == "not":
            lines += [f".names {names[a]} {out}", "0 1"]
        elif op == "and":
            lines += [f".names {names[a]} {names[b]} {out}", "11 1"]
        elif op == "or":
            lines += [f".names {names[a]} {names[b]} {out}", "1- 1", "-1 1"]
        elif op == "xor":
            lines += [f".names {names[a]} {names[b]} {out}", "10 1", "01 1"]
    for name, signal in outputs.items():
        lines += [f".names {names[signal.i]} {name}", "1 1"]
    lines.append(".end")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------ mapped network

def read_blif(text: str):
    """ABC's mapped BLIF -> (inputs, outputs, nodes [(out, ins, truth table)]),
    truth table bit x = f(ins[0] = top bit of x, ...)."""
    text = text.replace("\\\n", " ")
    inputs, outputs, nodes, cover = [], [], [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(".inputs"):
            inputs += line.split()[1:]
        elif line.startswith(".outputs"):
            outputs += line.split()[1:]
        elif line.startswith(".names"):
            *ins, out = line.split()[1:]
            cover = []
            nodes.append((out, ins, cover))
        elif line.startswith("."):
            cover = None
        elif cover is not None:
            cover.append(line.split())
    result = []
    for out, ins, rows in nodes:
        k = len(ins)
        on = 0
        if k == 0:
            on = 1 if rows and rows[0][-1] == "1" else 0
        else:
            polarity = rows[0][1] if rows else "1"
            for x in range(1 << k):
                bits = [(x >> (k - 1 - i)) & 1 for i in range(k)]
                hit = any(all(c == "-" or int(c) == v for c, v in zip(row[0], bits)) for row in rows)
                on |= (hit if polarity == "1" else not hit) << x
        result.append((out, ins, on))
    return inputs, outputs, result


def simplify(args, on):
    """Fold constant ("0"/"1") and repeated arguments, drop unused ones."""
    keep = []
    for a in args:
        if a not in ("0", "1") and a not in keep:
            keep.append(a)
    table = 0
    for y in range(1 << len(keep)):
        bits = {a: (y >> (len(keep) - 1 - j)) & 1 for j, a in enumerate(keep)}
        x = 0
        for a in args:
            x = (x << 1) | (int(a) if a in ("0", "1") else bits[a])
        table |= ((on >> x) & 1) << y
    j = 0
    while j < len(keep):
        n = len(keep)
        shift = n - 1 - j
        low = [(table >> y) & 1 for y in range(1 << n) if not (y >> shift) & 1]
        high = [(table >> y) & 1 for y in range(1 << n) if (y >> shift) & 1]
        if low == high:
            table = sum(bit << y for y, bit in enumerate(low))
            keep.pop(j)
        else:
            j += 1
    return keep, table


def pad3(ins, on):
    """LOP3 immediate: truth table over (a, b, c), the node's inputs first
    (missing inputs unused), bit i = f(a = i >> 2 & 1, b = i >> 1 & 1, c = i & 1)."""
    k = len(ins)
    table = 0
    for i in range(8):
        x = i >> (3 - k) if k else 0
        table |= ((on >> x) & 1) << i
    return table


def gate_list(mapped) -> str:
    """``t<n> <tt> <in>...`` per LUT (tt: LOP3 immediate, 2 hex digits),
    then ``<OUT> <signal>`` per output (an input, a LUT, 0 or 1)."""
    inputs, outputs, nodes = mapped
    by_name = {out: (ins, on) for out, ins, on in nodes}
    alias = {name: name for name in inputs}
    lines, emitted = [], {}

    def resolve(name):
        if name in alias:
            return alias[name]
        ins, on = by_name[name]
        args, on = simplify([resolve(i) for i in ins], on)
        if not args:
            alias[name] = "1" if on & 1 else "0"
        elif len(args) == 1 and on == 0b10:  # buffer
            alias[name] = args[0]
        else:
            table = pad3(args, on)
            key = (table, tuple(args))
            if key not in emitted:
                emitted[key] = f"t{len(emitted)}"
                lines.append(f"{emitted[key]} {table:02x} {' '.join(args)}")
            alias[name] = emitted[key]
        return alias[name]

    outs = [f"{out} {resolve(out)}" for out in outputs]
    return "\n".join(lines + outs)


def count_gates(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.startswith("t"))


def abc_map(abc: str, blif_path: str, script: str, workdir: str):
    lut = os.path.join(workdir, "lut3.lut")
    out = os.path.join(workdir, "mapped.blif")
    with open(lut, "w") as fh:
        fh.write("1 1 1\n2 1 1\n3 1 1\n")
    if os.path.exists(out):
        os.remove(out)
    subprocess.run([abc, "-c", f"read_lut {lut}; read_blif {blif_path}; {script}; write_blif {out}"],
                   check=True, capture_output=True, text=True)
    mapped_text = Path(out).read_text()
    proof = subprocess.run([abc, "-c", f"cec {blif_path} {out}"], check=True, capture_output=True, text=True)
    return mapped_text, "Networks are equivalent" in proof.stdout


def check_on_words(gates: str, net, inputs, outputs, trials: int = 4) -> None:
    rng = np.random.default_rng(0)
    for _ in range(trials):
        values = {name: rng.integers(0, 1 << 63, 64, dtype=np.uint64) for name in inputs}
        want = evaluate(net, inputs, outputs, values)
        got = run_gates(gates, values)
        for name in outputs:
            assert np.array_equal(want[name], got[name]), name


# ------------------------------------------------------------ main

PY_HEADER = '''\
# generated by scripts/synthesize_gpu_cells.py ({abc}); do not edit.
"""3-input LUT networks of the GPU kernel's cell update (``bpbc/sw.cu``).

``CIRCUITS[(planes, match, mismatch, gap_open, gap_extend)]`` is a gate list:
``t<n> <tt> <x> [<y> [<z>]]`` per LUT, in order (tt: the LOP3 immediate, the
truth table over a, b, c = the listed inputs, bit 4a + 2b + c), then
``<OUT> <signal>`` per output. Inputs: m (match word), hd<k> (H diagonal),
e<k> (E), f<k> (F above), bs<k> (best), fl (overflow flag); outputs H<k>,
E<k>, F<k>, BS<k>, FL. Every network was proven equal to the hand-written
cell of sw.cu by ABC ``cec``. ``bpbc/sw_cells.cuh`` is the same data as CUDA.
"""

'''


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--planes", type=int, nargs="+", default=PLANES)
    parser.add_argument("--abc", default=shutil.which("berkeley-abc") or shutil.which("yosys-abc"))
    parser.add_argument("--render-only", action="store_true",
                        help="only rewrite the CUDA header from the checked-in gate lists (no ABC)")
    args = parser.parse_args()
    if args.render_only:
        from bpbc.sw_cell_circuits import CIRCUITS

        generator = CUDA_OUTPUT.read_text().splitlines()[0].removeprefix("// generated by ").removesuffix(
            "; do not edit.")
        CUDA_OUTPUT.write_text(render_cuda(CIRCUITS, generator))
        print(f"wrote {CUDA_OUTPUT}")
        return
    if not args.abc:
        sys.exit("needs ABC: apt-get install berkeley-abc (or yosys)")
    version = subprocess.run([args.abc, "-c", "version"], capture_output=True, text=True).stdout
    found = re.search(r"ABC \S+ \(compiled [^)]*\)", version)
    abc_version = found.group(0) if found else os.path.basename(args.abc)

    circuits, report = {}, []
    with tempfile.TemporaryDirectory() as workdir:
        for scoring in SCORINGS:
            for planes in args.planes:
                started = time.time()
                net, inputs, outputs = reference_cell(planes, scoring)
                spec = os.path.join(workdir, "spec.blif")
                Path(spec).write_text(to_blif(net, inputs, outputs))
                best = None
                for script in ABC_SCRIPTS:
                    text, equivalent = abc_map(args.abc, spec, script, workdir)
                    mapped = read_blif(text)
                    if not equivalent or any(len(ins) > 3 for _, ins, _ in mapped[2]):
                        continue
                    gates = gate_list(mapped)
                    if best is None or count_gates(gates) < count_gates(best[0]):
                        best = (gates, script)
                key = (planes, scoring.match, scoring.mismatch, scoring.gap_open, scoring.gap_extend)
                if best is None:
                    report.append(f"{key}: no proven 3-input mapping, hand cell kept")
                else:
                    check_on_words(best[0], net, inputs, outputs)
                    circuits[key] = best[0]
                    report.append(f"{key}: {count_gates(best[0])} LUT3 ({best[1]}; {time.time() - started:.1f} s)")
                print(report[-1], flush=True)

    with open(PY_OUTPUT, "w") as fh:
        fh.write(PY_HEADER.format(abc=abc_version))
        fh.write("# per variant: LUT3 count (ABC script that found it)\n")
        for line in report:
            fh.write(f"# {line}\n")
        fh.write("CIRCUITS = {\n")
        for key, gates in circuits.items():
            fh.write(f"    {key!r}: \"\"\"\\\n{gates}\n\"\"\",\n")
        fh.write("}\n")
    CUDA_OUTPUT.write_text(render_cuda(circuits, f"scripts/synthesize_gpu_cells.py ({abc_version})"))
    print(f"wrote {PY_OUTPUT} and {CUDA_OUTPUT}")


if __name__ == "__main__":
    main()
