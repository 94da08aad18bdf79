"""Ratios against llama-server (or another baseline): tables, paired intervals, the plot."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from backend.bench import (
    BenchResult,
    LevelResult,
)
from backend.bench.paired import paired_ratio
from backend.bench.turns import turn_count

BASELINE = "llama-server"
TURN_RATIO_FIELDS = ("ttft_ms_p50", "ttft_ms_p99")


RATIO_FIELDS = ("tokens_per_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "requests_per_s")


def _against_baseline(
    results: list[BenchResult], baseline: str = BASELINE
) -> Iterator[tuple[str, str, LevelResult, LevelResult]]:
    """(server, scenario, its level, the baseline's same level) for every level both ran."""
    base = next((r for r in results if r.label == baseline), None)
    if base is None:
        return
    for result in results:
        if result is base:
            continue
        for scenario in result.scenarios:
            base_scenario = base.scenario(scenario.name)
            for level in scenario.levels:
                base_level = base_scenario.level(level.concurrency) if base_scenario else None
                if base_level is not None:
                    yield result.label, scenario.name, level, base_level


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or not b or math.isnan(a / b):
        return None
    return round(a / b, 3)


def ratios(results: list[BenchResult]) -> dict[str, Any]:
    """Each server's medians divided by llama-server's, per scenario and concurrency; the
    follow-up scenario's rows also hold ``turns``: per turn, TTFT p50/p99 ratios."""
    out: dict[str, Any] = {}
    for label, scenario, level, base_level in _against_baseline(results):
        row: dict[str, Any] = {"concurrency": level.concurrency}
        for name in RATIO_FIELDS:
            row[name] = _ratio(level.median_of(name), base_level.median_of(name))
        base_turns = base_level.turns()
        if level.turns() and base_turns:
            row["turns"] = [
                {"turn": t["turn"]} | {name: _ratio(t[name], b[name]) for name in TURN_RATIO_FIELDS}
                for t, b in zip(level.turns(), base_turns, strict=False)
            ]
        out.setdefault(label, {}).setdefault(scenario, []).append(row)
    return out


def paired_ratios(results: list[BenchResult], baseline: str = BASELINE) -> dict[str, Any]:
    """Tokens/s of each server over the baseline's (llama-server's), repetition by repetition
    (with --interleave, the two ran back to back on the same prompts): the per-pass ratios,
    their median, a 90% bootstrap interval of it and the share of passes at >= 1."""
    out: dict[str, Any] = {}
    for label, scenario, level, base_level in _against_baseline(results, baseline):
        pr = paired_ratio(level, base_level)
        if pr is not None:
            rows = out.setdefault(label, {}).setdefault(scenario, [])
            rows.append({"concurrency": level.concurrency, **pr.to_dict()})
    return out


def paired_turn_ratios(results: list[BenchResult], baseline: str = BASELINE) -> dict[str, Any]:
    """Follow-up scenario: per turn, TTFT p50 and p99 over the baseline's, paired pass by
    pass like :func:`paired_ratios` (the goal is <= 1 at every turn)."""
    out: dict[str, Any] = {}
    for label, scenario, level, base_level in _against_baseline(results, baseline):
        turns = []
        for turn in range(1, turn_count(level.repetitions) + 1):
            row: dict[str, Any] = {"turn": turn}
            for name in TURN_RATIO_FIELDS:
                pr = paired_ratio(level, base_level, name, turn=turn)
                row[name] = pr.to_dict() if pr else None
            turns.append(row)
        if turns:
            rows = out.setdefault(label, {}).setdefault(scenario, [])
            rows.append({"concurrency": level.concurrency, "turns": turns})
    return out


def turn_table(table: dict[str, Any], baseline: str = BASELINE) -> str:
    """The per-turn TTFT ratios of :func:`paired_turn_ratios` as text."""
    lines = [
        f"follow-up TTFT over {baseline}'s per turn, pass by pass "
        "(median [90% interval]; <= 1 is the goal)"
    ]
    for label, scenarios in table.items():
        for scenario, rows in scenarios.items():
            for row in rows:
                for turn in row["turns"]:
                    cells = []
                    for name in TURN_RATIO_FIELDS:
                        pr = turn[name]
                        lo, hi = pr["interval"] if pr else (math.nan, math.nan)
                        mid = pr["median"] if pr else math.nan
                        cells.append(f"{name[-3:]} {mid:5.2f} [{lo:.2f}, {hi:.2f}]")
                    lines.append(
                        f"{label:<18} {scenario:<10} t{turn['turn']} {row['concurrency']:>4}  "
                        + "   ".join(cells)
                    )
    return "\n".join(lines)


def paired_table(table: dict[str, Any], baseline: str = BASELINE) -> str:
    lines = [
        f"tokens/s over {baseline}'s, pass by pass (median, 90% bootstrap interval, "
        "share of passes >= 1)"
    ]
    for label, scenarios in table.items():
        for scenario, rows in scenarios.items():
            for row in rows:
                lo, hi = row["interval"]
                lines.append(
                    f"{label:<18} {scenario:<14} {row['concurrency']:>4} "
                    f"{row['median']:>6.2f}  [{lo:.2f}, {hi:.2f}]  "
                    f"{row['share_at_least_one']:.0%} of {len(row['ratios'])}"
                )
    return "\n".join(lines)


def ratio_table(table: dict[str, Any]) -> str:
    lines = [
        f"ratios vs {BASELINE} (>1 tok/s is better; <1 latency is better)",
        f"{'server':<18} {'scenario':<14} {'conc':>4} {'tok/s':>7} {'TTFT50':>7} "
        f"{'TTFT99':>7} {'ITL50':>7}",
    ]
    for label, scenarios in table.items():
        for scenario, rows in scenarios.items():
            for row in rows:
                cells = [
                    "-" if row[k] is None else f"{row[k]:.2f}"
                    for k in ("tokens_per_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50")
                ]
                lines.append(
                    f"{label:<18} {scenario:<14} {row['concurrency']:>4} "
                    + " ".join(f"{c:>7}" for c in cells)
                )
                for turn in row.get("turns", []):
                    ttft = ["-" if turn[k] is None else f"{turn[k]:.2f}" for k in TURN_RATIO_FIELDS]
                    name = f"{scenario[:10]} t{turn['turn']}"
                    lines.append(
                        f"{label:<18} {name:<14} {row['concurrency']:>4} {'-':>7} "
                        + " ".join(f"{c:>7}" for c in ttft)
                    )
    return "\n".join(lines)


def rss_table(results: list[BenchResult]) -> str:
    lines = [f"{'server':<18} {'RSS loaded':>11} {'RSS peak':>10} {'RSS end':>10}"]
    for r in results:
        mb = {k: r.server[f"rss_bytes_{k}"] / 2**20 for k in ("loaded", "peak", "end")}
        lines.append(
            f"{r.label:<18} {mb['loaded']:>8.0f} MB {mb['peak']:>7.0f} MB {mb['end']:>7.0f} MB"
        )
    ours = next((r for r in results if r.label == "ours"), None)
    if ours and ours.server.get("model_size_bytes") and ours.server.get("kv_bytes_total"):
        budget = ours.server["model_size_bytes"] + ours.server["kv_bytes_total"] + 400 * 2**20
        lines.append(f"ours: target RSS <= model + KV + 400 MB = {budget / 2**20:.0f} MB")
    return "\n".join(lines)


def write_ratio_plot(
    table: dict[str, Any], path: Path, paired: dict[str, Any] | None = None
) -> Path:
    """Ratios of medians; with ``paired`` (from :func:`paired_ratios`), the tokens/s
    panel also shows each level's 90% interval of the paired median as an error bar."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.5), layout="constrained")
    ax_tps, ax_ttft = fig.subplots(1, 2)
    for i, (label, scenarios) in enumerate(table.items()):
        for j, (scenario, rows) in enumerate(scenarios.items()):
            style = dict(color=f"C{i}", marker="os"[j % 2], linestyle="-" if j == 0 else "--")
            xs = [row["concurrency"] for row in rows]
            for ax, key in ((ax_tps, "tokens_per_s"), (ax_ttft, "ttft_ms_p99")):
                ys = [math.nan if row[key] is None else row[key] for row in rows]
                ax.plot(xs, ys, label=f"{label} / {scenario}", **style)  # type: ignore[arg-type]
            bars = (paired or {}).get(label, {}).get(scenario, [])
            if bars:
                mid = [b["median"] for b in bars]
                ax_tps.errorbar(
                    [b["concurrency"] for b in bars],
                    mid,
                    fmt="none",
                    ecolor=f"C{i}",
                    capsize=4,
                    alpha=0.6,
                    yerr=[
                        [m - b["interval"][0] for m, b in zip(mid, bars, strict=True)],
                        [b["interval"][1] - m for m, b in zip(mid, bars, strict=True)],
                    ],
                )
    low, high = ax_tps.get_ylim()
    ax_tps.set_ylim(min(low, 0.9), max(high, 1.1))  # a few % should look like a few %
    ax_tps.axhline(1.0, color="grey", lw=1)
    ax_tps.set_title(
        f"aggregate tokens/s ÷ {BASELINE} (higher is better)"
        + ("\nbars: 90% interval of the paired per-pass median" if paired else "")
    )
    ax_ttft.axhline(1.0, color="grey", lw=1)
    ax_ttft.axhline(0.2, color="green", lw=1, ls=":")
    ax_ttft.set_title(f"TTFT p99 ÷ {BASELINE}\n(lower is better; 0.2 dotted)")
    ax_ttft.set_yscale("log")
    levels = sorted(
        {row["concurrency"] for sc in table.values() for rows in sc.values() for row in rows}
    )
    for ax in (ax_tps, ax_ttft):
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.minorticks_off()
        ax.set_xlabel("concurrent clients")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)
    return path
