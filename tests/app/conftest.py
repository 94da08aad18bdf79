"""Fixtures for the desktop app: a themed QApplication and a main window that never autostarts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.storage.app_settings import AppSettings
from tests.rpc.conftest import start_worker  # noqa: F401  (fixture: real RPC workers)


@pytest.fixture
def settings() -> AppSettings:
    s = AppSettings()
    s.autostart_server = False
    s.server.ctx_size = 1024
    s.server.parallel = 2
    s.server.port = 0
    s.server.threads = 2
    return s


@pytest.fixture
def window(qtbot: QtBot, settings: AppSettings) -> Iterator[MainWindow]:
    from PySide6.QtWidgets import QApplication

    from app.theme import apply_theme

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app)
    win = MainWindow(settings)
    win.confirm_close = False
    qtbot.addWidget(win)
    win.resize(1440, 900)
    win.show()
    yield win
    win.close()  # stops the server if a test left it running
