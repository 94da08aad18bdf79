"""The Server page's fit estimate counts the RPC workers' memory, on real components: real
``quantdesk worker`` processes on loopback ports, probed by the Workers tab's Test, then one
bar per device in the fit box, the split as ``-ts`` says, the layers line, and a worker that
is untested or dead said and not counted. The fit never probes on its own."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.pages.server_page import ServerPage
from app.storage.app_settings import AppSettings
from app.widgets.fit_bar import FitBar
from backend.core.units import human_bytes
from tests.rpc.conftest import Worker, free_port, needs_rpc

pytestmark = needs_rpc


def server_page(window: MainWindow) -> ServerPage:
    window.show_page("server")
    page = window.page("server")
    assert isinstance(page, ServerPage)
    return page


def device_names(bar: FitBar) -> list[str]:
    return [row.label.text() for row in bar.device_rows if not row.label.isHidden()]


def add_worker(qtbot: QtBot, page: ServerPage, endpoint: str) -> None:
    """Type the address and press Add (which tests it at once)."""
    page.workers_box.endpoint_edit.setText(endpoint)
    qtbot.mouseClick(page.workers_box.add_button, Qt.MouseButton.LeftButton)


def test_an_untested_worker_is_said_then_counted_after_test_connection(
    qtbot: QtBot, settings: AppSettings, start_worker: Callable[..., Worker]
) -> None:
    from PySide6.QtWidgets import QApplication

    from app.theme import apply_theme

    endpoint = start_worker().endpoint
    settings.server.rpc = endpoint  # saved with the knobs: listed, not tested yet
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app)
    window = MainWindow(settings)
    window.confirm_close = False
    qtbot.addWidget(window)
    window.resize(1440, 900)
    window.show()
    try:
        page = server_page(window)
        bar = page.fit_bar
        assert page.workers_box.workers() == [endpoint]
        # untested: said, not counted, and the bars as without workers
        assert f"{endpoint} is not tested yet" in bar.summary.text()
        assert "not counted" in bar.summary.text()
        assert device_names(bar) == [] and bar.placement.isHidden()
        assert not bar.vram_label.isHidden()

        qtbot.mouseClick(page.workers_box.test_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: device_names(bar) == [f"RPC0 ({endpoint})"], timeout=60_000)
        probe = page.workers_box.probes[endpoint]
        row = bar.device_rows[0]
        free = human_bytes(probe.devices[0].free_bytes)
        assert row.text.text().endswith(f" of {free} free"), row.text.text()
        assert row.meter.total == probe.devices[0].free_bytes and row.meter.needed > 0
        assert bar.vram_label.isHidden() and not bar.ram_label.isHidden()
        assert "not counted" not in bar.summary.text()
        layers = bar.placement.text()
        assert layers.startswith("Layers 0-") and f"on RPC0 ({endpoint})" in layers
        assert not bar.placement.isHidden()
        assert page.fit_bar.view is not None and page.fit_bar.view.verdict == "fits"
    finally:
        window.close()


def test_two_workers_share_the_model_as_the_tensor_split_says(
    qtbot: QtBot, window: MainWindow, start_worker: Callable[..., Worker]
) -> None:
    first, second = start_worker().endpoint, start_worker().endpoint
    page = server_page(window)
    bar = page.fit_bar
    assert device_names(bar) == []  # no workers: one VRAM bar, as ever
    for endpoint in (first, second):
        add_worker(qtbot, page, endpoint)
    names = [f"RPC0 ({first})", f"RPC1 ({second})"]
    qtbot.waitUntil(lambda: device_names(bar) == names, timeout=60_000)

    page.workers_box.split_edit.setText("1,3")
    qtbot.waitUntil(
        lambda: bar.device_rows[1].meter.needed > 2 * bar.device_rows[0].meter.needed,
        timeout=30_000,
    )
    one, three = bar.device_rows[0].meter.needed, bar.device_rows[1].meter.needed
    assert three == pytest.approx(3 * one, rel=0.01)
    layers = bar.placement.text()
    assert f"on RPC0 ({first})" in layers and f"on RPC1 ({second})" in layers
    assert "+ output on RPC1" in layers  # the last device takes the output layer

    page.workers_box.split_edit.setText("3,1")
    qtbot.waitUntil(
        lambda: bar.device_rows[0].meter.needed > 2 * bar.device_rows[1].meter.needed,
        timeout=30_000,
    )

    # removing both workers: the bars as without workers again
    for _ in range(2):
        page.workers_box.table.selectRow(0)
        qtbot.mouseClick(page.workers_box.remove_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: device_names(bar) == [], timeout=30_000)
    assert not bar.vram_label.isHidden() and bar.placement.isHidden()


def test_a_dead_worker_is_said_and_not_counted(
    qtbot: QtBot, window: MainWindow, start_worker: Callable[..., Worker]
) -> None:
    live = start_worker().endpoint
    dead = f"127.0.0.1:{free_port()}"
    page = server_page(window)
    bar = page.fit_bar
    for endpoint in (live, dead):
        add_worker(qtbot, page, endpoint)
    qtbot.waitUntil(lambda: f"{dead} is unreachable" in bar.summary.text(), timeout=60_000)
    qtbot.waitUntil(lambda: device_names(bar) == [f"RPC0 ({live})"], timeout=60_000)
    assert "its memory is not counted" in bar.summary.text()
    assert dead not in bar.placement.text()
    assert live not in bar.summary.text()
