"""A tool call in the transcript, collapsible: its name and time on one line, its arguments
and result below when opened. A call that did not run says so. Also the collapsible
"Thinking" block of a reasoning model's reply."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QToolButton, QVBoxLayout, QWidget

RESULT_SHOWN = 4000  # characters of a result the card shows (the model got up to its cut)


class Collapsible(QFrame):
    """A header button that opens and closes a body label."""

    def __init__(self, title: str, body: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ToolCard")
        v = QVBoxLayout(self)
        v.setContentsMargins(8, 4, 8, 4)
        v.setSpacing(2)
        self.header = QToolButton()
        self.header.setCheckable(True)
        self.header.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.header.setArrowType(Qt.ArrowType.RightArrow)
        self.header.setAutoRaise(True)
        self.header.toggled.connect(self._toggle)
        self.body = QLabel()
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setObjectName("ToolCardBody")
        self.body.hide()
        v.addWidget(self.header)
        v.addWidget(self.body)
        self.set_content(title, body)

    def set_content(self, title: str, body: str) -> None:
        self.header.setText(title)
        self.body.setText(body)

    def _toggle(self, opened: bool) -> None:
        self.header.setArrowType(Qt.ArrowType.DownArrow if opened else Qt.ArrowType.RightArrow)
        self.body.setVisible(opened)


def call_title(call: dict[str, Any]) -> str:
    name = str(call.get("tool", "?"))
    if call.get("denied"):
        return f"Tool {name}: not run"
    seconds = float(call.get("seconds", 0.0))
    took = f"{seconds:.1f} s" if seconds >= 1 else f"{seconds * 1000:.0f} ms"
    status = "failed" if call.get("is_error") else took
    return f"Tool {name} ({status})"


def call_body(call: dict[str, Any]) -> str:
    arguments = json.dumps(call.get("arguments", {}), ensure_ascii=False, indent=1)
    result = str(call.get("result", ""))
    if len(result) > RESULT_SHOWN:
        result = result[:RESULT_SHOWN] + f"\n… ({len(result):,} characters)"
    return f"Arguments:\n{arguments}\n\nResult:\n{result}"


class ToolCallCard(Collapsible):
    def __init__(self, call: dict[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(call_title(call), call_body(call), parent)
        self.body.setTextFormat(Qt.TextFormat.PlainText)


class ThinkingBlock(Collapsible):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Thinking", "", parent)
        self.body.setTextFormat(Qt.TextFormat.PlainText)
        self.body.setProperty("muted", True)
        self.hide()

    def set_thinking(self, text: str) -> None:
        self.set_content("Thinking", text)
        self.setVisible(bool(text))
