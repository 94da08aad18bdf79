"""Server page: pick a model, set the knobs (speculative decoding too), see whether it fits,
start/stop, copy the endpoint, and the models a library server holds (Load/Unload/Pin).

The knobs shown are the chosen model's: picking a model shows the knobs remembered for it
(``ModelSettingsStore``), and starting or loading it remembers them, so every load of that
model, on demand too, uses them.

While a library server runs, the fit bars stack the models it holds, each its own segment,
before the chosen model (:mod:`app.pages.server_fit_box`), and the Status box says how
a change applies: another model loads beside the others without a restart.

The page composes its views: the knobs column on the left
(:mod:`app.pages.server_knobs_column`, over the model picker, the Engine, Speculative
decoding, fit, Network and other-machines boxes), the status, endpoint, log and resident
models on the right (:mod:`app.pages.server_status_view`,
:mod:`app.pages.server_resident_view`); it drives the server with the knobs shown."""

from __future__ import annotations

import logging

from PySide6.QtCore import QTimer
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QHBoxLayout, QTabWidget, QVBoxLayout, QWidget

from app.app_context import AppContext
from app.page_models.fit_adapter import FitView, estimate
from app.page_models.router_models import ModelCard, library_change_note, library_model_id
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
from app.page_models.speculative_choice import SpecMode
from app.pages.server_knobs_column import KnobsColumn
from app.pages.server_resident_view import ResidentModelsBox
from app.pages.server_status_view import EndpointBox, ServerLogBox, StatusBox
from app.storage.app_settings import AppSettings, ServerKnobs
from app.widgets.common import Banner, page_header
from app.workers.library_events import library_events
from app.workers.server_process import ServerState, remember_model_knobs
from backend.engine.stats_model import StatsSnapshot
from backend.settings.model_settings_store import ModelSettingsStore

log = logging.getLogger(__name__)


class ServerPage(QWidget):
    """Start and watch ``quantdesk serve``; the knobs persist in :class:`AppSettings`."""

    def __init__(
        self, settings: AppSettings, context: AppContext, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.context = context
        self.server = context.server
        self._port_note: str | None = None
        self._cards: list[ModelCard] = []  # a library server's models, as last polled
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
        self.knobs_column = KnobsColumn(settings, context.share)
        self.knobs_column.changed.connect(self._on_knob_changed)
        workers = self.knobs_column.rpc_tabs.workers_box
        workers.worker_probed.connect(lambda _endpoint: self._fit_timer.start())
        columns.addWidget(self.knobs_column, 5)
        columns.addLayout(self._build_activity_column(), 6)
        outer.addLayout(columns, 1)
        self._name_views()

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

    def _build_activity_column(self) -> QVBoxLayout:
        """The status with Start/Stop/Restart, the endpoint, and the log and the resident
        models sharing the room under it."""
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
        self.context.models_received.connect(self.resident.show_cards)
        self.context.models_received.connect(self._on_models)
        self.context.model_action_finished.connect(self.resident.action_done)
        self.context.model_action_failed.connect(self.resident.action_failed)
        self.endpoint = EndpointBox()
        self.server_log = ServerLogBox()
        self.server_log.setTitle("")
        self.server_log.setFlat(True)
        self.activity_tabs = QTabWidget()
        self.activity_tabs.addTab(self.server_log, "Server log")
        self.activity_tabs.addTab(self.resident, "Resident models")
        right.addWidget(self.status)
        right.addWidget(self.endpoint, 1)
        right.addWidget(self.activity_tabs, 1)
        return right

    def _name_views(self) -> None:
        """The knobs column's widgets the tests and the screenshot tools reach by the
        page's own names."""
        column = self.knobs_column
        engine, spec = column.engine, column.speculative
        self.model_picker = column.model_picker
        self.ctx_spin = engine.ctx_spin
        self.parallel_spin = engine.parallel_spin
        self.ngl_spin = engine.ngl_spin
        self.ctk_combo = engine.ctk_combo
        self.ctv_combo = engine.ctv_combo
        self.fa_combo = engine.fa_combo
        self.kv_layout_combo = engine.kv_layout_combo
        self.draft_spin = spec.draft_spin
        self.draft_picker = spec.draft_picker
        self.port_spin = column.network.port_spin
        self.knob_spins = engine.knob_spins | {"draft_max": spec.draft_spin, "port": self.port_spin}
        self.fit_bar = column.fit_box.fit_bar
        self.rpc_tabs = column.rpc_tabs
        self.workers_box = column.rpc_tabs.workers_box
        self.share_box = column.rpc_tabs.share_box

    # -- knobs ----------------------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        """Pick up models downloaded or quantised since the page was last shown."""
        super().showEvent(event)
        self.model_picker.scan_library()
        self.refresh_fit()  # the resident models and the free memory as they are now

    def shutdown(self) -> None:
        self.knobs_column.shutdown()

    def knobs(self) -> ServerKnobs:
        """The knobs as the widgets show them; knobs the page does not show keep their
        saved values."""
        return self.knobs_column.knobs()

    def spec_mode(self) -> SpecMode:
        """The speculative-decoding choice shown: 'off', 'ngram' or 'draft'."""
        return self.knobs_column.speculative.spec_mode()

    def set_spec_mode(self, mode: SpecMode) -> None:
        self.knobs_column.speculative.set_spec_mode(mode)

    def set_model(self, value: str) -> None:
        """Select a model (a path or 'default'), adding it to the list if needed."""
        self.model_picker.choose(value)

    def _on_knob_changed(self) -> None:
        """The settings hold the knobs shown: the fit, the endpoint and the Status box
        follow them."""
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
            chosen = self.knobs_column.chosen_library_id()
            resident = {c.id for c in self._cards if c.state in ("loaded", "loading")}
            if not self._cards and self.server.model_id:  # not polled yet: it started with it
                resident = {self.server.model_id}
            stored = ModelSettingsStore().get(chosen) if chosen is not None else {}
            note = library_change_note(running, shown, chosen, resident, stored, note)
        self.status.detail_label.setText(
            note if note is not None else serving_detail(running, self.server.pid())
        )

    def refresh_fit(self) -> FitView:
        """The fit of the knobs shown, with a running library server's models before it."""
        knobs = self.knobs()
        view = estimate(knobs, self.workers_box.fit_workers())
        cards = self._cards if self.server.state is ServerState.RUNNING else []
        column = self.knobs_column
        column.fit_box.show_fit(view, cards, column.chosen_library_id, self.server.knobs or knobs)
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
        self.knobs_column.show_port(port)
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
