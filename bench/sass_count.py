"""Instructions per 32-cell word of the GPU SW kernel, read off its SASS.

The kernel ``sw_screen<B, R, P, MA, MI, OE, EX, CELL, BEST>`` of ``bpbc/sw.cu`` is compiled
for one (planes, scoring, pattern length) the way ``bpbc/gpu_engine.py``
compiles it: the same source, the same name expression, NVRTC through CuPy
with the options CuPy's ``RawModule`` passes (``-std=c++17`` from the engine;
``-ftz=true``, ``-arch=sm_XX``, ``--device-as-default-execution-space`` and,
with NVRTC >= 12.8, ``--pch`` from CuPy), for the current device's
architecture. Without CuPy (a machine with no GPU) ``nvcc -cubin`` compiles the
same source with the same language options for ``--arch`` (``compiler`` column
says which). ``cuobjdump -sass`` (or ``nvdisasm``) disassembles the cubin.

The inner loop is the innermost backward branch region of the kernel with
the most LOP3 (for ``sw_screen``: the ``while`` loop that advances
``columns_per_turn`` read columns per iteration, one step each). One step
updates R pattern rows of one column in each thread, i.e. R words of 32
cells. Two scopes:

* ``loop``: every instruction of the loop body once (all its basic blocks,
  the rarely taken ones too: an upper bound of one steady-state iteration),
  per word = count / (columns_per_turn R);
* ``cell_block``: the loop's largest basic block, the straight-line cell
  updates of the R rows of one step (what the gate circuit costs, without
  the loop's bookkeeping), per word = count / R.

``executed`` rows (optional, from Nsight Compute's per-instruction
"Instructions Executed", see ``--executed``) weight every instruction by how
often a warp executed it, over the cells of that run.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

KERNEL_PATH = Path(__file__).resolve().parents[1] / "bpbc" / "sw.cu"  #: plus bpbc/sw_cells.cuh
ENGINE_OPTIONS = ("-std=c++17",)  #: what gpu_engine._compiled passes to cupy.RawModule
CUPY_OPTIONS = ("-ftz=true",)  #: what CuPy's _compile_with_cache_cuda adds before NVRTC
CLASSES = ("lop3", "iadd_shift", "shfl", "mov", "ldst", "branch", "dpx", "other")

_LOP3 = {"LOP3", "LOP", "LOP32I"}
_IADD_SHIFT = {"IADD3", "IADD", "IADD32I", "SHF", "SHL", "SHR", "LEA", "ISCADD", "IMAD", "IMAD32I", "IADD64",
               "UIADD3", "ULEA", "USHF", "UIMAD"}
_MOV = {"MOV", "MOV32I", "UMOV", "IMAD.MOV", "CS2R.ZERO"}
_LDST = {"LDG", "STG", "LDS", "STS", "LDL", "STL", "LD", "ST", "LDC", "ULDC", "ATOM", "ATOMS", "ATOMG", "RED",
         "LDSM", "STSM", "LDGSTS", "LDGDEPBAR", "UBLKCP", "UTMALDG", "UTMASTG", "CCTL", "MEMBAR", "ERRBAR"}
_BRANCH = {"BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "CALL", "BSSY", "BSYNC", "BREAK", "BPT", "WARPSYNC", "KILL",
           "NANOSLEEP", "YIELD", "ACQBULK"}
_DPX = {"VIADDMNMX", "VIMNMX3", "VIBMNMX"}  #: and any .16x2 form (VIADD.16x2, VIMNMX.S16x2, ...)

_INSTRUCTION = re.compile(
    r"^\s*/\*(?P<addr>[0-9a-fA-F]{4,})\*/\s+(?P<pred>@!?U?P[0-9T]\s+)?"
    r"(?P<op>[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)(?P<args>[^;]*);")
_FUNCTION = re.compile(r"Function\s*:\s*(\S+)")
_TARGET = re.compile(r"0x([0-9a-fA-F]+)")


@dataclass
class Instruction:
    addr: int
    opcode: str  # with modifiers, e.g. LOP3.LUT, IMAD.MOV.U32
    args: str
    predicate: str = ""

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def is_branch(self) -> bool:
        return self.base in ("BRA", "BRX", "JMP", "JMX")

    @property
    def target(self) -> int | None:
        """Branch target address (BRA/JMP and BSSY's reconvergence point)."""
        if self.base not in ("BRA", "JMP", "BSSY"):
            return None
        found = _TARGET.findall(self.args)
        return int(found[-1], 16) if found else None


@dataclass
class Function:
    name: str
    instructions: list[Instruction] = field(default_factory=list)


def classify(instruction: Instruction) -> str:
    """One of CLASSES. IMAD.MOV (the compiler's favourite register move) is a MOV."""
    op, base = instruction.opcode, instruction.base
    if base in _DPX or "16X2" in op.upper():
        return "dpx"
    if base == "VIADD":  # Hopper's 32-bit integer add
        return "iadd_shift"
    if base in _LOP3:
        return "lop3"
    if op.startswith("IMAD.MOV") or base in ("MOV", "MOV32I", "UMOV"):
        return "mov"
    if base in _IADD_SHIFT:
        return "iadd_shift"
    if base == "SHFL":
        return "shfl"
    if base in _LDST:
        return "ldst"
    if base in _BRANCH:
        return "branch"
    return "other"


def parse_sass(text: str) -> list[Function]:
    """Functions of a ``cuobjdump -sass`` (or ``nvdisasm``) listing, in order."""
    functions: list[Function] = []
    for line in text.splitlines():
        header = _FUNCTION.search(line)
        if header:
            functions.append(Function(header.group(1)))
            continue
        match = _INSTRUCTION.match(line)
        if match and functions:
            functions[-1].instructions.append(Instruction(
                int(match["addr"], 16), match["op"], match["args"].strip(), (match["pred"] or "").strip()))
    return functions


def find_function(functions: list[Function], fragment: str) -> Function:
    hits = [f for f in functions if fragment in f.name]
    if not hits:
        raise ValueError(f"no function containing {fragment!r} in {[f.name for f in functions]}")
    return hits[0]


def loops(function: Function) -> list[tuple[int, int]]:
    """(head, back-branch address) of every backward branch, innermost first."""
    found = []
    for ins in function.instructions:
        target = ins.target
        if ins.is_branch and target is not None and target < ins.addr:  # not the trailing self-branch
            found.append((target, ins.addr))
    found.sort(key=lambda span: span[1] - span[0])
    return found


def body(function: Function, span: tuple[int, int]) -> list[Instruction]:
    return [ins for ins in function.instructions if span[0] <= ins.addr <= span[1]]


def inner_loop(function: Function, key: str = "lop3") -> tuple[int, int]:
    """The innermost loop (no other loop inside) with the most instructions of class ``key``."""
    spans = loops(function)
    if not spans:
        raise ValueError(f"{function.name}: no backward branch, no loop")
    innermost = [s for s in spans if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans)]
    return max(innermost, key=lambda s: (sum(classify(i) == key for i in body(function, s)), s[1] - s[0]))


def basic_blocks(instructions: list[Instruction]) -> list[list[Instruction]]:
    """Split a contiguous run of instructions at branch targets, reconvergence
    points and after branches/exits."""
    if not instructions:
        return []
    leaders = {instructions[0].addr}
    for k, ins in enumerate(instructions):
        if ins.target is not None:
            leaders.add(ins.target)
        if (ins.is_branch or ins.base in ("EXIT", "RET", "BSYNC")) and k + 1 < len(instructions):
            leaders.add(instructions[k + 1].addr)
    blocks: list[list[Instruction]] = []
    for ins in instructions:
        if ins.addr in leaders or not blocks:
            blocks.append([])
        blocks[-1].append(ins)
    return blocks


def class_counts(instructions, weights=None) -> Counter:
    counts: Counter = Counter({name: 0 for name in CLASSES})
    for ins in instructions:
        counts[classify(ins)] += 1 if weights is None else weights.get(ins.addr, 0)
    return counts


def opcode_counts(instructions) -> Counter:
    return Counter(ins.opcode for ins in instructions)


@dataclass
class LoopReport:
    function: str
    span: tuple[int, int]
    loop: Counter
    cell_block: Counter
    cell_block_span: tuple[int, int]
    blocks: int
    loop_opcodes: Counter


def analyse(function: Function, key: str = "lop3") -> LoopReport:
    span = inner_loop(function, key)
    instructions = body(function, span)
    blocks = basic_blocks(instructions)
    biggest = max(blocks, key=len)
    return LoopReport(function.name, span, class_counts(instructions), class_counts(biggest),
                      (biggest[0].addr, biggest[-1].addr), len(blocks), opcode_counts(instructions))


# ---------------------------------------------------------------- compiling

def cupy_arch() -> str | None:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() == 0:
            return None
        from cupy.cuda import compiler

        return compiler._get_arch()
    except Exception:
        return None


def _nvrtc_library() -> str:
    """Path of the libnvrtc that CuPy loaded (after a first NVRTC call)."""
    from cupy.cuda import nvrtc

    nvrtc.getVersion()
    with open("/proc/self/maps") as fh:
        for line in fh:
            if "libnvrtc.so" in line and "builtins" not in line:
                return line.split()[-1]
    raise RuntimeError("CuPy's libnvrtc not found in /proc/self/maps")


def nvrtc_options(arch: str) -> list[str]:
    """The options CuPy's RawModule passes to NVRTC for the engine's kernels
    (cupy/cuda/compiler.py: the engine's, then -ftz=true, -arch=sm_XX,
    --device-as-default-execution-space; --pch only speeds compiling up)."""
    return list(ENGINE_OPTIONS + CUPY_OPTIONS) + [f"-arch=sm_{arch}", "--device-as-default-execution-space"]


def compile_nvrtc_library(source: str, expression: str, arch: str, library: str) -> tuple[bytes, str]:
    """(cubin, mangled name) from NVRTC called directly (ctypes)."""
    import ctypes

    nv = ctypes.CDLL(library)
    program = ctypes.c_void_p()

    def check(code, what):
        if code != 0:
            log_size = ctypes.c_size_t()
            nv.nvrtcGetProgramLogSize(program, ctypes.byref(log_size))
            log = ctypes.create_string_buffer(log_size.value)
            nv.nvrtcGetProgramLog(program, log)
            raise RuntimeError(f"NVRTC {what} failed ({code}): {log.value.decode(errors='replace')[:2000]}")

    check(nv.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"kern.cu", 0, None, None), "create")
    check(nv.nvrtcAddNameExpression(program, expression.encode()), "add name")
    options = [o.encode() for o in nvrtc_options(arch)]
    check(nv.nvrtcCompileProgram(program, len(options), (ctypes.c_char_p * len(options))(*options)), "compile")
    size = ctypes.c_size_t()
    check(nv.nvrtcGetCUBINSize(program, ctypes.byref(size)), "cubin size")
    buffer = ctypes.create_string_buffer(size.value)
    check(nv.nvrtcGetCUBIN(program, buffer), "cubin")
    lowered = ctypes.c_char_p()
    check(nv.nvrtcGetLoweredName(program, expression.encode(), ctypes.byref(lowered)), "lowered name")
    mangled = lowered.value.decode()
    nv.nvrtcDestroyProgram(ctypes.byref(program))
    return buffer.raw, mangled


def compile_nvrtc(source: str, expression: str, arch: str | None = None) -> tuple[bytes, str, str]:
    """(cubin, mangled name, description): the libnvrtc CuPy uses, with the
    options CuPy's RawModule passes, for the current device's architecture."""
    from cupy.cuda import compiler

    arch = str(arch or compiler._get_arch())
    library = _nvrtc_library()
    cubin, mangled = compile_nvrtc_library(source, expression, arch, library)
    major, minor = compiler._get_nvrtc_version()
    return cubin, mangled, f"nvrtc {major}.{minor} ({Path(library).name}) {' '.join(nvrtc_options(arch))}"


def compile_nvcc(source: str, expression: str, arch: str = "90") -> tuple[bytes, str, str]:
    """(cubin, '', description) of ``nvcc -cubin`` with the same language options."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError("neither CuPy with a GPU nor nvcc is available to compile the kernel")
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "kernel.cu"
        cu.write_text(source + f"\nvoid* sass_count_instance = (void*)&{expression};\n")
        cubin = Path(tmp) / "kernel.cubin"
        options = list(ENGINE_OPTIONS + CUPY_OPTIONS) + [f"-arch=sm_{arch}"]
        subprocess.run([nvcc, *options, "-cubin", "-o", str(cubin), str(cu)], check=True, capture_output=True)
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
        return cubin.read_bytes(), "", f"nvcc ({version}) {' '.join(options)}"


def _tools(name: str) -> list[str]:
    """Every copy of a CUDA tool found: the pip packages' (nvidia-cuda-cuobjdump,
    -nvdisasm: often newer than the toolkit, and NVRTC may be newer than the
    toolkit's cuobjdump too), then PATH and $CUDA_HOME/bin."""
    candidates = []
    try:
        import nvidia

        candidates += [Path(p) / sub / "bin" / name for p in nvidia.__path__ for sub in ("cu13", "cu12")]
    except ImportError:
        pass
    found = shutil.which(name)
    if found:
        candidates.append(Path(found))
    candidates.append(Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / name)
    unique = []
    for candidate in candidates:
        if candidate.exists() and str(candidate) not in unique:
            unique.append(str(candidate))
    return unique


def _tool(name: str) -> str | None:
    tools = _tools(name)
    return tools[0] if tools else None


def disassemble(cubin: bytes) -> tuple[str, str]:
    """(SASS text, resource usage text) of a cubin: the first cuobjdump (or
    nvdisasm) that reads it."""
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        for cuobjdump in _tools("cuobjdump"):
            result = subprocess.run([cuobjdump, "-sass", str(path)], capture_output=True, text=True)
            if result.returncode == 0 and "Function" in result.stdout:
                usage = subprocess.run([cuobjdump, "-res-usage", str(path)], capture_output=True, text=True).stdout
                return result.stdout, usage
            errors.append(f"{cuobjdump}: rc {result.returncode} {result.stderr.strip()[:200]}")
        for nvdisasm in _tools("nvdisasm"):
            result = subprocess.run([nvdisasm, "-c", str(path)], capture_output=True, text=True)
            if result.returncode == 0:
                return result.stdout, ""
            errors.append(f"{nvdisasm}: rc {result.returncode} {result.stderr.strip()[:200]}")
    raise RuntimeError("no cuobjdump or nvdisasm could read the cubin (CUDA toolkit, or pip "
                       f"nvidia-cuda-cuobjdump); it starts {cubin[:24]!r}, {len(cubin)} bytes: " + "; ".join(errors))


def spills(usage: str, mangled: str) -> str:
    """Local-memory bytes per thread of the sw_screen function (spills show up as STACK/LOCAL)."""
    lines = usage.splitlines()
    for k, line in enumerate(lines):
        if "Function" in line and (not mangled or mangled in line) and "sw_screen" in line:
            following = lines[k + 1] if k + 1 < len(lines) else ""
            stack = re.search(r"STACK:(\d+)", following)
            local = re.search(r"LOCAL:(\d+)", following)
            return f"{stack.group(1) if stack else '?'}/{local.group(1) if local else '?'}"
    return ""


def registers(usage: str, mangled: str) -> str:
    lines = usage.splitlines()
    for k, line in enumerate(lines):
        if "Function" in line and (not mangled or mangled in line) and "sw_screen" in line:
            found = re.search(r"REG:(\d+)", lines[k + 1] if k + 1 < len(lines) else "")
            return found.group(1) if found else ""
    return ""


# ---------------------------------------------------------------- executed counts

def read_ncu_source(path: Path) -> dict[str, list[tuple[int, str, float]]]:
    """Kernel name -> [(address, SASS text, warp-level executions)] from Nsight
    Compute's source page (``ncu -i REPORT --page source --csv --print-source
    sass``): one section per profiled kernel, each a ``"Kernel Name",...``
    line, a header with ``Address``, ``Source`` and ``Instructions Executed``,
    then one row per instruction."""
    sections: dict[str, list[tuple[int, str, float]]] = {}
    name, header = None, None
    with open(path, newline="") as fh:
        for row in csv.reader(fh):
            if not row or row[0].startswith("=="):
                continue
            if row[0] == "Kernel Name":
                name, header = row[1], None
                sections.setdefault(name, [])
                continue
            if header is None:
                header = {k.strip().lstrip("#").strip().lower(): i for i, k in enumerate(row)}
                continue
            try:
                address = int(row[header["address"]], 16)
                executed = float(row[header["instructions executed"]].replace(",", "") or 0)
            except (KeyError, ValueError, IndexError):
                continue
            sections[name].append((address, row[header["source"]], executed))
    return sections


def read_executed(path: Path) -> dict[int, float]:
    """Address -> warp-level executions of the first kernel of a source page CSV."""
    sections = read_ncu_source(path)
    first = next(iter(sections.values()), [])
    return {address: executed for address, _, executed in first}


def executed_counts(rows: list[tuple[int, str, float]]) -> Counter:
    """Warp-level executions by class, each instruction classified from its SASS text."""
    counts: Counter = Counter({name: 0 for name in CLASSES})
    for _, text, executed in rows:
        match = _INSTRUCTION.match(f"/*0000*/ {text.strip()};") if text else None
        if match:
            counts[classify(Instruction(0, match["op"], match["args"]))] += executed
    return counts


# ---------------------------------------------------------------- rows

def columns_per_turn(planes: int, rows_per_lane: int) -> int:
    """Column steps per turn of sw_screen's loop: two where H and E alternate
    between two register buffers (TWO_BUFFERS in bpbc/sw.cu: B R <= 64), else one."""
    return 2 if planes * rows_per_lane <= 64 else 1


def report_rows(report: LoopReport, rows_per_lane: int, base: dict) -> list[dict]:
    out = []
    steps = columns_per_turn(int(base["planes"]), rows_per_lane)
    for scope, counts, span, words in (("loop", report.loop, report.span, steps * rows_per_lane),
                                       ("cell_block", report.cell_block, report.cell_block_span, rows_per_lane)):
        total = sum(counts.values())
        row = dict(base, scope=scope, span=f"0x{span[0]:x}-0x{span[1]:x}", instructions=total,
                   words_per_iteration=words, per_word_total=f"{total / words:.2f}")
        row.update({f"per_word_{name}": f"{counts[name] / words:.2f}" for name in CLASSES})
        out.append(row)
    return out


def executed_row(counts: Counter, cells: float, base: dict) -> dict:
    """Executed warp instructions per 32-cell word over a whole launch:
    warp instructions x 32 lanes / (cells / 32)."""
    words = cells / 32
    total = sum(counts.values())
    row = dict(base, scope="executed", instructions=f"{total:.6g}", words_per_iteration="",
               per_word_total=f"{total * 32 / words:.2f}")
    row.update({f"per_word_{name}": f"{counts[name] * 32 / words:.2f}" for name in CLASSES})
    return row


def add_executed(rows: list[dict], source_csv: Path, cells: float) -> list[dict]:
    """The rows plus one ``executed`` row per kernel profiled in ``source_csv``
    (matched to the rows by plane count: ``sw_screen<(int)B, ...``)."""
    sections = read_ncu_source(source_csv)
    out = list(rows)
    for name, instructions in sections.items():
        found = re.search(r"sw_screen<([^>]*)>", name)
        if not found:
            continue
        arguments = [int(x) for x in re.findall(r"(?:\(int\))?\s*(-?\d+)", found.group(1))]
        planes = arguments[0]
        cell = {1: "synth", 0: "hand"}.get(arguments[7]) if len(arguments) > 7 else None
        variant = VARIANTS[arguments[8]] if len(arguments) > 8 else None
        base = next((r for r in rows if int(r["planes"]) == planes and r["scope"] == "loop"
                     and (cell is None or r.get("cell", cell) == cell)
                     and (variant is None or r.get("variant", variant) == variant)), None)
        if base is None:
            continue
        keep = {k: base.get(k, "") for k in ("kernel", "cell", "variant", "planes", "pattern_length", "rows_per_lane",
                                             "lanes_per_chain", "stripes", "scoring", "arch", "compiler", "registers")}
        keep["span"] = f"whole kernel, {cells:.6g} cells (ncu Instructions Executed)"
        out.append(executed_row(executed_counts(instructions), cells, keep))
    return out


#: sw_screen's BEST argument -> variant name: "best" tracks the best score (one
#: pass, and the second pass), "flag" keeps the overflow flag only (first pass)
VARIANTS = {1: "best", 0: "flag"}


def run(planes_list, pattern_length: int, scoring, compiler: str = "auto", arch: str | None = None,
        sass_dir: Path | None = None, cells=("synth",), variants=("best",)) -> list[dict]:
    """Static counts per (cell, variant, planes); cells: "synth" (the
    synthesised cell where one exists, what the engine runs by default)
    and/or "hand"; variants: "best" and/or "flag" (see VARIANTS)."""
    from bpbc.gpu_engine import cell_kind, chain_shape, kernel_expression, kernel_source, stripe_mode

    source = kernel_source()
    rows_per_lane, lanes, stripes = chain_shape(pattern_length)
    use_nvrtc = compiler == "nvrtc" or (compiler == "auto" and cupy_arch() is not None)
    rows = []
    for cell, variant, planes in ((c, v, b) for c in cells for v in variants for b in planes_list):
        expression = kernel_expression(planes, rows_per_lane, lanes, scoring, cell_kind(cell), variant == "best",
                                       stripe_mode(stripes))
        if use_nvrtc:
            cubin, mangled, how = compile_nvrtc(source, expression, arch)
            target = arch or cupy_arch()
        else:
            target = arch or "90"
            cubin, mangled, how = compile_nvcc(source, expression, target)
        sass, usage = disassemble(cubin)
        if sass_dir is not None:
            sass_dir.mkdir(parents=True, exist_ok=True)
            stem = f"sw_screen_{cell}_{variant}_b{planes}_m{pattern_length}"
            (sass_dir / f"{stem}.sass").write_text(sass)
            (sass_dir / f"{stem}.res").write_text(usage)
        functions = parse_sass(sass)
        function = find_function(functions, mangled or "sw_screen")
        report = analyse(function)
        base = {"kernel": expression, "cell": cell, "variant": variant, "planes": planes,
                "pattern_length": pattern_length,
                "rows_per_lane": rows_per_lane, "lanes_per_chain": lanes, "stripes": stripes,
                "scoring": f"{scoring.match}/{scoring.mismatch}/{scoring.gap_open}/{scoring.gap_extend}",
                "arch": f"sm_{target}", "compiler": how, "registers": registers(usage, mangled),
                "spills": spills(usage, mangled), "loop_blocks": report.blocks}
        rows += report_rows(report, rows_per_lane, base)
    return rows


def launch_for_profiler(planes_list, pattern_length: int, scoring, reads: int, read_length: int = 150,
                        cells=("synth",), variants=("best",)) -> None:
    """One GpuEngine.launch per cell, variant and plane count on random reads,
    for Nsight Compute (ncu --kernel-name regex:sw_screen ...): prints the
    cells of each launch."""
    import cupy

    from bpbc.alphabet import encode_pattern
    from bpbc.gpu_engine import GpuEngine
    from bpbc.patterns import PatternTable

    from .inputs import random_prepared

    prepared = random_prepared(reads, read_length, seed=1)
    rng = __import__("numpy").random.default_rng(1)
    table = PatternTable.of([encode_pattern("".join(rng.choice(list("ACGT"), pattern_length)))])
    for cell in cells:
        engine = GpuEngine(cell=cell)
        for variant in variants:
            for planes in planes_list:
                engine.launch(prepared, table, scoring, planes, track_best=variant == "best")
                cupy.cuda.Device().synchronize()
                print(f"launch cell={cell} variant={variant} planes={planes} reads={reads} read_length={read_length} "
                      f"pattern_length={pattern_length} cells={reads * read_length * pattern_length}", flush=True)


def main(argv: list[str] | None = None) -> int:
    from bpbc.scoring import Scoring

    from .environment import RESULTS_DIR, device_kind, environment, gpu_info, write_csv

    parser = argparse.ArgumentParser(prog="python -m bench sass", description=__doc__.split("\n\n")[0])
    parser.add_argument("--planes", type=int, nargs="+", default=[5, 6, 7])
    parser.add_argument("--cell", nargs="+", choices=("synth", "hand"), default=["synth"],
                        help="which cell(s): synth = the synthesised LUT3 cell where one exists (the default "
                             "engine's), hand = the hand-written one")
    parser.add_argument("--variant", nargs="+", choices=tuple(VARIANTS.values()), default=["best"],
                        help="best = the kernel that tracks the best score (one pass, second pass), "
                             "flag = the flag-only first pass of the two-pass screen")
    parser.add_argument("--pattern-length", type=int, default=128)
    parser.add_argument("--scoring", default="2,3,5,2", help="match,mismatch,gap_open,gap_extend")
    parser.add_argument("--compiler", choices=("auto", "nvrtc", "nvcc"), default="auto",
                        help="auto: NVRTC through CuPy when a GPU is usable, else nvcc")
    parser.add_argument("--arch", default=None, help="e.g. 90 (default: the device's, or 90 with nvcc)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--sass-dir", type=Path, default=None, help="also write each kernel's SASS here")
    parser.add_argument("--executed", type=Path, default=None, metavar="CSV",
                        help="add 'executed' rows from an ncu source page CSV of the --launch run")
    parser.add_argument("--cells", type=float, default=1048576 * 150 * 128,
                        help="cells of each profiled launch (default: --launch 1048576 at 150 x 128)")
    parser.add_argument("--launch", type=int, default=None, metavar="READS",
                        help="instead: launch the kernel once per plane count on READS random reads (for ncu)")
    parser.add_argument("--read-length", type=int, default=150, help="length of the --launch reads")
    args = parser.parse_args(argv)
    scoring = Scoring(*(int(x) for x in args.scoring.split(",")))
    if args.launch:
        launch_for_profiler(args.planes, args.pattern_length, scoring, args.launch, args.read_length,
                            cells=args.cell, variants=args.variant)
        return 0
    rows = run(args.planes, args.pattern_length, scoring, args.compiler, args.arch, args.sass_dir, args.cell,
               args.variant)
    if args.executed:
        rows = add_executed(rows, args.executed, args.cells)
    gpu = gpu_info()
    env = environment(gpu)
    path = write_csv(args.out / f"sass_{device_kind(gpu) if gpu else 'sm' + (args.arch or '90')}.csv", rows, env)
    columns = ["cell", "variant", "planes", "scope", "registers", "spills", "per_word_total"] + [f"per_word_{c}" for c in CLASSES]
    print("  ".join(f"{c.replace('per_word_', ''):>10}" for c in columns))
    for row in rows:
        print("  ".join(f"{str(row[c]):>10}" for c in columns))
    print(f"-> {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
