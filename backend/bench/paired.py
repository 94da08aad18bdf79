"""Paired ratios between two servers measured repetition by repetition.

When servers take turns on the same prompts (``peer_compare.py --interleave``), repetition
``i`` of both ran back to back, so their ratio cancels most of a shared machine's drift.
The median of these per-pass ratios, with a bootstrap interval of that median, says how
sure a "≥ 1.0" is; a ratio of two medians says less.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

from backend.bench.results import LevelResult, RepetitionResult
from backend.bench.turns import turn_value

BOOTSTRAP_SAMPLES = 2000


@dataclass(frozen=True)
class PairedRatio:
    """Per-repetition ratios of one field (``a / b``), their median and a bootstrap interval."""

    ratios: tuple[float, ...]
    median: float
    low: float
    high: float
    share_at_least_one: float

    def to_dict(self) -> dict[str, object]:
        return {
            "ratios": [round(r, 3) for r in self.ratios],
            "median": round(self.median, 3),
            "interval": [round(self.low, 3), round(self.high, 3)],
            "share_at_least_one": round(self.share_at_least_one, 3),
        }


def bootstrap_median_interval(
    values: list[float], confidence: float = 0.9, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of ``values``."""
    if not values:
        raise ValueError("no values")
    if len(values) == 1:
        return values[0], values[0]
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(samples))
    tail = (1.0 - confidence) / 2.0
    lo = medians[int(tail * (samples - 1))]
    hi = medians[round((1.0 - tail) * (samples - 1))]
    return lo, hi


def _figure(rep: RepetitionResult, field: str, turn: int | None) -> float | None:
    value = getattr(rep, field) if turn is None else turn_value(rep, f"turn_{field}", turn)
    return None if value is None or math.isnan(value) else float(value)


def paired_ratio(
    a: LevelResult, b: LevelResult, field: str = "tokens_per_s", turn: int | None = None
) -> PairedRatio | None:
    """``a``'s repetitions over ``b``'s, paired by position; None without valid pairs.
    With ``turn``, ``field`` is a per-turn figure of the follow-up scenario
    (``ttft_ms_p50`` reads ``turn_ttft_ms_p50[turn - 1]``)."""
    ratios = []
    for ra, rb in zip(a.repetitions, b.repetitions, strict=False):
        x, y = _figure(ra, field, turn), _figure(rb, field, turn)
        if x is not None and y:
            ratios.append(x / y)
    if not ratios:
        return None
    lo, hi = bootstrap_median_interval(ratios)
    at_least_one = sum(r >= 1.0 for r in ratios) / len(ratios)
    return PairedRatio(tuple(ratios), statistics.median(ratios), lo, hi, at_least_one)
