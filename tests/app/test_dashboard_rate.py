"""The dashboard takes 10 Hz stats without redrawing per sample or stalling the event loop."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.pages.dashboard_page import DashboardPage


def _snapshot(i: int) -> dict[str, object]:
    """A /v1/stats body in the documented shape (values vary with i)."""
    return {
        "requests": {"running": i % 3, "queued": i % 2, "completed": i, "errors": 0},
        "tokens": {"gen_tokens_per_s": 50.0 + i, "prompt_tokens_per_s": 200.0},
        "latency": {"ttft_ms_p50": 80.0, "ttft_ms_p99": 150.0, "ttft_ms_last": None},
        "kv": {
            "cells_used": 10 * i,
            "cells_total": 1024,
            "bytes_used": 23040 * 10 * i,
            "bytes_total": 23040 * 1024,
            "used_pct": 100 * 10 * i / 1024,
        },
        "prefix_cache": {"hits": i // 4, "misses": i // 5, "tokens_saved": 7 * i},
        "system": {
            "rss_bytes": 2.5e8,
            "cpu_pct": 90.0,
            "ram_used_bytes": 3e9,
            "ram_total_bytes": 2.5e10,
            "gpus": [
                {
                    "index": 0,
                    "name": "Test GPU",
                    "vram_used_bytes": 2**30 * i / 10,
                    "vram_total_bytes": 8 * 2**30,
                }
            ],
            "gpu_note": None,
        },
    }


def test_ten_hertz_stats_one_redraw_timer(window: MainWindow, qtbot: QtBot) -> None:
    dash = window.page("dashboard")
    assert isinstance(dash, DashboardPage)
    dash.stack.setCurrentIndex(1)
    window.show_page("dashboard")
    sent = 0
    lags: list[float] = []
    last = [time.monotonic()]

    def feed() -> None:
        nonlocal sent
        now = time.monotonic()
        lags.append(now - last[0])
        last[0] = now
        dash.on_stats({**_snapshot(sent), "_received_at": now})
        sent += 1

    timer = QTimer()
    timer.timeout.connect(feed)
    timer.start(100)
    qtbot.waitUntil(lambda: sent >= 30, timeout=20_000)
    timer.stop()
    qtbot.wait(dash.REDRAW_MS + 50)
    assert dash.stats_count == 30
    # one redraw per timer tick at most, not one per sample
    assert 1 <= dash.redraw_count <= 30 * 100 / dash.REDRAW_MS + 2
    assert max(lags[1:]) < 1.0, f"the event loop stalled for {max(lags[1:]):.2f} s"
    assert dash.tiles["done"].value.text() == "29"
    assert dash.tiles["kv"].value.text() == "290 / 1024"
    # a GPU in the stats shows its curve and name instead of the "no NVIDIA GPU" state
    assert dash.vram_stack.currentWidget() is dash.plots["vram"]
    assert len(dash.curves["vram"][0].xData) == 30
