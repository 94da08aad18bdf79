"""Every page at 1280x720 and up: no overlapping, clipped or squeezed widgets.

The check compares widget geometries (see :mod:`tests.app.layout_check`), not pixels,
so it is exact and needs no reference images. Sizes are logical pixels, the unit
Qt lays widgets out in: a 1920x1080 screen at 150% scaling (``QT_SCALE_FACTOR=1.5``
or the desktop's own setting) gives the window 1920/1.5 x 1080/1.5 = 1280x720
logical pixels, fonts included, so the 1280x720 case covers 150% on a full-HD
screen too (and 2560x1440 at 200%). At :data:`MINIMUM_SIZE`, the smallest the window
allows (a maximised window on a 1280x720 screen, less its title bar and panel), a
page may scroll but still must not overlap or cut.
"""

from __future__ import annotations

import time

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MINIMUM_SIZE, MainWindow
from app.pages.dashboard_page import DashboardPage
from tests.app.layout_check import layout_problems
from tests.server.stats_sample import sample_stats

SIZES = [(1280, 720), (1440, 900), (1920, 1080), (2560, 1440)]


def _show(window: MainWindow, qtbot: QtBot, key: str) -> None:
    window.show_page(key)
    if key == "dashboard":  # the live charts and tiles, not only the empty state
        dash = window.page(key)
        assert isinstance(dash, DashboardPage)
        dash.stack.setCurrentIndex(1)
        for i in range(5):
            dash.on_stats(sample_stats(i), received_at=time.monotonic())
        dash.redraw()
    qtbot.wait(60)


@pytest.mark.parametrize(("width", "height"), SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_pages_fit_without_overlap_or_clipping(
    window: MainWindow, qtbot: QtBot, width: int, height: int
) -> None:
    window.resize(width, height)
    qtbot.wait(50)
    assert (window.width(), window.height()) == (width, height)
    problems: dict[str, list[str]] = {}
    for key in window.page_keys():
        _show(window, qtbot, key)
        found = layout_problems(window)
        holder = window.page_holder
        if holder.verticalScrollBar().isVisible() or holder.horizontalScrollBar().isVisible():
            found.append(
                f"the whole page scrolls: it needs "
                f"{window.page(key).minimumSizeHint().toTuple()}, has "
                f"{holder.viewport().size().toTuple()}"
            )
        if found:
            problems[key] = found
    assert not problems, "\n".join(
        f"{key}:\n  " + "\n  ".join(lines) for key, lines in problems.items()
    )


def test_smallest_window_scrolls_instead_of_squeezing(window: MainWindow, qtbot: QtBot) -> None:
    window.resize(*MINIMUM_SIZE)
    qtbot.wait(50)
    assert window.minimumSize().toTuple() == MINIMUM_SIZE
    problems: dict[str, list[str]] = {}
    for key in window.page_keys():
        _show(window, qtbot, key)
        page = window.page(key)
        need = page.minimumSizeHint()
        assert page.width() >= need.width() and page.height() >= need.height(), key
        found = layout_problems(window)
        if found:
            problems[key] = found
    assert not problems, "\n".join(
        f"{key}:\n  " + "\n  ".join(lines) for key, lines in problems.items()
    )


def test_the_check_sees_overlap_clipping_and_squeezing(qtbot: QtBot) -> None:
    """The checker itself: each kind of fault, built on purpose, is reported."""
    from PySide6.QtWidgets import QCheckBox, QLabel, QPushButton, QWidget

    root = QWidget()
    qtbot.addWidget(root)
    root.resize(300, 200)
    a = QPushButton("Overlapping one", root)
    a.setGeometry(10, 10, 150, 30)
    b = QPushButton("Overlapping two", root)
    b.setGeometry(100, 20, 150, 30)
    cut = QLabel("A label far too long for its little box", root)
    cut.setGeometry(10, 60, 60, 20)
    outside = QCheckBox("Half outside", root)
    outside.setGeometry(250, 150, 120, 24)
    wrapped = QLabel("A wrapped label with more words than fit in one short line", root)
    wrapped.setWordWrap(True)
    wrapped.setGeometry(10, 100, 120, 16)
    root.show()
    qtbot.waitExposed(root)
    text = "\n".join(layout_problems(root))
    assert "overlap: QPushButton 'Overlapping one'" in text
    assert "squeezed: QLabel 'A label far too long" in text
    assert "clipped: QCheckBox 'Half outside'" in text
    assert "squeezed: QLabel 'A wrapped label" in text and "wrapped text needs" in text
