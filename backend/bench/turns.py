"""Per-turn figures of the ``follow-up`` scenario: TTFT and prompt length of turn 1, 2, ...

A follow-up turn's TTFT says how much of the conversation the server prefilled again: one
that keeps the conversation's cache prefills only the new user message, so its TTFT stays
flat while the prompt grows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from backend.bench.stats import median, percentile

if TYPE_CHECKING:
    from backend.bench.results import RepetitionResult, RequestRecord

TURN_FIELDS = ("turn_ttft_ms_p50", "turn_ttft_ms_p99", "turn_prompt_tokens_mean")


def turn_figures(records: Sequence[RequestRecord]) -> dict[str, list[float]]:
    """``TURN_FIELDS`` -> one value per turn (index 0 is turn 1); empty lists when no record
    belongs to a turn. Failed requests count in no turn."""
    turns = sorted({r.turn for r in records if r.turn is not None})
    out: dict[str, list[float]] = {name: [] for name in TURN_FIELDS}
    for turn in range(1, (turns[-1] if turns else 0) + 1):
        ok = [r for r in records if r.turn == turn and r.ok]
        ttfts = [r.ttft_s * 1000.0 for r in ok if r.ttft_s is not None]
        prompts = [float(r.prompt_tokens) for r in ok if r.prompt_tokens is not None]
        out["turn_ttft_ms_p50"].append(percentile(ttfts, 50))
        out["turn_ttft_ms_p99"].append(percentile(ttfts, 99))
        out["turn_prompt_tokens_mean"].append(sum(prompts) / len(prompts) if prompts else math.nan)
    return out


def turn_count(repetitions: Sequence[RepetitionResult]) -> int:
    return max((len(r.turn_ttft_ms_p50) for r in repetitions), default=0)


def turn_value(rep: RepetitionResult, name: str, turn: int) -> float:
    """Figure ``name`` (one of ``TURN_FIELDS``) of ``turn`` (1-based); NaN if absent."""
    values: list[float] = getattr(rep, name)
    return values[turn - 1] if 0 < turn <= len(values) else math.nan


def turn_medians(repetitions: Sequence[RepetitionResult]) -> list[dict[str, Any]]:
    """Per turn, the median over repetitions of each per-turn figure."""
    rows: list[dict[str, Any]] = []
    for turn in range(1, turn_count(repetitions) + 1):
        row: dict[str, Any] = {"turn": turn}
        for name in TURN_FIELDS:
            value = median([turn_value(r, name, turn) for r in repetitions])
            row[name.removeprefix("turn_")] = None if math.isnan(value) else round(value, 3)
        rows.append(row)
    return rows
