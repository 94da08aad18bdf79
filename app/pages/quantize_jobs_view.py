"""The Quantise page's jobs: a card per ``QuantizeJob`` (newest first), or an empty state."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.page_models.quantize_jobs import JobState, QuantizeJob, outcome_lines
from app.theme import BAD, GOOD
from app.widgets.common import ElidedLabel, EmptyState, log_view, set_button_role

STATE_COLOUR = {JobState.DONE: GOOD, JobState.FAILED: BAD}


class JobCard(QFrame):
    """One job: title, status, progress bar, Cancel, what it made, and its log."""

    def __init__(self, job: QuantizeJob, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        self.job = job
        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 10, 10, 10)
        lay.setSpacing(6)
        top = QHBoxLayout()
        self.title = ElidedLabel(job.options.title)
        self.title.setStyleSheet("font-weight: 600; font-size: 14px;")
        self.log_button = set_button_role(QPushButton("Show log"), "flat")
        self.log_button.clicked.connect(self.toggle_log)
        self.cancel_button = set_button_role(QPushButton("Cancel"), "danger")
        top.addWidget(self.title, 1)
        top.addWidget(self.log_button)
        top.addWidget(self.cancel_button)
        self.status = QLabel()
        self.status.setProperty("muted", True)
        self.status.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setFormat("%p%")
        self.outputs = QLabel()
        self.outputs.setWordWrap(True)
        self.outputs.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.outputs.hide()
        self.log = log_view(3000)
        self.log.setMinimumHeight(150)
        self.log.hide()
        lay.addLayout(top)
        lay.addWidget(self.status)
        lay.addWidget(self.bar)
        lay.addWidget(self.outputs)
        lay.addWidget(self.log)
        self.refresh()

    def toggle_log(self) -> None:
        self.log.setVisible(not self.log.isVisible())
        self.log_button.setText("Hide log" if self.log.isVisible() else "Show log")

    def refresh(self) -> None:
        """Show the job's current state."""
        job = self.job
        self.status.setText(job.status)
        colour = STATE_COLOUR.get(job.state)
        self.status.setStyleSheet(f"color: {colour};" if colour else "")
        self.cancel_button.setVisible(job.active)
        self.bar.setRange(0, job.total)
        self.bar.setValue(job.done)
        if job.outcome is not None:
            self.outputs.setText("<br>".join(outcome_lines(job.outcome)))
            self.outputs.show()


class JobList(QWidget):
    """'Jobs', then the cards, newest on top; an explanation while there are none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        head = QLabel("Jobs")
        head.setStyleSheet("font-weight: 600; color: #c9d0dc; font-size: 14px;")
        v.addWidget(head)
        self.stack = QStackedWidget()
        self.empty = EmptyState(
            "quantize",
            "No quantise jobs yet",
            "Pick a source on the left, tick the types you want and press Start. Each job "
            "shows its progress and log here, and its files appear in the library.",
        )
        area = QScrollArea()
        area.setWidgetResizable(True)
        holder = QWidget()
        self._layout = QVBoxLayout(holder)
        self._layout.setContentsMargins(0, 0, 6, 0)
        self._layout.setSpacing(10)
        self._layout.addStretch(1)
        area.setWidget(holder)
        self.stack.addWidget(self.empty)
        self.stack.addWidget(area)
        v.addWidget(self.stack, 1)
        self.cards: list[JobCard] = []

    def add(self, job: QuantizeJob) -> JobCard:
        card = JobCard(job)
        self.cards.append(card)
        self._layout.insertWidget(0, card)
        self.stack.setCurrentIndex(1)
        return card

    def card(self, job: QuantizeJob) -> JobCard:
        return next(c for c in self.cards if c.job is job)

    def refresh(self) -> None:
        """Show every job's current state."""
        for card in self.cards:
            card.refresh()
