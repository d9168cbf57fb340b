"""Each pattern's threshold: from its FASTA header, from a fraction of its best score, or one for all.

Precedence, per pattern: ``threshold=N`` in the pattern's header (``>name
threshold=25``), then ``--min-score-fraction F`` (the threshold is
ceil(F x match x pattern length)), then ``--threshold``.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from .alphabet import as_bytes
from .errors import InputError
from .scoring import Scoring

HEADER_KEY = "threshold="
_POSITIVE_INTEGER = re.compile(r"[1-9][0-9]*")


def header_value(header: str, key: str) -> str | None:
    """The text after ``key`` (``threshold=``, ``adapter=``) in a header's
    comment (the words after the name), or None."""
    for word in header.split()[1:]:
        if word.startswith(key):
            return word[len(key):]
    return None


def header_threshold(header: str) -> str | None:
    """The text after ``threshold=`` in a header's comment, or None."""
    return header_value(header, HEADER_KEY)


def fraction_threshold(fraction: float, scoring: Scoring, length: int) -> int:
    """ceil(fraction x best score), computed exactly on the decimal the user wrote (0.8 is 4/5)."""
    return math.ceil(Fraction(str(fraction)) * scoring.max_score(length))


def check_fraction(fraction: float) -> None:
    if not 0 < fraction <= 1:
        raise InputError(f"--min-score-fraction must be in (0, 1], got {fraction}")


def pattern_thresholds(patterns, file_name: str, scoring: Scoring, threshold: int,
                       min_score_fraction: float | None = None) -> int | list[int]:
    """One threshold for every pattern (an int) when neither a header nor a
    fraction sets one, else one per pattern. A header value that is not a
    positive integer raises InputError naming the file and the record."""
    if min_score_fraction is not None:
        check_fraction(min_score_fraction)
    from_headers = []
    for number, record in enumerate(patterns, start=1):
        value = header_threshold(getattr(record, "name", ""))  # records have headers; plain sequences do not
        if value is not None and not _POSITIVE_INTEGER.fullmatch(value):
            raise InputError(f"{file_name}: pattern {record.id!r} (record {number}): {HEADER_KEY}{value} in the "
                             "header is not a positive integer")
        from_headers.append(None if value is None else int(value))
    if min_score_fraction is None and all(value is None for value in from_headers):
        return threshold
    return [
        value if value is not None
        else threshold if min_score_fraction is None
        else fraction_threshold(min_score_fraction, scoring, len(as_bytes(record)))
        for value, record in zip(from_headers, patterns)
    ]
