"""Server page: pick a model, set the knobs (speculative decoding too), see whether it fits,
start/stop, copy the endpoint, and the models a library server holds (Load/Unload/Pin).

The knobs shown are the chosen model's: picking a model shows the knobs remembered for it
(``ModelSettingsStore``), and starting or loading it remembers them, so every load of that
model, on demand too, uses them.

While a library server runs, the fit bars stack the models it holds, each its own segment,
before the chosen model (:mod:`app.page_models.memory_stack`), and the Status box says how
a change applies: another model loads beside the others without a restart."""

from __future__ import annotations

import logging
from typing import Any, get_args

from annotated_types import Ge, Le
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.app_context import AppContext
from app.page_models.fit_adapter import FitView, estimate
from app.page_models.memory_stack import estimated_gpu_bytes, load_plan, memory_stacks
from app.page_models.router_models import (
    ModelCard,
    library_change_note,
    library_model_id,
    with_model_overrides,
)
from app.page_models.rpc_workers import join_workers, parse_workers
from app.page_models.server_command import find_free_port
from app.page_models.server_errors import ServerProcessError
from app.page_models.server_status import (
    RESTART_TO_APPLY,
    Endpoint,
    cpu_path_text,
    failure_advice,
    port_moved_note,
    serving_detail,
    status_view,
)
from app.page_models.speculative_choice import (
    DRAFT_MODEL_TIP,
    DRAFT_TOKENS_TIP,
    SPEC_CHOICES,
    SpecMode,
    spec_mode,
    spec_update,
)
from app.pages.server_model_picker import ModelPicker
from app.pages.server_resident_view import ResidentModelsBox
from app.pages.server_status_view import EndpointBox, ServerLogBox, StatusBox
from app.pages.server_workers_view import WORKERS_TIP, ShareBox, WorkersBox
from app.storage.app_settings import AppSettings, ServerKnobs
from app.widgets.checkbox_style import use_visible_checkboxes
from app.widgets.common import Banner, page_header
from app.widgets.fit_bar import FitBar
from app.workers.library_events import library_events
from app.workers.server_process import ServerState, remember_model_knobs
from backend.engine.stats_model import StatsSnapshot
from backend.settings.model_settings_store import ModelSettingsStore
from backend.settings.router_settings import RouterSettings

log = logging.getLogger(__name__)


def knob_bounds(name: str) -> tuple[int, int]:
    """The ``ge``/``le`` bounds :class:`ServerKnobs` declares for an integer knob."""
    lo = hi = None
    for bound in ServerKnobs.model_fields[name].metadata:
        if isinstance(bound, Ge) and isinstance(bound.ge, int):
            lo = bound.ge
        elif isinstance(bound, Le) and isinstance(bound.le, int):
            hi = bound.le
    if lo is None or hi is None:
        raise ValueError(f"knob {name!r} declares no integer ge/le bounds")
    return lo, hi


def knob_choices(name: str) -> list[str]:
    """The values a Literal-typed knob of :class:`ServerKnobs` accepts, in declared order."""
    return [str(choice) for choice in get_args(ServerKnobs.model_fields[name].annotation)]


def _knob_spin(name: str, step: int = 1, special: str | None = None) -> QSpinBox:
    """A spin box whose range, default and tooltip are the knob's own in :class:`ServerKnobs`."""
    field = ServerKnobs.model_fields[name]
    box = QSpinBox()
    box.setRange(*knob_bounds(name))
    box.setSingleStep(step)
    box.setValue(field.get_default(call_default_factory=True))
    box.setAccelerated(True)
    box.setToolTip(field.description or "")
    if special:
        box.setSpecialValueText(special)
    return box


AUTO = -1  # a budget spin box's "auto" (the knob's None: sized by the server)
OLLAMA_PORT = 11434  # where Ollama's clients look by default


def _budget_spin(name: str) -> QSpinBox:
    """A MiB budget whose None is "auto" (shown below 0) and 0 is off."""
    box = QSpinBox()
    box.setRange(AUTO, min(knob_bounds(name)[1], 99_999))  # a narrow box; serve takes more
    box.setSingleStep(512)
    box.setSpecialValueText("auto")
    box.setValue(AUTO)
    box.setAccelerated(True)
    box.setToolTip(ServerKnobs.model_fields[name].description or "")
    return box


def _budget_value(box: QSpinBox) -> int | None:
    return None if box.value() == AUTO else box.value()


def _knob_combo(name: str) -> QComboBox:
    combo = QComboBox()
    combo.addItems(knob_choices(name))
    combo.setToolTip(ServerKnobs.model_fields[name].description or "")
    return combo


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
        self._port_note: str | None = None
        self._chosen_id: tuple[str, str | None] = ("", None)  # (picker value, library id)
        # a library server's models, as last polled, and each one's GPU share by estimate
        self._cards: list[ModelCard] = []
        self._gpu_shares: dict[tuple[str, int | None], int] = {}
        self._router = RouterSettings()  # the server's reserve and models_max (same env)
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
        self.model_picker = ModelPicker(settings)
        self.model_picker.model_changed.connect(self._on_model_changed)
        model_box = QGroupBox("Model")
        QVBoxLayout(model_box).addWidget(self.model_picker)
        lv.addWidget(model_box)
        lv.addWidget(self._build_knobs_box())
        lv.addWidget(self._build_speculative_box())
        lv.addWidget(self._build_fit_box())
        lv.addWidget(self._build_network_box())
        lv.addWidget(self._build_rpc_tabs())
        lv.addStretch(1)
        left_scroll.setWidget(left)
        left_scroll.setMinimumWidth(540)
        columns.addWidget(left_scroll, 5)

        right = QVBoxLayout()
        right.setSpacing(12)
        self.status = StatusBox()
        self.status.start_button.clicked.connect(self.start_server)
        self.status.stop_button.clicked.connect(self.server.stop)
        self.status.restart_button.clicked.connect(self.restart_server)
        self.resident = ResidentModelsBox()
        self.resident.load_requested.connect(self.load_model)
        self.resident.unload_requested.connect(self._unload_model)
        self.resident.pin_requested.connect(self._pin_model)
        context.models_received.connect(self.resident.show_cards)
        context.models_received.connect(self._on_models)
        context.model_action_finished.connect(self.resident.action_done)
        context.model_action_failed.connect(self.resident.action_failed)
        self.endpoint = EndpointBox()
        self.server_log = ServerLogBox()
        self.server_log.setTitle("")
        self.server_log.setFlat(True)
        # the resident models and the log share the room under the endpoint
        self.activity_tabs = QTabWidget()
        self.activity_tabs.addTab(self.server_log, "Server log")
        self.activity_tabs.addTab(self.resident, "Resident models")
        right.addWidget(self.status)
        right.addWidget(self.endpoint, 1)
        right.addWidget(self.activity_tabs, 1)
        columns.addLayout(right, 6)
        outer.addLayout(columns, 1)

        self._load_knobs(settings.server)
        self._loading = False
        self.server.state_changed.connect(self._on_state)
        self.server.server_started.connect(self._on_started)
        self.server.server_crashed.connect(self._on_crashed)
        self.server.log_line.connect(self.server_log.log_view.appendPlainText)
        context.port_moved.connect(self._on_port_moved)
        context.stats_received.connect(self._on_stats)
        self._on_state(self.server.state.value)
        self.refresh_fit()
        # the Models and Quantise pages announce downloads, new files and deletions here
        library_events().library_changed.connect(self.model_picker.scan_library)

    # -- building -------------------------------------------------------------------------
    def _build_knobs_box(self) -> QGroupBox:
        box = QGroupBox("Engine")
        grid = QGridLayout(box)
        grid.setHorizontalSpacing(12)  # six rows of four: leaves room for the scroll bar
        grid.setVerticalSpacing(8)
        self.ctx_spin = _knob_spin("ctx_size", 256)
        self.parallel_spin = _knob_spin("parallel")
        self.batch_spin = _knob_spin("batch_size", 32)
        self.ubatch_spin = _knob_spin("ubatch_size", 16)
        self.ngl_spin = _knob_spin("gpu_layers", special="all")
        self.threads_spin = _knob_spin("threads")
        self.knob_spins: dict[str, QSpinBox] = {
            "ctx_size": self.ctx_spin,
            "parallel": self.parallel_spin,
            "batch_size": self.batch_spin,
            "ubatch_size": self.ubatch_spin,
            "gpu_layers": self.ngl_spin,
            "threads": self.threads_spin,
        }
        self.ctk_combo = _knob_combo("cache_type_k")
        self.ctv_combo = _knob_combo("cache_type_v")
        self.fa_combo = _knob_combo("flash_attn")
        self.kv_layout_combo = QComboBox()
        self.kv_layout_combo.addItems(["unified", "per slot"])
        self.kv_layout_combo.setToolTip(
            "unified: one cache for all sequences, one request may use the whole context.\n"
            "per slot (default): each sequence gets context/parallel cells of its own "
            "(llama-server's layout with -np); faster, since a row attends only to its slot"
        )
        # sessions kept past their slot (issue 29): llama-server's --cache-ram, and on disk
        self.cache_ram_spin = _budget_spin("cache_ram")
        self.cache_disk_spin = _budget_spin("cache_disk")
        pairs = [
            ("Context length", self.ctx_spin, "Parallel sequences", self.parallel_spin),
            ("Batch size", self.batch_spin, "Micro-batch size", self.ubatch_spin),
            ("GPU layers", self.ngl_spin, "CPU threads", self.threads_spin),
            ("K cache type", self.ctk_combo, "V cache type", self.ctv_combo),
            ("Flash attention", self.fa_combo, "KV cache", self.kv_layout_combo),
            ("RAM cache MiB", self.cache_ram_spin, "Disk cache MiB", self.cache_disk_spin),
        ]
        for row, (l1, w1, l2, w2) in enumerate(pairs):
            grid.addWidget(QLabel(l1), row, 0)
            grid.addWidget(w1, row, 1)
            if l2 and w2:
                grid.addWidget(QLabel(l2), row, 2)
                grid.addWidget(w2, row, 3)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 1)
        self.model_picker.layers_read.connect(self.ngl_spin.setMaximum)
        for spin in (*self.knob_spins.values(), self.cache_ram_spin, self.cache_disk_spin):
            spin.valueChanged.connect(self._on_knob_changed)
        for combo in (self.ctk_combo, self.ctv_combo, self.fa_combo, self.kv_layout_combo):
            combo.currentIndexChanged.connect(self._on_knob_changed)
        return box

    def _build_speculative_box(self) -> QGroupBox:
        """Off, n-gram lookup or a draft model (with its picker and draft length), as LM
        Studio offers it; the draft picker lists what the model picker's scan found."""
        box = QGroupBox("Speculative decoding")
        grid = self._spec_grid = QGridLayout(box)
        grid.setHorizontalSpacing(10)  # four columns in the left column's 540 px
        grid.setVerticalSpacing(8)
        self.spec_combo = QComboBox()
        for i, choice in enumerate(SPEC_CHOICES):
            self.spec_combo.addItem(choice.label, choice.mode)
            self.spec_combo.setItemData(i, choice.tooltip, Qt.ItemDataRole.ToolTipRole)
        self.draft_spin = _knob_spin("draft_max")
        self.draft_spin.setToolTip(DRAFT_TOKENS_TIP)
        self.knob_spins["draft_max"] = self.draft_spin
        self.draft_picker = ModelPicker(self.settings, open_text="Open…")
        self.draft_picker.combo.setToolTip(DRAFT_MODEL_TIP)
        self.draft_tokens_label = QLabel("Draft tokens")
        self.draft_model_label = QLabel("Draft model")
        # level with the picker's list, not with the middle of list and facts
        self.draft_model_label.setMinimumHeight(self.draft_picker.combo.sizeHint().height())
        grid.addWidget(QLabel("Method"), 0, 0)
        grid.addWidget(self.spec_combo, 0, 1)
        grid.addWidget(self.draft_tokens_label, 0, 2)
        grid.addWidget(self.draft_spin, 0, 3)
        grid.addWidget(self.draft_model_label, 1, 0, Qt.AlignmentFlag.AlignTop)
        grid.addWidget(self.draft_picker, 1, 1, 1, 3)
        grid.setColumnStretch(1, 1)
        self.spec_combo.currentIndexChanged.connect(self._on_spec_mode)
        self.draft_spin.valueChanged.connect(self._on_knob_changed)
        self.draft_picker.model_changed.connect(self._on_knob_changed)
        self.model_picker.library_read.connect(self.draft_picker.set_library)
        return box

    def spec_mode(self) -> SpecMode:
        """The speculative-decoding choice shown: 'off', 'ngram' or 'draft'."""
        mode: SpecMode = self.spec_combo.currentData()
        return mode

    def set_spec_mode(self, mode: SpecMode) -> None:
        self.spec_combo.setCurrentIndex(self.spec_combo.findData(mode))

    def _show_spec_mode(self) -> None:
        """The draft model's row and length only for a draft model; the tooltip says what
        the shown choice does."""
        index = self.spec_combo.currentIndex()
        self.spec_combo.setToolTip(SPEC_CHOICES[index].tooltip if index >= 0 else "")
        drafting = self.spec_mode() == "draft"
        # the choice spans the row the draft length leaves empty
        self._spec_grid.removeWidget(self.spec_combo)
        self._spec_grid.addWidget(self.spec_combo, 0, 1, 1, 1 if drafting else 3)
        for widget in (
            self.draft_tokens_label,
            self.draft_spin,
            self.draft_model_label,
            self.draft_picker,
        ):
            widget.setVisible(drafting)

    def _on_spec_mode(self) -> None:
        self._show_spec_mode()
        self._on_knob_changed()

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
        self.port_spin = _knob_spin("port", special="any free port")
        self.knob_spins["port"] = self.port_spin
        self.key_edit = QLineEdit()
        self.key_edit.setPlaceholderText("none (required when binding a public address)")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        self.cors_edit = QLineEdit()
        self.cors_edit.setPlaceholderText("localhost always; e.g. https://my.app, or *")
        form.addRow("Host", self.host_edit)
        form.addRow("Port", self.port_spin)
        form.addRow("API key", self.key_edit)
        form.addRow("CORS origins", self.cors_edit)
        self.ollama_check = QCheckBox(f"Answer Ollama clients on port {OLLAMA_PORT}")
        self.ollama_check.setToolTip(
            "Zed, JetBrains, Continue, Open WebUI and VS Code Copilot look for Ollama on "
            f"http://localhost:{OLLAMA_PORT}: answer there too (loopback only). Not while "
            "Ollama itself runs."
        )
        self.ollama_check.toggled.connect(self._on_knob_changed)
        form.addRow("", self.ollama_check)
        use_visible_checkboxes(box)
        for edit in (self.host_edit, self.key_edit, self.cors_edit):
            edit.textChanged.connect(self._on_knob_changed)
        self.port_spin.valueChanged.connect(self._on_knob_changed)
        return box

    def _build_rpc_tabs(self) -> QTabWidget:
        """Other machines (llama.cpp RPC): the workers the model is split across, and
        sharing this machine as one; two tabs, so the column grows by one of them."""
        self.workers_box = WorkersBox(knob_choices("split_mode"))
        self.workers_box.workers_changed.connect(self._on_knob_changed)
        self.workers_box.workers_changed.connect(self._show_rpc_tab_titles)
        self.workers_box.worker_probed.connect(lambda _endpoint: self._fit_timer.start())
        self.share_box = ShareBox(self.context.share, self.settings.share)
        self.context.share.state_changed.connect(self._show_rpc_tab_titles)
        self.rpc_tabs = QTabWidget()
        for box in (self.workers_box, self.share_box):
            box.setTitle("")
            box.setFlat(True)
        self.rpc_tabs.addTab(self.workers_box, "")
        self.rpc_tabs.addTab(self.share_box, "")
        self._show_rpc_tab_titles()
        return self.rpc_tabs

    def _show_rpc_tab_titles(self) -> None:
        count = len(self.workers_box.workers())
        self.rpc_tabs.setTabText(0, f"Workers ({count})" if count else "Workers")
        self.rpc_tabs.setTabToolTip(0, WORKERS_TIP)
        sharing = self.context.share.is_active()
        self.rpc_tabs.setTabText(1, "Share this machine: on" if sharing else "Share this machine")

    # -- knobs <-> settings ---------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        """Pick up models downloaded or quantised since the page was last shown."""
        super().showEvent(event)
        self.model_picker.scan_library()
        self.refresh_fit()  # the resident models and the free memory as they are now

    def shutdown(self) -> None:
        self.model_picker.shutdown()
        self.workers_box.shutdown()

    def _load_knobs(self, k: ServerKnobs) -> None:
        self.model_picker.select(k.model)
        self.ctx_spin.setValue(k.ctx_size)
        self.parallel_spin.setValue(k.parallel)
        self.batch_spin.setValue(k.batch_size)
        self.ubatch_spin.setValue(k.ubatch_size)
        self.ngl_spin.setValue(k.gpu_layers)
        self.threads_spin.setValue(k.threads)
        self.ctk_combo.setCurrentText(k.cache_type_k)
        self.ctv_combo.setCurrentText(k.cache_type_v)
        self.fa_combo.setCurrentText(k.flash_attn)
        self.kv_layout_combo.setCurrentIndex(0 if k.kv_unified else 1)
        self.cache_ram_spin.setValue(AUTO if k.cache_ram is None else k.cache_ram)
        self.cache_disk_spin.setValue(AUTO if k.cache_disk is None else k.cache_disk)
        self.draft_picker.select(k.model_draft or self._remembered_draft())
        self.draft_spin.setValue(k.draft_max)
        self.set_spec_mode(spec_mode(k))
        self._show_spec_mode()
        self.host_edit.setText(k.host)
        self.port_spin.setValue(k.port)
        self.key_edit.setText(k.api_key)
        self.cors_edit.setText(", ".join(k.cors_origins))
        self.ollama_check.setChecked(k.ollama_port is not None)
        self.workers_box.set_workers(parse_workers(k.rpc))
        self.workers_box.set_split(k.tensor_split, k.split_mode)
        self._show_rpc_tab_titles()

    def knobs(self) -> ServerKnobs:
        """The knobs as the widgets show them; knobs the page does not show keep their
        saved values."""
        origins = [o.strip() for o in self.cors_edit.text().split(",") if o.strip()]
        shown: dict[str, Any] = {name: spin.value() for name, spin in self.knob_spins.items()} | {
            "model": self.model_picker.value(),
            "cache_type_k": self.ctk_combo.currentText(),
            "cache_type_v": self.ctv_combo.currentText(),
            "flash_attn": self.fa_combo.currentText(),
            "kv_unified": self.kv_layout_combo.currentIndex() == 0,
            "cache_ram": _budget_value(self.cache_ram_spin),
            "cache_disk": _budget_value(self.cache_disk_spin),
            "host": self.host_edit.text().strip() or "127.0.0.1",
            "api_key": self.key_edit.text().strip(),
            "cors_origins": origins,
            "ollama_port": OLLAMA_PORT if self.ollama_check.isChecked() else None,
            "rpc": join_workers(self.workers_box.workers()),
            "tensor_split": self.workers_box.tensor_split(),
            "split_mode": self.workers_box.split_mode_combo.currentText(),
        }
        shown |= spec_update(self.settings.server, self.spec_mode(), self.draft_picker.value())
        return self.settings.server.model_copy(update=shown)

    def _remembered_draft(self) -> str:
        """The draft model picked last, kept while speculative decoding is off (the knobs
        then name none, since a draft model alone turns it on)."""
        value = self.settings.pages.get("server", {}).get("draft_model")
        return value if isinstance(value, str) and value else "default"

    def set_model(self, value: str) -> None:
        """Select a model (a path or 'default'), adding it to the list if needed."""
        self.model_picker.choose(value)

    def _on_model_changed(self) -> None:
        """Another model was picked: show the knobs remembered for it, if any."""
        if self._loading:
            return
        model_id = library_model_id(self.model_picker.value())
        stored = ModelSettingsStore().get(model_id) if model_id is not None else {}
        if stored:
            self._loading = True
            self._load_knobs(with_model_overrides(self.knobs(), stored))
            self._loading = False
        self._on_knob_changed()

    def _on_knob_changed(self) -> None:
        if self._loading:
            return
        self.settings.server = self.knobs()
        self.settings.pages.setdefault("server", {})["draft_model"] = self.draft_picker.value()
        self._fit_timer.start()
        self._update_endpoint()
        self._show_changes()

    def _show_changes(self) -> None:
        """Say in the Status box what the knobs shown would change in the running server:
        a single server restarts to apply them; a library server loads another model
        beside the others, and restarts only for a knob of the whole server."""
        running = self.server.knobs if self.server.state is ServerState.RUNNING else None
        if running is None:
            return
        shown = self.settings.server
        note: str | None = RESTART_TO_APPLY if running != shown else None
        if note is not None and self.server.serves_library:
            chosen = self._chosen_library_id()
            resident = {c.id for c in self._cards if c.state in ("loaded", "loading")}
            if not self._cards and self.server.model_id:  # not polled yet: it started with it
                resident = {self.server.model_id}
            stored = ModelSettingsStore().get(chosen) if chosen is not None else {}
            note = library_change_note(running, shown, chosen, resident, stored, note)
        self.status.detail_label.setText(
            note if note is not None else serving_detail(running, self.server.pid())
        )

    def refresh_fit(self) -> FitView:
        view = estimate(self.knobs(), self.workers_box.fit_workers())
        self.fit_bar.set_view(view)
        self._show_stack(view)
        return view

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

    # -- models beside the served one (a library server) -----------------------------------
    def _on_models(self, cards: list[ModelCard]) -> None:
        """A poll of the library server's models: the fit bars stack them, against the
        memory free now (read again, since loads and unloads move it)."""

        def resident(of: list[ModelCard]) -> set[str]:
            return {c.id for c in of if c.state in ("loaded", "loading")}

        before = resident(self._cards)
        self._cards = cards
        if self.isVisible() or (before and not resident(cards)):  # hidden: only to clear it
            self.refresh_fit()
        if resident(cards) != before:  # the chosen model may have loaded or gone
            self._show_changes()

    def _show_stack(self, view: FitView) -> None:
        """With a library server holding models, each one is a segment of the fit bars,
        then the chosen model if it is not among them."""
        cards = self._cards if self.server.state is ServerState.RUNNING else []
        if not any(c.state in ("loaded", "loading") for c in cards):
            return
        gpu_of = self._gpu_share if view.vram_total > 0 else None
        ram, vram = memory_stacks(
            view, cards, self._chosen_library_id(), self._router.memory_reserve, gpu_of
        )
        plan = load_plan(ram, vram, cards, self._router.models_max)
        self.fit_bar.set_stacks(ram, vram, plan)

    def _chosen_library_id(self) -> str | None:
        """The library id of the model chosen above (``None``: a file outside the library)."""
        value = self.model_picker.value()
        if self._chosen_id[0] != value:  # read the library's folder once per choice
            self._chosen_id = (value, library_model_id(value))
        return self._chosen_id[1]

    def _gpu_share(self, card: ModelCard) -> int:
        """A resident model's GPU memory by the fit estimate, once per load of it."""
        key = (card.id, card.memory_bytes)
        if key not in self._gpu_shares:
            running = self.server.knobs or self.knobs()
            stored = ModelSettingsStore().get(card.id)
            self._gpu_shares[key] = estimated_gpu_bytes(card.id, running, stored)
        return self._gpu_shares[key]

    def load_model(self, model_id: str = "") -> None:
        """Load ``model_id`` (or, given '', the model chosen above, with the knobs shown,
        which are remembered for it) in the running server, beside the others."""
        if not model_id:
            knobs = self.knobs()
            chosen = library_model_id(knobs.model)
            if chosen is None:
                self.resident.action_failed(
                    knobs.model.rsplit("/", 1)[-1],
                    "only a model of the library can be loaded beside others",
                )
                return
            model_id = chosen
            remember_model_knobs(model_id, knobs)
        self.resident.mark(model_id, "loading")
        self.context.load_model(model_id)

    def _unload_model(self, model_id: str) -> None:
        self.resident.mark(model_id, "unloading")
        self.context.unload_model(model_id)

    def _pin_model(self, model_id: str, pin: bool) -> None:
        self.context.load_model(model_id, pin=pin)

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
        self._port_note = port_moved_note(busy, port)
        self.banner.show_message(self._port_note, "info")

    def _on_state(self, state: str) -> None:
        view = status_view(state, self.server.last_error, self.server.knobs is not None)
        self.status.show_status(state, view)
        if state != ServerState.RUNNING.value:
            self.resident.set_serving(None)
        if state in (ServerState.STARTING.value, ServerState.CRASHED.value):
            self.activity_tabs.setCurrentWidget(self.server_log)  # what it prints now matters
        self._update_endpoint()

    def _on_started(self, _url: str) -> None:
        self.banner.hide()
        if self._port_note:  # the first run's port change stays said once it serves
            self.banner.show_message(self._port_note, "info")
            self._port_note = None
        knobs = self.server.knobs
        if knobs is not None:
            self.status.detail_label.setText(serving_detail(knobs, self.server.pid()))
        serving_library = self.server.serves_library
        if serving_library and self.resident.serving is not True and _url:
            self.activity_tabs.setCurrentWidget(self.resident)  # the server just started
        self.resident.set_serving(serving_library)
        self._update_endpoint()

    def _on_stats(self, snapshot: StatsSnapshot, _received_at: float) -> None:
        model = snapshot.model
        self.status.show_cpu_path(
            cpu_path_text(model.cpu_path, model.cpu_path_reason, model.extra_buffers)
        )

    def _on_crashed(self, message: str) -> None:
        advice = failure_advice(self.server.last_error)
        if advice.with_estimate:
            view = self.refresh_fit()
            message = f"{message}\nEstimate for these settings: {self.fit_bar.summary.text()}"
            log.info("OOM on load; fit verdict was %s", view.verdict)
        self.banner.show_message(message, "error", advice.action)
        self.status.detail_label.setText(advice.detail)
        error = self.server.last_error
        if error is not None and error.kind == "rpc_worker":  # show the worker's row, tested
            self.rpc_tabs.setCurrentWidget(self.workers_box)
            for endpoint in self.workers_box.workers():
                if endpoint in message:
                    self.workers_box.test(endpoint)

    def _update_endpoint(self) -> None:
        """The running server's endpoint, else the one the knobs would give."""
        running = self.server.knobs if self.server.state is ServerState.RUNNING else None
        if running is not None and self.server.port is not None:
            endpoint = Endpoint.of(running, self.server.port)
        else:
            endpoint = Endpoint.of(self.knobs())
        self.endpoint.show_endpoint(endpoint)
