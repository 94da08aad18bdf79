"""The Chat page's message box (Enter sends, and images pasted or dropped in are attached),
and the area around it: the note while a message is edited, the attached images, the Send,
Stop and Regenerate buttons, and the line that says how the reply goes."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QBuffer, QIODevice, QMimeData, Qt
from PySide6.QtGui import QImage, QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.pages.chat_attachments import ChatAttachments
from app.widgets.common import set_button_role


class Composer(QPlainTextEdit):
    """Enter sends, Shift+Enter adds a line; a pasted or dropped image (or image file) goes
    to ``attach`` (its bytes and a name) instead of the text."""

    def __init__(self, send: Callable[[], None], attach: Callable[[bytes, str], None]) -> None:
        super().__init__()
        self._send = send
        self._attach = attach

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return source.hasImage() or source.hasUrls() or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        if source.hasImage():
            buffer = QBuffer()
            buffer.open(QIODevice.OpenModeFlag.WriteOnly)
            QImage(source.imageData()).save(buffer, b"PNG")
            self._attach(bytes(buffer.data().data()), "pasted image.png")
            return
        files = [u.toLocalFile() for u in source.urls() if u.isLocalFile()]
        if files:
            for name in files:
                self._attach(b"", name)  # read by the page: it says what cannot be read
            return
        super().insertFromMimeData(source)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (
            event.modifiers() & Qt.KeyboardModifier.ShiftModifier
        ):
            self._send()
            return
        super().keyPressEvent(event)


class ComposerArea(QWidget):
    """Below the transcript: ``edit_note``, the ``attachments``, the ``composer`` with
    ``send_button``, ``stop_button`` (shown while a reply streams) and ``regen_button``,
    and ``reply_stats``; the page connects the buttons."""

    def __init__(
        self,
        send: Callable[[], None],
        attachments: ChatAttachments,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        v.setSpacing(10)
        self.edit_note = QLabel("Editing a message: Send replaces it and the replies after it.")
        self.edit_note.setProperty("muted", True)
        self.edit_note.hide()
        v.addWidget(self.edit_note)
        self.attachments = attachments
        v.addWidget(attachments)
        row = QHBoxLayout()
        self.composer = Composer(send, attachments.attach)
        self.composer.setPlaceholderText("Message the model…")
        self.composer.setFixedHeight(84)
        buttons = QVBoxLayout()
        self.send_button = set_button_role(QPushButton("Send"), "primary")
        self.stop_button = set_button_role(QPushButton("Stop"), "danger")
        self.stop_button.hide()
        self.regen_button = QPushButton("Regenerate")
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.regen_button)
        row.addWidget(self.composer, 1)
        row.addLayout(buttons)
        v.addLayout(row)
        self.reply_stats = QLabel()
        self.reply_stats.setProperty("muted", True)
        v.addWidget(self.reply_stats)
