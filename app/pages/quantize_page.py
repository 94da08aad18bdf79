"""Quantise page: pick a source and target types, run ``quantdesk quantize`` jobs in child
processes with progress, a log and cancel; the outputs land in the library.

The jobs' state lives in :mod:`app.page_models.quantize_jobs`; the cards are
:mod:`app.pages.quantize_jobs_view`."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.page_models.quantize_jobs import (
    DEFAULT_TYPES,
    JobState,
    QuantizeJob,
    QuantizeOptions,
    QuantizeQueue,
    SourceKind,
    form_note,
    source_advice,
)
from app.pages.quantize_jobs_view import JobCard, JobList
from app.storage.app_settings import AppSettings
from app.widgets.checkbox_style import use_visible_checkboxes
from app.widgets.common import page_header, scroll_column, set_button_role
from app.workers.cli_job import CliJob
from app.workers.library_events import library_events, scan_library
from app.workers.thread_worker import start_worker, wait_for_workers
from backend.core.units import human_bytes
from backend.hub.library import LibraryEntry, ModelLibrary
from backend.jobs.events import ProgressEvent
from quantize.quant_types import IMATRIX_RECOMMENDED, QUANT_TYPES

log = logging.getLogger(__name__)


class QuantizePage(QWidget):
    """Source, target types, optional calibration text; a queue of jobs with progress."""

    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.state: dict[str, Any] = settings.pages.setdefault("quantize", {})
        self.entries: list[LibraryEntry] = []
        self.queue = QuantizeQueue()
        self.process: CliJob | None = None  # the running job's child process
        self.out_dir: str | None = None  # None: the library (tests may point elsewhere)
        self.pick_file: Callable[[str, str], str] = self._pick_file
        self.pick_folder: Callable[[str], str] = self._pick_folder

        outer = QVBoxLayout(self)
        outer.setContentsMargins(28, 22, 28, 22)
        outer.setSpacing(12)
        outer.addWidget(
            page_header(
                "Quantise",
                "Make smaller GGUF files from a Hugging Face model or a GGUF. Each type "
                "becomes its own file in your library; compare them on the Compare page.",
            )
        )
        row = QHBoxLayout()
        row.setSpacing(16)
        row.addWidget(scroll_column(self._build_controls(), 420, self._build_start()), 0)
        self.job_list = JobList()
        row.addWidget(self.job_list, 1)
        outer.addLayout(row, 1)
        library_events().library_changed.connect(self.refresh_library)
        self.refresh_library()
        self._update_controls()

    # -- building -------------------------------------------------------------------------
    def _build_controls(self) -> QWidget:
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        v.addWidget(self._build_source())
        v.addWidget(self._build_types())
        v.addWidget(self._build_calibration())

        opts = QGroupBox("Options")
        form = QFormLayout(opts)
        self.requant_check = QCheckBox("Allow re-quantising a quantised GGUF")
        self.requant_check.setToolTip(
            "Works, but the result is worse than quantising the original F16/BF16 weights"
        )
        self.threads_spin = QSpinBox()
        self.threads_spin.setRange(1, 256)
        self.threads_spin.setValue(int(self.state.get("threads", min(8, os.cpu_count() or 1))))
        form.addRow(self.requant_check)
        form.addRow("Threads", self.threads_spin)
        use_visible_checkboxes(opts)
        v.addWidget(opts)
        v.addStretch(1)
        return box

    def _build_source(self) -> QGroupBox:
        source = QGroupBox("Source")
        sv = QVBoxLayout(source)
        self.kind_combo = QComboBox()
        self.kind_combo.addItems([kind.label for kind in SourceKind])
        self.source_stack = QStackedWidget()
        self.library_combo = QComboBox()
        self.library_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.library_combo.setMinimumContentsLength(20)
        self.library_combo.currentIndexChanged.connect(lambda _i: self._on_source_changed())
        folder_row = QWidget()
        fh = QHBoxLayout(folder_row)
        fh.setContentsMargins(0, 0, 0, 0)
        self.folder_edit = QLineEdit()
        self.folder_edit.setPlaceholderText("folder with config.json and *.safetensors")
        self.folder_edit.textChanged.connect(lambda _t: self._update_controls())
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_folder)
        fh.addWidget(self.folder_edit, 1)
        fh.addWidget(browse)
        self.repo_edit = QLineEdit()
        self.repo_edit.setPlaceholderText("owner/model, e.g. HuggingFaceTB/SmolLM2-135M-Instruct")
        self.repo_edit.textChanged.connect(lambda _t: self._update_controls())
        for w in (self.library_combo, folder_row, self.repo_edit):
            self.source_stack.addWidget(w)
        self.kind_combo.currentIndexChanged.connect(self._on_kind)
        self.source_note = QLabel()
        self.source_note.setProperty("muted", True)
        self.source_note.setWordWrap(True)
        sv.addWidget(self.kind_combo)
        sv.addWidget(self.source_stack)
        sv.addWidget(self.source_note)
        return source

    def _build_types(self) -> QGroupBox:
        types = QGroupBox("Target types")
        grid = QGridLayout(types)
        grid.setHorizontalSpacing(14)
        grid.setVerticalSpacing(6)
        self.type_checks: dict[str, QCheckBox] = {}
        wanted = set(self.state.get("types", DEFAULT_TYPES))
        for i, qt in enumerate(QUANT_TYPES):
            check = QCheckBox(f"{qt.name}  ({qt.bits_per_weight:g} bpw)")
            tip = qt.description
            if qt.name in IMATRIX_RECOMMENDED:
                tip += "; a calibration file (importance matrix) helps a lot"
            check.setToolTip(tip)
            check.setChecked(qt.name in wanted)
            check.toggled.connect(lambda _c: self._update_controls())
            self.type_checks[qt.name] = check
            grid.addWidget(check, i // 2, i % 2)
        use_visible_checkboxes(types)
        return types

    def _build_calibration(self) -> QGroupBox:
        calib = QGroupBox("Calibration (optional)")
        cv = QVBoxLayout(calib)
        crow = QHBoxLayout()
        self.calib_edit = QLineEdit(str(self.state.get("calibration", "")))
        self.calib_edit.setPlaceholderText("text file of your own prompts")
        self.calib_edit.setClearButtonEnabled(True)
        cbrowse = QPushButton("Browse…")
        cbrowse.clicked.connect(self._browse_calibration)
        crow.addWidget(self.calib_edit, 1)
        crow.addWidget(cbrowse)
        cnote = QLabel(
            "Computes an importance matrix, so the low-bit types keep what matters "
            "for your kind of text."
        )
        cnote.setProperty("muted", True)
        cnote.setWordWrap(True)
        cv.addLayout(crow)
        cv.addWidget(cnote)
        return calib

    def _build_start(self) -> QWidget:
        """The Start button and what stops it, pinned below the scrolling form."""
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        self.start_button = set_button_role(QPushButton("Start quantising"), "primary")
        self.start_button.clicked.connect(self.start)
        self.form_note = QLabel()
        self.form_note.setProperty("muted", True)
        self.form_note.setWordWrap(True)
        v.addWidget(self.start_button)
        v.addWidget(self.form_note)
        return box

    # -- source ---------------------------------------------------------------------------
    def refresh_library(self) -> None:
        start_worker(
            self,
            scan_library,
            self._on_library,
            lambda msg: log.warning("library scan failed: %s", msg),
        )

    def _on_library(self, entries: list[LibraryEntry]) -> None:
        current = self.library_combo.currentData()
        self.entries = [e for e in entries if not e.error]
        self.library_combo.blockSignals(True)
        self.library_combo.clear()
        for e in self.entries:
            label = f"{e.name}  ·  {e.file_type or e.format}  ·  {human_bytes(e.size_bytes)}"
            self.library_combo.addItem(label, e.path)
            self.library_combo.setItemData(
                self.library_combo.count() - 1, e.path, Qt.ItemDataRole.ToolTipRole
            )
        index = self.library_combo.findData(current) if current else -1
        self.library_combo.setCurrentIndex(max(0, index))
        self.library_combo.blockSignals(False)
        self._on_source_changed()

    def _on_kind(self, index: int) -> None:
        self.source_stack.setCurrentIndex(index)
        self._on_source_changed()

    def selected_library_entry(self) -> LibraryEntry | None:
        path = self.library_combo.currentData()
        return next((e for e in self.entries if e.path == path), None)

    def select_library_path(self, path: str) -> bool:
        index = self.library_combo.findData(path)
        if index < 0:
            return False
        self.kind_combo.setCurrentIndex(SourceKind.LIBRARY)
        self.library_combo.setCurrentIndex(index)
        return True

    def _on_source_changed(self) -> None:
        advice = source_advice(
            SourceKind(self.kind_combo.currentIndex()), self.selected_library_entry()
        )
        if advice.requantize is not None:
            self.requant_check.setChecked(advice.requantize)
        self.source_note.setText(advice.note)
        self.source_note.setVisible(bool(advice.note))
        self._update_controls()

    def source(self) -> str:
        kind = SourceKind(self.kind_combo.currentIndex())
        if kind is SourceKind.LIBRARY:
            entry = self.selected_library_entry()
            return entry.path if entry else ""
        edit = self.folder_edit if kind is SourceKind.FOLDER else self.repo_edit
        return edit.text().strip()

    def chosen_types(self) -> list[str]:
        return [name for name, check in self.type_checks.items() if check.isChecked()]

    def _browse_folder(self) -> None:
        folder = self.pick_folder("Hugging Face model folder")
        if folder:
            self.folder_edit.setText(folder)

    def _browse_calibration(self) -> None:
        path = self.pick_file("Calibration text", "Text files (*.txt *.md *.jsonl);;All files (*)")
        if path:
            self.calib_edit.setText(path)

    def _pick_file(self, title: str, filters: str) -> str:
        return QFileDialog.getOpenFileName(self, title, str(Path.home()), filters)[0]

    def _pick_folder(self, title: str) -> str:
        return QFileDialog.getExistingDirectory(self, title, str(Path.home()))

    def _update_controls(self) -> None:
        where = self.out_dir or str(ModelLibrary().root)
        ready, note = form_note(self.source(), self.chosen_types(), where)
        self.start_button.setEnabled(ready)
        self.form_note.setText(note)

    # -- jobs -----------------------------------------------------------------------------
    def start(self) -> JobCard | None:
        """Queue a job from the form; its card, or ``None`` when the form is not ready."""
        source, types = self.source(), self.chosen_types()
        if not source or not types:
            return None
        calibration = self.calib_edit.text().strip()
        if calibration and not Path(calibration).is_file():
            self.form_note.setText(f"The calibration file does not exist: {calibration}")
            return None
        options = QuantizeOptions(
            source,
            types,
            calibration=calibration,
            allow_requantize=self.requant_check.isChecked(),
            threads=self.threads_spin.value(),
            out=self.out_dir,
        )
        self.state.update(options.remembered())
        job = self.queue.add(options)
        card = self.job_list.add(job)
        card.cancel_button.clicked.connect(lambda: self.cancel(job))
        self._pump()
        return card

    def cancel(self, job: QuantizeJob) -> None:
        if self.queue.cancel(job) and self.process is not None:
            self.process.cancel()
        self.job_list.card(job).refresh()

    def _pump(self) -> None:
        """Start the next queued job if none runs."""
        job = None if self.process is not None else self.queue.start_next()
        if job is None:
            return
        card = self.job_list.card(job)
        process = CliJob(job.options.arguments(), self)
        process.progress_reported.connect(lambda event: self._on_progress(card, event))
        process.log_line.connect(card.log.appendPlainText)
        process.succeeded.connect(lambda payload: self._on_done(card, payload))
        process.failed.connect(lambda message: self._on_failed(card, message))
        process.finished.connect(self._on_finished)
        self.process = process
        card.refresh()
        process.start()

    def _on_progress(self, card: JobCard, event: ProgressEvent) -> None:
        self.queue.progressed(card.job, event)
        card.refresh()
        if event.message:
            card.log.appendPlainText(event.message)

    def _on_done(self, card: JobCard, payload: dict[str, Any]) -> None:
        self.queue.succeeded(card.job, payload)
        assert card.job.outcome is not None
        for warning in card.job.outcome.warnings:
            card.log.appendPlainText(f"warning: {warning}")
        card.refresh()
        library_events().library_changed.emit()

    def _on_failed(self, card: JobCard, message: str) -> None:
        cancelled = self.process is not None and self.process.cancelled
        self.queue.failed(card.job, message, cancelled)
        card.refresh()
        if card.job.state is JobState.FAILED and not card.log.isVisible():
            card.toggle_log()

    def _on_finished(self) -> None:
        process = self.process
        self.process = None
        if process is not None:
            process.deleteLater()
        self._pump()

    def shutdown(self) -> None:
        if self.process is not None:
            self.process.cancel()
            self.process.wait(10_000)
        wait_for_workers(self)
