"""A run's settings and their defaults, apart from the pipeline: the command
line reads them before it imports anything heavy (numpy, numba: see
:mod:`bpbc.cli`)."""

from __future__ import annotations

from dataclasses import dataclass

from bpbc.scoring import Scoring

DEFAULT_THRESHOLD = 40
DEFAULT_CHUNK_SIZE = 100_000
#: the strand choices and the strands each screens, in output order
STRANDS = {"both": ("+", "-"), "forward": ("+",)}
PAIR_FILTERS = ("any", "both")


def strands_of(strand: str) -> tuple[str, ...]:
    try:
        return STRANDS[strand]
    except KeyError:
        raise ValueError(f"strand must be one of {', '.join(STRANDS)}, got {strand!r}") from None


@dataclass(frozen=True)
class ScreenSettings:
    """Everything that decides which instances pass and how they are reported."""

    threshold: int = DEFAULT_THRESHOLD
    scoring: Scoring = Scoring()
    strand: str = "both"
    device: str = "auto"
    exact_scores: bool = False
    eqx: bool = False
    threads: int | None = None
    chunk_size: int | None = None  # None: automatic, see bpbc.pipeline.chunk_size_for
    #: per pattern threshold ceil(F x match x length), instead of ``threshold``
    min_score_fraction: float | None = None
    #: paired reads: a pair passes when 'any' mate passes, or only when 'both' do
    pair_filter: str = "any"
    #: what happens to the adapters found, 'none', 'trim' or 'mask', and how (docs/trimming.md)
    action: str = "none"
    adapter_kind: str = "3prime"
    min_overlap: int = 3
    trim_strand: str = "forward"
    min_length: int | None = None
    #: screen only the first and last ``ends`` bases of each read (bpbc.windows)
    ends: int | None = None

    @property
    def strands(self) -> tuple[str, ...]:
        return strands_of(self.strand)
