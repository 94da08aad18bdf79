"""The Chat page's Tools panel: the MCP servers of ``mcp.json``, each with an on/off box for
this chat, its state (a failed one says why) and its tools; and the question a tool call
asks before it runs, answered on the GUI thread for the reply's worker."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QGroupBox,
    QLabel,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.page_models.chat_tools import Answer, ServerRow
from app.widgets.checkbox_style import use_visible_checkboxes
from app.widgets.common import set_button_role
from backend.mcp_tools.mcp_hub import McpTool


def state_text(row: ServerRow) -> str:
    if row.state == "failed":
        return f"failed: {(row.error or '').splitlines()[0] if row.error else 'unknown'}"
    if row.state == "ready":
        return f"ready · {', '.join(row.tools) or 'no tools'}"
    return "starts when a chat uses it" if row.state == "stopped" else row.state


class ToolsPanel(QGroupBox):
    """``toggled(name, on)`` when a server's box changes; ``reload_requested()``."""

    toggled = Signal(str, bool)
    reload_requested = Signal()

    def __init__(self, config: Path, parent: QWidget | None = None) -> None:
        super().__init__("Tools (MCP)", parent)
        self.config = config
        self._v = QVBoxLayout(self)
        self._v.setSpacing(6)
        self.rows: dict[str, tuple[QCheckBox, QLabel]] = {}
        self.note = QLabel()
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.setWordWrap(True)
        self.note.setProperty("muted", True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._rows_box = QVBoxLayout()
        self._v.addLayout(self._rows_box)
        self._v.addWidget(self.note)
        reload = set_button_role(QPushButton("Reload mcp.json"), "flat")
        reload.clicked.connect(self.reload_requested)
        self._v.addWidget(reload)
        use_visible_checkboxes(self)

    def show_rows(self, rows: list[ServerRow], error: str | None) -> None:
        names = [r.name for r in rows]
        if names != list(self.rows):
            while self._rows_box.count():
                item = self._rows_box.takeAt(0)
                if item is not None and (widget := item.widget()) is not None:
                    widget.deleteLater()
            self.rows = {}
            for row in rows:
                box = QCheckBox(row.name)
                box.toggled.connect(lambda on, name=row.name: self.toggled.emit(name, on))
                label = QLabel()
                label.setTextFormat(Qt.TextFormat.PlainText)  # a server's stderr is text
                label.setWordWrap(True)
                label.setProperty("muted", True)
                self._rows_box.addWidget(box)
                self._rows_box.addWidget(label)
                self.rows[row.name] = (box, label)
        for row in rows:
            box, label = self.rows[row.name]
            box.blockSignals(True)
            box.setChecked(row.enabled)
            box.blockSignals(False)
            always = " · runs without asking" if row.always else ""
            label.setText(state_text(row) + always)
            label.setToolTip(row.error or "")
        if error:
            self.note.setText(error)
        elif not rows:
            self.note.setText(
                f"No MCP servers. Put yours in {self.config} (the mcpServers format of "
                "Claude Desktop, LM Studio and Cursor)."
            )
        else:
            self.note.setText(f"From {self.config}. Each call asks before it runs.")


class ApprovalBridge(QObject):
    """The reply's worker asks here (blocking it) and the GUI thread shows the question."""

    _asked = Signal(object)

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._parent = parent
        self._asked.connect(self._show, Qt.ConnectionType.QueuedConnection)

    def ask(self, tool: McpTool, arguments: dict[str, Any], cancel: threading.Event) -> Answer:
        """From the worker thread: the user's answer (deny if the reply is stopped)."""
        done = threading.Event()
        box: dict[str, Any] = {"tool": tool, "arguments": arguments, "done": done}
        self._asked.emit(box)
        while not done.wait(0.1):
            if cancel.is_set():
                return "deny"
        answer: Answer = box.get("answer", "deny")
        return answer

    @Slot(object)
    def _show(self, box: dict[str, Any]) -> None:
        tool: McpTool = box["tool"]
        shown = json.dumps(box["arguments"], ensure_ascii=False, indent=1)
        dialog = QMessageBox(self._parent)
        dialog.setWindowTitle("Run a tool?")
        dialog.setText(f"The model wants to run {tool.name} from {tool.server}.")
        dialog.setInformativeText(f"Arguments:\n{shown[:1500]}")
        once = dialog.addButton("Allow once", QMessageBox.ButtonRole.AcceptRole)
        always = dialog.addButton("Always for this tool", QMessageBox.ButtonRole.AcceptRole)
        server = dialog.addButton(f"Always for {tool.server}", QMessageBox.ButtonRole.AcceptRole)
        deny = dialog.addButton("Deny", QMessageBox.ButtonRole.RejectRole)
        dialog.setDefaultButton(deny)
        dialog.exec()
        clicked = dialog.clickedButton()
        answers = {once: "once", always: "always", server: "server"}
        box["answer"] = answers.get(clicked, "deny")  # type: ignore[call-overload]
        box["done"].set()
