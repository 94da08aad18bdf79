"""Changing the Server page's knobs changes the fit estimate it shows."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.pages.server_page import ServerPage

pytest.importorskip("backend.fit.fit_estimate")


def test_knobs_change_the_fit_estimate(window: MainWindow, qtbot: QtBot) -> None:
    page = window.page("server")
    assert isinstance(page, ServerPage)
    window.show_page("server")
    base = page.refresh_fit()
    assert base.exact and base.verdict == "fits"
    assert base.weights_bytes > 50_000_000  # SmolLM2 Q4_1 is ~94 MiB of tensors
    assert base.kv_bytes > 0

    page.ctx_spin.setValue(page.ctx_spin.value() * 4)  # 1024 -> 4096 cells
    qtbot.waitUntil(
        lambda: page.fit_bar.view is not None and page.fit_bar.view.kv_bytes > base.kv_bytes,
        timeout=3000,
    )
    bigger = page.fit_bar.view
    assert bigger is not None
    assert bigger.kv_bytes == pytest.approx(4 * base.kv_bytes, rel=0.05)
    assert bigger.weights_bytes == base.weights_bytes
    assert "KV cache" in page.fit_bar.summary.text()

    page.ctk_combo.setCurrentText("q8_0")
    page.ctv_combo.setCurrentText("q8_0")
    qtbot.waitUntil(
        lambda: page.fit_bar.view is not None and page.fit_bar.view.kv_bytes < bigger.kv_bytes,
        timeout=3000,
    )
    quantised = page.fit_bar.view
    assert quantised is not None
    assert quantised.kv_bytes == pytest.approx(bigger.kv_bytes * 34 / 64, rel=0.05)
    # the knobs are also what the next start uses, and they persist
    assert window.settings.server.ctx_size == 4096
    assert window.settings.server.cache_type_k == "q8_0"
