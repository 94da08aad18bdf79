"""The Bench page runs a real sweep against the real server, plots it and keeps it."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.pages.bench_page import BenchPage, parse_levels
from app.storage.bench_store import BenchStore


def test_parse_levels() -> None:
    assert parse_levels("4, 1 2,,2") == (1, 2, 4)
    with pytest.raises(ValueError):
        parse_levels("0, 1")
    with pytest.raises(ValueError):
        parse_levels("one")


@pytest.mark.slow
def test_bench_sweep_from_the_gui(window: MainWindow, qtbot: QtBot) -> None:
    page = window.page("bench")
    assert isinstance(page, BenchPage)
    window.show_page("bench")
    assert not page.run_button.isEnabled()  # no server yet
    with qtbot.waitSignal(window.context.server.server_started, timeout=180_000):
        window.context.start_server()
    assert page.run_button.isEnabled()
    page.levels_edit.setText("1, 2")
    page.reps_spin.setValue(1)
    page.rpc_spin.setValue(1)
    page.prompt_spin.setValue(16)
    page.max_tokens_spin.setValue(8)
    qtbot.mouseClick(page.run_button, Qt.MouseButton.LeftButton)
    assert page.worker is not None and page.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: page.worker is None, timeout=240_000)
    assert page.status.text().startswith("Done"), page.status.text()
    assert len(page.runs) == 1
    path, result = page.runs[0]
    levels = result.scenario("plain").levels  # type: ignore[union-attr]
    assert [lv.concurrency for lv in levels] == [1, 2]
    assert all(lv.tokens_per_s > 0 for lv in levels)
    assert "-np 2" in result.label
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["server"]["knobs"]["ctx_size"] == 1024
    assert "api_key" not in saved["server"]["knobs"]
    # plotted: one throughput curve with both levels
    curves = page.tps_plot.getPlotItem().listDataItems()
    assert len(curves) == 1 and list(curves[0].xData) == [1, 2]
    # kept for next time
    assert [r.label for _p, r in BenchStore().load_all()] == [result.label]
