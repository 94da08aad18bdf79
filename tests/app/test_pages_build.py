"""Every page builds, the registry degrades gracefully, and the window remembers things."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.app_context import AppContext
from app.main_window import MainWindow
from app.pages import PAGES, BrokenPage, ComingSoonPage, PageSpec, build_page
from app.pages.bench_page import BenchPage
from app.pages.chat_page import ChatPage
from app.pages.dashboard_page import DashboardPage
from app.pages.server_page import ServerPage
from app.storage.app_settings import AppSettings

OWN_PAGES = {"server": ServerPage, "dashboard": DashboardPage, "chat": ChatPage, "bench": BenchPage}


def test_every_page_builds(window: MainWindow, qtbot: QtBot) -> None:
    assert window.page_keys() == [spec.key for spec in PAGES]
    for key, cls in OWN_PAGES.items():
        assert isinstance(window.page(key), cls), key
    for key in window.page_keys():
        page = window.page(key)
        assert not isinstance(page, BrokenPage), f"{key} failed to build"
        window.show_page(key)
        qtbot.wait(10)
        assert window.stack.currentWidget() is page
        assert window.settings.window.last_page == key


def test_missing_page_module_shows_coming_soon(qtbot: QtBot) -> None:
    settings = AppSettings(autostart_server=False)
    context = AppContext(settings)
    spec = PageSpec("nope", "Nope", "models", "app.pages.no_such_page", "NoPage", "Later.")
    page = build_page(spec, settings, context)
    qtbot.addWidget(page)
    assert isinstance(page, ComingSoonPage)
    assert "coming soon" in page.title.text()


def test_page_that_raises_shows_the_error(qtbot: QtBot) -> None:
    settings = AppSettings(autostart_server=False)
    context = AppContext(settings)
    # a real module whose named class is not a page: constructing it raises
    spec = PageSpec("bad", "Bad", "models", "app.page_models.ring_buffer", "RingBuffer", "")
    page = build_page(spec, settings, context)
    qtbot.addWidget(page)
    assert isinstance(page, BrokenPage)
    assert "could not be opened" in page.title.text()


def test_window_state_persists(window: MainWindow, isolated_home: Path) -> None:
    window.show_page("dashboard")
    window.resize(1300, 800)
    window.close()
    saved = AppSettings.load()
    assert saved.window.last_page == "dashboard"
    assert saved.window.geometry_hex
    assert (isolated_home / "gui-settings.json").is_file()
