"""Chat page: streaming chat with the served model; conversations saved on disk.

With a library server a picker beside the title lists every library model: the chat
sends the chosen one as ``model``, and one not loaded loads on demand ("Loading <id>…"
until its first token), so switching needs no restart.

The conversation's state lives in :mod:`app.page_models.chat_session`; the messages are
:mod:`app.pages.chat_transcript`."""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.app_context import AppContext
from app.page_models.chat_session import ChatSession, served_label, server_notice
from app.page_models.chat_tools import ChatTools
from app.page_models.router_models import ModelCard
from app.pages.chat_attachments import ChatAttachments
from app.pages.chat_composer import Composer
from app.pages.chat_tools_panel import ApprovalBridge, ToolsPanel
from app.pages.chat_transcript import ChatTranscript
from app.storage.app_settings import AppSettings, ChatDefaults
from app.storage.chat_store import ChatStore
from app.widgets.common import Banner, ElidedLabel, scroll_column, set_button_role
from app.widgets.message_bubble import meta_text
from app.workers.chat_stream import run_tool_reply, stream_reply
from app.workers.server_process import ServerState
from app.workers.thread_worker import ThreadWorker, stop_worker
from backend.mcp_tools.mcp_config import default_mcp_path

log = logging.getLogger(__name__)


_STATE_WORDS = {"unloaded": "loads on demand", "loading": "loading…", "failed": "failed"}


def _dspin(lo: float, hi: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setDecimals(decimals)
    return box


class ChatPage(QWidget):
    """Conversations on the left, the transcript in the middle, settings on the right."""

    def __init__(
        self, settings: AppSettings, context: AppContext, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.context = context
        self.server = context.server
        self.store = ChatStore()
        self.session = ChatSession(self.store, settings.chat)
        self.tools = ChatTools(settings.pages.setdefault("chat", {}))
        self.worker: ThreadWorker | None = None
        self._first_token = False
        self._model_ids: list[str] = []

        root = QHBoxLayout(self)
        root.setContentsMargins(20, 18, 20, 18)
        root.setSpacing(16)
        root.addWidget(self._build_history(), 0)
        root.addLayout(self._build_center(), 1)
        root.addWidget(scroll_column(self._build_settings(), 290), 0)

        self.server.state_changed.connect(self._on_server_state)
        self.server.server_started.connect(lambda _url: self._on_server_state("running"))
        context.models_received.connect(self.show_models)
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
        self.model_combo = QComboBox()
        self.model_combo.setMinimumWidth(200)
        # as wide as a short name needs, not the longest id: the title keeps its room
        self.model_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.model_combo.setMinimumContentsLength(26)
        self.model_combo.setToolTip(
            "The model that answers. Any library model can be chosen: one that is not "
            "loaded loads when you send, beside the others."
        )
        self.model_combo.hide()
        self.model_combo.activated.connect(self._on_model_chosen)
        head.addWidget(self.title_label, 1)
        head.addWidget(self.model_label)
        head.addWidget(self.model_combo)
        v.addLayout(head)
        self.banner = Banner()
        v.addWidget(self.banner)
        self.transcript = ChatTranscript()
        self.transcript.edit_requested.connect(self.begin_edit)
        self.transcript.regenerate_requested.connect(self.regenerate)
        v.addWidget(self.transcript, 1)

        self.edit_note = QLabel("Editing a message: Send replaces it and the replies after it.")
        self.edit_note.setProperty("muted", True)
        self.edit_note.hide()
        v.addWidget(self.edit_note)
        self.attachments = ChatAttachments(
            self.session.attached, self._sees_images, self._model_name, self._say_error
        )
        v.addWidget(self.attachments)
        row = QHBoxLayout()
        self.composer = Composer(self.send, self.attachments.attach)
        self.composer.setPlaceholderText("Message the model…")
        self.composer.setFixedHeight(84)
        buttons = QVBoxLayout()
        self.send_button = set_button_role(QPushButton("Send"), "primary")
        self.send_button.clicked.connect(self.send)
        self.stop_button = set_button_role(QPushButton("Stop"), "danger")
        self.stop_button.clicked.connect(self.stop)
        self.stop_button.hide()
        self.regen_button = QPushButton("Regenerate")
        self.regen_button.clicked.connect(lambda: self.regenerate())
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
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        sys_box = QGroupBox("System prompt")
        sv = QVBoxLayout(sys_box)
        self.system_edit = QPlainTextEdit()
        self.system_edit.setMinimumHeight(110)
        sv.addWidget(self.system_edit)
        samp = QGroupBox("Sampling")
        form = QFormLayout(samp)
        self.temp_spin = _dspin(0.0, 2.0, 0.05)
        self.top_p_spin = _dspin(0.01, 1.0, 0.01)
        self.top_k_spin = QSpinBox()
        self.top_k_spin.setRange(0, 1000)
        self.top_k_spin.setSpecialValueText("off")
        self.min_p_spin = _dspin(0.0, 1.0, 0.01)
        self.repeat_spin = _dspin(0.0, 10.0, 0.05)
        self.max_tokens_spin = QSpinBox()
        self.max_tokens_spin.setRange(1, 1_048_576)
        self.seed_spin = QSpinBox()
        self.seed_spin.setRange(-1, 2**31 - 1)
        self.seed_spin.setSpecialValueText("random")
        self._spins: dict[str, QSpinBox | QDoubleSpinBox] = {
            "temperature": self.temp_spin,
            "top_p": self.top_p_spin,
            "top_k": self.top_k_spin,
            "min_p": self.min_p_spin,
            "repeat_penalty": self.repeat_spin,
            "max_tokens": self.max_tokens_spin,
            "seed": self.seed_spin,
        }
        for label, spin in zip(
            ("Temperature", "Top P", "Top K", "Min P", "Repeat penalty", "Max tokens", "Seed"),
            self._spins.values(),
            strict=True,
        ):
            form.addRow(label, spin)
        v.addWidget(sys_box)
        v.addWidget(samp)
        self.tools_panel = ToolsPanel(default_mcp_path())
        self.tools_panel.toggled.connect(self._on_tool_server_toggled)
        self.tools_panel.reload_requested.connect(self._reload_tools)
        self.approvals = ApprovalBridge(self)
        v.addWidget(self.tools_panel)
        self._show_tools()
        v.addStretch(1)
        self._show_defaults(self.settings.chat)
        self.system_edit.textChanged.connect(self._save_defaults)
        for spin in self._spins.values():
            spin.valueChanged.connect(self._save_defaults)
        self._save_defaults()  # the settings hold what the boxes show (rounded as they are)
        return box

    # -- settings ------------------------------------------------------------------------
    def _show_defaults(self, defaults: ChatDefaults) -> None:
        """Put a system prompt and sampling settings in the boxes (the settings follow)."""
        self.system_edit.setPlainText(defaults.system_prompt)
        for name, spin in self._spins.items():
            spin.setValue(getattr(defaults, name))

    def _save_defaults(self) -> None:
        c = self.settings.chat
        c.system_prompt = self.system_edit.toPlainText()
        for name, spin in self._spins.items():
            setattr(c, name, spin.value())

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
            if conv.id == self.session.conversation.id:
                self.history.setCurrentItem(item)

    def new_conversation(self) -> None:
        if self.is_streaming():
            self.stop()
        self.session.new()
        self.tools.new_chat()
        self._show_tools()
        self.attachments.refresh()
        self._show_conversation()
        self.history.clearSelection()
        self.composer.setFocus()

    def open_conversation(self, conv_id: str) -> None:
        if self.is_streaming():
            self.stop()
        self._show_defaults(self.session.open(conv_id))
        self._show_conversation()

    def delete_conversation(self) -> None:
        item = self.history.currentItem()
        if item is None or not item.data(Qt.ItemDataRole.UserRole):
            return
        if self.session.delete(str(item.data(Qt.ItemDataRole.UserRole))):
            self.new_conversation()
        self.refresh_history()

    def _on_history_clicked(self, item: QListWidgetItem) -> None:
        conv_id = item.data(Qt.ItemDataRole.UserRole)
        if conv_id:
            self.open_conversation(str(conv_id))

    def _show_conversation(self) -> None:
        self.edit_note.hide()
        self.transcript.show_messages(self.session.messages)
        self.title_label.set_full_text(self.session.conversation.title)
        self._update_controls()

    def _show_saved(self) -> None:
        self.title_label.set_full_text(self.session.conversation.title)
        self.refresh_history()

    # -- sending --------------------------------------------------------------------------
    def is_streaming(self) -> bool:
        return self.worker is not None

    def send(self) -> None:
        text = self.composer.toPlainText().strip()
        images = list(self.session.attached)
        if (not text and not images) or self.is_streaming() or self.server.base_url is None:
            return
        if images and not self.attachments.model_can_read():
            return
        self.edit_note.hide()
        self.composer.clear()
        self.transcript.truncate(self.session.add_user_message(text))
        self.transcript.add("user", text).set_images(images)
        self.attachments.refresh()
        self._start_reply()

    def begin_edit(self, index: int) -> None:
        """Put message ``index`` back in the composer (its images too); sending replaces it
        and what followed."""
        text = None if self.is_streaming() else self.session.begin_edit(index)
        if text is None:
            return
        self.composer.setPlainText(text)
        self.attachments.refresh()
        self.edit_note.show()
        self.composer.setFocus()

    # -- images ---------------------------------------------------------------------------
    def _sees_images(self) -> bool | None:
        """Whether the model that answers reads images (None: not known yet)."""
        model = self.chosen_model()
        if model is not None:
            card = next((c for c in self.context.latest_models if c.id == model), None)
            return card.vision if card is not None else None
        stats = self.context.latest_stats
        return stats.model.vision if stats is not None else None

    def _say_error(self, text: str) -> None:
        self.banner.show_message(text, "error")

    def _model_name(self) -> str:
        model = self.chosen_model()
        if model is None and self.context.latest_stats is not None:
            model = self.context.latest_stats.model.id
        return (model or "This model").rsplit("/", 1)[-1]

    def regenerate(self, index: int | None = None) -> None:
        """Ask again for the reply at ``index`` (default: the last reply)."""
        if self.is_streaming() or self.server.base_url is None:
            return
        kept = self.session.drop_reply(index)
        if kept is None:
            return
        self.transcript.truncate(kept)
        self._start_reply()

    def _start_reply(self) -> None:
        url = self.server.base_url
        if url is None:
            return
        payload = self.session.start_reply()
        model = self.chosen_model()
        if model is not None:
            payload["model"] = model
        self._show_saved()
        self.transcript.start_stream()
        api_key = self.server.api_key
        sampling = {k: v for k, v in payload.items() if k not in ("messages", "model")}
        loop = self.tools.loop(
            url,
            model or self.server.model_id or "default",
            api_key,
            lambda tool, args: self.approvals.ask(tool, args, worker.cancel_event),
            sampling,
        )

        def reply() -> dict[str, Any]:
            if loop is not None:
                return run_tool_reply(loop, payload["messages"], worker.report, worker.cancel_event)
            return stream_reply(url, payload, api_key, worker.report, worker.cancel_event)

        worker = ThreadWorker(reply)
        worker.yielded.connect(self._on_delta)
        worker.returned.connect(self._on_reply_finished)
        worker.errored.connect(self._on_reply_failed)
        worker.cancelled.connect(lambda: self._on_reply_finished({"cancelled": True}))
        worker.finished.connect(self._on_worker_done)
        self.worker = worker
        self._first_token = False
        state = self.context.model_state(model) if model is not None else None
        loading = state in ("unloaded", "loading", "failed")  # it loads before it answers
        self.reply_stats.setText(f"Loading {model}…" if loading else "Waiting for the first token…")
        worker.start()
        self._update_controls()

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.cancel()

    def _on_delta(self, event: str | tuple[str, Any]) -> None:
        """Text of the reply, or (from a reply with tools) its thinking or a tool call."""
        if not self._first_token:
            self._first_token = True
            self.reply_stats.setText("")
        kind, value = ("text", event) if isinstance(event, str) else event
        if kind == "call" and isinstance(value, dict):
            self.session.add_call(value)
            self.transcript.stream_call(value)
            self._show_tools()
        elif kind == "thinking":
            self.session.add_thinking(str(value))
            message = self.session.replying_message()
            self.transcript.stream_thinking(message.thinking if message else str(value))
        else:
            self.session.add_delta(str(value))
            self.transcript.stream(self.session.reply)

    def _finish_message(self, meta: dict[str, Any]) -> None:
        self.transcript.end_stream(self.session.reply, meta)
        self.session.finish_reply(meta)
        self._show_saved()

    def _on_reply_finished(self, meta: dict[str, Any]) -> None:
        self._finish_message(meta)
        self._show_tools()
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
            stop_worker(self.worker, 5000)
        self.tools.close()

    # -- tools ----------------------------------------------------------------------------
    def _show_tools(self) -> None:
        self.tools_panel.show_rows(self.tools.rows(), self.tools.error)

    def _on_tool_server_toggled(self, name: str, on: bool) -> None:
        self.tools.set_enabled(name, on)
        self._show_tools()

    def _reload_tools(self) -> None:
        if self.is_streaming():
            return
        self.tools.reload()
        self._show_tools()

    # -- the model picker (a library server) ------------------------------------------------
    def chosen_model(self) -> str | None:
        """The model id to send, or ``None`` (a single server answers with its one model)."""
        if not self.server.serves_library:
            return None
        value = self.model_combo.currentData()
        return str(value) if value else self.server.model_id

    def choose_model(self, model_id: str) -> bool:
        index = self.model_combo.findData(model_id)
        if index < 0:
            return False
        self.model_combo.setCurrentIndex(index)
        self._on_model_chosen(index)
        return True

    def _on_model_chosen(self, _index: int) -> None:
        value = self.model_combo.currentData()
        if value:
            self.settings.pages.setdefault("chat", {})["model"] = str(value)

    def show_models(self, cards: list[ModelCard]) -> None:
        """The library server's models, each with its state (the list is rebuilt only when
        the models change, so an open list is not disturbed by each poll)."""
        ids = [c.id for c in cards]
        if ids != self._model_ids:
            self._model_ids = ids
            current = self.model_combo.currentData() or self._remembered_model()
            self.model_combo.blockSignals(True)
            self.model_combo.clear()
            for card in cards:
                self.model_combo.addItem(card.id, card.id)
            index = self.model_combo.findData(current)
            if index < 0:
                index = self.model_combo.findData(self.server.model_id)
            self.model_combo.setCurrentIndex(max(index, 0))
            self.model_combo.blockSignals(False)
        widest = 0
        metrics = self.model_combo.fontMetrics()
        for i, card in enumerate(cards):
            words = _STATE_WORDS.get(card.state, card.state)
            name = card.id.rsplit("/", 1)[-1]  # the file's name; the full id as a tooltip
            text = name if card.state == "loaded" else f"{name}  ({words})"
            if tags := card.tags():
                text += f"  [{tags}]"
            self.model_combo.setItemText(i, text)
            tip = f"{card.id}\n{', '.join(card.capabilities)}" if card.capabilities else card.id
            self.model_combo.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
            widest = max(widest, metrics.horizontalAdvance(text))
        self.model_combo.view().setMinimumWidth(widest + 48)  # the open list shows it all
        self._show_picker()

    def _remembered_model(self) -> str | None:
        value = self.settings.pages.get("chat", {}).get("model")
        return value if isinstance(value, str) and value else self.server.model_id

    def _show_picker(self) -> None:
        library = self.server.state is ServerState.RUNNING and self.server.serves_library
        shown = library and self.model_combo.count() > 0
        self.model_combo.setVisible(shown)
        self.model_label.setVisible(not shown)

    # -- server state ---------------------------------------------------------------------
    def _on_server_state(self, state: str) -> None:
        notice = server_notice(state)
        if notice is None:
            self.banner.hide()
        else:
            self.banner.show_message(notice.text, notice.level, notice.action)
        label = served_label(state, self.server.knobs)
        if label is not None:
            self.model_label.setText(label)
        if state != ServerState.RUNNING.value:
            self._model_ids = []
            self.model_combo.clear()
        self._show_picker()
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
        self.regen_button.setEnabled(ready and not streaming and self.session.has_reply)
        self.transcript.set_actions_enabled(ready and not streaming)
