"""Page header, read-only tables, a log view, status light, banner, empty state and a stat
tile."""

from __future__ import annotations

from typing import ClassVar

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.theme import BAD, GOOD, IDLE, WARN, icon


def page_header(title: str, subtitle: str) -> QWidget:
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 4)
    layout.setSpacing(2)
    t = QLabel(title)
    t.setObjectName("PageTitle")
    s = QLabel(subtitle)
    s.setObjectName("PageSubtitle")
    s.setWordWrap(True)
    layout.addWidget(t)
    layout.addWidget(s)
    return box


def set_button_role(button: QPushButton, role: str) -> QPushButton:
    """Mark a button 'primary', 'danger' or 'flat' for the stylesheet."""
    button.setProperty(role, True)
    return button


def table_item(text: str, tip: str = "", align_right: bool = False) -> QTableWidgetItem:
    """A read-only table cell."""
    item = QTableWidgetItem(text)
    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
    if tip:
        item.setToolTip(tip)
    if align_right:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


def list_table(columns: tuple[str, ...]) -> QTableWidget:
    """A read-only table that selects one whole row; the first column takes the spare width."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    table.verticalHeader().setDefaultSectionSize(34)
    table.setShowGrid(False)
    table.setAlternatingRowColors(False)
    table.setWordWrap(False)
    header = table.horizontalHeader()
    header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft)
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    return table


def log_view(max_lines: int) -> QPlainTextEdit:
    """A read-only, monospaced log that keeps its last ``max_lines`` lines."""
    view = QPlainTextEdit()
    view.setObjectName("LogView")
    view.setReadOnly(True)
    view.setMaximumBlockCount(max_lines)
    return view


SCROLLBAR_ROOM = 12
"""Width a vertical scroll bar takes (10 px in the theme) plus a little air."""


def scroll_column(content: QWidget, width: int, footer: QWidget | None = None) -> QWidget:
    """``content`` in a vertical scroll area ``width`` px wide (plus room for the bar).

    A form column taller than the window scrolls instead of being squeezed, which
    would make its rows overlap (what happened at 1280x720 before). ``footer`` (the
    column's Start button and progress, say) stays pinned below the scroll area, so
    it is on screen whatever the window's height.
    """
    area = QScrollArea()
    area.setObjectName("ScrollColumn")
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setWidget(content)
    if footer is None:
        area.setFixedWidth(width + SCROLLBAR_ROOM)
        return area
    column = QWidget()
    column.setFixedWidth(width + SCROLLBAR_ROOM)
    v = QVBoxLayout(column)
    v.setContentsMargins(0, 0, 0, 0)
    v.setSpacing(8)
    v.addWidget(area, 1)
    footer.setContentsMargins(0, 0, SCROLLBAR_ROOM, 0)
    v.addWidget(footer)
    return column


class ElidedLabel(QLabel):
    """A one-line label that ends in '…' instead of being clipped; full text in the tooltip."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(40)
        self.set_full_text(text)

    def full_text(self) -> str:
        return self._full

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        width = max(10, self.width())
        self.setText(self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, width))


class StatusLight(QWidget):
    """A round coloured dot: green running, amber starting/stopping, red crashed, grey stopped."""

    COLOURS: ClassVar[dict[str, str]] = {
        "running": GOOD,
        "starting": WARN,
        "stopping": WARN,
        "crashed": BAD,
        "stopped": IDLE,
    }

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._state = "stopped"
        self.setFixedSize(14, 14)

    @property
    def state(self) -> str:
        return self._state

    def set_state(self, state: str) -> None:
        self._state = state
        self.setToolTip(state)
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(14, 14)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(self.COLOURS.get(self._state, IDLE)))
        painter.drawEllipse(1, 1, 12, 12)


class Banner(QFrame):
    """A coloured message strip with an optional action button; hidden when empty."""

    action_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Banner")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 8, 8)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.button = QPushButton()
        self.button.clicked.connect(self.action_clicked)
        self.close_button = set_button_role(QPushButton("✕"), "flat")
        self.close_button.clicked.connect(self.hide)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.button)
        layout.addWidget(self.close_button)
        self.hide()

    def show_message(self, text: str, level: str = "info", action: str | None = None) -> None:
        self.setProperty("level", level)
        self.style().unpolish(self)
        self.style().polish(self)
        self.label.setText(text)
        self.button.setVisible(action is not None)
        if action:
            self.button.setText(action)
        self.show()


class EmptyState(QWidget):
    """A centred icon, title, explanation and optional action."""

    action_clicked = Signal()

    def __init__(
        self,
        icon_name: str,
        title: str,
        text: str,
        action: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.addStretch(1)
        pic = QLabel()
        pic.setPixmap(icon(icon_name).pixmap(56, 56))
        pic.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.title = QLabel(title)
        self.title.setObjectName("EmptyTitle")
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.text = QLabel(text)
        self.text.setObjectName("EmptyText")
        self.text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.text.setWordWrap(True)
        self.text.setMaximumWidth(520)
        outer.addWidget(pic)
        outer.addSpacing(8)
        outer.addWidget(self.title)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.text)
        row.addStretch(1)
        outer.addLayout(row)
        self.button: QPushButton | None = None
        if action:
            self.button = set_button_role(QPushButton(action), "primary")
            self.button.clicked.connect(self.action_clicked)
            brow = QHBoxLayout()
            brow.addStretch(1)
            brow.addWidget(self.button)
            brow.addStretch(1)
            outer.addSpacing(10)
            outer.addLayout(brow)
        outer.addStretch(2)


class StatTile(QFrame):
    """A big number with a caption, for the dashboard header."""

    def __init__(self, label: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.setSpacing(2)
        self.value = QLabel("–")
        self.value.setObjectName("TileValue")
        self.caption = QLabel(label)
        self.caption.setObjectName("TileLabel")
        layout.addWidget(self.value)
        layout.addWidget(self.caption)

    def set_value(self, text: str) -> None:
        self.value.setText(text)
