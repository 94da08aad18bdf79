"""A VRAM / RAM bar: needed against available, with a verdict badge.

While a library server runs the bars stack the models it holds, each a segment of its own,
then the chosen model about to load, against the free memory (the server's reserve hatched
at the end); a legend under the bars names them and says what loading the chosen model does
(:mod:`app.page_models.memory_stack`).

With RPC workers counted the VRAM bar becomes one bar per offload device (the workers'
first, as llama.cpp orders them), each "needed of free", and a line says which layers go
where. Without workers it is the one VRAM bar."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetrics, QPainter, QPainterPath, QPaintEvent
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QWidget

from app.page_models.fit_adapter import DeviceShare, FitView
from app.page_models.memory_stack import LoadPlan, MemoryStack, Segment, legend
from app.theme import BAD, GOOD, IDLE, WARN
from app.widgets.fit_badge import VERDICT_LOOKS
from backend.core.units import human_bytes

# the resident models' colours: none of them green, amber or red (the chosen model's)
RESIDENT_COLOURS = ("#6e8bff", "#b48cff", "#4aa8d8", "#c678dd", "#7f8fd0", "#5f9ea0")
PLAN_COLOURS = {"": GOOD, "loaded": GOOD, "fits": GOOD, "evicts": WARN, "refused": BAD}
_TRACK = "#11131a"


def segment_colours(ram: MemoryStack, plan: LoadPlan) -> dict[str, str]:
    """One colour per model of the bars, the same on both: the resident models in turn, the
    model about to load in the plan's colour."""
    colours: dict[str, str] = {}
    for segment in ram.segments:
        if segment.role == "new":
            colours[segment.model_id] = PLAN_COLOURS[plan.kind]
        else:
            colours[segment.model_id] = RESIDENT_COLOURS[len(colours) % len(RESIDENT_COLOURS)]
    return colours


class _Meter(QWidget):
    PLAIN_HEIGHT = 12
    STACK_HEIGHT = 18

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.needed = 0
        self.total = 0
        self.stack: MemoryStack | None = None
        self.colours: dict[str, str] = {}
        self.setFixedHeight(self.PLAIN_HEIGHT)
        self.setMinimumWidth(120)

    def set_values(self, needed: int, total: int) -> None:
        self.needed, self.total = needed, total
        self.stack = None
        self.setFixedHeight(self.PLAIN_HEIGHT)
        self.setToolTip("")
        self.update()

    def set_stack(self, stack: MemoryStack, colours: dict[str, str]) -> None:
        self.stack, self.colours = stack, colours
        self.setFixedHeight(self.STACK_HEIGHT)
        self.setToolTip(stack.tooltip())
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(Qt.PenStyle.NoPen)
        rect = QRectF(self.rect())
        p.setBrush(QColor(_TRACK))
        p.drawRoundedRect(rect, 6, 6)
        if self.stack is not None:
            self._paint_stack(p, rect, self.stack)
            return
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

    def _paint_stack(self, p: QPainter, rect: QRectF, stack: MemoryStack) -> None:
        clip = QPainterPath()
        clip.addRoundedRect(rect, 6, 6)
        p.setClipPath(clip)
        width = rect.width()
        reserve = stack.reserve_span()
        if reserve is not None:
            start, end = reserve
            hatch = QColor(IDLE)
            hatch.setAlpha(150)
            p.setBrush(QBrush(hatch, Qt.BrushStyle.BDiagPattern))
            p.drawRect(
                QRectF(rect.x() + width * start, rect.y(), width * (end - start), rect.height())
            )
        font = p.font()
        font.setPixelSize(11)
        p.setFont(font)
        metrics = QFontMetrics(font)
        for start, end, segment in stack.spans():
            x0 = rect.x() + width * start
            w = max(3.0, width * min(1.0, end) - width * start)
            box = QRectF(x0, rect.y(), w, rect.height())
            colour = QColor(self.colours.get(segment.model_id, IDLE))
            if segment.role == "new" and not stack.fits:
                colour.setAlpha(200)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(colour)
            p.drawRect(box)
            p.setPen(QColor(_TRACK))  # a gap between two models
            p.drawLine(box.topRight(), box.bottomRight())
            text = _segment_text(segment, metrics, int(w) - 8)
            if text:
                p.setPen(QColor("#0d0f14"))
                p.drawText(box.adjusted(4, 0, -4, 0), Qt.AlignmentFlag.AlignVCenter, text)


def _segment_text(segment: Segment, metrics: QFontMetrics, room: int) -> str:
    """The model's name (and size) if the segment has room for it, else ''."""
    if room < 24:
        return ""
    full = f"{segment.label} {human_bytes(segment.size_bytes)}"
    if metrics.horizontalAdvance(full) <= room:
        return full
    text = metrics.elidedText(segment.label, Qt.TextElideMode.ElideRight, room)
    return text if len(text) > 3 else ""


def _short(label: str, most: int = 34) -> str:
    """A model's name cut to fit the legend's width (the full one is in the tooltips)."""
    return label if len(label) <= most else label[: most - 1] + "…"


def _nbsp(text: str) -> str:
    """``text`` kept on one line of the legend: no break at its spaces or hyphens."""
    return text.replace(" ", "&nbsp;").replace("-", "\u2011")


class _DeviceRow:
    """One offload device's row: its name, its bar, "needed of free"."""

    def __init__(self) -> None:
        self.label = QLabel()
        self.meter = _Meter()
        self.text = QLabel()
        self.text.setMinimumWidth(170)
        self.text.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def show_share(self, share: DeviceShare) -> None:
        self.label.setText(share.name)
        self.label.setToolTip(share.name)
        self.meter.set_values(share.needed, share.free)
        self.text.setText(f"{human_bytes(share.needed)} of {human_bytes(share.free)} free")

    def widgets(self) -> tuple[QLabel, _Meter, QLabel]:
        return self.label, self.meter, self.text


class FitBar(QWidget):
    """Shows a :class:`FitView`, and with :meth:`set_stacks` a library server's models."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid = grid = QGridLayout(self)
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
        # the library server's models: a coloured key per segment, then the load plan
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.hide()
        # with RPC workers: a row per offload device instead of the VRAM row, and the layers
        self.device_rows: list[_DeviceRow] = []
        self.placement = QLabel()
        self.placement.setWordWrap(True)
        self.placement.setProperty("muted", True)
        self.placement.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.placement.hide()
        self.head = QWidget(self)  # the badge and the summary in one row, with devices
        self.head_row = QHBoxLayout(self.head)
        self.head_row.setContentsMargins(0, 0, 0, 0)
        self.head_row.setSpacing(10)
        grid.setColumnStretch(1, 1)
        self._devices_laid_out = -1
        self._lay_out(0)
        self.view: FitView | None = None
        self.stacks: tuple[MemoryStack, MemoryStack | None] | None = None
        self.plan = LoadPlan("", "")
        self.colours: dict[str, str] = {}

    def _lay_out(self, devices: int) -> None:
        """Put the rows in order: verdict, VRAM (or ``devices`` device rows), RAM, the
        layers line, the legend."""
        if devices == self._devices_laid_out:
            return
        self._devices_laid_out = devices
        grid = self.grid
        while len(self.device_rows) < devices:
            row = _DeviceRow()
            self.device_rows.append(row)
            for part in row.widgets():
                part.setParent(self)
        for old in self._row_widgets():
            grid.removeWidget(old)
        for label in (self.badge, self.summary):
            self.head_row.removeWidget(label)
        if devices:  # the device names widen the first column: the summary starts at the badge
            self.head_row.addWidget(self.badge, 0, Qt.AlignmentFlag.AlignVCenter)
            self.head_row.addWidget(self.summary, 1)
            grid.addWidget(self.head, 0, 0, 1, 3)
        else:
            grid.addWidget(self.badge, 0, 0, 1, 1)
            grid.addWidget(self.summary, 0, 1, 1, 2)
        self.head.setVisible(bool(devices))
        rows: list[tuple[QLabel, _Meter, QLabel]] = [
            (self.vram_label, self.vram_meter, self.vram_text)
        ]
        if devices:
            rows = [r.widgets() for r in self.device_rows[:devices]]
        rows.append((self.ram_label, self.ram_meter, self.ram_text))
        for r, widgets in enumerate(rows, start=1):
            for column, cell in enumerate(widgets):
                grid.addWidget(cell, r, column)
        grid.addWidget(self.placement, len(rows) + 1, 0, 1, 3)
        grid.addWidget(self.legend, len(rows) + 2, 0, 1, 3)
        for vram in (self.vram_label, self.vram_meter, self.vram_text):
            vram.setVisible(not devices)
        for i, row in enumerate(self.device_rows):
            for part in row.widgets():
                part.setVisible(i < devices)
        self.placement.setVisible(bool(devices))

    def _row_widgets(self) -> list[QWidget]:
        out: list[QWidget] = [self.badge, self.summary, self.vram_label, self.vram_meter]
        out += [self.vram_text, self.ram_label, self.ram_meter, self.ram_text]
        out += [self.placement, self.legend, self.head]
        for row in self.device_rows:
            out += row.widgets()
        return out

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
        if view.session_cache_bytes:
            parts.append(f"session cache ≤ {human_bytes(view.session_cache_bytes)}")
        summary = " · ".join(parts)
        for said in (view.summary, view.worker_note and f"{view.worker_note}."):
            if said:
                summary = f"{summary}. {said}" if summary else said
        self.summary.setText(summary)
        self._lay_out(len(view.devices))
        for row, share in zip(self.device_rows, view.devices, strict=False):
            row.show_share(share)
        where = "; ".join(view.placement)  # "layers 0-7 on RPC0 (...); layers 8-29 + output ..."
        self.placement.setText(where[:1].upper() + where[1:])
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
        self.stacks = None
        self.legend.hide()

    def set_stacks(self, ram: MemoryStack, vram: MemoryStack | None, plan: LoadPlan) -> None:
        """Stack the resident models on the bars (after :meth:`set_view`, which clears it)."""
        self.stacks, self.plan = (ram, vram), plan
        self.colours = segment_colours(ram, plan)
        self.ram_meter.set_stack(ram, self.colours)
        self.ram_text.setText(ram.text())
        if vram is not None:
            self.vram_meter.set_stack(vram, self.colours)
            self.vram_text.setText(vram.text())
        keys = []
        for segment, size in legend(ram, vram):
            role = {"resident": "", "chosen": " (chosen)", "new": " (to load)"}[segment.role]
            size_text = human_bytes(size) if size else segment.state
            keys.append(
                f'<span style="color:{self.colours[segment.model_id]}">■</span>&nbsp;'
                f"{_nbsp(escape(_short(segment.label)))}{_nbsp(role)}"
                f"&nbsp;{_nbsp(size_text)}"
            )
        reserve = ram.reserve_bytes
        if reserve:
            keys.append(
                f'<span style="color:{IDLE}">▨</span>&nbsp;kept&nbsp;free&nbsp;'
                f"{_nbsp(human_bytes(reserve))}"
            )
        text = " &nbsp; ".join(keys)
        if plan.text:
            text += f'<br><span style="color:{PLAN_COLOURS[plan.kind]}">{escape(plan.text)}</span>'
        self.legend.setText(text)
        self.legend.setToolTip(
            "The server's models as it counts them before it loads another: each one's "
            "estimate (weights, KV cache, compute, its server process), then the chosen "
            "model with the knobs shown, against the memory free now"
        )
        self.legend.setVisible(bool(keys))
