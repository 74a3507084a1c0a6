"""Whether two engines' speeds are told apart by the rounds that measured them.

A speed measured once moves between runs on the same machine (CTranslate2's batch 1 went
from 121.7 to 185 tokens/s on one shared 2-vCPU machine), so a ratio of two medians can
say more than the rounds do. Each engine's rounds give a range, lowest to highest: a ratio
is published where the two ranges do not cross, and where they do the report says so
beside the ratio of the medians.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    """The lowest, the median and the highest of one engine's rounds."""

    low: float
    median: float
    high: float

    @classmethod
    def of(cls, values) -> "Spread":
        """The spread of some rounds' figures.

        Raises:
            ValueError: If there are none.
        """
        values = [float(v) for v in values]
        if not values:
            raise ValueError("a spread needs at least one round")
        return cls(min(values), statistics.median(values), max(values))

    @classmethod
    def from_list(cls, triple) -> "Spread | None":
        """A spread as :meth:`as_list` wrote it into a report's JSON; ``None`` for none."""
        return cls(*triple) if triple else None

    def as_list(self, digits: int = 1) -> list[float]:
        """``[low, median, high]``, rounded, for a report's JSON."""
        return [round(self.low, digits), round(self.median, digits), round(self.high, digits)]


def apart(a: Spread, b: Spread) -> bool:
    """Whether every round of one is above every round of the other."""
    return a.low > b.high or b.low > a.high


def ratio_text(a: Spread | None, b: Spread | None) -> str:
    """``a`` over ``b`` for a report: ``1.23×`` where the ranges are apart, ``ranges cross
    (1.02× of the medians)`` where they are not, ``n/a`` where either is missing or zero."""
    if a is None or b is None or not a.median or not b.median:
        return "n/a"
    return told(a.median / b.median, apart(a, b))


def told(ratio: float, ranges_apart: bool) -> str:
    """A ratio of medians as a report gives it: ``1.23×``, or ``ranges cross (1.02× of the
    medians)`` where the rounds' ranges cross."""
    return f"{ratio:.2f}×" if ranges_apart else f"ranges cross ({ratio:.2f}× of the medians)"


def range_text(s: Spread | None) -> str:
    """``low–high`` of a spread for a report's cell, empty for none."""
    return "" if s is None else f"{s.low:g}–{s.high:g}"
