"""Integer bounds of a JSON schema as GBNF: checked against every integer in a window."""

from __future__ import annotations

import random
import re

import pytest

from backend.server.integer_range_grammar import integer_range_rule


def _as_regex(rule: str) -> re.Pattern[str]:
    """The GBNF expression (literals, classes, alternatives) as a Python regex."""
    text = re.sub(r'"(.)"', lambda m: re.escape(m.group(1)), rule)
    return re.compile(text.replace(" ", ""))


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(0, 120), (7, 1234), (0, 0), (-5, 5), (-1234, -7), (1, 9), (10, 99), (95, 1005), (-3, 0)],
)
def test_exactly_the_integers_in_range_match(lo: int, hi: int) -> None:
    pattern = _as_regex(integer_range_rule(lo, hi))
    for n in range(lo - 200, hi + 200):
        assert bool(pattern.fullmatch(str(n))) == (lo <= n <= hi), n
    assert not pattern.fullmatch("007") and not pattern.fullmatch("-0")


def test_random_ranges_and_open_bounds() -> None:
    rng = random.Random(3)
    for _ in range(40):
        lo = rng.randint(-5000, 5000)
        hi = lo + rng.randint(0, 3000)
        pattern = _as_regex(integer_range_rule(lo, hi))
        for n in rng.sample(range(lo - 500, hi + 500), 300):
            assert bool(pattern.fullmatch(str(n))) == (lo <= n <= hi), (lo, hi, n)
    at_least = _as_regex(integer_range_rule(18, None))
    assert at_least.fullmatch("18") and at_least.fullmatch("123456789")
    assert not at_least.fullmatch("17") and not at_least.fullmatch("-1")
    at_most = _as_regex(integer_range_rule(None, -2))
    assert at_most.fullmatch("-2") and at_most.fullmatch("-99999")
    assert not at_most.fullmatch("-1") and not at_most.fullmatch("0")


def test_an_empty_range_is_refused() -> None:
    with pytest.raises(ValueError):
        integer_range_rule(5, 4)
