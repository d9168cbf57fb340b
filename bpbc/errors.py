"""The exceptions of bpbc, and how ``bpbc-screen`` reports them.

* :class:`InputError`: an expected problem with an input or output file or an
  option value (exit status 1, one line naming the file).
* :class:`InternalError`: a failed cross-check inside bpbc (a traceback score
  that disagrees with the screen score, a CUDA kernel that does not compile):
  a bug or a broken installation, never the user's input (exit status 3, one
  line asking for a report).

:class:`bpbc.alphabet.SequenceError` (a ``ValueError``) stays in
:mod:`bpbc.alphabet`, beside the alphabet it checks.
"""

from __future__ import annotations

import re

_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def one_line(message) -> str:
    """``message`` as one line: line breaks and the blanks around them become one space."""
    return _LINE_BREAKS.sub(" ", str(message)).strip()


class InputError(Exception):
    """An expected problem with an input or output file or an option value.

    ``str()`` is a single line that names the file and, where known, the line
    or record; the CLI prints it and exits with status 1.
    """

    def __init__(self, message: str):
        super().__init__(one_line(message))


class InternalError(RuntimeError):
    """bpbc found itself inconsistent (a failed cross-check), or a part of it
    could not be built (a CUDA kernel that NVRTC does not compile).

    Not caused by the input: the CLI asks for a report and exits with status 3.
    A ``RuntimeError``, as these errors were before this class existed.
    """
