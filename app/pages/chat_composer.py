"""The Chat page's message box: Enter sends, and images pasted or dropped in are attached."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QBuffer, QIODevice, QMimeData, Qt
from PySide6.QtGui import QImage, QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit


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
