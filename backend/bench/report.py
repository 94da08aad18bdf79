"""Writing results: JSON files (atomically) and a plain-text table."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from backend.bench.results import BenchResult, LevelResult
from backend.bench.stats import median


def write_json_atomic(data: Any, path: Path) -> Path:
    """Write ``data`` as indented JSON to a temp file beside ``path``, then rename it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_results_json(results: Sequence[BenchResult], path: Path) -> Path:
    """One JSON file holding every server's results."""
    return write_json_atomic({"results": [r.to_dict() for r in results]}, path)


def _fmt(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _turn_rows(label: str, scenario: str, level: LevelResult) -> list[str]:
    """``follow-up``: one row per turn with its TTFT (and the mean prompt length in the
    tok/s column's place, marked ``p=``); ``edit``: the answers' similarity to the file."""
    rows = []
    for turn in level.turns():
        name = f"{scenario[:10]} t{turn['turn']}"
        prompt = f"p={_num(turn['prompt_tokens_mean'])}"
        rows.append(
            f"{label[:18]:<18} {name:<14} {level.concurrency:>4} {prompt:>8} {'':>6} "
            f"{_num(turn['ttft_ms_p50']):>9} {_num(turn['ttft_ms_p99']):>9}"
        )
    similar = [r.output_similarity for r in level.repetitions if r.output_similarity is not None]
    if similar:
        share = median(similar)
        rows.append(f"{'':<18} {'':<14} {'':>4} answers match the expected file: {share:.0%}")
    return rows


def format_table(results: Sequence[BenchResult]) -> str:
    """Medians per server, scenario and concurrency, as an aligned text table."""
    header = (
        f"{'server':<18} {'scenario':<14} {'conc':>4} {'tok/s':>8} {'req/s':>6} "
        f"{'TTFT p50':>9} {'TTFT p99':>9} {'ITL p50':>8} {'ITL p99':>8} {'err':>4} {'early':>5}"
    )
    lines = [header, "-" * len(header)]
    for result in results:
        for scenario in result.scenarios:
            for level in scenario.levels:
                errors = sum(r.errors for r in level.repetitions)
                early = sum(r.early_stops for r in level.repetitions)
                lines.append(
                    f"{result.label[:18]:<18} {scenario.name:<14} {level.concurrency:>4} "
                    f"{_fmt(level.tokens_per_s):>8} {_fmt(level.requests_per_s, 2):>6} "
                    f"{_fmt(level.ttft_ms_p50, 0):>9} {_fmt(level.ttft_ms_p99, 0):>9} "
                    f"{_fmt(level.itl_ms_p50):>8} {_fmt(level.itl_ms_p99):>8} "
                    f"{errors:>4} {early:>5}"
                )
                lines.extend(_turn_rows(result.label, scenario.name, level))
    lines.append("(medians over repetitions; latencies in ms)")
    return "\n".join(lines)
