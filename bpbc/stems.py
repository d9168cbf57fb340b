"""``{stem}`` in output paths: the reads file's name without directory, format and compression suffixes.

Light (the standard library only): the command fills output paths before its imports.
"""

from __future__ import annotations

import os

STEM_FIELD = "{stem}"
_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zstd")
_FORMAT_SUFFIXES = (".fastq", ".fq", ".fasta", ".fa", ".fna", ".fas")


def stem(path) -> str:
    """``{stem}``: the file name without directory, compression and format suffixes
    (``runs/S1_R1.fastq.gz`` -> ``S1_R1``)."""
    name = os.path.basename(os.fspath(path))
    lower = name.lower()
    for suffixes in (_COMPRESSION_SUFFIXES, _FORMAT_SUFFIXES):
        for suffix in suffixes:
            if lower.endswith(suffix) and len(name) > len(suffix):
                name, lower = name[:-len(suffix)], lower[:-len(suffix)]
                break
    return name


def fill_stem(path, reads_path):
    """``path`` with ``{stem}`` replaced by the stem of ``reads_path`` (None stays None)."""
    if path is None:
        return None
    return os.fspath(path).replace(STEM_FIELD, stem(reads_path))
