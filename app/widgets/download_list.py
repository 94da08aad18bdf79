"""The Models page's downloads: a scrolling list of rows, each a view of one ``Download``."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.page_models.download_queue import Download
from app.widgets.common import ElidedLabel, set_button_role

BAR_STEPS = 1000


class DownloadRow(QFrame):
    """Name, progress bar, status, and Cancel / Resume (``action``) and Remove (``remove``)."""

    def __init__(self, download: Download, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        self.download = download
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 8, 8, 8)
        lay.setSpacing(4)
        top = QHBoxLayout()
        self.name = ElidedLabel(download.title)
        self.name.setStyleSheet("font-weight: 600;")
        self.action = QPushButton("Cancel")
        self.action.setFixedWidth(90)
        self.remove = set_button_role(QPushButton("✕"), "flat")
        self.remove.setToolTip("Remove from the list")
        top.addWidget(self.name, 1)
        top.addWidget(self.action)
        top.addWidget(self.remove)
        self.bar = QProgressBar()
        self.bar.setRange(0, BAR_STEPS)
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(10)
        self.status = QLabel()
        self.status.setProperty("muted", True)
        lay.addLayout(top)
        lay.addWidget(self.bar)
        lay.addWidget(self.status)
        self.refresh()

    def refresh(self) -> None:
        """Show the download's current state."""
        d = self.download
        self.status.setText(d.status)
        self.bar.setValue(int(d.fraction * BAR_STEPS))
        self.action.setVisible(d.action is not None)
        self.action.setText(d.action or "")
        self.remove.setVisible(not d.active)


class DownloadList(QScrollArea):
    """The rows, newest last, and a note while there are none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setMinimumHeight(120)
        holder = QWidget()
        self._layout = QVBoxLayout(holder)
        self._layout.setContentsMargins(0, 0, 4, 0)
        self._layout.setSpacing(6)
        self.empty_note = QLabel(
            "No downloads yet. Pick a file above and press Download; "
            "a cancelled download resumes where it stopped."
        )
        self.empty_note.setProperty("muted", True)
        self._layout.addWidget(self.empty_note)
        self._layout.addStretch(1)
        self.setWidget(holder)
        self.rows: list[DownloadRow] = []

    def add(self, download: Download) -> DownloadRow:
        row = DownloadRow(download)
        self.rows.append(row)
        self.empty_note.hide()
        self._layout.insertWidget(self._layout.count() - 1, row)
        return row

    def refresh(self) -> None:
        """Show every download's current state."""
        for row in self.rows:
            row.refresh()

    def drop(self, download: Download) -> None:
        row = next(r for r in self.rows if r.download is download)
        self.rows.remove(row)
        row.setParent(None)
        row.deleteLater()
        self.empty_note.setVisible(not self.rows)
