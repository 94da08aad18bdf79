"""A three-step tour shown the first time the window opens: model, chat, dashboard.

Shown once: :func:`maybe_show_tour` records ``{"shown": true}`` under
``AppSettings.pages["first_run_tour"]`` (saved at once), so a later start skips it.
Each step has a button that takes the user to the page it describes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.storage.app_settings import AppSettings

log = logging.getLogger(__name__)

TOUR_KEY = "first_run_tour"


@dataclass(frozen=True)
class TourStep:
    title: str
    text: str
    action: str  # the button that opens the page
    page: str  # page key


STEPS: tuple[TourStep, ...] = (
    TourStep(
        "1 · Pick a model",
        "QuantDesk starts on its embedded model, SmolLM2-135M-Instruct: small, offline, "
        "ready now. To run a bigger one, search Hugging Face or add a GGUF file on the "
        "<b>Models</b> page, then press <i>Serve</i>.",
        "Open Models",
        "models",
    ),
    TourStep(
        "2 · Chat",
        "The <b>Chat</b> page talks to the local server with streaming answers. Set the "
        "system prompt and sampling on the right; conversations are kept between runs.",
        "Open Chat",
        "chat",
    ),
    TourStep(
        "3 · Dashboard",
        "The <b>Dashboard</b> shows the server live: tokens per second, time to first "
        "token, KV-cache use, CPU, RAM and VRAM. Any OpenAI client can use the same "
        "server; the <b>Server</b> page shows its address.",
        "Open Dashboard",
        "dashboard",
    ),
)


class FirstRunTour(QDialog):
    """Back / Next / Finish through :data:`STEPS`; ``page_requested`` asks for a page."""

    page_requested = Signal(str)  # page key

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("FirstRunTour")
        self.setWindowTitle("Welcome to QuantDesk")
        self.setMinimumWidth(480)
        self.stack = QStackedWidget()
        for step in STEPS:
            self.stack.addWidget(self._build_step(step))

        self.skip_button = QPushButton("Skip tour")
        self.back_button = QPushButton("Back")
        self.next_button = QPushButton("Next")
        self.next_button.setDefault(True)
        self.skip_button.clicked.connect(self.reject)
        self.back_button.clicked.connect(lambda: self.go_to(self.stack.currentIndex() - 1))
        self.next_button.clicked.connect(self._on_next)
        self.step_label = QLabel()
        self.step_label.setObjectName("TourStepCount")

        buttons = QHBoxLayout()
        buttons.addWidget(self.skip_button)
        buttons.addStretch(1)
        buttons.addWidget(self.step_label)
        buttons.addWidget(self.back_button)
        buttons.addWidget(self.next_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.stack, 1)
        layout.addLayout(buttons)
        self.go_to(0)

    def _build_step(self, step: TourStep) -> QWidget:
        page = QWidget()
        v = QVBoxLayout(page)
        title = QLabel(step.title)
        title.setObjectName("TourTitle")
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.4)
        font.setBold(True)
        title.setFont(font)
        body = QLabel(step.text)
        body.setWordWrap(True)
        body.setTextFormat(Qt.TextFormat.RichText)
        go = QPushButton(step.action)
        go.setObjectName(f"tour_open_{step.page}")
        go.clicked.connect(lambda _checked=False, key=step.page: self.page_requested.emit(key))
        v.addWidget(title)
        v.addWidget(body, 1)
        v.addWidget(go, 0, Qt.AlignmentFlag.AlignLeft)
        return page

    @property
    def step(self) -> int:
        return self.stack.currentIndex()

    def go_to(self, index: int) -> None:
        index = max(0, min(index, len(STEPS) - 1))
        self.stack.setCurrentIndex(index)
        self.back_button.setEnabled(index > 0)
        last = index == len(STEPS) - 1
        self.next_button.setText("Start chatting" if last else "Next")
        self.step_label.setText(f"{index + 1} of {len(STEPS)}")

    def _on_next(self) -> None:
        if self.step == len(STEPS) - 1:
            self.page_requested.emit("chat")
            self.accept()
        else:
            self.go_to(self.step + 1)


def tour_seen(settings: AppSettings) -> bool:
    return bool(settings.pages.get(TOUR_KEY, {}).get("shown", False))


def mark_tour_seen(settings: AppSettings, save: Callable[[], object] | None = None) -> None:
    """Remember the tour; ``save`` (e.g. ``settings.save``) writes it out now."""
    settings.pages.setdefault(TOUR_KEY, {})["shown"] = True
    if save is not None:
        try:
            save()
        except OSError as exc:
            log.warning("could not save that the tour was shown: %s", exc)


def maybe_show_tour(
    parent: QWidget,
    settings: AppSettings,
    navigate: Callable[[str], None],
    save: Callable[[], object] | None = None,
) -> FirstRunTour | None:
    """Open the tour (non-modal, over ``parent``) unless it was shown before.

    ``navigate`` shows a page by key (``MainWindow.show_page``). The tour is marked as
    seen as soon as it opens, so quitting mid-tour doesn't bring it back.
    """
    if tour_seen(settings):
        return None
    dialog = FirstRunTour(parent)
    dialog.page_requested.connect(navigate)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
    mark_tour_seen(settings, save if save is not None else settings.save)
    dialog.open()
    return dialog
