"""backend.bench.paired: per-pass ratios of two servers and how sure their median is."""

from __future__ import annotations

import statistics

import pytest

from backend.bench import LevelResult, RepetitionResult
from backend.bench.paired import bootstrap_median_interval, paired_ratio


def _level(tokens_per_s: list[float]) -> LevelResult:
    reps = [
        RepetitionResult(
            repetition=i,
            requests=4,
            errors=0,
            early_stops=0,
            wall_s=1.0,
            generated_tokens=128,
            prompt_tokens_mean=64.0,
            tokens_per_s=t,
            requests_per_s=4.0,
            ttft_ms_p50=100.0,
            ttft_ms_p99=120.0,
            itl_ms_p50=10.0,
            itl_ms_p99=12.0,
            tokens_from_usage=True,
        )
        for i, t in enumerate(tokens_per_s)
    ]
    return LevelResult(concurrency=4, repetitions=reps)


def test_ratios_pair_repetitions_by_position() -> None:
    # the machine slows down pass by pass; the pairs cancel it, the medians do not
    ours = _level([110.0, 88.0, 66.0, 55.0])
    peer = _level([100.0, 80.0, 60.0, 50.0])
    pr = paired_ratio(ours, peer)
    assert pr is not None
    assert pr.ratios == pytest.approx((1.1, 1.1, 1.1, 1.1))
    assert pr.median == pytest.approx(1.1)
    assert (pr.low, pr.high) == pytest.approx((1.1, 1.1))
    assert pr.share_at_least_one == 1.0
    assert pr.to_dict()["interval"] == [1.1, 1.1]


def test_a_noisy_parity_has_an_interval_around_one() -> None:
    ours = _level([95.0, 104.0, 99.0, 103.0, 96.0, 101.0, 98.0, 102.0])
    peer = _level([100.0] * 8)
    pr = paired_ratio(ours, peer)
    assert pr is not None
    assert pr.median == pytest.approx(statistics.median(pr.ratios))
    assert pr.low < 1.0 < pr.high
    assert pr.low >= min(pr.ratios) and pr.high <= max(pr.ratios)
    assert pr.share_at_least_one == 0.5


def test_bootstrap_interval_is_reproducible_and_narrows_with_more_passes() -> None:
    few = [0.9, 1.1, 1.0, 0.95, 1.05]
    many = few * 8
    assert bootstrap_median_interval(few) == bootstrap_median_interval(few)
    lo_few, hi_few = bootstrap_median_interval(few)
    lo_many, hi_many = bootstrap_median_interval(many)
    assert hi_many - lo_many < hi_few - lo_few
    assert bootstrap_median_interval([1.2]) == (1.2, 1.2)
    with pytest.raises(ValueError):
        bootstrap_median_interval([])


def test_unmatched_or_empty_levels() -> None:
    assert paired_ratio(_level([]), _level([100.0])) is None
    pr = paired_ratio(_level([50.0, 60.0, 70.0]), _level([100.0]))  # one pass each
    assert pr is not None and pr.ratios == (0.5,)
