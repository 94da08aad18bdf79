"""The Server page's right column: the status with Start/Stop/Restart, the endpoint with
copy-paste snippets, and the server's log."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.page_models.ollama_snippets import OLLAMA_SNIPPETS
from app.page_models.server_status import Endpoint, StatusView
from app.page_models.snippets import SNIPPETS
from app.widgets.common import StatusLight, log_view, set_button_role


def copy_text(text: str) -> None:
    QGuiApplication.clipboard().setText(text)


class StatusBox(QGroupBox):
    """A light, the state in words, the three buttons, and a detail line."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Status", parent)
        v = QVBoxLayout(self)
        row = QHBoxLayout()
        self.light = StatusLight()
        self.state_label = QLabel("Stopped")
        self.state_label.setStyleSheet("font-size: 15px; font-weight: 600;")
        self.state_label.setWordWrap(True)
        row.addWidget(self.light)
        row.addWidget(self.state_label, 1)
        self.start_button = set_button_role(QPushButton("Start"), "primary")
        self.stop_button = set_button_role(QPushButton("Stop"), "danger")
        self.restart_button = QPushButton("Restart")
        for button in (self.start_button, self.stop_button, self.restart_button):
            button.setMinimumWidth(90)
            row.addWidget(button)
        self.detail_label = QLabel()
        self.detail_label.setProperty("muted", True)
        self.detail_label.setWordWrap(True)
        # how the served model's CPU weights run (AMX, repack or plain), from /v1/stats
        self.cpu_label = QLabel()
        self.cpu_label.setProperty("muted", True)
        self.cpu_label.setWordWrap(True)
        self.cpu_label.hide()
        v.addLayout(row)
        v.addWidget(self.detail_label)
        v.addWidget(self.cpu_label)

    def show_status(self, state: str, view: StatusView) -> None:
        self.light.set_state(state)
        self.state_label.setText(view.title)
        self.start_button.setEnabled(view.can_start)
        self.stop_button.setEnabled(view.can_stop)
        self.restart_button.setEnabled(view.can_restart)
        if view.detail is not None:
            self.detail_label.setText(view.detail)
        if state != "running":
            self.cpu_label.hide()

    def show_cpu_path(self, text: str) -> None:
        self.cpu_label.setText(text)
        self.cpu_label.show()


class EndpointBox(QGroupBox):
    """The API's URL and a tab of code per snippet, each with a copy button."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Endpoint", parent)
        v = QVBoxLayout(self)
        row = QHBoxLayout()
        self.url_edit = QLineEdit()
        self.url_edit.setReadOnly(True)
        self.copy_url_button = QPushButton("Copy URL")
        self.copy_url_button.clicked.connect(lambda: copy_text(self.url_edit.text()))
        row.addWidget(self.url_edit, 1)
        row.addWidget(self.copy_url_button)
        v.addLayout(row)
        # a client per entry (the OpenAI ones, then those with an Ollama provider): too many
        # for tabs on a laptop screen, so a list picks the one shown
        self.snippet_combo = QComboBox()
        self.snippet_stack = QStackedWidget()
        self.snippet_edits: list[QPlainTextEdit] = []
        for title, _write in (*SNIPPETS, *OLLAMA_SNIPPETS):
            edit = QPlainTextEdit()
            edit.setObjectName("Snippet")
            edit.setReadOnly(True)
            edit.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
            self.snippet_edits.append(edit)
            self.snippet_stack.addWidget(edit)
            self.snippet_combo.addItem(title)
        self.snippet_combo.currentIndexChanged.connect(self.snippet_stack.setCurrentIndex)
        copy = set_button_role(QPushButton("Copy snippet"), "flat")
        copy.clicked.connect(
            lambda: copy_text(self.snippet_edits[self.snippet_combo.currentIndex()].toPlainText())
        )
        picker = QHBoxLayout()
        picker.addWidget(QLabel("Set up"))
        picker.addWidget(self.snippet_combo, 1)
        picker.addWidget(copy)
        v.addLayout(picker)
        # up to 170 px; less on a short window (a banner above, 1280x720) rather than
        # pushing the whole page into a scroll area
        self.snippet_stack.setMinimumHeight(90)
        self.snippet_stack.setMaximumHeight(170)
        v.addWidget(self.snippet_stack)

    def show_endpoint(self, endpoint: Endpoint) -> None:
        self.url_edit.setText(endpoint.api_url)
        for edit, (_title, code) in zip(self.snippet_edits, endpoint.snippets(), strict=True):
            edit.setPlainText(code)


class ServerLogBox(QGroupBox):
    """The server's output, as it prints it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Server log", parent)
        v = QVBoxLayout(self)
        self.log_view = log_view(5000)
        self.log_view.setPlaceholderText("The server's output appears here once it starts.")
        v.addWidget(self.log_view)
