"""The files one run writes: the PAF (a file, or standard output), the reads
files (matched, unmatched, trimmed; one a pattern with ``{name}``) and the
JSON summary.

Each file is written under a hidden name and appears only when the whole run
succeeds (:class:`bpbc.io.AtomicOutput`); a run that fails leaves none. The
local pipeline (:func:`bpbc.pipeline.screen_files`) and the Dask client
(:mod:`bpbc.distributed`) make them alike here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import ExitStack

from bpbc.io import STDIN, AtomicOutput, InputError, ReadsOutput
from bpbc.sinks import DemuxSink, FileSink, is_template


def is_null_device(path) -> bool:
    """Whether ``path`` names the null device (``/dev/null`` or a link to it)."""
    try:
        return os.path.samefile(path, os.devnull)
    except (OSError, ValueError):
        return False


class RunFiles:
    """The files of one run, made in ``stack``: the caller closes it (each
    file committed or discarded) after the threads that write them have
    stopped, since a file discarded while a writer could still open one (a
    demultiplexed file, made as the reads come) was left open. Compressed
    files take ``compress`` threads each."""

    def __init__(self, stack: ExitStack, compress: int):
        self._stack = stack
        self._compress = compress
        self._files: list[AtomicOutput] = []
        self._to_stdout = False
        self._json: AtomicOutput | None = None

    def create(self, path, what: str) -> AtomicOutput:
        """A file to write, committed by :meth:`commit`."""
        out = self._stack.enter_context(AtomicOutput(path, what, self._compress))
        self._files.append(out)
        return out

    def paf_writer(self, path) -> Callable[[bytes], None] | None:
        """Where PAF text goes: ``path``, or standard output (None or '-');
        None where ``path`` is the null device: the caller formats no PAF
        (for 10M trimmed reads on 16 cores, formatting the lines only to drop
        them kept one thread busy for about as long as the whole run)."""
        if path not in (None, STDIN):
            return None if is_null_device(path) else self.create(path, "PAF").open_binary().write
        self._to_stdout = True
        stdout = sys.stdout

        def write(text: bytes) -> None:
            stdout.write(text.decode("ascii"))

        return write

    def reads_sink(self, kind: str, paths: tuple, sources: tuple, pattern_ids: list[str] | None = None,
                   interleaved: bool = False):
        """Where the ``kind`` reads go ('matched', 'unmatched', 'trimmed'):
        ``paths`` (a file a mate, None where not given; ``{name}`` in the
        first: a file a pattern of ``pattern_ids``), each mate read from its
        source of ``sources``; None where no path is given. With
        ``interleaved`` input and one file, the pairs go there interleaved."""
        given = tuple(path for path in paths if path is not None)
        if not given:
            return None
        tail = (None,) if interleaved and len(given) == 1 else ()
        if is_template(given[0]):
            return DemuxSink(given, pattern_ids or [], sources, self.create, interleaved_output=bool(tail))
        return FileSink(tuple(ReadsOutput(self.create(path, f"{kind} reads"), source)
                              for path, source in zip(given, sources)) + tail)

    def json_summary(self, path) -> None:
        """The JSON summary goes to ``path`` (None: nowhere), written by :meth:`commit`."""
        if path is not None:
            self._json = self.create(path, "JSON summary")

    def commit(self, summary_json: Callable[[], bytes]) -> None:
        """Write the JSON summary (``summary_json()``, asked only where there is
        one) and make every file appear."""
        if self._to_stdout:
            sys.stdout.flush()
        if self._json is not None:
            self._json.open_binary().write(summary_json())
        for out in self._files:
            out.commit()


def check_distinct_files(inputs: dict, outputs: dict) -> None:
    """Refuse an output that is an input or another output (``{option: path}``;
    None and '-' are left out): the run would overwrite its input, or one
    output the other. Outputs that exist and are not regular files
    (``/dev/null``, a pipe) are written in place and may be shared."""
    seen: dict[str, str] = {}
    for kind, named in (("input", inputs), ("output", outputs)):
        for option, path in named.items():
            if path is None or path == STDIN:
                continue
            text = os.fspath(path)
            if os.path.exists(text) and not os.path.isfile(text):
                continue
            key = os.path.realpath(text)
            if kind == "output" and key in seen:
                raise InputError(f"{option} and {seen[key]} are the same file ({text}): give each output a file "
                                 "of its own, other than the inputs")
            seen.setdefault(key, option)
