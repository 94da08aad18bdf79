"""Dashboard: live pyqtgraph charts of the server's /v1/stats.

Stats arrive from the shared poller (off the GUI thread) into preallocated ring
buffers; one timer redraws the visible charts a few times a second, so the GUI
stays smooth however fast the stats come.

With a library server a filter shows every loaded model added up ("All models") or one
model's own stats (the poller then reads ``/v1/stats?model=ID``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.app_context import AppContext
from app.page_models.ring_buffer import RingBuffer
from app.page_models.router_models import ModelCard
from app.page_models.server_memory_view import ram_series_name, ram_tooltip
from app.storage.app_settings import AppSettings
from app.theme import MUTED, SERIES, SURFACE
from app.widgets.common import EmptyState, StatTile, page_header
from app.workers.server_process import ServerState
from backend.core.units import human_bytes
from backend.engine.stats_model import StatsSnapshot

pg.setConfigOptions(antialias=True, background=SURFACE, foreground=MUTED)

WINDOW_S = 120.0
CAPACITY = 1200  # 2 min at 10 Hz
MAX_GPUS = 8
GiB = float(1 << 30)
ALL_MODELS = "All models"


@dataclass(frozen=True)
class _Chart:
    key: str
    title: str
    unit: str
    series: tuple[str, ...]
    min_top: float  # the y axis runs from 0 to at least this


CHARTS = (
    _Chart("tps", "Throughput", "tok/s", ("generation", "prompt"), 10.0),
    _Chart("ttft", "Time to first token", "ms", ("last", "p50", "p99"), 10.0),
    _Chart("requests", "Requests", "", ("running", "queued"), 2.0),
    _Chart("kv", "KV cache in use", "%", ("used",), 100.0),
    _Chart("prefix", "Prefix cache", "", ("hits", "misses"), 5.0),
    _Chart("ram", "RAM", "GiB", ("server RSS", "machine used"), 1.0),
    _Chart("vram", "VRAM per GPU", "GiB", tuple(f"GPU {i}" for i in range(MAX_GPUS)), 1.0),
    _Chart("cpu", "Server CPU", "%", ("cpu",), 100.0),
)


def _nan_if_none(value: float | None) -> float:
    """A chart point: a missing value (a percentile before any sample) leaves a gap."""
    return float("nan") if value is None else float(value)


def session_tiers_text(s: StatsSnapshot) -> str:
    """The prefix tile's tooltip: what the slots reused, and the sessions kept past their
    slot in RAM and on disk (--cache-ram, --cache-disk) with their hits."""
    lines = [f"Prefix reuse: {s.prefix_cache.hits} hits, {s.prefix_cache.tokens_saved} tokens"]
    for name, t in (("RAM", s.session_cache.ram), ("Disk", s.session_cache.disk)):
        budget = human_bytes(t.budget_bytes) if t.budget_bytes else "off"
        lines.append(
            f"{name}: {t.entries} sessions, {human_bytes(t.bytes)} of {budget}; "
            f"{t.hits} hits, {t.misses} misses, {t.tokens_saved} tokens restored"
        )
    return "\n".join(lines)


class DashboardPage(QWidget):
    REDRAW_MS = 200

    def __init__(
        self, settings: AppSettings, context: AppContext, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.context = context
        self.stats_count = 0
        self.redraw_count = 0
        self._dirty = False
        self.buffers = {c.key: RingBuffer(CAPACITY, len(c.series)) for c in CHARTS}
        self.plots: dict[str, pg.PlotWidget] = {}
        self.curves: dict[str, list[pg.PlotDataItem]] = {}
        self._gpu_names: list[str] = []
        self._gpu_note: str | None = None
        self._latest: StatsSnapshot | None = None
        self._ram_rss = 0  # the server line's last value, bytes
        self.chart_cards: dict[str, QFrame] = {}

        outer = QVBoxLayout(self)
        outer.setContentsMargins(28, 22, 28, 22)
        outer.setSpacing(12)
        outer.addWidget(
            page_header(
                "Dashboard", "Live throughput, latency, KV-cache and memory of the running server."
            )
        )
        self.stack = QStackedWidget()
        self.empty = EmptyState(
            "dashboard",
            "No server running",
            "Start the server and its live charts appear here: tokens per second, time to "
            "first token, requests, KV-cache use, prefix-cache hits, memory and CPU.",
            "Go to Server",
        )
        self.empty.action_clicked.connect(lambda: context.navigate("server"))
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self._build_live())
        outer.addWidget(self.stack, 1)

        self._timer = QTimer(self)
        self._timer.setInterval(self.REDRAW_MS)
        self._timer.timeout.connect(self.redraw)
        self._timer.start()
        context.stats_received.connect(self.on_stats)
        context.models_received.connect(self.show_models)
        context.server.state_changed.connect(self._on_state)
        context.server.server_started.connect(lambda _u: self._on_state("running"))
        self._on_state(context.server.state.value)

    def _build_live(self) -> QWidget:
        live = QWidget()
        v = QVBoxLayout(live)
        v.setContentsMargins(0, 0, 0, 0)
        v.setSpacing(12)
        self.filter_row = QWidget()
        row = QHBoxLayout(self.filter_row)
        row.setContentsMargins(0, 0, 0, 0)
        label = QLabel("Model")
        label.setProperty("muted", True)
        self.model_filter = QComboBox()
        self.model_filter.setMinimumWidth(260)
        self.model_filter.setToolTip(
            "Every loaded model added up (latency: the slowest), or one model's own stats"
        )
        self.model_filter.addItem(ALL_MODELS, "")
        self.model_filter.currentIndexChanged.connect(self._on_filter)
        row.addWidget(label)
        row.addWidget(self.model_filter)
        row.addStretch(1)
        self.filter_row.hide()
        v.addWidget(self.filter_row)
        self.tile_grid = QGridLayout()
        self.tile_grid.setSpacing(10)
        self.tiles = {
            key: StatTile(label)
            for key, label in (
                ("gen", "generation tok/s"),
                ("prompt", "prompt tok/s"),
                ("ttft", "TTFT p50 / p99"),
                ("requests", "running / queued"),
                ("kv", "KV cells used"),
                ("prefix", "prefix-cache hits"),
                ("spec", "draft acceptance"),
                ("done", "requests completed"),
            )
        }
        self.tile_columns = 0
        self._arrange_tiles(len(self.tiles))
        v.addLayout(self.tile_grid)
        grid = QGridLayout()
        grid.setSpacing(10)
        for i, chart in enumerate(CHARTS):
            grid.addWidget(self._build_chart(chart), i // 4, i % 4)
        v.addLayout(grid, 1)
        return live

    def _build_chart(self, chart: _Chart) -> QWidget:
        card = QFrame()
        card.setObjectName("Card")
        self.chart_cards[chart.key] = card
        lay = QVBoxLayout(card)
        lay.setContentsMargins(10, 8, 10, 6)
        lay.setSpacing(2)
        title = QLabel(f"{chart.title}" + (f"  ·  {chart.unit}" if chart.unit else ""))
        title.setStyleSheet("font-weight: 600; color: #c9d0dc;")
        lay.addWidget(title)
        plot = pg.PlotWidget()
        plot.setMinimumHeight(150)
        plot.setMenuEnabled(False)
        plot.setMouseEnabled(x=False, y=False)
        plot.hideButtons()
        plot.showGrid(x=True, y=True, alpha=0.12)
        plot.setXRange(-WINDOW_S, 0, padding=0)
        plot.setYRange(0, chart.min_top, padding=0)
        plot.setLabel("bottom", "seconds")
        item = plot.getPlotItem()
        item.getAxis("bottom").setStyle(tickTextOffset=4)
        legend = plot.addLegend(offset=(6, 4), labelTextColor=MUTED, labelTextSize="8pt")
        legend.setBrush(pg.mkBrush(27, 30, 37, 200))
        curves = []
        for i, name in enumerate(chart.series):
            pen = pg.mkPen(SERIES[i % len(SERIES)], width=2)
            curve = plot.plot([], [], pen=pen, name=name if chart.key != "vram" else None)
            curve.setSkipFiniteCheck(True)
            curves.append(curve)
        self.plots[chart.key] = plot
        self.curves[chart.key] = curves
        if chart.key == "vram":
            self.vram_stack = QStackedWidget()
            self.no_gpu_label = QLabel("No NVIDIA GPU")
            self.no_gpu_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
            self.no_gpu_label.setWordWrap(True)
            self.no_gpu_label.setProperty("muted", True)
            self.vram_stack.addWidget(self.no_gpu_label)
            self.vram_stack.addWidget(plot)
            lay.addWidget(self.vram_stack, 1)
        else:
            lay.addWidget(plot, 1)
        return card

    # -- the model filter -------------------------------------------------------------------
    def show_models(self, cards: list[ModelCard]) -> None:
        """Offer the loaded models; a filtered model that went away falls back to All."""
        loaded = [c.id for c in cards if c.state == "loaded"]
        shown = [self.model_filter.itemData(i) for i in range(1, self.model_filter.count())]
        self.filter_row.setVisible(bool(cards))
        if loaded == shown:
            return
        current = self.model_filter.currentData() or ""
        self.model_filter.blockSignals(True)
        while self.model_filter.count() > 1:
            self.model_filter.removeItem(1)
        for model_id in loaded:
            self.model_filter.addItem(model_id, model_id)
        index = self.model_filter.findData(current)
        self.model_filter.setCurrentIndex(max(index, 0))
        self.model_filter.blockSignals(False)
        if index < 0:
            self._on_filter()

    def filter_model(self, model_id: str | None) -> bool:
        """Show ``model_id``'s stats (``None``: all models); False if it is not offered."""
        index = self.model_filter.findData(model_id or "")
        if index < 0:
            return False
        self.model_filter.setCurrentIndex(index)
        return True

    def _on_filter(self) -> None:
        chosen = self.model_filter.currentData() or None
        if chosen != self.context.stats_model:
            self.context.stats_model = chosen
            for buf in self.buffers.values():  # another model's history does not continue
                buf.clear()
            self._latest = None
            self._dirty = True

    # -- data -----------------------------------------------------------------------------
    def on_stats(self, stats: StatsSnapshot, received_at: float) -> None:
        """Store one /v1/stats snapshot at the ``time.monotonic()`` its response arrived;
        cheap, so it can run at 10 Hz."""
        wanted = self.context.stats_model
        if wanted is not None and stats.model.id != wanted:
            return  # polled before the filter changed
        b = self.buffers
        b["tps"].append(
            received_at, (stats.tokens.gen_tokens_per_s, stats.tokens.prompt_tokens_per_s)
        )
        latency = stats.latency
        b["ttft"].append(
            received_at,
            (
                _nan_if_none(latency.ttft_ms_last),
                _nan_if_none(latency.ttft_ms_p50),
                _nan_if_none(latency.ttft_ms_p99),
            ),
        )
        b["requests"].append(received_at, (stats.requests.running, stats.requests.queued))
        b["kv"].append(received_at, (stats.kv.used_pct,))
        b["prefix"].append(received_at, (stats.prefix_cache.hits, stats.prefix_cache.misses))
        system = stats.system
        # a library server's snapshots count its models alone: with every model shown, the
        # server line is the router and its model servers together, as psutil reads them
        memory = self.context.latest_memory
        rss = memory.total if wanted is None and memory is not None else system.rss_bytes
        self._ram_rss = rss
        b["ram"].append(received_at, (rss / GiB, system.ram_used_bytes / GiB))
        gpus = system.gpus[:MAX_GPUS]
        vram = [float("nan")] * MAX_GPUS
        for gpu in gpus:
            vram[gpu.index % MAX_GPUS] = gpu.vram_used_bytes / GiB
        b["vram"].append(received_at, vram)
        b["cpu"].append(received_at, (system.cpu_pct,))
        self._gpu_names = [gpu.name for gpu in gpus]
        self._gpu_note = system.gpu_note
        self._latest = stats
        self.stats_count += 1
        self._dirty = True

    def redraw(self) -> None:
        """Push the buffers into the curves (only when new data came and the page shows)."""
        if not self._dirty or not self.isVisible():
            return
        self._dirty = False
        self.redraw_count += 1
        now = time.monotonic()
        for chart in CHARTS:
            buf = self.buffers[chart.key]
            x = buf.times() - now
            top = chart.min_top
            for i, curve in enumerate(self.curves[chart.key]):
                if chart.key == "vram" and i >= len(self._gpu_names):
                    curve.setData([], [])
                    continue
                y = buf.series(i)
                curve.setData(x, y, connect="finite")
                if len(y) and not np.all(np.isnan(y)):
                    top = max(top, float(np.nanmax(y)) * 1.1)
            if chart.key != "vram":
                self.plots[chart.key].setYRange(0, top, padding=0)
        self._update_vram_state()
        self._update_ram_names()
        self._update_tiles()

    def _update_vram_state(self) -> None:
        plot = self.plots["vram"]
        if self._gpu_names:
            self.vram_stack.setCurrentWidget(plot)
            gpus = self._latest.system.gpus if self._latest is not None else []
            total = max((gpu.vram_total_bytes for gpu in gpus), default=0)
            plot.setYRange(0, max(total / GiB, 1.0), padding=0.02)
            legend = plot.getPlotItem().legend
            if legend is not None and not legend.items:
                for curve, name in zip(self.curves["vram"], self._gpu_names, strict=False):
                    legend.addItem(curve, name)
        else:
            self.vram_stack.setCurrentWidget(self.no_gpu_label)
            note = self._gpu_note or "NVML found no device"
            self.no_gpu_label.setText(
                f"<b>No NVIDIA GPU</b><br>{note}.<br>The model runs on the CPU."
            )

    def _update_ram_names(self) -> None:
        """Name the server line for what it counts, and give its numbers as a tooltip."""
        model = self.context.stats_model
        memory = self.context.latest_memory if model is None else None
        legend = self.plots["ram"].getPlotItem().legend
        if legend is not None and legend.items:
            name = ram_series_name(model, memory)
            label = legend.items[0][1]
            if label.text != name:
                label.setText(name)
                legend.updateSize()
        card = next((c for c in self.context.latest_models if c.id == model), None)
        self.chart_cards["ram"].setToolTip(
            ram_tooltip(model, memory, self._ram_rss, card.memory_bytes if card else None)
        )

    def _update_tiles(self) -> None:
        s = self._latest
        if s is None:
            return
        tokens, latency, requests, kv = s.tokens, s.latency, s.requests, s.kv
        self.tiles["gen"].set_value(f"{tokens.gen_tokens_per_s:.1f}")
        self.tiles["prompt"].set_value(f"{tokens.prompt_tokens_per_s:.0f}")
        self.tiles["ttft"].set_value(
            f"{latency.ttft_ms_p50 or 0.0:.0f} / {latency.ttft_ms_p99 or 0.0:.0f} ms"
        )
        self.tiles["requests"].set_value(f"{requests.running} / {requests.queued}")
        self.tiles["kv"].set_value(f"{kv.cells_used} / {kv.cells_total}")
        self.tiles["kv"].setToolTip(
            f"{human_bytes(kv.bytes_used)} of {human_bytes(kv.bytes_total)} ({kv.used_pct:.1f}%)"
        )
        self.tiles["kv"].caption.setText(
            f"KV cells · {human_bytes(kv.bytes_used)} · {kv.used_pct:.0f}%"
        )
        self.tiles["prefix"].set_value(f"{s.prefix_cache.hits}")
        self.tiles["prefix"].caption.setText(
            f"prefix hits · {s.prefix_cache.tokens_saved} tok saved"
        )
        self.tiles["prefix"].setToolTip(session_tiers_text(s))
        self._update_spec_tile()
        self.tiles["done"].set_value(f"{requests.completed}")

    def _update_spec_tile(self) -> None:
        """Speculative decoding: the share of drafted tokens the model accepted."""
        assert self._latest is not None
        spec = self._latest.speculative
        tile = self.tiles["spec"]
        if not spec.type:
            tile.set_value("off")
            tile.caption.setText("draft acceptance")
            tile.setToolTip("Start the server with --spec-type ngram-simple or a draft model")
            return
        rate = spec.acceptance_rate
        tile.set_value("–" if rate is None else f"{100 * rate:.0f}%")
        tile.caption.setText(f"accepted · {spec.accepted}/{spec.drafted} tok")
        tile.setToolTip(
            f"{spec.type}: {spec.drafts} drafts verified, {spec.draft_ms_avg:.1f} ms drafting "
            "per step that drafted"
        )

    # One row of tiles needs about this much width; narrower pages get two rows, so a
    # value such as "1234 / 5678 ms" is never cut (at 1280x720 seven tiles had ~110 px).
    ONE_ROW_MIN_WIDTH = 1500

    def _arrange_tiles(self, columns: int) -> None:
        if columns == self.tile_columns:
            return
        self.tile_columns = columns
        for tile in self.tiles.values():
            self.tile_grid.removeWidget(tile)
        for i, tile in enumerate(self.tiles.values()):
            self.tile_grid.addWidget(tile, i // columns, i % columns)
        for column in range(len(self.tiles)):
            self.tile_grid.setColumnStretch(column, 1 if column < columns else 0)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        wide = self.width() >= self.ONE_ROW_MIN_WIDTH
        self._arrange_tiles(len(self.tiles) if wide else (len(self.tiles) + 1) // 2)

    def _on_state(self, state: str) -> None:
        if state != ServerState.RUNNING.value:
            self.show_models([])
        if state == ServerState.RUNNING.value:
            if self.stack.currentWidget() is self.empty:
                for buf in self.buffers.values():
                    buf.clear()
            self.stack.setCurrentIndex(1)
        elif state != ServerState.STOPPING.value:
            self.stack.setCurrentWidget(self.empty)
            self.empty.title.setText(
                "The server stopped unexpectedly"
                if state == ServerState.CRASHED.value
                else (
                    "The server is starting…"
                    if state == ServerState.STARTING.value
                    else "No server running"
                )
            )
