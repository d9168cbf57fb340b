"""Where screened reads go: the matched and unmatched files, for single reads or pairs, or one file per pattern.

A *unit* is what passes or fails as a whole: a read, or a pair of mates. A
sink takes the units of a chunk that belong to it and writes their records
unchanged. With ``{name}`` in the path of ``--matched`` (and ``--matched2``)
each passing unit goes to the file of its best hit's pattern (:class:`DemuxSink`).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from .errors import InputError
from .io import AtomicOutput, ReadsOutput

NAME_FIELD = "{name}"
#: demultiplexed files open at once at most (each pair of mates counts two),
#: and at most half the process's limit on open files; the others are closed
#: and reopened for appending when their next unit comes
MAX_OPEN_FILES = 512


def open_file_budget() -> int:
    try:
        import resource
    except ImportError:  # not POSIX
        return 64
    soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_limit == resource.RLIM_INFINITY:
        return MAX_OPEN_FILES
    return max(2, min(MAX_OPEN_FILES, soft_limit // 2))


def is_template(path) -> bool:
    return path is not None and NAME_FIELD in os.fspath(path)


def write_units(chunk, outputs: tuple, units: np.ndarray) -> None:
    """Write ``units`` (increasing indices) of a chunk: ``outputs`` is
    (file,) for single reads, (mate 1 file, mate 2 file or None) for pairs."""
    if len(outputs) == 1:
        chunk.write(outputs[0], units)
    else:
        chunk.write(outputs, units)


class FileSink:
    """Every unit given goes to the same file(s)."""

    def __init__(self, outputs: tuple):
        self.outputs = outputs

    def write(self, chunk, units: np.ndarray, best_pattern: np.ndarray | None) -> None:
        if len(units):
            write_units(chunk, self.outputs, units)


class DemuxSink:
    """One file (or two, for pairs) per pattern, from path templates holding
    ``{name}``, created when its pattern gets its first unit. At most
    :func:`open_file_budget` are open at once. ``create(path, what)`` makes the
    :class:`~bpbc.io.AtomicOutput` (the caller commits or discards it).
    """

    def __init__(self, templates: tuple, pattern_names: list[str], sources: tuple, create: Callable,
                 interleaved_output: bool = False):
        for name in pattern_names:
            if "/" in name or os.sep in name or name in (".", ".."):
                raise InputError(f"pattern name {name!r} cannot be part of a file name ({NAME_FIELD} in "
                                 f"{templates[0]})")
        self._templates = templates
        self._names = pattern_names
        self._sources = sources
        self._create = create
        self._interleaved = interleaved_output
        self._files: dict[int, tuple] = {}
        self._open: OrderedDict[int, None] = OrderedDict()  # patterns with open files, least recent first
        self._files_per_pattern = len(templates)
        self._budget = open_file_budget()
        for template in templates:
            if NAME_FIELD in os.path.dirname(template):
                raise InputError(f"{template}: {NAME_FIELD} may only be part of the file name, not of a directory")
            # an unwritable directory is reported before any work is done
            AtomicOutput(template, "demultiplexed reads").discard()

    def _outputs(self, pattern: int) -> tuple:
        if pattern not in self._files:
            name = self._names[pattern]
            self._files[pattern] = tuple(
                ReadsOutput(self._create(template.replace(NAME_FIELD, name), f"reads of pattern {name}"), source,
                            lazy=True)
                for template, source in zip(self._templates, self._sources))
        files = self._files[pattern]
        self._open[pattern] = None
        self._open.move_to_end(pattern)
        while len(self._open) > 1 and len(self._open) * self._files_per_pattern > self._budget:
            evicted, _ = self._open.popitem(last=False)
            for output in self._files[evicted]:
                output.suspend()
        return files + (None,) if self._interleaved else files

    def write(self, chunk, units: np.ndarray, best_pattern: np.ndarray | None) -> None:
        if not len(units):
            return
        assert best_pattern is not None  # the matched sink gets each unit's best pattern
        patterns = best_pattern[units]
        order = np.argsort(patterns, kind="stable")  # units stay increasing within a pattern
        patterns, units = patterns[order], units[order]
        bounds = np.flatnonzero(np.diff(patterns)) + 1
        for group in np.split(np.arange(len(units)), bounds):
            write_units(chunk, self._outputs(int(patterns[group[0]])), units[group])


def best_patterns(alignments, units: int, mates: int) -> np.ndarray:
    """Per unit, the pattern of its best-scoring alignment (ties: the pattern
    listed first), or -1 for units without one."""
    best = np.full(units, -1, np.int64)
    if len(alignments):
        unit = alignments.read_index // mates
        order = np.lexsort((alignments.pattern_index, -alignments.score, unit))
        unit = unit[order]
        first = order[np.r_[True, unit[1:] != unit[:-1]]]
        best[alignments.read_index[first] // mates] = alignments.pattern_index[first]
    return best
