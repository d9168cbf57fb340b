"""bpbc.cpu_engine's kernel cache: generated modules and their bytecode."""

from __future__ import annotations

import importlib.util
import os
import sys

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
