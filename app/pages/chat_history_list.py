"""The Chat page's left column: the saved chats, with "New chat" and "Delete chat"."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.storage.chat_store import Conversation
from app.widgets.common import set_button_role


class ChatHistoryList(QWidget):
    """``opened(conversation_id)`` when a saved chat is clicked; the page connects
    ``new_button`` and ``delete_button``."""

    opened = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFixedWidth(230)
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        title = QLabel("Chats")
        title.setObjectName("PageTitle")
        self.new_button = set_button_role(QPushButton("+  New chat"), "primary")
        self.history = QListWidget()
        self.history.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.history.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.history.itemClicked.connect(self._on_clicked)
        self.delete_button = set_button_role(QPushButton("Delete chat"), "flat")
        v.addWidget(title)
        v.addWidget(self.new_button)
        v.addWidget(self.history, 1)
        v.addWidget(self.delete_button)

    def show_conversations(self, conversations: list[Conversation], current_id: str) -> None:
        """List ``conversations`` (a hint when there are none), ``current_id``'s selected."""
        self.history.clear()
        if not conversations:
            hint = QListWidgetItem("No saved chats yet")
            hint.setFlags(Qt.ItemFlag.NoItemFlags)
            self.history.addItem(hint)
        for conv in conversations:
            item = QListWidgetItem(conv.title)
            item.setData(Qt.ItemDataRole.UserRole, conv.id)
            item.setToolTip(conv.title)
            self.history.addItem(item)
            if conv.id == current_id:
                self.history.setCurrentItem(item)

    def current_id(self) -> str | None:
        """The selected chat's id (``None``: none, or the hint)."""
        item = self.history.currentItem()
        if item is None or not item.data(Qt.ItemDataRole.UserRole):
            return None
        return str(item.data(Qt.ItemDataRole.UserRole))

    def _on_clicked(self, item: QListWidgetItem) -> None:
        conv_id = item.data(Qt.ItemDataRole.UserRole)
        if conv_id:
            self.opened.emit(str(conv_id))
