"""Chat page: streaming chat with the served model; conversations saved on disk."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QGuiApplication, QKeyEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.app_context import AppContext
from app.app_settings import AppSettings
from app.chat_store import ChatMessage, ChatStore, Conversation
from app.server_process import ServerState
from app.widgets.common import Banner, ElidedLabel, EmptyState, scroll_column, set_button_role
from app.widgets.message_bubble import MessageBubble, meta_text
from app.workers.chat_stream import stream_reply
from app.workers.thread_worker import ThreadWorker

log = logging.getLogger(__name__)


class _Composer(QPlainTextEdit):
    """Enter sends, Shift+Enter adds a line."""

    def __init__(self, send: Callable[[], None]) -> None:
        super().__init__()
        self._send = send

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (
            event.modifiers() & Qt.KeyboardModifier.ShiftModifier
        ):
            self._send()
            return
        super().keyPressEvent(event)


def _dspin(lo: float, hi: float, value: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setDecimals(decimals)
    box.setValue(value)
    return box


class ChatPage(QWidget):
    """Conversations on the left, the transcript in the middle, settings on the right."""

    RENDER_MS = 60

    def __init__(
        self, settings: AppSettings, context: AppContext, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.context = context
        self.server = context.server
        self.store = ChatStore()
        self.conversation = Conversation(system_prompt=settings.chat.system_prompt)
        self.bubbles: list[MessageBubble] = []
        self.worker: ThreadWorker | None = None
        self._edit_index: int | None = None
        self._stream_text = ""
        self._stream_bubble: MessageBubble | None = None
        self._dirty = False
        self._render_timer = QTimer(self)
        self._render_timer.setInterval(self.RENDER_MS)
        self._render_timer.timeout.connect(self._render_stream)

        root = QHBoxLayout(self)
        root.setContentsMargins(20, 18, 20, 18)
        root.setSpacing(16)
        root.addWidget(self._build_history(), 0)
        root.addLayout(self._build_center(), 1)
        root.addWidget(scroll_column(self._build_settings(), 290), 0)

        self.server.state_changed.connect(self._on_server_state)
        self.server.server_started.connect(lambda _url: self._on_server_state("running"))
        self.banner.action_clicked.connect(self._on_banner_action)
        QShortcut(QKeySequence("Escape"), self, self.stop)
        self.refresh_history()
        self._show_conversation()
        self._on_server_state(self.server.state.value)

    # -- building -------------------------------------------------------------------------
    def _build_history(self) -> QWidget:
        box = QWidget()
        box.setFixedWidth(230)
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        title = QLabel("Chats")
        title.setObjectName("PageTitle")
        self.new_button = set_button_role(QPushButton("+  New chat"), "primary")
        self.new_button.clicked.connect(self.new_conversation)
        self.history = QListWidget()
        self.history.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.history.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.history.itemClicked.connect(self._on_history_clicked)
        self.delete_button = set_button_role(QPushButton("Delete chat"), "flat")
        self.delete_button.clicked.connect(self.delete_conversation)
        v.addWidget(title)
        v.addWidget(self.new_button)
        v.addWidget(self.history, 1)
        v.addWidget(self.delete_button)
        return box

    def _build_center(self) -> QVBoxLayout:
        v = QVBoxLayout()
        v.setSpacing(10)
        head = QHBoxLayout()
        self.title_label = ElidedLabel("New chat")
        self.title_label.setObjectName("PageTitle")
        self.model_label = QLabel()
        self.model_label.setProperty("muted", True)
        head.addWidget(self.title_label, 1)
        head.addWidget(self.model_label)
        v.addLayout(head)
        self.banner = Banner()
        v.addWidget(self.banner)

        self.transcript_stack = QStackedWidget()
        self.empty = EmptyState(
            "chat",
            "Start a conversation",
            "Messages go to the model on the Server page, and replies stream in as they are "
            "generated. Enter sends; Shift+Enter starts a new line.",
        )
        self.transcript = QScrollArea()
        self.transcript.setWidgetResizable(True)
        self.transcript.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        inner = QWidget()
        self.messages_layout = QVBoxLayout(inner)
        self.messages_layout.setContentsMargins(0, 0, 8, 0)
        self.messages_layout.setSpacing(10)
        self.messages_layout.addStretch(1)
        self.transcript.setWidget(inner)
        self.transcript.verticalScrollBar().rangeChanged.connect(self._maybe_follow)
        self.transcript_stack.addWidget(self.empty)
        self.transcript_stack.addWidget(self.transcript)
        v.addWidget(self.transcript_stack, 1)

        self.edit_note = QLabel()
        self.edit_note.setProperty("muted", True)
        self.edit_note.hide()
        v.addWidget(self.edit_note)
        row = QHBoxLayout()
        self.composer = _Composer(self.send)
        self.composer.setPlaceholderText("Message the model…")
        self.composer.setFixedHeight(84)
        buttons = QVBoxLayout()
        self.send_button = set_button_role(QPushButton("Send"), "primary")
        self.send_button.clicked.connect(self.send)
        self.stop_button = set_button_role(QPushButton("Stop"), "danger")
        self.stop_button.clicked.connect(self.stop)
        self.stop_button.hide()
        self.regen_button = QPushButton("Regenerate")
        self.regen_button.clicked.connect(self.regenerate)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.regen_button)
        row.addWidget(self.composer, 1)
        row.addLayout(buttons)
        v.addLayout(row)
        self.reply_stats = QLabel()
        self.reply_stats.setProperty("muted", True)
        v.addWidget(self.reply_stats)
        return v

    def _build_settings(self) -> QWidget:
        c = self.settings.chat
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        sys_box = QGroupBox("System prompt")
        sv = QVBoxLayout(sys_box)
        self.system_edit = QPlainTextEdit(c.system_prompt)
        self.system_edit.setMinimumHeight(110)
        sv.addWidget(self.system_edit)
        samp = QGroupBox("Sampling")
        form = QFormLayout(samp)
        self.temp_spin = _dspin(0.0, 2.0, c.temperature, 0.05)
        self.top_p_spin = _dspin(0.01, 1.0, c.top_p, 0.01)
        self.top_k_spin = QSpinBox()
        self.top_k_spin.setRange(0, 1000)
        self.top_k_spin.setValue(c.top_k)
        self.top_k_spin.setSpecialValueText("off")
        self.min_p_spin = _dspin(0.0, 1.0, c.min_p, 0.01)
        self.repeat_spin = _dspin(0.0, 10.0, c.repeat_penalty, 0.05)
        self.max_tokens_spin = QSpinBox()
        self.max_tokens_spin.setRange(1, 1_048_576)
        self.max_tokens_spin.setValue(c.max_tokens)
        self.seed_spin = QSpinBox()
        self.seed_spin.setRange(-1, 2**31 - 1)
        self.seed_spin.setValue(c.seed)
        self.seed_spin.setSpecialValueText("random")
        for label, widget in (
            ("Temperature", self.temp_spin),
            ("Top P", self.top_p_spin),
            ("Top K", self.top_k_spin),
            ("Min P", self.min_p_spin),
            ("Repeat penalty", self.repeat_spin),
            ("Max tokens", self.max_tokens_spin),
            ("Seed", self.seed_spin),
        ):
            form.addRow(label, widget)
        v.addWidget(sys_box)
        v.addWidget(samp)
        v.addStretch(1)
        self.system_edit.textChanged.connect(self._save_defaults)
        for spin in (
            self.temp_spin,
            self.top_p_spin,
            self.top_k_spin,
            self.min_p_spin,
            self.repeat_spin,
            self.max_tokens_spin,
            self.seed_spin,
        ):
            spin.valueChanged.connect(self._save_defaults)
        return box

    # -- settings ------------------------------------------------------------------------
    def _save_defaults(self) -> None:
        c = self.settings.chat
        c.system_prompt = self.system_edit.toPlainText()
        c.temperature = self.temp_spin.value()
        c.top_p = self.top_p_spin.value()
        c.top_k = self.top_k_spin.value()
        c.min_p = self.min_p_spin.value()
        c.repeat_penalty = self.repeat_spin.value()
        c.max_tokens = self.max_tokens_spin.value()
        c.seed = self.seed_spin.value()

    def sampling_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "temperature": self.temp_spin.value(),
            "top_p": self.top_p_spin.value(),
            "top_k": self.top_k_spin.value(),
            "min_p": self.min_p_spin.value(),
            "repeat_penalty": self.repeat_spin.value(),
            "max_tokens": self.max_tokens_spin.value(),
        }
        if self.seed_spin.value() >= 0:
            params["seed"] = self.seed_spin.value()
        return params

    # -- conversations --------------------------------------------------------------------
    def refresh_history(self) -> None:
        self.history.clear()
        conversations = self.store.list()
        if not conversations:
            hint = QListWidgetItem("No saved chats yet")
            hint.setFlags(Qt.ItemFlag.NoItemFlags)
            self.history.addItem(hint)
        for conv in conversations:
            item = QListWidgetItem(conv.title)
            item.setData(Qt.ItemDataRole.UserRole, conv.id)
            item.setToolTip(conv.title)
            self.history.addItem(item)
            if conv.id == self.conversation.id:
                self.history.setCurrentItem(item)

    def new_conversation(self) -> None:
        if self.is_streaming():
            self.stop()
        self.conversation = Conversation(system_prompt=self.system_edit.toPlainText())
        self._edit_index = None
        self.edit_note.hide()
        self._show_conversation()
        self.history.clearSelection()
        self.composer.setFocus()

    def open_conversation(self, conv_id: str) -> None:
        if self.is_streaming():
            self.stop()
        self.conversation = self.store.load(conv_id)
        self.system_edit.setPlainText(self.conversation.system_prompt)
        self._restore_params(self.conversation.params)
        self._show_conversation()

    def _restore_params(self, params: dict[str, Any]) -> None:
        """Put a saved conversation's sampling settings back in the spin boxes."""
        spins: dict[str, QSpinBox | QDoubleSpinBox] = {
            "temperature": self.temp_spin,
            "top_p": self.top_p_spin,
            "top_k": self.top_k_spin,
            "min_p": self.min_p_spin,
            "repeat_penalty": self.repeat_spin,
            "max_tokens": self.max_tokens_spin,
        }
        for key, spin in spins.items():
            if isinstance(params.get(key), int | float):
                spin.setValue(params[key])  # type: ignore[arg-type]
        self.seed_spin.setValue(int(params.get("seed", -1)))

    def delete_conversation(self) -> None:
        item = self.history.currentItem()
        if item is None or not item.data(Qt.ItemDataRole.UserRole):
            return
        conv_id = str(item.data(Qt.ItemDataRole.UserRole))
        self.store.delete(conv_id)
        if conv_id == self.conversation.id:
            self.new_conversation()
        self.refresh_history()

    def _on_history_clicked(self, item: QListWidgetItem) -> None:
        conv_id = item.data(Qt.ItemDataRole.UserRole)
        if conv_id:
            self.open_conversation(str(conv_id))

    def _show_conversation(self) -> None:
        for bubble in self.bubbles:
            bubble.setParent(None)
            bubble.deleteLater()
        self.bubbles = []
        for message in self.conversation.messages:
            bubble = self._add_bubble(message.role, message.content)
            bubble.set_meta(message.meta)
        self.title_label.set_full_text(self.conversation.title)
        self._update_controls()

    def _add_bubble(self, role: str, text: str) -> MessageBubble:
        bubble = MessageBubble(role, text)
        index = len(self.bubbles)
        bubble.edit_requested.connect(lambda: self.begin_edit(index))
        bubble.regenerate_requested.connect(lambda: self.regenerate(index))
        bubble.copy_requested.connect(lambda: QGuiApplication.clipboard().setText(bubble.text))
        self.messages_layout.insertWidget(self.messages_layout.count() - 1, bubble)
        self.bubbles.append(bubble)
        self.transcript_stack.setCurrentWidget(self.transcript)
        return bubble

    def _truncate(self, index: int) -> None:
        """Drop messages ``index`` and after (and their bubbles)."""
        del self.conversation.messages[index:]
        for bubble in self.bubbles[index:]:
            bubble.setParent(None)
            bubble.deleteLater()
        del self.bubbles[index:]

    def save(self) -> None:
        self.conversation.system_prompt = self.system_edit.toPlainText()
        self.conversation.params = self.sampling_params()
        self.conversation.auto_title()
        self.title_label.set_full_text(self.conversation.title)
        self.store.save(self.conversation)
        self.refresh_history()

    # -- sending --------------------------------------------------------------------------
    def is_streaming(self) -> bool:
        return self.worker is not None

    def send(self) -> None:
        text = self.composer.toPlainText().strip()
        if not text or self.is_streaming() or self.server.base_url is None:
            return
        if self._edit_index is not None:
            self._truncate(self._edit_index)
            self._edit_index = None
            self.edit_note.hide()
        self.composer.clear()
        self.conversation.messages.append(ChatMessage(role="user", content=text))
        self._add_bubble("user", text)
        self._start_reply()

    def begin_edit(self, index: int) -> None:
        """Put message ``index`` back in the composer; sending replaces it and what followed."""
        if self.is_streaming() or index >= len(self.conversation.messages):
            return
        self._edit_index = index
        self.composer.setPlainText(self.conversation.messages[index].content)
        self.edit_note.setText("Editing a message: Send replaces it and the replies after it.")
        self.edit_note.show()
        self.composer.setFocus()

    def regenerate(self, index: int | None = None) -> None:
        """Ask again for the reply at ``index`` (default: the last reply)."""
        if self.is_streaming() or self.server.base_url is None:
            return
        messages = self.conversation.messages
        if index is None:
            index = len(messages) - 1
        while index >= 0 and messages[index].role != "assistant":
            index -= 1
        if index < 0:
            return
        self._truncate(index)
        self._start_reply()

    def _start_reply(self) -> None:
        url = self.server.base_url
        if url is None:
            return
        self.conversation.system_prompt = self.system_edit.toPlainText()
        payload = {"messages": self.conversation.api_messages(), **self.sampling_params()}
        self.conversation.messages.append(ChatMessage(role="assistant", content=""))
        self._stream_bubble = self._add_bubble("assistant", "")
        self._stream_text = ""
        self.save()
        api_key = self.server.api_key

        def reply() -> dict[str, Any]:
            return stream_reply(url, payload, api_key, worker.report, worker.cancel_event)

        worker = ThreadWorker(reply)
        worker.yielded.connect(self._on_delta)
        worker.returned.connect(self._on_reply_finished)
        worker.errored.connect(self._on_reply_failed)
        worker.cancelled.connect(lambda: self._on_reply_finished({"cancelled": True}))
        worker.finished.connect(self._on_worker_done)
        self.worker = worker
        self._render_timer.start()
        self.reply_stats.setText("Waiting for the first token…")
        worker.start()
        self._update_controls()

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.cancel()

    def _on_delta(self, text: str) -> None:
        self._stream_text += text
        self._dirty = True

    def _render_stream(self) -> None:
        if self._dirty and self._stream_bubble is not None:
            self._dirty = False
            self._stream_bubble.set_text(self._stream_text)

    def _finish_message(self, meta: dict[str, Any]) -> None:
        self._render_timer.stop()
        message = self.conversation.messages[-1]
        message.content = self._stream_text
        message.meta = meta
        if self._stream_bubble is not None:
            self._stream_bubble.set_text(self._stream_text)
            self._stream_bubble.set_meta(meta)
        self.save()

    def _on_reply_finished(self, meta: dict[str, Any]) -> None:
        self._finish_message(meta)
        self.reply_stats.setText(f"Last reply: {meta_text(meta)}")

    def _on_reply_failed(self, message: str) -> None:
        self._finish_message({"error": message})
        self.reply_stats.setText("")
        self.banner.show_message(f"The reply failed: {message}", "error")

    def _on_worker_done(self) -> None:
        if self.worker is not None:
            self.worker.deleteLater()
        self.worker = None
        self._update_controls()

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.worker.wait(5000)

    # -- server state ---------------------------------------------------------------------
    def _on_server_state(self, state: str) -> None:
        if state == ServerState.RUNNING.value:
            self.banner.hide()
            knobs = self.server.knobs
            name = (
                "SmolLM2-135M-Instruct"
                if knobs is None or knobs.model == "default"
                else knobs.model.rsplit("/", 1)[-1]
            )
            self.model_label.setText(f"● {name}")
        elif state == ServerState.STARTING.value:
            self.banner.show_message("The server is loading the model…", "info")
            self.model_label.setText("")
        elif state == ServerState.CRASHED.value:
            self.banner.show_message(
                "The server stopped unexpectedly. Your conversation is kept.",
                "error",
                "Restart server",
            )
        else:
            self.banner.show_message("The server is not running.", "warning", "Start server")
            self.model_label.setText("")
        self._update_controls()

    def _on_banner_action(self) -> None:
        if self.server.state is ServerState.CRASHED and self.server.knobs is not None:
            self.server.restart()
        else:
            self.context.start_server()

    def _update_controls(self) -> None:
        streaming = self.is_streaming()
        ready = self.server.state is ServerState.RUNNING
        self.send_button.setVisible(not streaming)
        self.stop_button.setVisible(streaming)
        self.send_button.setEnabled(ready)
        has_reply = any(m.role == "assistant" for m in self.conversation.messages)
        self.regen_button.setEnabled(ready and not streaming and has_reply)
        for bubble in self.bubbles:
            bubble.set_actions_enabled(ready and not streaming)
        if not self.conversation.messages:
            self.transcript_stack.setCurrentWidget(self.empty)

    def _maybe_follow(self, _lo: int, hi: int) -> None:
        bar = self.transcript.verticalScrollBar()
        if self.is_streaming() or bar.value() >= hi - 200:
            bar.setValue(hi)
