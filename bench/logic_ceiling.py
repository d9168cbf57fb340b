"""The GPU's logic ceiling: the most cells a second that bpbc's bit-sliced cell
can run at on a GPU, from its logic alone. The suite prints no GPU rate of
bpbc's kernel above it.

An SM issues at most 64 LOP3 a clock (3-input logic on 32-bit words; 1.96
warp instructions a clock measured on the H100,
``bench/results/instruction_rates_h100.csv``), and one LOP3 updates one bit
of 32 cells. A cell of b bit planes takes at least ``min_lut3(b)`` 3-input
gates, so no kernel updates more than

    multiprocessors x 64 x clock x 32 / min_lut3(b)   cells a second

(H100 and H200: 132 SMs at 1.98 GHz, 535e12 / k: 6.37 TCUPS at 6 planes,
8.23 at 5). A rate above that is a timer that missed the work: CUDA events
recorded on the default stream, while the engine launched on a non-blocking
stream of its own, timed a 15.9 ms launch at 0.1 ms (777 TCUPS).
"""

from __future__ import annotations

from dataclasses import dataclass

LOP3_PER_SM_PER_CLOCK = 64
CELLS_PER_WORD = 32

#: the fewest 3-input LUTs of any variant of the cell update (saturating with
#: best, saturating with a sticky flag, the first pass's wrap and flag, the
#: kernel's own function) by plane count, default scoring, from logic
#: synthesis (yosys 0.23 and ABC, LUT3 mapping, every netlist proven equal
#: to the cell by ABC ``cec``); the match bit (about 4 LOP3 today) not counted
MIN_LUT3 = {5: 65, 6: 84, 7: 100}
#: below 5 planes, which the synthesis did not cover: a bound per plane under
#: the 13-14.3 it found at 5-7 planes (the count per plane falls with the planes)
MIN_LUT3_PER_PLANE_BELOW = 12


def min_lut3(planes: int) -> int:
    """A lower bound on the 3-input gates of a cell of ``planes`` bit planes
    (above 7 planes: the 7-plane count, a cell of more planes being no smaller)."""
    if planes in MIN_LUT3:
        return MIN_LUT3[planes]
    if planes > max(MIN_LUT3):
        return MIN_LUT3[max(MIN_LUT3)]
    return MIN_LUT3_PER_PLANE_BELOW * planes


class AboveLogicCeiling(Exception):
    """A rate the GPU cannot reach: its timer missed work."""


@dataclass(frozen=True)
class LogicCeiling:
    """The logic ceiling of one GPU (``clock_hz``: its highest SM clock)."""

    multiprocessors: int
    clock_hz: float

    @classmethod
    def of_device(cls, device: int | None = None) -> LogicCeiling:
        """The ceiling of CUDA device ``device`` (default: the current one)."""
        import cupy

        attributes = cupy.cuda.Device(device).attributes
        return cls(attributes["MultiProcessorCount"], attributes["ClockRate"] * 1e3)

    def cells_per_second(self, planes: int) -> float:
        return self.multiprocessors * LOP3_PER_SM_PER_CLOCK * self.clock_hz * CELLS_PER_WORD / min_lut3(planes)

    def rate(self, figure: str, cells: float, seconds: float, planes: int) -> float:
        """``cells / seconds``, the rate of bpbc's kernel at ``planes`` bit
        planes (two passes: the first pass's) that ``figure`` names; raises
        AboveLogicCeiling, naming the figure and the ceiling, above it."""
        rate = cells / seconds if seconds > 0 else float("inf")
        ceiling = self.cells_per_second(planes)
        if rate > ceiling:
            raise AboveLogicCeiling(
                f"{figure}: {rate / 1e12:.3f} TCUPS is above this GPU's logic ceiling of {ceiling / 1e12:.2f} TCUPS "
                f"at {planes} planes ({self.multiprocessors} SMs x {LOP3_PER_SM_PER_CLOCK} LOP3 a clock x "
                f"{self.clock_hz / 1e9:.3g} GHz x {CELLS_PER_WORD} cells / {min_lut3(planes)} LUT3 a cell): "
                f"its timer missed work")
        return rate
