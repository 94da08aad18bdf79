"""Server page: pick a model, set the knobs, see whether it fits, start/stop, copy the endpoint."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QGuiApplication, QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.app_context import AppContext
from app.app_settings import AppSettings, ServerKnobs
from app.fit_adapter import FitView, estimate
from app.model_choices import describe, library_paths, model_choices, model_facts
from app.server_command import base_url, find_free_port
from app.server_errors import ServerProcessError, failure_title
from app.server_process import ServerState
from app.snippets import SNIPPETS
from app.widgets.common import Banner, StatusLight, page_header, set_button_role
from app.widgets.fit_bar import FitBar
from app.workers.thread_worker import ThreadWorker
from backend.settings.default_model import DEFAULT_MODEL_ID
from backend.settings.engine_settings import CacheType

log = logging.getLogger(__name__)

CACHE_TYPES: tuple[str, ...] = CacheType.__args__  # type: ignore[attr-defined]


def _spin(lo: int, hi: int, value: int, step: int = 1, special: str | None = None) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setValue(value)
    box.setAccelerated(True)
    if special:
        box.setSpecialValueText(special)
    return box


class ServerPage(QWidget):
    """Start and watch ``quantdesk serve``; the knobs persist in :class:`AppSettings`."""

    def __init__(
        self, settings: AppSettings, context: AppContext, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.context = context
        self.server = context.server
        self._loading = True
        self._library: list[Path] = []
        self._port_note: str | None = None
        self._scan: ThreadWorker | None = None
        self.library_scans = 0
        self._fit_timer = QTimer(self)
        self._fit_timer.setSingleShot(True)
        self._fit_timer.setInterval(120)
        self._fit_timer.timeout.connect(self.refresh_fit)

        outer = QVBoxLayout(self)
        outer.setContentsMargins(28, 22, 28, 22)
        outer.setSpacing(12)
        outer.addWidget(
            page_header(
                "Server", "Serve a GGUF model over an OpenAI-compatible API on this machine."
            )
        )
        self.banner = Banner()
        self.banner.action_clicked.connect(self._on_banner_action)
        outer.addWidget(self.banner)

        columns = QHBoxLayout()
        columns.setSpacing(16)
        left_scroll = QScrollArea()
        left_scroll.setWidgetResizable(True)
        left_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 6, 0)
        lv.setSpacing(12)
        lv.addWidget(self._build_model_box())
        lv.addWidget(self._build_knobs_box())
        lv.addWidget(self._build_fit_box())
        lv.addWidget(self._build_network_box())
        lv.addStretch(1)
        left_scroll.setWidget(left)
        left_scroll.setMinimumWidth(540)
        columns.addWidget(left_scroll, 5)

        right = QVBoxLayout()
        right.setSpacing(12)
        right.addWidget(self._build_control_box())
        right.addWidget(self._build_endpoint_box(), 1)
        right.addWidget(self._build_log_box(), 1)
        columns.addLayout(right, 6)
        outer.addLayout(columns, 1)

        self._load_knobs(settings.server)
        self._loading = False
        self.server.state_changed.connect(self._on_state)
        self.server.server_started.connect(self._on_started)
        self.server.server_crashed.connect(self._on_crashed)
        self.server.log_line.connect(self.log_view.appendPlainText)
        context.port_moved.connect(self._on_port_moved)
        self._on_state(self.server.state.value)
        self.refresh_fit()
        try:  # the Models page announces downloads and deletions here
            from app.workers.library_events import library_events

            library_events().library_changed.connect(self.scan_library)
        except ImportError:
            pass

    # -- building -------------------------------------------------------------------------
    def _build_model_box(self) -> QGroupBox:
        box = QGroupBox("Model")
        v = QVBoxLayout(box)
        row = QHBoxLayout()
        self.model_combo = QComboBox()
        self.model_combo.setMinimumWidth(260)
        self.open_button = QPushButton("Open GGUF…")
        self.open_button.clicked.connect(self._open_gguf)
        row.addWidget(self.model_combo, 1)
        row.addWidget(self.open_button)
        self.model_info = QLabel()
        self.model_info.setProperty("muted", True)
        self.model_info.setWordWrap(True)
        v.addLayout(row)
        v.addWidget(self.model_info)
        self.model_combo.currentIndexChanged.connect(self._on_model_changed)
        return box

    def _build_knobs_box(self) -> QGroupBox:
        box = QGroupBox("Engine")
        grid = QGridLayout(box)
        grid.setHorizontalSpacing(14)
        grid.setVerticalSpacing(8)
        self.ctx_spin = _spin(256, 1_048_576, 4096, 256)
        self.ctx_spin.setToolTip("Total KV-cache cells shared by all parallel sequences")
        self.parallel_spin = _spin(1, 128, 4)
        self.parallel_spin.setToolTip("Sequences generated at once (continuous batching)")
        self.batch_spin = _spin(32, 65_536, 512, 32)
        self.ubatch_spin = _spin(16, 65_536, 512, 16)
        self.ngl_spin = _spin(-1, 100_000, -1, 1, "all")
        self.ngl_spin.setToolTip("Layers offloaded to the GPU (all = every layer)")
        self.threads_spin = _spin(1, 512, 4)
        self.ctk_combo = QComboBox()
        self.ctv_combo = QComboBox()
        for combo in (self.ctk_combo, self.ctv_combo):
            combo.addItems(list(CACHE_TYPES))
        self.ctv_combo.setToolTip("A quantised V cache needs flash attention")
        self.fa_combo = QComboBox()
        self.fa_combo.addItems(["auto", "on", "off"])
        self.kv_layout_combo = QComboBox()
        self.kv_layout_combo.addItems(["unified", "per slot"])
        self.kv_layout_combo.setToolTip(
            "unified: one cache for all sequences, one request may use the whole context.\n"
            "per slot: each sequence gets context/parallel cells of its own (llama-server's "
            "layout with -np); faster when many requests run at once"
        )
        pairs = [
            ("Context length", self.ctx_spin, "Parallel sequences", self.parallel_spin),
            ("Batch size", self.batch_spin, "Micro-batch size", self.ubatch_spin),
            ("GPU layers", self.ngl_spin, "CPU threads", self.threads_spin),
            ("K cache type", self.ctk_combo, "V cache type", self.ctv_combo),
            ("Flash attention", self.fa_combo, "KV cache", self.kv_layout_combo),
        ]
        for row, (l1, w1, l2, w2) in enumerate(pairs):
            grid.addWidget(QLabel(l1), row, 0)
            grid.addWidget(w1, row, 1)
            if l2 and w2:
                grid.addWidget(QLabel(l2), row, 2)
                grid.addWidget(w2, row, 3)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 1)
        for spin in (
            self.ctx_spin,
            self.parallel_spin,
            self.batch_spin,
            self.ubatch_spin,
            self.ngl_spin,
            self.threads_spin,
        ):
            spin.valueChanged.connect(self._on_knob_changed)
        for combo in (self.ctk_combo, self.ctv_combo, self.fa_combo, self.kv_layout_combo):
            combo.currentIndexChanged.connect(self._on_knob_changed)
        return box

    def _build_fit_box(self) -> QGroupBox:
        box = QGroupBox("Will it fit?")
        v = QVBoxLayout(box)
        self.fit_bar = FitBar()
        v.addWidget(self.fit_bar)
        return box

    def _build_network_box(self) -> QGroupBox:
        box = QGroupBox("Network")
        form = QFormLayout(box)
        form.setHorizontalSpacing(14)
        form.setVerticalSpacing(8)
        self.host_edit = QLineEdit()
        self.host_edit.setToolTip("127.0.0.1 keeps the server private to this machine")
        self.port_spin = _spin(0, 65_535, 8080, 1, "any free port")
        self.key_edit = QLineEdit()
        self.key_edit.setPlaceholderText("none (required when binding a public address)")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        self.cors_edit = QLineEdit()
        self.cors_edit.setPlaceholderText("localhost always; e.g. https://my.app, or *")
        form.addRow("Host", self.host_edit)
        form.addRow("Port", self.port_spin)
        form.addRow("API key", self.key_edit)
        form.addRow("CORS origins", self.cors_edit)
        for edit in (self.host_edit, self.key_edit, self.cors_edit):
            edit.textChanged.connect(self._on_knob_changed)
        self.port_spin.valueChanged.connect(self._on_knob_changed)
        return box

    def _build_control_box(self) -> QGroupBox:
        box = QGroupBox("Status")
        v = QVBoxLayout(box)
        row = QHBoxLayout()
        self.light = StatusLight()
        self.state_label = QLabel("Stopped")
        self.state_label.setStyleSheet("font-size: 15px; font-weight: 600;")
        self.state_label.setWordWrap(True)
        row.addWidget(self.light)
        row.addWidget(self.state_label, 1)
        self.start_button = set_button_role(QPushButton("Start"), "primary")
        self.stop_button = set_button_role(QPushButton("Stop"), "danger")
        self.restart_button = QPushButton("Restart")
        for button in (self.start_button, self.stop_button, self.restart_button):
            button.setMinimumWidth(90)
            row.addWidget(button)
        self.start_button.clicked.connect(self.start_server)
        self.stop_button.clicked.connect(self.server.stop)
        self.restart_button.clicked.connect(self.restart_server)
        self.detail_label = QLabel()
        self.detail_label.setProperty("muted", True)
        self.detail_label.setWordWrap(True)
        v.addLayout(row)
        v.addWidget(self.detail_label)
        return box

    def _build_endpoint_box(self) -> QGroupBox:
        box = QGroupBox("Endpoint")
        v = QVBoxLayout(box)
        row = QHBoxLayout()
        self.url_edit = QLineEdit()
        self.url_edit.setReadOnly(True)
        self.copy_url_button = QPushButton("Copy URL")
        self.copy_url_button.clicked.connect(lambda: self._copy(self.url_edit.text()))
        row.addWidget(self.url_edit, 1)
        row.addWidget(self.copy_url_button)
        v.addLayout(row)
        self.snippet_tabs = QTabWidget()
        self.snippet_edits: list[QPlainTextEdit] = []
        for title, _func in SNIPPETS:
            edit = QPlainTextEdit()
            edit.setObjectName("Snippet")
            edit.setReadOnly(True)
            edit.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
            self.snippet_edits.append(edit)
            self.snippet_tabs.addTab(edit, title)
        copy = set_button_role(QPushButton("Copy snippet"), "flat")
        copy.clicked.connect(
            lambda: self._copy(self.snippet_edits[self.snippet_tabs.currentIndex()].toPlainText())
        )
        self.snippet_tabs.setCornerWidget(copy)
        # up to 200 px; less on a short window (a banner above, 1280x720) rather than
        # pushing the whole page into a scroll area
        self.snippet_tabs.setMinimumHeight(120)
        self.snippet_tabs.setMaximumHeight(200)
        v.addWidget(self.snippet_tabs)
        return box

    def _build_log_box(self) -> QGroupBox:
        box = QGroupBox("Server log")
        v = QVBoxLayout(box)
        self.log_view = QPlainTextEdit()
        self.log_view.setObjectName("LogView")
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(5000)
        self.log_view.setPlaceholderText("The server's output appears here once it starts.")
        v.addWidget(self.log_view)
        return box

    # -- knobs <-> settings ---------------------------------------------------------------
    def _fill_models(self, select: str) -> None:
        self.model_combo.blockSignals(True)
        self.model_combo.clear()
        values = []
        for choice in model_choices(self.settings.recent_models, self._library):
            self.model_combo.addItem(choice.label, choice.value)
            values.append(choice.value)
        if select not in values:
            self.model_combo.addItem(Path(select).name, select)
            values.append(select)
        self.model_combo.setCurrentIndex(values.index(select))
        self.model_combo.blockSignals(False)
        self._update_model_info()

    def showEvent(self, event: QShowEvent) -> None:
        """Pick up models downloaded or quantised since the page was last shown."""
        super().showEvent(event)
        self.scan_library()

    def scan_library(self) -> None:
        """Re-read the hub library in a thread; the picker updates when it is done."""
        if self._scan is not None:
            return
        scan = ThreadWorker(library_paths)
        scan.returned.connect(self._on_library)
        scan.errored.connect(lambda message: log.warning("library scan failed: %s", message))
        scan.finished.connect(self._on_scan_done)
        self._scan = scan
        scan.start()

    def _on_library(self, paths: list[Path]) -> None:
        self._library = paths
        self._fill_models(str(self.model_combo.currentData() or "default"))
        self.library_scans += 1

    def _on_scan_done(self) -> None:
        if self._scan is not None:
            self._scan.deleteLater()
        self._scan = None

    def shutdown(self) -> None:
        if self._scan is not None:
            self._scan.wait(10_000)

    def _load_knobs(self, k: ServerKnobs) -> None:
        self._fill_models(k.model)
        self.ctx_spin.setValue(k.ctx_size)
        self.parallel_spin.setValue(k.parallel)
        self.batch_spin.setValue(k.batch_size)
        self.ubatch_spin.setValue(k.ubatch_size)
        self.ngl_spin.setValue(k.gpu_layers)
        self.threads_spin.setValue(k.threads)
        self.ctk_combo.setCurrentText(k.cache_type_k)
        self.ctv_combo.setCurrentText(k.cache_type_v)
        self.fa_combo.setCurrentText(k.flash_attn)
        self.kv_layout_combo.setCurrentIndex(1 if k.kv_per_slot else 0)
        self.host_edit.setText(k.host)
        self.port_spin.setValue(k.port)
        self.key_edit.setText(k.api_key)
        self.cors_edit.setText(", ".join(k.cors_origins))

    def knobs(self) -> ServerKnobs:
        """The knobs as the widgets show them."""
        origins = [o.strip() for o in self.cors_edit.text().split(",") if o.strip()]
        return ServerKnobs(
            model=str(self.model_combo.currentData() or "default"),
            ctx_size=self.ctx_spin.value(),
            batch_size=self.batch_spin.value(),
            ubatch_size=self.ubatch_spin.value(),
            parallel=self.parallel_spin.value(),
            gpu_layers=self.ngl_spin.value(),
            cache_type_k=self.ctk_combo.currentText(),  # type: ignore[arg-type]
            cache_type_v=self.ctv_combo.currentText(),  # type: ignore[arg-type]
            flash_attn=self.fa_combo.currentText(),  # type: ignore[arg-type]
            kv_per_slot=self.kv_layout_combo.currentIndex() == 1,
            threads=self.threads_spin.value(),
            host=self.host_edit.text().strip() or "127.0.0.1",
            port=self.port_spin.value(),
            api_key=self.key_edit.text().strip(),
            cors_origins=origins,
        )

    def set_model(self, value: str) -> None:
        """Select a model (a path or 'default'), adding it to the list if needed."""
        self.settings.remember_model(value)
        self._fill_models(value)
        self._on_knob_changed()

    def _on_model_changed(self) -> None:
        self._update_model_info()
        self._on_knob_changed()

    def _update_model_info(self) -> None:
        value = str(self.model_combo.currentData() or "default")
        facts = model_facts(value)
        if facts is None:
            self.model_info.setText("The model file cannot be read.")
            return
        self.model_info.setText(describe(facts))
        self.model_info.setToolTip(str(facts.path))
        if facts.n_layer:
            self.ngl_spin.setMaximum(max(facts.n_layer, 0))

    def _on_knob_changed(self) -> None:
        if self._loading:
            return
        self.settings.server = self.knobs()
        self._fit_timer.start()
        self._update_endpoint()
        running = self.server.knobs if self.server.state is ServerState.RUNNING else None
        if running is not None:
            if running != self.settings.server:
                self.detail_label.setText("Settings changed: press Restart to apply them.")
            else:
                self._on_started("")

    def refresh_fit(self) -> FitView:
        view = estimate(self.knobs())
        self.fit_bar.set_view(view)
        return view

    def _open_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a GGUF model", str(Path.home()), "GGUF models (*.gguf)"
        )
        if path:
            self.set_model(path)

    # -- server control -------------------------------------------------------------------
    def start_server(self) -> None:
        self.banner.hide()
        knobs = self.knobs()
        self.settings.server = knobs
        self.settings.remember_model(knobs.model)
        self.context.save_settings()
        try:
            self.server.start(knobs)
        except ServerProcessError as exc:
            self.banner.show_message(str(exc), "warning")

    def restart_server(self) -> None:
        self.banner.hide()
        knobs = self.knobs()
        self.settings.server = knobs
        self.server.restart(knobs)

    def use_free_port(self) -> int:
        """Switch to a port nothing listens on, keep it in the settings, and start."""
        knobs = self.knobs()
        port = find_free_port(knobs.host)
        self.port_spin.setValue(port)  # the settings follow the widgets
        self.start_server()
        return port

    def _on_banner_action(self) -> None:
        error = self.server.last_error
        if error is not None and error.kind == "port_in_use" and not self.server.is_active():
            self.use_free_port()
        elif self.server.knobs:
            self.restart_server()
        else:
            self.start_server()

    def _on_port_moved(self, busy: int, port: int) -> None:
        """The first run found the default port taken and took a free one instead."""
        self._loading = True
        self.port_spin.setValue(port)
        self._loading = False
        self._update_endpoint()
        self._port_note = (
            f"Port {busy} is in use by another program, so QuantDesk serves on port {port} "
            "instead and will keep using it. You can change it under Network."
        )
        self.banner.show_message(self._port_note, "info")

    def _on_state(self, state: str) -> None:
        self.light.set_state(state)
        labels = {
            "running": "Running",
            "starting": "Starting…",
            "stopping": "Stopping…",
            "crashed": failure_title(self.server.last_error),
            "stopped": "Stopped",
        }
        self.state_label.setText(labels.get(state, state))
        active = state in (
            ServerState.STARTING.value,
            ServerState.RUNNING.value,
            ServerState.STOPPING.value,
        )
        self.start_button.setEnabled(not active)
        self.stop_button.setEnabled(active and state != ServerState.STOPPING.value)
        self.restart_button.setEnabled(
            state != ServerState.STOPPING.value and self.server.knobs is not None
        )
        if state == "starting":
            self.detail_label.setText("Loading the model and warming up…")
        elif state == "stopped":
            self.detail_label.setText("Press Start to serve the selected model.")
        self._update_endpoint()

    def _on_started(self, url: str) -> None:
        self.banner.hide()
        if self._port_note:  # the first run's port change stays said once it serves
            self.banner.show_message(self._port_note, "info")
            self._port_note = None
        k = self.server.knobs
        if k is not None:
            name = DEFAULT_MODEL_ID if k.model == "default" else Path(k.model).stem
            self.detail_label.setText(
                f"{name} · ctx {k.ctx_size:,} · {k.parallel} parallel · pid {self.server.pid()}"
            )
        self._update_endpoint()

    def _on_crashed(self, message: str) -> None:
        error = self.server.last_error
        if error is not None and error.kind == "port_in_use":
            self.banner.show_message(message, "error", "Use a free port")
            self.detail_label.setText("Nothing was started: another program holds the port.")
            return
        if error is not None and error.kind == "oom":
            view = self.refresh_fit()
            message = f"{message}\nEstimate for these settings: {self.fit_bar.summary.text()}"
            log.info("OOM on load; fit verdict was %s", view.verdict)
        self.banner.show_message(message, "error", "Restart")
        if error is not None and error.while_starting:
            self.detail_label.setText(
                "The server did not start. Change the settings or the model, then restart."
            )
        else:
            self.detail_label.setText(
                "The server stopped. Your chats are kept; restart when ready."
            )

    def _update_endpoint(self) -> None:
        k = self.server.knobs if self.server.state is ServerState.RUNNING else None
        if k is not None and self.server.port is not None:
            url = base_url(k.host, self.server.port)
            key = k.api_key
            model = DEFAULT_MODEL_ID if k.model == "default" else Path(k.model).stem
        else:
            k = self.knobs()
            url = base_url(k.host, k.port or 8080)
            key = k.api_key
            model = DEFAULT_MODEL_ID if k.model == "default" else Path(k.model).stem
        self.url_edit.setText(f"{url}/v1")
        for edit, (_title, func) in zip(self.snippet_edits, SNIPPETS, strict=True):
            edit.setPlainText(func(url, model, key))

    def _copy(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)
