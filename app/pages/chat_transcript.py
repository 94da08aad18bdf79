"""The Chat page's transcript: a bubble per message (or an empty state), following a reply as
it streams in; the streamed text is redrawn by a timer, not on every delta."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QScrollArea, QStackedWidget, QVBoxLayout, QWidget

from app.storage.chat_store import ChatMessage
from app.widgets.common import EmptyState
from app.widgets.message_bubble import MessageBubble

RENDER_MS = 60
FOLLOW_PX = 200  # scrolled this close to the end, the view keeps following new text


class ChatTranscript(QStackedWidget):
    """``edit_requested(index)`` / ``regenerate_requested(index)`` from a bubble's button."""

    edit_requested = Signal(int)
    regenerate_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bubbles: list[MessageBubble] = []
        self._streaming: MessageBubble | None = None  # the bubble a reply streams into
        self._pending: str | None = None  # streamed text not drawn yet
        self._render_timer = QTimer(self)
        self._render_timer.setInterval(RENDER_MS)
        self._render_timer.timeout.connect(self._render)
        self.empty = EmptyState(
            "chat",
            "Start a conversation",
            "Messages go to the model on the Server page, and replies stream in as they are "
            "generated. Enter sends; Shift+Enter starts a new line.",
        )
        self.messages_area = QScrollArea()
        self.messages_area.setWidgetResizable(True)
        self.messages_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        inner = QWidget()
        self._layout = QVBoxLayout(inner)
        self._layout.setContentsMargins(0, 0, 8, 0)
        self._layout.setSpacing(10)
        self._layout.addStretch(1)
        self.messages_area.setWidget(inner)
        self.messages_area.verticalScrollBar().rangeChanged.connect(self._maybe_follow)
        self.addWidget(self.empty)
        self.addWidget(self.messages_area)

    def show_messages(self, messages: list[ChatMessage]) -> None:
        """Show a whole conversation (the empty state when it has no messages)."""
        self.truncate(0)
        for message in messages:
            bubble = self.add(message.role, message.content)
            bubble.set_meta(message.meta)
            bubble.set_images(message.images)
            bubble.set_thinking(message.thinking)
            for call in message.calls:
                bubble.add_call(call)
        self.setCurrentWidget(self.messages_area if messages else self.empty)

    def add(self, role: str, text: str) -> MessageBubble:
        bubble = MessageBubble(role, text)
        index = len(self.bubbles)
        bubble.edit_requested.connect(lambda: self.edit_requested.emit(index))
        bubble.regenerate_requested.connect(lambda: self.regenerate_requested.emit(index))
        bubble.copy_requested.connect(lambda: QGuiApplication.clipboard().setText(bubble.text))
        self._layout.insertWidget(self._layout.count() - 1, bubble)
        self.bubbles.append(bubble)
        self.setCurrentWidget(self.messages_area)
        return bubble

    def truncate(self, count: int) -> None:
        """Keep the first ``count`` bubbles."""
        for bubble in self.bubbles[count:]:
            bubble.setParent(None)
            bubble.deleteLater()
        del self.bubbles[count:]

    def set_actions_enabled(self, enabled: bool) -> None:
        for bubble in self.bubbles:
            bubble.set_actions_enabled(enabled)

    # -- a streamed reply ------------------------------------------------------------------
    def start_stream(self) -> None:
        """Add the reply's bubble; :meth:`stream` fills it."""
        self._streaming = self.add("assistant", "")
        self._pending = None
        self._render_timer.start()

    def stream(self, text: str) -> None:
        """The reply so far (drawn at the next tick)."""
        self._pending = text

    def stream_thinking(self, text: str) -> None:
        if self._streaming is not None and self._streaming in self.bubbles:
            self._streaming.set_thinking(text)

    def stream_call(self, call: dict[str, Any]) -> None:
        """A tool call of the streamed reply, as soon as it is decided (run or not)."""
        if self._streaming is not None and self._streaming in self.bubbles:
            self._streaming.add_call(call)

    def end_stream(self, text: str, meta: dict[str, Any]) -> None:
        self._render_timer.stop()
        bubble, self._streaming = self._streaming, None
        self._pending = None
        if bubble is not None and bubble in self.bubbles:  # not if another chat was opened
            bubble.set_text(text)
            bubble.set_meta(meta)

    def _render(self) -> None:
        bubble = self._streaming
        if self._pending is not None and bubble is not None and bubble in self.bubbles:
            bubble.set_text(self._pending)
            self._pending = None

    def _maybe_follow(self, _lo: int, hi: int) -> None:
        bar = self.messages_area.verticalScrollBar()
        if self._streaming is not None or bar.value() >= hi - FOLLOW_PX:
            bar.setValue(hi)
