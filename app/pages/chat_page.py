"""Chat page: streaming chat with the served model; conversations saved on disk.

With a library server a picker beside the title lists every library model: the chat
sends the chosen one as ``model``, and one not loaded loads on demand ("Loading <id>…"
until its first token), so switching needs no restart.

The conversation's state lives in :mod:`app.page_models.chat_session`. The page composes
its views: the saved chats (:mod:`app.pages.chat_history_list`), the title and model bar
(:mod:`app.pages.chat_model_bar`), the messages (:mod:`app.pages.chat_transcript`), the
composer with its attachments (:mod:`app.pages.chat_composer`), and the settings column
(:mod:`app.pages.chat_settings_panel`, :mod:`app.pages.chat_tools_panel`); it sends what
they hold and streams the reply into them."""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QVBoxLayout, QWidget

from app.app_context import AppContext
from app.page_models.chat_session import ChatSession, server_notice
from app.page_models.chat_tools import ChatTools
from app.page_models.router_models import ModelCard
from app.pages.chat_attachments import ChatAttachments
from app.pages.chat_composer import ComposerArea
from app.pages.chat_history_list import ChatHistoryList
from app.pages.chat_model_bar import ChatModelBar
from app.pages.chat_settings_panel import ChatSettingsPanel
from app.pages.chat_tools_panel import ApprovalBridge, ToolsPanel
from app.pages.chat_transcript import ChatTranscript
from app.storage.app_settings import AppSettings
from app.storage.chat_store import ChatStore
from app.widgets.common import Banner, scroll_column
from app.widgets.message_bubble import meta_text
from app.workers.chat_stream import run_tool_reply, stream_reply
from app.workers.server_process import ServerState
from app.workers.thread_worker import ThreadWorker, stop_worker
from backend.mcp_tools.mcp_config import default_mcp_path

log = logging.getLogger(__name__)


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
        self.history_list = ChatHistoryList()
        self.history_list.opened.connect(self.open_conversation)
        self.new_button = self.history_list.new_button
        self.new_button.clicked.connect(self.new_conversation)
        self.delete_button = self.history_list.delete_button
        self.delete_button.clicked.connect(self.delete_conversation)
        self.history = self.history_list.history
        return self.history_list

    def _build_center(self) -> QVBoxLayout:
        v = QVBoxLayout()
        v.setSpacing(10)
        self.model_bar = ChatModelBar(self.settings, self.server)
        self.title_label = self.model_bar.title_label
        self.model_combo = self.model_bar.model_combo
        v.addWidget(self.model_bar)
        self.banner = Banner()
        v.addWidget(self.banner)
        self.transcript = ChatTranscript()
        self.transcript.edit_requested.connect(self.begin_edit)
        self.transcript.regenerate_requested.connect(self.regenerate)
        v.addWidget(self.transcript, 1)
        self.attachments = ChatAttachments(
            self.session.attached, self._sees_images, self._model_name, self._say_error
        )
        area = self.composer_area = ComposerArea(self.send, self.attachments)
        self.composer = area.composer
        self.edit_note = area.edit_note
        self.reply_stats = area.reply_stats
        self.send_button = area.send_button
        self.stop_button = area.stop_button
        self.regen_button = area.regen_button
        self.send_button.clicked.connect(self.send)
        self.stop_button.clicked.connect(self.stop)
        self.regen_button.clicked.connect(lambda: self.regenerate())
        v.addWidget(area)
        return v

    def _build_settings(self) -> QWidget:
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        self.settings_panel = ChatSettingsPanel()
        self.system_edit = self.settings_panel.system_edit
        self.temp_spin = self.settings_panel.temp_spin
        self.top_k_spin = self.settings_panel.top_k_spin
        self.max_tokens_spin = self.settings_panel.max_tokens_spin
        self.seed_spin = self.settings_panel.seed_spin
        v.addWidget(self.settings_panel)
        self.tools_panel = ToolsPanel(default_mcp_path())
        self.tools_panel.toggled.connect(self._on_tool_server_toggled)
        self.tools_panel.reload_requested.connect(self._reload_tools)
        self.approvals = ApprovalBridge(self)
        v.addWidget(self.tools_panel)
        self._show_tools()
        v.addStretch(1)
        self.settings_panel.show_defaults(self.settings.chat)
        self.settings_panel.changed.connect(self._save_defaults)
        self._save_defaults()  # the settings hold what the boxes show (rounded as they are)
        return box

    # -- settings ------------------------------------------------------------------------
    def _save_defaults(self) -> None:
        self.settings_panel.save_to(self.settings.chat)

    # -- conversations --------------------------------------------------------------------
    def refresh_history(self) -> None:
        self.history_list.show_conversations(self.store.list(), self.session.conversation.id)

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
        self.settings_panel.show_defaults(self.session.open(conv_id))
        self._show_conversation()

    def delete_conversation(self) -> None:
        conv_id = self.history_list.current_id()
        if conv_id is None:
            return
        if self.session.delete(conv_id):
            self.new_conversation()
        self.refresh_history()

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
        return self.model_bar.chosen_model()

    def choose_model(self, model_id: str) -> bool:
        return self.model_bar.choose_model(model_id)

    def show_models(self, cards: list[ModelCard]) -> None:
        """The library server's models, each with its state."""
        self.model_bar.show_models(cards)

    # -- server state ---------------------------------------------------------------------
    def _on_server_state(self, state: str) -> None:
        notice = server_notice(state)
        if notice is None:
            self.banner.hide()
        else:
            self.banner.show_message(notice.text, notice.level, notice.action)
        self.model_bar.show_server_state(state)
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
