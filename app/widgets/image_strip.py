"""A row of image thumbnails: the composer's attachments (removable) or a message's."""

from __future__ import annotations

import base64

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.storage.chat_store import ChatImage
from app.widgets.common import set_button_role

THUMB_PX = 64


def thumbnail(image: ChatImage, size: int = THUMB_PX) -> QPixmap:
    """The image scaled to fit ``size`` (an empty pixmap when it does not decode)."""
    pixmap = QPixmap()
    pixmap.loadFromData(base64.b64decode(image.data))
    if pixmap.isNull():
        return pixmap
    return pixmap.scaled(
        size, size, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
    )


class ImageStrip(QWidget):
    """Thumbnails left to right; with ``removable`` each has a × that emits ``removed(i)``."""

    removed = Signal(int)

    def __init__(self, *, removable: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.removable = removable
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.setSpacing(8)
        self._row.addStretch(1)
        self.thumbs: list[QWidget] = []
        self.hide()

    def set_images(self, images: list[ChatImage]) -> None:
        for thumb in self.thumbs:
            thumb.setParent(None)
            thumb.deleteLater()
        self.thumbs = [self._thumb(i, image) for i, image in enumerate(images)]
        for thumb in self.thumbs:
            self._row.insertWidget(self._row.count() - 1, thumb)
        self.setVisible(bool(images))

    def _thumb(self, index: int, image: ChatImage) -> QWidget:
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        v.setSpacing(2)
        picture = QLabel()
        pixmap = thumbnail(image)
        if pixmap.isNull():
            picture.setText(image.name or "image")
        else:
            picture.setPixmap(pixmap)
        picture.setToolTip(image.name)
        picture.setFixedHeight(THUMB_PX)
        v.addWidget(picture)
        if self.removable:
            remove = set_button_role(QPushButton("Remove"), "flat")
            remove.setToolTip(f"Remove {image.name or 'this image'}")
            remove.clicked.connect(lambda: self.removed.emit(index))
            v.addWidget(remove)
        return box
