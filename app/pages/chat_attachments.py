"""The images attached to the next chat message: a button, the thumbnails, the checks.

A model known not to read images (no projector) says so at once, when an image is
attached, instead of failing when the message is sent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QPushButton, QWidget

from app.page_models.chat_images import AttachError, cannot_see_text, chat_image, image_from_file
from app.storage.chat_store import ChatImage
from app.widgets.common import set_button_role
from app.widgets.image_strip import ImageStrip


class ChatAttachments(QWidget):
    """Shows and edits ``attached``, the session's list (changed in place by both)."""

    def __init__(
        self,
        attached: list[ChatImage],
        sees_images: Callable[[], bool | None],
        model_name: Callable[[], str],
        say_error: Callable[[str], None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.attached = attached
        self._sees_images = sees_images
        self._model_name = model_name
        self._say_error = say_error
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.button = set_button_role(QPushButton("Attach image…"), "flat")
        self.button.setToolTip(
            "Send pictures with the message (or paste or drop them into the box). The model "
            "needs a projector (mmproj) to read them."
        )
        self.button.clicked.connect(self.choose)
        self.strip = ImageStrip(removable=True)
        self.strip.removed.connect(self.remove)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.strip, 1)

    def refresh(self) -> None:
        """Show ``attached`` again (after a send, an edit or a new chat changed it)."""
        self.strip.set_images(self.attached)

    def model_can_read(self) -> bool:
        """False, after saying so, when the model is known to read no images."""
        if self._sees_images() is False:
            self._say_error(cannot_see_text(self._model_name()))
            return False
        return True

    def choose(self) -> None:
        names, _ = QFileDialog.getOpenFileNames(
            self, "Attach images", "", "Images (*.png *.jpg *.jpeg *.webp *.gif *.bmp)"
        )
        for name in names:
            self.attach(b"", name)

    def attach(self, data: bytes, name: str) -> None:
        """Attach an image (``data`` empty: read the file ``name``), or say why not."""
        if not self.model_can_read():
            return
        try:
            image = chat_image(data, name) if data else image_from_file(Path(name))
        except AttachError as exc:
            self._say_error(str(exc))
            return
        self.attached.append(image)
        self.strip.set_images(self.attached)

    def remove(self, index: int) -> None:
        del self.attached[index]
        self.strip.set_images(self.attached)
