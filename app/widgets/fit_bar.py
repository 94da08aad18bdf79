"""A VRAM / RAM bar: needed against available, with a verdict badge."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QGridLayout, QLabel, QWidget

from app.page_models.fit_adapter import FitView
from app.theme import BAD, GOOD, WARN
from app.widgets.fit_badge import VERDICT_LOOKS
from backend.core.units import human_bytes


class _Meter(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.needed = 0
        self.total = 0
        self.setFixedHeight(12)
        self.setMinimumWidth(120)

    def set_values(self, needed: int, total: int) -> None:
        self.needed, self.total = needed, total
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(Qt.PenStyle.NoPen)
        rect = QRectF(self.rect())
        p.setBrush(QColor("#11131a"))
        p.drawRoundedRect(rect, 6, 6)
        if self.total <= 0 or self.needed <= 0:
            return
        frac = min(1.0, self.needed / self.total)
        colour = GOOD if frac < 0.8 else WARN
        if self.needed > self.total:
            colour = BAD
        p.setBrush(QColor(colour))
        p.drawRoundedRect(
            QRectF(rect.x(), rect.y(), max(8.0, rect.width() * frac), rect.height()), 6, 6
        )


class FitBar(QWidget):
    """Shows a :class:`FitView`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(6)
        self.badge = QLabel()
        self.badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setProperty("muted", True)
        self.vram_label = QLabel("VRAM")
        self.vram_meter = _Meter()
        self.vram_text = QLabel()
        self.ram_label = QLabel("RAM")
        self.ram_meter = _Meter()
        self.ram_text = QLabel()
        for text in (self.vram_text, self.ram_text):
            text.setMinimumWidth(170)
            text.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        grid.addWidget(self.badge, 0, 0, 1, 1)
        grid.addWidget(self.summary, 0, 1, 1, 2)
        grid.addWidget(self.vram_label, 1, 0)
        grid.addWidget(self.vram_meter, 1, 1)
        grid.addWidget(self.vram_text, 1, 2)
        grid.addWidget(self.ram_label, 2, 0)
        grid.addWidget(self.ram_meter, 2, 1)
        grid.addWidget(self.ram_text, 2, 2)
        grid.setColumnStretch(1, 1)
        self.view: FitView | None = None

    def set_view(self, view: FitView) -> None:
        self.view = view
        text, colour = VERDICT_LOOKS[view.verdict]
        self.badge.setText(text)
        c = QColor(colour)
        rgb = f"{c.red()},{c.green()},{c.blue()}"
        self.badge.setStyleSheet(
            f"background:rgba({rgb},0.14); color:{colour}; border:1px solid rgba({rgb},0.55);"
            "border-radius:9px; padding:2px 10px; font-weight:600;"
        )
        parts = []
        if view.weights_bytes:
            parts.append(f"weights {human_bytes(view.weights_bytes)}")
        if view.kv_bytes:
            parts.append(f"KV cache {human_bytes(view.kv_bytes)}")
        if view.compute_bytes:
            parts.append(f"compute {human_bytes(view.compute_bytes)}")
        summary = " · ".join(parts)
        if view.summary:
            summary = f"{summary}. {view.summary}" if summary else view.summary
        self.summary.setText(summary)
        self.vram_meter.set_values(view.vram_needed, view.vram_total)
        if view.vram_total:
            self.vram_text.setText(
                f"{human_bytes(view.vram_needed)} of {human_bytes(view.vram_total)} free"
            )
        else:
            self.vram_text.setText("no NVIDIA GPU")
            self.vram_text.setToolTip(view.gpu_note or "")
        self.ram_meter.set_values(view.ram_needed, view.ram_total)
        self.ram_text.setText(
            f"{human_bytes(view.ram_needed)} of {human_bytes(view.ram_total)} free"
            if view.ram_total
            else human_bytes(view.ram_needed)
        )
