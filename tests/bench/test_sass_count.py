"""bench/sass_count.py: SASS parsing, loop finding and classes on a checked-in
listing (tests/bench/data/small_loop.sass: ``cuobjdump -sass`` of
small_loop.cu built by nvcc 13.0 for sm_90), CPU only."""

import shutil
from pathlib import Path

import pytest

from bench import sass_count as sc

DATA = Path(__file__).with_name("data")


@pytest.fixture(scope="module")
def small():
    functions = sc.parse_sass((DATA / "small_loop.sass").read_text())
    return sc.find_function(functions, "small_loop")


def test_parse_functions_and_instructions(small):
    assert small.name == "small_loop"
    first, last = small.instructions[0], small.instructions[-1]
    assert (first.addr, first.opcode) == (0x0, "LDC")
    assert last.opcode == "NOP"
    addrs = [ins.addr for ins in small.instructions]
    assert addrs == sorted(addrs) and len(set(addrs)) == len(addrs)
    assert all(b - a == 0x10 for a, b in zip(addrs, addrs[1:]))
    predicated = [ins for ins in small.instructions if ins.predicate]
    assert predicated and all(ins.predicate.lstrip("@!").startswith("P") for ins in predicated)


def test_modifiers_and_targets(small):
    by_addr = {ins.addr: ins for ins in small.instructions}
    assert by_addr[0x2F0].opcode == "VIMNMX3.S16x2.RELU"
    assert by_addr[0x480].opcode == "BRA" and by_addr[0x480].target == 0x190
    assert by_addr[0x480].predicate == "@P1"
    assert by_addr[0x290].opcode == "SHFL.UP"


def test_loops_and_inner_loop(small):
    spans = sc.loops(small)
    assert (0x190, 0x480) in spans and (0x520, 0x620) in spans
    assert all(head < end for head, end in spans)  # the trailing "BRA self" is no loop
    assert sc.inner_loop(small) == (0x190, 0x480)  # the unrolled main loop, not the remainder


def test_classes_of_the_loop(small):
    counts = sc.class_counts(sc.body(small, (0x190, 0x480)))
    assert counts == {"lop3": 8, "iadd_shift": 16, "shfl": 4, "mov": 2, "ldst": 8, "branch": 1, "dpx": 4,
                      "other": 5}
    assert sum(counts.values()) == (0x480 - 0x190) // 0x10 + 1


@pytest.mark.parametrize("opcode, expected", [
    ("LOP3.LUT", "lop3"), ("IMAD.MOV.U32", "mov"), ("IMAD.MOV", "mov"), ("MOV", "mov"), ("IMAD.SHL.U32", "iadd_shift"),
    ("SHF.R.S32.HI", "iadd_shift"), ("IADD3", "iadd_shift"), ("VIADD", "iadd_shift"), ("LEA.HI.X", "iadd_shift"),
    ("SHFL.UP", "shfl"), ("SHFL.BFLY", "shfl"), ("LDG.E.128.CONSTANT", "ldst"), ("STS.128", "ldst"), ("LDS.U8", "ldst"),
    ("BRA", "branch"), ("BSSY", "branch"), ("EXIT", "branch"), ("VIADD.16x2", "dpx"), ("VIADDMNMX.S16x2.RELU", "dpx"),
    ("VIMNMX.S16x2", "dpx"), ("VIMNMX", "other"), ("SEL", "other"), ("ISETP.NE.AND", "other"), ("VOTE.ANY", "other"),
    ("PRMT", "other"),
])
def test_classify(opcode, expected):
    assert sc.classify(sc.Instruction(0, opcode, "")) == expected


def test_basic_blocks_split_at_targets_and_branches(small):
    blocks = sc.basic_blocks(sc.body(small, (0x190, 0x480)))
    assert blocks[0][0].addr == 0x190 and blocks[-1][-1].addr == 0x480
    assert sum(len(b) for b in blocks) == 48
    assert len(blocks) == 1  # the unrolled body is one straight block (stores are predicated)


def test_report_rows_divide_by_words():
    report = sc.LoopReport("f", (0, 0x70), sc.class_counts([sc.Instruction(0, "LOP3.LUT", "")] * 8),
                           sc.class_counts([sc.Instruction(0, "LOP3.LUT", "")] * 4), (0, 0x30), 1, None)
    rows = sc.report_rows(report, 4, {"planes": 6})  # the loop: two column steps of 4 words
    assert rows[0]["scope"] == "loop" and rows[0]["per_word_lop3"] == "1.00" and rows[0]["per_word_total"] == "1.00"
    assert rows[1]["scope"] == "cell_block" and rows[1]["per_word_lop3"] == "1.00"
    rows = sc.report_rows(report, 8, {"planes": 9})  # B R > 64: one buffer, one step a turn
    assert rows[0]["per_word_lop3"] == "1.00" and rows[1]["per_word_lop3"] == "0.50"


NCU_SOURCE = (
    '"Kernel Name","void sw_screen<(int)6, (int)8, (int)16, (int)2, (int)3, (int)7, (int)2>(const unsigned int *)",\n'
    '"Address","Source","Warp Stall Sampling (All Samples)","# Samples","Instructions Executed"\n'
    '"00000190","LOP3.LUT R1, R2, R3, R4, 0xb8, !PT","0","0","1,024"\n'
    '"000001a0","@!P0 SEL R5, R5, RZ, P1","0","0","1024"\n'
    '"000001b0","SHFL.UP PT, R86, R155, 0x1, 0x1000","0","0","64"\n'
    '"000001c0","BRA 0x190","0","0","10"\n'
    '"Kernel Name","void other(int)",\n'
    '"Address","Source","Instructions Executed"\n'
    '"00000000","EXIT","1"\n')


def test_read_ncu_source_sections(tmp_path):
    """The layout of ``ncu -i R --page source --csv --print-source sass`` (seen on the H100, ncu 2025.3)."""
    path = tmp_path / "source.csv"
    path.write_text(NCU_SOURCE)
    sections = sc.read_ncu_source(path)
    assert list(sections) == ["void sw_screen<(int)6, (int)8, (int)16, (int)2, (int)3, (int)7, (int)2>(const unsigned int *)",
                              "void other(int)"]
    first = next(iter(sections.values()))
    assert first[0] == (0x190, "LOP3.LUT R1, R2, R3, R4, 0xb8, !PT", 1024.0)
    assert sc.read_executed(path) == {0x190: 1024.0, 0x1A0: 1024.0, 0x1B0: 64.0, 0x1C0: 10.0}
    counts = sc.executed_counts(first)
    assert counts["lop3"] == 1024 and counts["other"] == 1024 and counts["shfl"] == 64 and counts["branch"] == 10


def test_add_executed_rows(tmp_path):
    path = tmp_path / "source.csv"
    path.write_text(NCU_SOURCE)
    base = {"kernel": "k", "planes": "6", "pattern_length": 128, "rows_per_lane": 8, "lanes_per_chain": 16,
            "stripes": 1, "scoring": "2/3/5/2", "arch": "sm_90", "compiler": "c", "registers": "186", "scope": "loop"}
    rows = sc.add_executed([base], path, cells=32 * 1024)  # 1024 words
    executed = rows[-1]
    assert executed["scope"] == "executed" and executed["planes"] == "6"
    # 1024 LOP3 warp instructions x 32 lanes over 1024 words
    assert executed["per_word_lop3"] == "32.00" and executed["per_word_shfl"] == "2.00"


@pytest.mark.skipif(shutil.which("nvcc") is None or sc._tool("cuobjdump") is None,
                    reason="needs nvcc and cuobjdump")
def test_sw_kernel_counts_with_nvcc():
    from bpbc.scoring import Scoring

    rows = sc.run([5, 6], 128, Scoring(), compiler="nvcc")
    cell = {r["planes"]: r for r in rows if r["scope"] == "cell_block"}
    loop = {r["planes"]: r for r in rows if r["scope"] == "loop"}
    for planes in (5, 6):
        assert float(cell[planes]["per_word_lop3"]) > 40
        assert float(loop[planes]["per_word_total"]) >= float(cell[planes]["per_word_total"])
        assert float(loop[planes]["per_word_shfl"]) > 0
    assert float(cell[6]["per_word_lop3"]) > float(cell[5]["per_word_lop3"])  # more planes, more gates


@pytest.mark.skipif(shutil.which("nvcc") is None or sc._tool("cuobjdump") is None,
                    reason="needs nvcc and cuobjdump")
def test_flag_only_kernel_drops_the_best_logic():
    """The flag-only kernel (BEST = 0) reuses the synthesised cell and leaves
    its best output unused: the compiler must drop those LUTs (at B = 5 the
    cell has 74 LUT3 with best, about 9 of them for it)."""
    from bpbc.scoring import Scoring

    rows = sc.run([5], 128, Scoring(), compiler="nvcc", variants=("best", "flag"))
    loop = {r["variant"]: float(r["per_word_lop3"]) for r in rows if r["scope"] == "loop"}
    assert loop["flag"] < loop["best"] - 6
