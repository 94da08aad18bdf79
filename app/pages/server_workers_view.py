"""The Server page's "Other machines" section (llama.cpp RPC): the Workers list the served
model is split across (``serve --rpc``), with Add, Remove and Test, and the "Share this
machine" toggle that runs ``quantdesk worker`` here.

A Test asks each worker for its devices off the GUI thread (:class:`ThreadWorker`), so a
dead or busy worker shows its message in the row and never freezes the window."""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.page_models.rpc_workers import (
    TESTING,
    UNTESTED,
    WorkerState,
    WorkerView,
    check_tensor_split,
    failure_view,
    normalize_endpoint,
    probe,
    probe_view,
    share_endpoint,
    share_note,
)
from app.storage.app_settings import ShareSettings
from app.widgets.checkbox_style import use_visible_checkboxes
from app.widgets.common import Banner, list_table, table_item
from app.workers.share_process import ShareState, ShareSupervisor
from app.workers.thread_worker import start_worker, wait_for_workers
from backend.llama.rpc_probe import WorkerProbe

log = logging.getLogger(__name__)

WORKERS_TIP = (
    "Other machines running 'quantdesk worker' (or llama.cpp's rpc-server) hold layers of "
    "the model: the server starts with --rpc and these workers"
)


def _muted(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setProperty("muted", True)
    label.setWordWrap(True)
    return label


def _detail(endpoint: str, view: WorkerView) -> str:
    """The line under the list: what the worker said (a failure already names it)."""
    return view.detail if endpoint in view.detail else f"{endpoint}: {view.detail}"


class WorkersBox(QGroupBox):
    """The RPC workers the server uses, each with its state and free memory."""

    workers_changed = Signal()  # the list, the tensor split or the split mode changed
    worker_probed = Signal(str)  # a Test of this endpoint came back (answered or not)

    COLUMNS = ("Worker", "State", "Free memory")

    def __init__(self, split_modes: list[str], parent: QWidget | None = None) -> None:
        super().__init__("Workers: other machines' memory (RPC)", parent)
        self.setToolTip(WORKERS_TIP)
        self.views: dict[str, WorkerView] = {}
        self.probes: dict[str, WorkerProbe] = {}  # each worker's last answer, while it holds
        v = QVBoxLayout(self)
        v.setSpacing(8)
        self.table = list_table(self.COLUMNS)
        self.table.setMinimumHeight(108)
        self.table.setMaximumHeight(150)
        self.table.itemSelectionChanged.connect(self._show_detail)
        v.addWidget(self.table)
        self.empty_label = _muted(
            "None: the model runs on this machine alone. Add a machine running "
            "'quantdesk worker' to place layers of the model on it."
        )
        v.addWidget(self.empty_label)

        add_row = QHBoxLayout()
        self.endpoint_edit = QLineEdit()
        self.endpoint_edit.setPlaceholderText("host:port")
        self.endpoint_edit.setToolTip(
            "A machine running 'quantdesk worker', e.g. 192.168.1.20:50052"
        )
        self.endpoint_edit.returnPressed.connect(self.add_from_edit)
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(self.add_from_edit)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_selected)
        self.test_button = QPushButton("Test connection")
        self.test_button.setToolTip("Ask the selected worker (or every worker) for its devices")
        self.test_button.clicked.connect(self.test_selected)
        add_row.addWidget(self.endpoint_edit, 1)
        for button in (self.add_button, self.remove_button, self.test_button):
            add_row.addWidget(button)
        v.addLayout(add_row)
        self.detail_label = _muted()
        self.detail_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        v.addWidget(self.detail_label)

        split = QGridLayout()
        split.setHorizontalSpacing(10)
        self.split_edit = QLineEdit()
        self.split_edit.setPlaceholderText("by free memory (e.g. 3,1)")
        self.split_edit.setToolTip(
            "-ts: proportions of the model per device, the workers' devices first, then "
            "this machine's GPUs; blank splits by each device's free memory"
        )
        self.split_edit.textChanged.connect(self._on_split_text)
        self.split_mode_combo = QComboBox()
        self.split_mode_combo.addItems(split_modes)
        self.split_mode_combo.setToolTip(
            "-sm: layer (whole layers per device, the usual), row (each weight split by "
            "rows), none (one device)"
        )
        self.split_mode_combo.currentIndexChanged.connect(self.workers_changed)
        split.addWidget(QLabel("Tensor split"), 0, 0)
        split.addWidget(self.split_edit, 0, 1)
        split.addWidget(QLabel("Split mode"), 0, 2)
        split.addWidget(self.split_mode_combo, 0, 3)
        split.setColumnStretch(1, 1)
        v.addLayout(split)
        v.addStretch(1)
        self._tensor_split: str | None = None
        self._show_buttons()

    # -- the list ---------------------------------------------------------------------------
    def workers(self) -> list[str]:
        return [self._endpoint_at(row) for row in range(self.table.rowCount())]

    def _endpoint_at(self, row: int) -> str:
        item = self.table.item(row, 0)
        return item.text() if item is not None else ""

    def _row_of(self, endpoint: str) -> int:
        return next(
            (r for r in range(self.table.rowCount()) if self._endpoint_at(r) == endpoint), -1
        )

    def set_workers(self, endpoints: list[str]) -> None:
        """Show ``endpoints`` (the saved list), keeping what a Test said of each."""
        self.table.setRowCount(0)
        for endpoint in endpoints:
            self._append(endpoint)
        self._show_buttons()

    def _append(self, endpoint: str) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        self.table.setItem(row, 0, table_item(endpoint))
        self._show_view(endpoint, self.views.get(endpoint, UNTESTED))

    def add_from_edit(self) -> None:
        """Add the address typed (checked as llama.cpp parses it) and test it at once."""
        try:
            endpoint = normalize_endpoint(self.endpoint_edit.text())
        except ValueError as exc:
            self.detail_label.setText(str(exc))
            return
        if self._row_of(endpoint) < 0:
            self._append(endpoint)
            self.workers_changed.emit()
        self.endpoint_edit.clear()
        self.table.selectRow(self._row_of(endpoint))
        self._show_buttons()
        self.test(endpoint)

    def remove_selected(self) -> None:
        row = self.table.currentRow()
        if row < 0:
            return
        self.views.pop(self._endpoint_at(row), None)
        self.probes.pop(self._endpoint_at(row), None)
        self.table.removeRow(row)
        self.detail_label.clear()
        self._show_buttons()
        self.workers_changed.emit()

    def _show_buttons(self) -> None:
        has_rows = self.table.rowCount() > 0
        self.table.setVisible(has_rows)
        self.empty_label.setVisible(not has_rows)
        self.remove_button.setEnabled(has_rows)
        self.test_button.setEnabled(has_rows)

    # -- testing ----------------------------------------------------------------------------
    def test_selected(self) -> None:
        """Test the selected worker, or every worker when none is selected."""
        row = self.table.currentRow()
        for endpoint in [self._endpoint_at(row)] if row >= 0 else self.workers():
            self.test(endpoint)

    def test(self, endpoint: str) -> None:
        """Probe ``endpoint`` off the GUI thread; its row says what came back."""
        if self.views.get(endpoint) is TESTING:
            return
        self._show_view(endpoint, TESTING)
        start_worker(
            self,
            lambda: probe(endpoint),
            lambda result: self._on_probed(endpoint, result),
            lambda message: self._on_failed(endpoint, message),
        )

    def _on_probed(self, endpoint: str, result: WorkerProbe) -> None:
        self.probes[endpoint] = result
        self._show_view(endpoint, probe_view(result))
        self.worker_probed.emit(endpoint)

    def _on_failed(self, endpoint: str, message: str) -> None:
        self.probes.pop(endpoint, None)
        self._show_view(endpoint, failure_view(message))
        self.worker_probed.emit(endpoint)

    def fit_workers(self) -> dict[str, WorkerProbe | WorkerState]:
        """For the fit estimate: each listed worker's last answer, or, without one that
        holds, its state (untested, testing, busy...)."""
        out: dict[str, WorkerProbe | WorkerState] = {}
        for endpoint in self.workers():
            view = self.views.get(endpoint, UNTESTED)
            found = self.probes.get(endpoint)
            out[endpoint] = found if found is not None and view.state == "ready" else view.state
        return out

    def _show_view(self, endpoint: str, view: WorkerView) -> None:
        self.views[endpoint] = view
        row = self._row_of(endpoint)
        if row < 0:  # removed while it was being tested
            return
        self.table.setItem(row, 1, table_item(view.state_text, view.detail))
        self.table.setItem(row, 2, table_item(view.memory, view.detail))
        first = self.table.item(row, 0)
        if first is not None:
            first.setToolTip(view.detail)
        if row == self.table.currentRow() or self.table.currentRow() < 0:
            self.detail_label.setText(_detail(endpoint, view))

    def _show_detail(self) -> None:
        row = self.table.currentRow()
        if row >= 0:
            endpoint = self._endpoint_at(row)
            self.detail_label.setText(_detail(endpoint, self.views.get(endpoint, UNTESTED)))

    # -- split ------------------------------------------------------------------------------
    def tensor_split(self) -> str | None:
        """The last valid ``-ts`` typed (``None``: by free memory)."""
        return self._tensor_split

    def set_split(self, tensor_split: str | None, split_mode: str) -> None:
        self._tensor_split = tensor_split
        self.split_edit.setText(tensor_split or "")
        self.split_mode_combo.setCurrentText(split_mode)

    def _on_split_text(self, text: str) -> None:
        try:
            value = check_tensor_split(text)
        except ValueError as exc:
            self.split_edit.setToolTip(f"Not used: {exc}")
            self.split_edit.setProperty("invalid", True)
            return
        self.split_edit.setProperty("invalid", False)
        self.split_edit.setToolTip("")
        if value != self._tensor_split:
            self._tensor_split = value
            self.workers_changed.emit()

    def shutdown(self) -> None:
        wait_for_workers(self, 6000)


class ShareBox(QGroupBox):
    """ "Share this machine": a toggle that runs ``quantdesk worker`` here, its endpoint,
    and the no-authentication warning."""

    def __init__(
        self, supervisor: ShareSupervisor, settings: ShareSettings, parent: QWidget | None = None
    ) -> None:
        super().__init__("Share this machine", parent)
        self.supervisor = supervisor
        self.settings = settings
        use_visible_checkboxes(self)
        v = QVBoxLayout(self)
        v.setSpacing(8)
        row = QHBoxLayout()
        self.toggle = QCheckBox("Offer this machine's devices to other servers")
        self.toggle.setToolTip(
            "Runs 'quantdesk worker': another machine's QuantDesk adds this one to its "
            "Workers list (or runs llama-server --rpc) and places layers of its model here"
        )
        self.toggle.toggled.connect(self._on_toggled)
        row.addWidget(self.toggle, 1)
        row.addWidget(QLabel("Port"))
        self.port_spin = QSpinBox()
        self.port_spin.setRange(1, 65_535)
        self.port_spin.setValue(settings.port)
        self.port_spin.valueChanged.connect(self._on_choice)
        row.addWidget(self.port_spin)
        v.addLayout(row)
        self.remote_check = QCheckBox("Allow other machines to connect (binds every address)")
        self.remote_check.setChecked(settings.allow_remote)
        self.remote_check.toggled.connect(self._on_choice)
        v.addWidget(self.remote_check)
        self.state_label = QLabel()
        self.state_label.setWordWrap(True)
        self.state_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        v.addWidget(self.state_label)
        self.note_label = _muted()
        v.addWidget(self.note_label)
        self.warning = Banner()
        self.warning.close_button.hide()
        v.addWidget(self.warning)
        v.addStretch(1)  # in a tab as tall as the Workers list: keep the rows together
        supervisor.state_changed.connect(self._on_state)
        self._on_choice()
        self._on_state(supervisor.state.value)

    def endpoint(self) -> str:
        port = self.supervisor.port if self.supervisor.is_active() else None
        remote = self.supervisor.allow_remote if port else self.remote_check.isChecked()
        return share_endpoint(port or self.port_spin.value(), remote)

    def _on_choice(self) -> None:
        self.settings.port = self.port_spin.value()
        self.settings.allow_remote = self.remote_check.isChecked()
        note = share_note(self.settings.port, self.settings.allow_remote)
        if self.settings.allow_remote:
            self.note_label.hide()
            self.warning.show_message(note, "warning")
        else:
            self.warning.hide()
            self.note_label.setText(note)
            self.note_label.show()
        self._on_state(self.supervisor.state.value)

    def _on_toggled(self, on: bool) -> None:
        if on and not self.supervisor.is_active():
            self.supervisor.start(self.settings.port, self.settings.allow_remote)
        elif not on:
            self.supervisor.stop()

    def _on_state(self, state: str) -> None:
        active = state in (ShareState.STARTING, ShareState.SHARING, ShareState.STOPPING)
        self.port_spin.setEnabled(not active)
        self.remote_check.setEnabled(not active)
        self.toggle.blockSignals(True)
        self.toggle.setChecked(state in (ShareState.STARTING, ShareState.SHARING))
        self.toggle.blockSignals(False)
        endpoint = self.endpoint()
        if state == ShareState.SHARING:
            devices = "; ".join(self.supervisor.device_lines())
            text = f"Sharing at {endpoint}" + (f": {devices}" if devices else "")
        elif state == ShareState.STARTING:
            text = f"Starting the worker on {endpoint}…"
        elif state == ShareState.STOPPING:
            text = "Stopping the worker…"
        elif state == ShareState.FAILED:
            text = self.supervisor.last_error
        else:
            text = f"Not shared. Other servers would use {endpoint}"
        self.state_label.setText(text)
