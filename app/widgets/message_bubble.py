"""One chat message: role, rendered Markdown, timing line and actions."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.page_models.markdown_render import markdown_to_html
from app.storage.chat_store import ChatImage
from app.widgets.common import set_button_role
from app.widgets.image_strip import ImageStrip
from app.widgets.tool_call_card import ThinkingBlock, ToolCallCard


def meta_text(meta: dict[str, object]) -> str:
    """'42 tokens · 95.3 tok/s · TTFT 120 ms' (what is known of it)."""
    parts = []
    if meta.get("error"):
        return f"error: {meta['error']}"
    if meta.get("tokens") is not None:
        parts.append(f"{meta['tokens']} tokens")
    if meta.get("tokens_per_s") is not None:
        parts.append(f"{meta['tokens_per_s']} tok/s")
    if meta.get("ttft_ms") is not None:
        parts.append(
            f"TTFT {meta['ttft_ms']:.0f} ms" if isinstance(meta["ttft_ms"], int | float) else ""
        )
    if meta.get("tool_calls"):
        n = meta["tool_calls"]
        parts.append(f"{n} tool call{'s' if n != 1 else ''} · {meta.get('seconds', 0)} s")
    if meta.get("cancelled"):
        parts.append("stopped")
    return " · ".join(p for p in parts if p)


class MessageBubble(QFrame):
    """A user or assistant message; ``edit_requested`` / ``regenerate_requested`` carry nothing."""

    edit_requested = Signal()
    regenerate_requested = Signal()
    copy_requested = Signal()

    def __init__(self, role: str, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Bubble")
        self.setProperty("role", role)
        self.role = role
        self._text = text
        v = QVBoxLayout(self)
        v.setContentsMargins(14, 10, 14, 8)
        v.setSpacing(4)
        head = QHBoxLayout()
        who = QLabel("You" if role == "user" else "Assistant")
        who.setObjectName("BubbleRole")
        head.addWidget(who)
        head.addStretch(1)
        self.copy_button = set_button_role(QPushButton("Copy"), "flat")
        self.copy_button.clicked.connect(self.copy_requested)
        head.addWidget(self.copy_button)
        self.action_button = set_button_role(
            QPushButton("Edit" if role == "user" else "Regenerate"), "flat"
        )
        self.action_button.clicked.connect(
            self.edit_requested if role == "user" else self.regenerate_requested
        )
        head.addWidget(self.action_button)
        v.addLayout(head)
        self.images = ImageStrip(removable=False)
        v.addWidget(self.images)
        self.thinking = ThinkingBlock()
        v.addWidget(self.thinking)
        self.calls = QVBoxLayout()  # a card per tool call, before the answer
        self.calls.setSpacing(4)
        v.addLayout(self.calls)
        self.cards: list[ToolCallCard] = []
        self.body = QLabel()
        self.body.setTextFormat(Qt.TextFormat.RichText)
        self.body.setWordWrap(True)
        self.body.setOpenExternalLinks(True)
        self.body.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.LinksAccessibleByMouse
        )
        v.addWidget(self.body)
        self.meta = QLabel()
        self.meta.setObjectName("BubbleMeta")
        self.meta.hide()
        v.addWidget(self.meta)
        self.set_text(text)

    @property
    def text(self) -> str:
        return self._text

    def set_text(self, text: str) -> None:
        self._text = text
        self.body.setText(markdown_to_html(text) if text else "<i>…</i>")

    def set_images(self, images: list[ChatImage]) -> None:
        self.images.set_images(images)

    def set_thinking(self, text: str) -> None:
        self.thinking.set_thinking(text)

    def add_call(self, call: dict[str, Any]) -> None:
        card = ToolCallCard(call)
        self.calls.addWidget(card)
        self.cards.append(card)

    def set_meta(self, meta: dict[str, object]) -> None:
        text = meta_text(meta)
        self.meta.setText(text)
        self.meta.setVisible(bool(text))

    def set_actions_enabled(self, enabled: bool) -> None:
        self.action_button.setEnabled(enabled)
