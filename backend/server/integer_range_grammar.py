"""GBNF for integers within ``minimum``/``maximum`` (JSON schema), digit by digit.

llama-cpp-python's converter ignores these bounds ("age": 1213 passed a 0..120 schema).
A range is split into runs that share a prefix and end in full ``[0-9]`` columns, the
way regex range generators do: [7, 1234] -> 7-9, 10-99, 100-999, 1000-1199, 1200-1229,
1230-1234. No leading zeros, at most 16 digits, as the converter's own integers.
"""

from __future__ import annotations

# The converter's integers have at most 16 digits: an open bound stops there.
LARGEST = 10**16 - 1


def integer_range_rule(minimum: int | None, maximum: int | None) -> str:
    """A GBNF expression (without trailing space) for the integers in [minimum, maximum]."""
    lo = -LARGEST if minimum is None else max(minimum, -LARGEST)
    hi = LARGEST if maximum is None else min(maximum, LARGEST)
    if lo > hi:
        raise ValueError(f"minimum {minimum} is greater than maximum {maximum}")
    alternatives: list[str] = []
    if lo < 0:
        magnitudes = _non_negative(max(1, -min(hi, -1)), -lo)
        alternatives += [f'"-" {m}' for m in magnitudes]
    if hi >= 0:
        alternatives += _non_negative(max(lo, 0), hi)
    return "(" + " | ".join(alternatives) + ")"


def _non_negative(lo: int, hi: int) -> list[str]:
    """Patterns for [lo, hi], 0 <= lo <= hi."""
    patterns = []
    start = lo
    for stop in _split(lo, hi):
        patterns.append(_pattern(start, stop))
        start = stop + 1
    return patterns


def _split(lo: int, hi: int) -> list[int]:
    """The ends of the runs that cover [lo, hi] (each run: one pattern)."""
    stops = {hi}
    nines = 1
    stop = _fill_nines(lo, nines)
    while lo <= stop <= hi:
        stops.add(stop)
        nines += 1
        stop = _fill_nines(lo, nines)
    zeros = 1
    stop = _clear_zeros(hi + 1, zeros) - 1
    while lo < stop <= hi:
        stops.add(stop)
        zeros += 1
        stop = _clear_zeros(hi + 1, zeros) - 1
    return sorted(stops)


def _fill_nines(n: int, count: int) -> int:
    text = str(n)
    return int(text[:-count] + "9" * count) if count <= len(text) else int("9" * count)


def _clear_zeros(n: int, count: int) -> int:
    return n - n % 10**count


def _pattern(start: int, stop: int) -> str:
    """One run: equal digits as literals, then one class, then full columns."""
    a, b = str(start), str(stop)
    assert len(a) == len(b), (start, stop)
    parts = []
    for da, db in zip(a, b, strict=True):
        if da == db:
            parts.append(f'"{da}"')
        elif da == "0" and db == "9":
            parts.append("[0-9]")
        else:
            parts.append(f"[{da}-{db}]")
    return " ".join(parts)
