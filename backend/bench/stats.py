"""Small order statistics, without numpy so the GUI can import this module cheaply."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    pos = (len(ordered) - 1) * min(max(q, 0.0), 100.0) / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    frac = pos - low
    return float(ordered[low] + (ordered[high] - ordered[low]) * frac)


def median(values: Sequence[float]) -> float:
    """Median of the finite values; NaN when there are none."""
    finite = [v for v in values if not math.isnan(v)]
    return percentile(finite, 50.0)
