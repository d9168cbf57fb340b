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

_LINE_BREAKS = re.compile(r"[\r\n]+")
#: control characters other than tab (C0, DEL, C1, Unicode line and paragraph separators)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: longer messages (quoting an enormous line of a damaged file) are cut to this many characters
MAX_MESSAGE = 2000


def one_line(message) -> str:
    """``message`` as one line: line breaks and the blanks around them become
    one space, other control characters (which quoted file content may hold:
    a vertical tab or form feed also breaks a line, ESC starts a terminal
    escape sequence) are shown escaped, as ``\\x0b``, and beyond
    MAX_MESSAGE characters the rest is cut. Linear in the message's length
    (a regular expression matching the blanks around a line break took time
    quadratic in the length of a run of blanks: days for a line of tabs)."""
    text = str(message)
    parts = [part.strip() for part in _LINE_BREAKS.split(text)]
    text = " ".join(part for part in parts if part) if len(parts) > 1 else text.strip()
    if len(text) > MAX_MESSAGE:
        text = f"{text[:MAX_MESSAGE]}... ({len(text) - MAX_MESSAGE} more characters)"
    return _CONTROL.sub(_escape, text)


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
