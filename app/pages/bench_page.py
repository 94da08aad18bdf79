"""Bench page: a concurrency sweep against the running server, plotted beside earlier runs."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.app_context import AppContext
from app.storage.app_settings import AppSettings
from app.storage.bench_store import BenchStore
from app.theme import MUTED, SERIES
from app.widgets.common import page_header, scroll_column, set_button_role
from app.workers.server_process import ServerState
from app.workers.thread_worker import ThreadWorker
from backend.bench import BenchConfig, BenchError, BenchProgress, BenchResult, run_benchmark
from backend.settings.default_model import DEFAULT_MODEL_ID

log = logging.getLogger(__name__)

# Config keys that define the load; runs are comparable when these match.
LOAD_KEYS = (
    "endpoint",
    "concurrency",
    "repetitions",
    "requests_per_client",
    "prompt_tokens",
    "max_tokens",
    "shared_prefix_tokens",
    "include_plain",
    "ignore_eos",
    "temperature",
)


def _spin(lo: int, hi: int, value: int) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setValue(value)
    return box


def parse_levels(text: str) -> tuple[int, ...]:
    """'1, 2, 4' -> (1, 2, 4); bad entries raise ValueError."""
    levels = tuple(sorted({int(p) for p in text.replace(" ", ",").split(",") if p.strip()}))
    if not levels or min(levels) < 1:
        raise ValueError("concurrency levels must be whole numbers >= 1")
    return levels


def load_signature(result: BenchResult) -> tuple[Any, ...]:
    return tuple(str(result.config.get(k)) for k in LOAD_KEYS)


class BenchPage(QWidget):
    def __init__(
        self, settings: AppSettings, context: AppContext, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.context = context
        self.server = context.server
        self.store = BenchStore()
        self.runs: list[tuple[Path, BenchResult]] = self.store.load_all()
        self.worker: ThreadWorker | None = None

        outer = QVBoxLayout(self)
        outer.setContentsMargins(28, 22, 28, 22)
        outer.setSpacing(12)
        outer.addWidget(
            page_header(
                "Bench",
                "Throughput and latency against concurrency. Change one setting at a time, "
                "keep the load fixed, and compare the medians.",
            )
        )
        row = QHBoxLayout()
        row.setSpacing(16)
        row.addWidget(scroll_column(self._build_controls(), 360), 0)
        row.addLayout(self._build_charts(), 1)
        outer.addLayout(row, 1)

        self.server.state_changed.connect(self._update_controls)
        self.server.server_started.connect(lambda _u: self._update_controls())
        self._refresh_runs()
        self._update_controls()

    # -- building -------------------------------------------------------------------------
    def _build_controls(self) -> QWidget:
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        load = QGroupBox("Load")
        form = QFormLayout(load)
        self.levels_edit = QLineEdit("1, 2, 4, 8")
        self.reps_spin = _spin(1, 20, 3)
        self.rpc_spin = _spin(1, 50, 2)
        self.prompt_spin = _spin(1, 32_768, 64)
        self.max_tokens_spin = _spin(1, 32_768, 64)
        self.prefix_spin = _spin(0, 32_768, 0)
        self.prefix_spin.setSpecialValueText("off")
        self.plain_check = QCheckBox("without a shared prefix too")
        self.plain_check.setChecked(True)
        self.endpoint_combo = QComboBox()
        self.endpoint_combo.addItems(["completions", "chat"])
        form.addRow("Concurrency", self.levels_edit)
        form.addRow("Repetitions", self.reps_spin)
        form.addRow("Requests / client", self.rpc_spin)
        form.addRow("Prompt tokens", self.prompt_spin)
        form.addRow("Output tokens", self.max_tokens_spin)
        form.addRow("Shared prefix", self.prefix_spin)
        form.addRow("", self.plain_check)
        form.addRow("Endpoint", self.endpoint_combo)
        v.addWidget(load)

        run = QGroupBox("Run")
        rv = QVBoxLayout(run)
        self.label_edit = QLineEdit()
        self.label_edit.setPlaceholderText("label (default: model and server knobs)")
        buttons = QHBoxLayout()
        self.run_button = set_button_role(QPushButton("Run benchmark"), "primary")
        self.run_button.clicked.connect(self.start)
        self.cancel_button = set_button_role(QPushButton("Cancel"), "danger")
        self.cancel_button.clicked.connect(self.cancel)
        buttons.addWidget(self.run_button, 1)
        buttons.addWidget(self.cancel_button)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setProperty("muted", True)
        rv.addWidget(self.label_edit)
        rv.addLayout(buttons)
        rv.addWidget(self.progress)
        rv.addWidget(self.status)
        v.addWidget(run)

        runs = QGroupBox("Runs")
        lv = QVBoxLayout(runs)
        self.run_list = QListWidget()
        self.run_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.run_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.run_list.itemChanged.connect(lambda _i: self.replot())
        self.delete_button = set_button_role(QPushButton("Delete selected run"), "flat")
        self.delete_button.clicked.connect(self.delete_selected)
        lv.addWidget(self.run_list, 1)
        lv.addWidget(self.delete_button)
        v.addWidget(runs, 1)
        return box

    def _build_charts(self) -> QVBoxLayout:
        v = QVBoxLayout()
        head = QHBoxLayout()
        head.addWidget(QLabel("Scenario"))
        self.scenario_combo = QComboBox()
        self.scenario_combo.addItems(["plain", "shared-prefix"])
        self.scenario_combo.currentIndexChanged.connect(lambda _i: self.replot())
        head.addWidget(self.scenario_combo)
        head.addStretch(1)
        self.note = QLabel()
        self.note.setProperty("muted", True)
        head.addWidget(self.note)
        v.addLayout(head)
        tps_card, self.tps_plot = self._plot("Aggregate generation throughput", "tok/s")
        ttft_card, self.ttft_plot = self._plot("Time to first token (solid p50, dashed p99)", "ms")
        v.addWidget(tps_card, 1)
        v.addWidget(ttft_card, 1)
        return v

    def _plot(self, title: str, unit: str) -> tuple[QFrame, pg.PlotWidget]:
        card = QFrame()
        card.setObjectName("Card")
        lay = QVBoxLayout(card)
        lay.setContentsMargins(10, 8, 10, 6)
        label = QLabel(f"{title}  ·  {unit}")
        label.setStyleSheet("font-weight: 600; color: #c9d0dc;")
        lay.addWidget(label)
        plot = pg.PlotWidget()
        plot.setMenuEnabled(False)
        plot.setMouseEnabled(x=False, y=False)
        plot.hideButtons()
        plot.showGrid(x=True, y=True, alpha=0.12)
        plot.setLogMode(x=True, y=False)
        plot.setLabel("bottom", "concurrent clients")
        plot.addLegend(offset=(6, 4), labelTextColor=MUTED, labelTextSize="8pt")
        lay.addWidget(plot, 1)
        return card, plot

    # -- runs -----------------------------------------------------------------------------
    def _refresh_runs(self) -> None:
        self.run_list.blockSignals(True)
        self.run_list.clear()
        latest = load_signature(self.runs[-1][1]) if self.runs else None
        for i, (path, result) in enumerate(self.runs):
            same = load_signature(result) == latest
            text = f"{result.started_at[5:16].replace('T', ' ')}  ·  {result.label}"
            if not same:
                text += "  (different load)"
            item = QListWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, str(path))
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            recent = i >= len(self.runs) - 4
            item.setCheckState(
                Qt.CheckState.Checked if recent and same else Qt.CheckState.Unchecked
            )
            item.setToolTip("\n".join([result.label, *result.notes]))
            self.run_list.addItem(item)
        self.run_list.blockSignals(False)
        self.replot()

    def checked_runs(self) -> list[BenchResult]:
        out = []
        for i in range(self.run_list.count()):
            if self.run_list.item(i).checkState() == Qt.CheckState.Checked:
                out.append(self.runs[i][1])
        return out

    def replot(self) -> None:
        self.tps_plot.clear()
        self.ttft_plot.clear()
        scenario = self.scenario_combo.currentText()
        plotted = 0
        tops = [1.0, 1.0]
        for i, result in enumerate(self.checked_runs()):
            sc = result.scenario(scenario)
            if sc is None or not sc.levels:
                continue
            colour = SERIES[i % len(SERIES)]
            xs = [lv.concurrency for lv in sc.levels]
            sym = {"symbol": "o", "symbolSize": 7, "symbolBrush": colour, "symbolPen": None}
            self.tps_plot.plot(
                xs,
                [lv.tokens_per_s for lv in sc.levels],
                pen=pg.mkPen(colour, width=2),
                name=result.label,
                **sym,
            )
            self.ttft_plot.plot(
                xs,
                [lv.ttft_ms_p50 for lv in sc.levels],
                pen=pg.mkPen(colour, width=2),
                name=result.label,
                **sym,
            )
            self.ttft_plot.plot(
                xs,
                [lv.ttft_ms_p99 for lv in sc.levels],
                pen=pg.mkPen(colour, width=1.5, style=Qt.PenStyle.DashLine),
            )
            plotted += 1
            tops[0] = max(
                [
                    tops[0],
                    *(v * 1.15 for v in (lv.tokens_per_s for lv in sc.levels) if math.isfinite(v)),
                ]
            )
            tops[1] = max(
                [
                    tops[1],
                    *(v * 1.15 for v in (lv.ttft_ms_p99 for lv in sc.levels) if math.isfinite(v)),
                ]
            )
        self.tps_plot.setYRange(0, tops[0], padding=0)
        self.ttft_plot.setYRange(0, tops[1], padding=0)
        self.note.setText(
            "" if plotted else "No runs for this scenario yet: start the server and run a sweep."
        )

    def delete_selected(self) -> None:
        row = self.run_list.currentRow()
        if 0 <= row < len(self.runs):
            self.store.delete(self.runs[row][0])
            del self.runs[row]
            self._refresh_runs()

    # -- running --------------------------------------------------------------------------
    def default_label(self) -> str:
        k = self.server.knobs
        if k is None:
            return "server"
        model = DEFAULT_MODEL_ID if k.model == "default" else Path(k.model).stem
        return (
            f"{model} -c {k.ctx_size} -np {k.parallel} -b {k.batch_size} "
            f"-ctk {k.cache_type_k} -t {k.threads}"
        )

    def config(self) -> BenchConfig:
        url = self.server.base_url or ""
        return BenchConfig(
            url=url,
            label=self.label_edit.text().strip() or self.default_label(),
            endpoint=self.endpoint_combo.currentText(),  # type: ignore[arg-type]
            api_key=self.server.api_key or None,
            concurrency=parse_levels(self.levels_edit.text()),
            repetitions=self.reps_spin.value(),
            requests_per_client=self.rpc_spin.value(),
            prompt_tokens=self.prompt_spin.value(),
            max_tokens=self.max_tokens_spin.value(),
            shared_prefix_tokens=self.prefix_spin.value(),
            include_plain=self.plain_check.isChecked(),
        )

    def start(self) -> None:
        if self.worker is not None or self.server.base_url is None:
            return
        try:
            config = self.config()
            config.validate()
        except (ValueError, BenchError) as exc:
            self.status.setText(f"Check the load settings: {exc}")
            return

        def bench() -> BenchResult:
            return run_benchmark(config, progress=worker.report, cancel=worker.cancel_event)

        worker = ThreadWorker(bench)
        worker.yielded.connect(self._on_progress)
        worker.returned.connect(self._on_result)
        worker.errored.connect(self._on_failed)
        worker.cancelled.connect(lambda: self._on_failed("Cancelled."))
        worker.finished.connect(self._on_done)
        self.worker = worker
        self.progress.setRange(0, 0)
        self.status.setText("Warming up…")
        worker.start()
        self._update_controls()

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.status.setText("Cancelling…")

    def _on_progress(self, p: BenchProgress) -> None:
        self.progress.setRange(0, max(1, p.total))
        self.progress.setValue(p.done)
        self.status.setText(p.message)

    def _on_result(self, result: BenchResult) -> None:
        knobs = self.server.knobs
        if knobs is not None:
            result.server = {**result.server, "knobs": knobs.model_dump(exclude={"api_key"})}
        path = self.store.save(result)
        self.runs.append((path, result))
        self._refresh_runs()
        self.status.setText(f"Done in {result.duration_s:.0f} s. " + " ".join(result.notes))
        self.progress.setRange(0, 1)
        self.progress.setValue(1)

    def _on_failed(self, message: str) -> None:
        self.status.setText(message)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)

    def _on_done(self) -> None:
        if self.worker is not None:
            self.worker.deleteLater()
        self.worker = None
        self._update_controls()

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.worker.wait(10_000)

    def _update_controls(self, *_args: object) -> None:
        running = self.worker is not None
        ready = self.server.state is ServerState.RUNNING
        self.run_button.setEnabled(ready and not running)
        self.cancel_button.setEnabled(running)
        if not ready and not running:
            self.status.setText("Start the server on the Server page to run a benchmark.")
        elif ready and not running and self.status.text().startswith("Start the server"):
            self.status.setText("Ready.")
