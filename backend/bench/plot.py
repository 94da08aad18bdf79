"""A PNG of throughput, TTFT and inter-token latency against concurrency (matplotlib, Agg)."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from backend.bench.results import BenchResult, LevelResult


def _series(levels: Sequence[LevelResult], name: str) -> tuple[list[int], list[float]]:
    xs: list[int] = []
    ys: list[float] = []
    for level in levels:
        value = level.median_of(name)
        if not math.isnan(value):
            xs.append(level.concurrency)
            ys.append(value)
    return xs, ys


def write_plot(results: Sequence[BenchResult], path: Path, title: str | None = None) -> Path:
    """One line per server and scenario; written to a temp name, then renamed."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

    fig = Figure(figsize=(15, 4.8), layout="constrained")
    ax_tps, ax_ttft, ax_itl = fig.subplots(1, 3)
    colors = [f"C{i}" for i in range(10)]
    line_no = 0
    for result in results:
        for scenario in result.scenarios:
            color = colors[line_no % len(colors)]
            marker = "o" if scenario.shared_prefix_tokens == 0 else "s"
            label = f"{result.label} / {scenario.name}"
            line_no += 1
            xs, ys = _series(scenario.levels, "tokens_per_s")
            ax_tps.plot(xs, ys, marker=marker, color=color, label=label)
            for field, style, ax in (
                ("ttft_ms_p50", "-", ax_ttft),
                ("ttft_ms_p99", "--", ax_ttft),
                ("itl_ms_p50", "-", ax_itl),
                ("itl_ms_p99", "--", ax_itl),
            ):
                xs, ys = _series(scenario.levels, field)
                suffix = "p50" if field.endswith("p50") else "p99"
                ax.plot(xs, ys, style, marker=marker, color=color, label=f"{label} {suffix}")
    ax_tps.set_title("aggregate generated tokens/s (median)")
    ax_ttft.set_title("time to first token, ms (p50 solid, p99 dashed)")
    ax_itl.set_title("inter-token latency, ms (p50 solid, p99 dashed)")
    levels = sorted({lv.concurrency for r in results for s in r.scenarios for lv in s.levels})
    for ax in (ax_tps, ax_ttft, ax_itl):
        ax.set_xlabel("concurrent clients")
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.grid(True, which="both", alpha=0.3)
    for ax in (ax_ttft, ax_itl):
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax_tps.set_ylim(bottom=0)
    ax_tps.legend(fontsize=7)
    ax_ttft.legend(fontsize=6, ncol=1)
    if title:
        fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
