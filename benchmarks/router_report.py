"""router_compare's figures: per-pass values of each router, paired ratios ours / llama-server
(median, 90% bootstrap interval, share of passes at >= 1), the printed table and the PNG."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.bench.paired import PairedRatio, bootstrap_median_interval
from benchmarks.router_servers import BASELINE, OURS

MIB = 1 << 20


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    unit: str
    higher_is_better: bool
    scale: float = 1.0
    """Divide the stored value by this to show it in ``unit``."""


METRICS = (
    Metric("cold_switch_ttft_ms", "cold switch: request to first token (load included)", "ms",
           higher_is_better=False),
    Metric("warm_ttft_ms", "the next request's first token (loaded)", "ms",
           higher_is_better=False),
    Metric("tokens_per_s", "warm throughput, both models streaming", "tok/s",
           higher_is_better=True),
    Metric("rss_both_bytes", "RSS of the process tree, both resident", "MiB",
           higher_is_better=False, scale=MIB),
    Metric("rss_one_bytes", "RSS after unloading one", "MiB",
           higher_is_better=False, scale=MIB),
)  # fmt: skip


def per_pass(passes: list[dict[str, Any]], server: str, key: str) -> list[float | None]:
    """``key`` of ``server`` in each pass (None where that pass lacks it)."""
    values: list[float | None] = []
    for p in passes:
        value = p.get(server, {}).get(key)
        values.append(None if value is None else float(value))
    return values


def paired(passes: list[dict[str, Any]], key: str) -> PairedRatio | None:
    """Ours over llama-server's ``key``, pass by pass (each pair measured back to back)."""
    ratios = [
        a / b
        for a, b in zip(per_pass(passes, OURS, key), per_pass(passes, BASELINE, key), strict=True)
        if a is not None and b
    ]
    if not ratios:
        return None
    lo, hi = bootstrap_median_interval(ratios)
    share = sum(r >= 1.0 for r in ratios) / len(ratios)
    return PairedRatio(tuple(ratios), statistics.median(ratios), lo, hi, share)


def summary(passes: list[dict[str, Any]]) -> dict[str, Any]:
    """Per metric: each router's median over passes and the paired ratio."""
    out: dict[str, Any] = {}
    for m in METRICS:
        medians: dict[str, float | None] = {}
        for server in (OURS, BASELINE):
            values = [v for v in per_pass(passes, server, m.key) if v is not None]
            medians[server] = round(statistics.median(values), 3) if values else None
        pr = paired(passes, m.key)
        out[m.key] = {
            "unit": "bytes" if m.unit == "MiB" else m.unit,
            "higher_is_better": m.higher_is_better,
            "median": medians,
            "ratio_ours_over_llama_server": pr.to_dict() if pr else None,
        }
    return out


def _shown(value: float | None, m: Metric) -> str:
    return "-" if value is None else f"{value / m.scale:,.1f}"


def table(figures: dict[str, Any]) -> str:
    """The summary as text: medians of both routers and the paired ratio."""
    lines = [
        f"ours / {BASELINE}, pass by pass (median [90% bootstrap interval], share of passes >= 1)",
        f"{'figure':<54} {'ours':>10} {BASELINE:>13}  ratio",
    ]
    for m in METRICS:
        row = figures[m.key]
        med = row["median"]
        pr = row["ratio_ours_over_llama_server"]
        better = "higher" if m.higher_is_better else "lower"
        ratio = "-"
        if pr:
            lo, hi = pr["interval"]
            ratio = (
                f"{pr['median']:.2f} [{lo:.2f}, {hi:.2f}] "
                f"{pr['share_at_least_one']:.0%} of {len(pr['ratios'])}  ({better} is better)"
            )
        name = f"{m.title} ({m.unit})"
        lines.append(
            f"{name:<54} {_shown(med[OURS], m):>10} {_shown(med[BASELINE], m):>13}  {ratio}"
        )
    return "\n".join(lines)


def write_plot(
    passes: list[dict[str, Any]], figures: dict[str, Any], path: Path, title: str
) -> Path:
    """Left: each ratio with its interval (1.0 marked); then each figure, pass by pass."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig = Figure(figsize=(15, 7.5), layout="constrained")
    axes = fig.subplots(2, 3).flatten()
    ax = axes[0]
    names = [m.key for m in METRICS]
    ys = list(range(len(METRICS)))[::-1]
    for y, m in zip(ys, METRICS, strict=True):
        pr = figures[m.key]["ratio_ours_over_llama_server"]
        if not pr:
            continue
        mid, (lo, hi) = pr["median"], pr["interval"]
        color = "C2" if (mid >= 1.0) == m.higher_is_better else "C3"
        ax.errorbar([mid], [y], xerr=[[mid - lo], [hi - mid]], fmt="o", color=color, capsize=4)
        ax.scatter(pr["ratios"], [y] * len(pr["ratios"]), s=10, color="grey", alpha=0.6)
    ax.axvline(1.0, color="grey", lw=1)
    ax.set_yticks(ys, names, fontsize=7)
    ax.set_xscale("log")
    low, high = ax.get_xlim()
    ax.set_xlim(min(low, 0.8), max(high, 1.25))  # a few % should look like a few %
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_title(f"ours ÷ {BASELINE} per pass (grey), median and 90% interval\n"
                 "(green: ours better)", fontsize=9)  # fmt: skip
    ax.grid(True, which="both", alpha=0.3)
    for ax, m in zip(axes[1:], METRICS, strict=True):
        for i, server in enumerate((OURS, BASELINE)):
            values = per_pass(passes, server, m.key)
            xs = [n + 1 for n, v in enumerate(values) if v is not None]
            shown = [v / m.scale for v in values if v is not None]
            ax.plot(xs, shown, marker="os"[i], color=f"C{i}", label=server)
        ax.set_title(f"{m.title}\n({m.unit}, {'higher' if m.higher_is_better else 'lower'} "
                     "is better)", fontsize=9)  # fmt: skip
        ax.set_xlabel("pass")
        ax.set_xticks(range(1, len(passes) + 1))
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, path)
    return path
