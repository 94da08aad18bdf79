"""The Chat page's title bar: the chat's title, and the model that answers: its name, or with
a library server a picker of every library model, each with its state ("loads on demand");
the model picked last is remembered in ``AppSettings.pages["chat"]["model"]``."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from app.page_models.chat_session import served_label
from app.page_models.router_models import ModelCard
from app.storage.app_settings import AppSettings
from app.widgets.common import ElidedLabel
from app.workers.server_process import ServerState, ServerSupervisor

_STATE_WORDS = {"unloaded": "loads on demand", "loading": "loading…", "failed": "failed"}


class ChatModelBar(QWidget):
    """``title_label``, ``model_label`` (the served model, in words) and ``model_combo``
    (a library server's models, shown instead of the label while there are any)."""

    def __init__(
        self, settings: AppSettings, server: ServerSupervisor, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.server = server
        head = QHBoxLayout(self)
        head.setContentsMargins(0, 0, 0, 0)
        head.setSpacing(10)  # the page's centre column's
        self._model_ids: list[str] = []
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

    def _remembered_model(self) -> str | None:
        value = self.settings.pages.get("chat", {}).get("model")
        return value if isinstance(value, str) and value else self.server.model_id

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

    def show_server_state(self, state: str) -> None:
        """The served model's name for ``state``; a stopped server's list is emptied."""
        label = served_label(state, self.server.knobs)
        if label is not None:
            self.model_label.setText(label)
        if state != ServerState.RUNNING.value:
            self._model_ids = []
            self.model_combo.clear()
        self._show_picker()

    def _show_picker(self) -> None:
        """The picker for a running library server with models, else the model's name."""
        library = self.server.state is ServerState.RUNNING and self.server.serves_library
        shown = library and self.model_combo.count() > 0
        self.model_combo.setVisible(shown)
        self.model_label.setVisible(not shown)
