"""The dashboard takes 10 Hz stats without redrawing per sample or stalling the event loop."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.pages.dashboard_page import DashboardPage
from backend.engine.stats_model import SpeculativeStats
from tests.server.stats_sample import sample_stats


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
        dash.on_stats(sample_stats(sent), received_at=now)
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
    assert dash.tiles["ttft"].value.text() == "80 / 150 ms"
    assert dash.tiles["prefix"].value.text() == "7"  # 29 // 4
    # a GPU in the stats shows its curve and name instead of the "no NVIDIA GPU" state
    assert dash.vram_stack.currentWidget() is dash.plots["vram"]
    assert len(dash.curves["vram"][0].xData) == 30


def test_the_speculation_tile_shows_the_acceptance_rate(window: MainWindow, qtbot: QtBot) -> None:
    dash = window.page("dashboard")
    assert isinstance(dash, DashboardPage)
    dash.stack.setCurrentIndex(1)
    window.show_page("dashboard")
    dash.on_stats(sample_stats(3), received_at=time.monotonic())
    qtbot.wait(dash.REDRAW_MS + 50)
    assert dash.tiles["spec"].value.text() == "off"  # a server without --spec-type / -md
    spec = SpeculativeStats(
        type="ngram-simple",
        drafted=200,
        accepted=150,
        drafts=40,
        acceptance_rate=0.75,
        draft_ms_avg=0.3,
    )
    dash.on_stats(sample_stats(4).model_copy(update={"speculative": spec}), time.monotonic())
    qtbot.wait(dash.REDRAW_MS + 50)
    assert dash.tiles["spec"].value.text() == "75%"
    assert "150/200" in dash.tiles["spec"].caption.text()
