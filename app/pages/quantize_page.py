"""Quantise page: pick a source and target types, run ``quantdesk quantize`` jobs in child
processes with progress, a log and cancel; the outputs land in the library."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.app_settings import AppSettings
from app.theme import BAD, GOOD
from app.widgets.checkbox_style import use_visible_checkboxes
from app.widgets.common import (
    ElidedLabel,
    EmptyState,
    page_header,
    scroll_column,
    set_button_role,
)
from app.workers.cli_job import CliJob
from app.workers.library_events import library_events, scan_library
from app.workers.thread_worker import start_worker, wait_for_workers
from backend.core.units import human_bytes
from backend.hub.library import LibraryEntry, ModelLibrary
from quantize.quant_types import IMATRIX_RECOMMENDED, QUANT_TYPES

log = logging.getLogger(__name__)

SOURCE_KINDS = ("Library model", "Hugging Face folder", "Hub repo id")
FLOAT_TYPES = ("F32", "F16", "BF16")
STAGE_TEXT = {
    "download": "Downloading",
    "convert": "Converting to GGUF",
    "write": "Writing GGUF",
    "imatrix": "Importance matrix",
    "quantize": "Quantising",
}
DEFAULT_TYPES = ("Q8_0", "Q4_K_M")


def quantize_arguments(
    source: str,
    types: list[str],
    *,
    calibration: str = "",
    allow_requantize: bool = False,
    threads: int | None = None,
    out: str | None = None,
) -> list[str]:
    """The ``quantdesk`` arguments of one job (``--progress-jsonl`` is added by CliJob)."""
    args = ["quantize", source]
    for t in types:
        args += ["--type", t]
    if calibration:
        args += ["--calibration", calibration]
    if allow_requantize:
        args.append("--allow-requantize")
    if threads:
        args += ["--threads", str(threads)]
    if out:
        args += ["--out", out]
    return args


class JobCard(QFrame):
    """One quantise job: title, stage, progress bar, Cancel, and its log."""

    def __init__(self, title: str, args: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        self.args = args
        self.job: CliJob | None = None
        self.state = "queued"  # queued, running, done, failed, cancelled
        self.result: dict[str, Any] | None = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 10, 10, 10)
        lay.setSpacing(6)
        top = QHBoxLayout()
        self.title = ElidedLabel(title)
        self.title.setStyleSheet("font-weight: 600; font-size: 14px;")
        self.log_button = set_button_role(QPushButton("Show log"), "flat")
        self.log_button.clicked.connect(self.toggle_log)
        self.cancel_button = set_button_role(QPushButton("Cancel"), "danger")
        top.addWidget(self.title, 1)
        top.addWidget(self.log_button)
        top.addWidget(self.cancel_button)
        self.status = QLabel("Queued")
        self.status.setProperty("muted", True)
        self.status.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1)
        self.bar.setValue(0)
        self.bar.setFormat("%p%")
        self.outputs = QLabel()
        self.outputs.setWordWrap(True)
        self.outputs.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.outputs.hide()
        self.log = QPlainTextEdit()
        self.log.setObjectName("LogView")
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(3000)
        self.log.setMinimumHeight(150)
        self.log.hide()
        lay.addLayout(top)
        lay.addWidget(self.status)
        lay.addWidget(self.bar)
        lay.addWidget(self.outputs)
        lay.addWidget(self.log)

    def toggle_log(self) -> None:
        self.log.setVisible(not self.log.isVisible())
        self.log_button.setText("Hide log" if self.log.isVisible() else "Show log")

    def on_progress(self, stage: str, done: int, total: int, message: str) -> None:
        self.bar.setRange(0, max(1, total))
        self.bar.setValue(min(done, max(1, total)))
        tag = ""
        if message.startswith("[") and "]" in message:
            tag = " " + message[1 : message.index("]")]
        what = STAGE_TEXT.get(stage, stage.capitalize())
        self.status.setText(f"{what}{tag}: {done}/{total}")
        if message:
            self.log.appendPlainText(message)

    def set_state(self, state: str, text: str) -> None:
        self.state = state
        self.status.setText(text)
        running = state in ("queued", "running")
        self.cancel_button.setVisible(running)
        colour = {"done": GOOD, "failed": BAD}.get(state)
        self.status.setStyleSheet(f"color: {colour};" if colour else "")
        if state == "done":
            self.bar.setRange(0, 1)
            self.bar.setValue(1)


class QuantizePage(QWidget):
    """Source, target types, optional calibration text; a queue of jobs with progress."""

    job_finished = Signal(str)  # done, failed or cancelled
    library_loaded = Signal()

    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.state: dict[str, Any] = settings.pages.setdefault("quantize", {})
        self.entries: list[LibraryEntry] = []
        self.jobs: list[JobCard] = []
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
        row.addWidget(self._build_jobs(), 1)
        outer.addLayout(row, 1)
        library_events().library_changed.connect(self.refresh_library)
        self.refresh_library()
        self._update_controls()

    # -- building -------------------------------------------------------------------------
    def _build_controls(self) -> QWidget:
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)

        source = QGroupBox("Source")
        sv = QVBoxLayout(source)
        self.kind_combo = QComboBox()
        self.kind_combo.addItems(list(SOURCE_KINDS))
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
        v.addWidget(source)

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
        v.addWidget(types)

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
        v.addWidget(calib)

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

    def _build_jobs(self) -> QWidget:
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        head = QLabel("Jobs")
        head.setStyleSheet("font-weight: 600; color: #c9d0dc; font-size: 14px;")
        v.addWidget(head)
        self.jobs_stack = QStackedWidget()
        self.empty = EmptyState(
            "quantize",
            "No quantise jobs yet",
            "Pick a source on the left, tick the types you want and press Start. Each job "
            "shows its progress and log here, and its files appear in the library.",
        )
        area = QScrollArea()
        area.setWidgetResizable(True)
        holder = QWidget()
        self.jobs_layout = QVBoxLayout(holder)
        self.jobs_layout.setContentsMargins(0, 0, 6, 0)
        self.jobs_layout.setSpacing(10)
        self.jobs_layout.addStretch(1)
        area.setWidget(holder)
        self.jobs_stack.addWidget(self.empty)
        self.jobs_stack.addWidget(area)
        v.addWidget(self.jobs_stack, 1)
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
        self.library_loaded.emit()

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
        self.kind_combo.setCurrentIndex(0)
        self.library_combo.setCurrentIndex(index)
        return True

    def _on_source_changed(self) -> None:
        note = ""
        if self.kind_combo.currentIndex() == 0:
            entry = self.selected_library_entry()
            if entry is not None:
                quantised = entry.format == "gguf" and (entry.file_type or "") not in FLOAT_TYPES
                if quantised:
                    note = (
                        f"{entry.name} is already quantised ({entry.file_type}): "
                        "re-quantising works but loses more quality than starting from "
                        "F16/BF16."
                    )
                    self.requant_check.setChecked(True)
                else:
                    note = (
                        "A Hugging Face model is converted to F16 GGUF once, then quantised."
                        if entry.format == "safetensors"
                        else ""
                    )
                    self.requant_check.setChecked(False)
        elif self.kind_combo.currentIndex() == 1:
            note = "The folder is converted to an F16 GGUF first (needs the model's tokenizer)."
        else:
            note = "The repo is downloaded into the library first (needs the network)."
        self.source_note.setText(note)
        self.source_note.setVisible(bool(note))
        self._update_controls()

    def source(self) -> str:
        kind = self.kind_combo.currentIndex()
        if kind == 0:
            entry = self.selected_library_entry()
            return entry.path if entry else ""
        if kind == 1:
            return self.folder_edit.text().strip()
        return self.repo_edit.text().strip()

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
        problems = []
        if not self.source():
            problems.append("choose a source")
        if not self.chosen_types():
            problems.append("tick at least one type")
        self.start_button.setEnabled(not problems)
        if problems:
            self.form_note.setText("To start: " + " and ".join(problems) + ".")
        else:
            where = self.out_dir or str(ModelLibrary().root)
            self.form_note.setText(f"Files are written to {where}.")

    # -- jobs -----------------------------------------------------------------------------
    def start(self) -> JobCard | None:
        source, types = self.source(), self.chosen_types()
        if not source or not types:
            return None
        calibration = self.calib_edit.text().strip()
        if calibration and not Path(calibration).is_file():
            self.form_note.setText(f"The calibration file does not exist: {calibration}")
            return None
        self.state.update(types=types, calibration=calibration, threads=self.threads_spin.value())
        args = quantize_arguments(
            source,
            types,
            calibration=calibration,
            allow_requantize=self.requant_check.isChecked(),
            threads=self.threads_spin.value(),
            out=self.out_dir,
        )
        name = Path(source).name if os.sep in source or Path(source).exists() else source
        card = JobCard(f"{name}  →  {', '.join(types)}", args)
        card.cancel_button.clicked.connect(lambda: self.cancel(card))
        self.jobs.append(card)
        self.jobs_layout.insertWidget(0, card)
        self.jobs_stack.setCurrentIndex(1)
        self._pump()
        return card

    def cancel(self, card: JobCard) -> None:
        if card.state == "queued":
            card.set_state("cancelled", "Cancelled before it started.")
            self.job_finished.emit("cancelled")
        elif card.job is not None:
            card.status.setText("Cancelling…")
            card.job.cancel()

    def _pump(self) -> None:
        if any(c.state == "running" for c in self.jobs):
            return
        card = next((c for c in self.jobs if c.state == "queued"), None)
        if card is None:
            return
        job = CliJob(card.args, self)
        card.job = job
        job.progressed.connect(card.on_progress)
        job.log_line.connect(card.log.appendPlainText)
        job.succeeded.connect(lambda result: self._on_done(card, result))
        job.failed.connect(lambda message: self._on_failed(card, message))
        job.finished.connect(lambda: self._on_finished(card))
        card.set_state("running", "Starting…")
        card.bar.setRange(0, 0)
        job.start()

    def _on_done(self, card: JobCard, result: dict[str, Any]) -> None:
        card.result = result
        outputs = result.get("outputs", [])
        lines = [
            f"<b>{o['type']}</b>  {Path(o['path']).name}  ·  "
            f"{human_bytes(int(o['size_bytes']))}  ·  {float(o['seconds']):.1f} s"
            for o in outputs
        ]
        warnings = [str(w) for w in result.get("warnings", [])]
        for w in warnings:
            card.log.appendPlainText(f"warning: {w}")
        card.outputs.setText("<br>".join(lines))
        card.outputs.show()
        note = f"Done: {len(outputs)} file(s) added to the library."
        if warnings:
            note += f" {len(warnings)} warning(s) in the log."
        card.set_state("done", note)
        library_events().library_changed.emit()

    def _on_failed(self, card: JobCard, message: str) -> None:
        cancelled = card.job is not None and card.job.cancelled
        card.set_state(
            "cancelled" if cancelled else "failed",
            "Cancelled; no partial files were kept." if cancelled else f"Failed: {message}",
        )
        card.bar.setRange(0, 1)
        card.bar.setValue(0)
        if not cancelled and not card.log.isVisible():
            card.toggle_log()

    def _on_finished(self, card: JobCard) -> None:
        job = card.job
        card.job = None
        if job is not None:
            job.deleteLater()
        self.job_finished.emit(card.state)
        self._pump()

    def shutdown(self) -> None:
        for card in self.jobs:
            if card.job is not None:
                card.job.cancel()
                card.job.wait(10_000)
        wait_for_workers(self)
