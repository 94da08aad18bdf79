"""The first-run tour: three steps, page buttons navigate, shown once and remembered on disk."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton, QWidget
from pytestqt.qtbot import QtBot

from app.first_run_tour import STEPS, FirstRunTour, maybe_show_tour
from app.storage.app_settings import AppSettings


def test_tour_walks_three_steps_and_finishes_on_chat(qtbot: QtBot) -> None:
    tour = FirstRunTour()
    qtbot.addWidget(tour)
    asked: list[str] = []
    tour.page_requested.connect(asked.append)
    tour.show()
    assert tour.step == 0 and not tour.back_button.isEnabled()
    qtbot.mouseClick(tour.findChild(QPushButton, "tour_open_models"), Qt.MouseButton.LeftButton)
    assert asked == ["models"]
    qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)
    assert tour.step == len(STEPS) - 1 == 2
    assert tour.next_button.text() == "Start chatting"
    qtbot.mouseClick(tour.back_button, Qt.MouseButton.LeftButton)
    assert tour.step == 1
    qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(tour.accepted, timeout=2000):
        qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)
    assert asked == ["models", "chat"]


def test_tour_is_shown_once_and_remembered_in_settings(qtbot: QtBot) -> None:
    parent = QWidget()
    qtbot.addWidget(parent)
    settings = AppSettings()
    shown = maybe_show_tour(parent, settings, navigate=lambda _key: None)
    assert isinstance(shown, FirstRunTour) and shown.isVisible()
    shown.reject()
    # settings.save() wrote it under the temp QUANTDESK_HOME; a fresh load remembers it
    reloaded = AppSettings.load()
    assert maybe_show_tour(parent, reloaded, navigate=lambda _key: None) is None
    assert maybe_show_tour(parent, AppSettings(), navigate=lambda _key: None) is not None


def test_tour_over_the_main_window_navigates_its_pages(qtbot: QtBot) -> None:
    """The hook the window uses: maybe_show_tour(window, settings, show_page, save_settings)."""
    from app.main_window import MainWindow

    settings = AppSettings()
    settings.autostart_server = False
    window = MainWindow(settings)
    window.confirm_close = False
    qtbot.addWidget(window)
    window.show()
    tour = maybe_show_tour(window, window.settings, window.show_page, window.save_settings)
    assert tour is not None and tour.parent() is window
    qtbot.mouseClick(tour.findChild(QPushButton, "tour_open_models"), Qt.MouseButton.LeftButton)
    assert window.stack.currentWidget() is window.page("models")
    tour.go_to(2)
    qtbot.mouseClick(tour.findChild(QPushButton, "tour_open_dashboard"), Qt.MouseButton.LeftButton)
    assert window.stack.currentWidget() is window.page("dashboard")
    qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)  # "Start chatting"
    assert window.stack.currentWidget() is window.page("chat")
    assert AppSettings.load().pages["first_run_tour"] == {"shown": True}
    window.close()
