"""Compare page: what quantisation costs, from ``quantdesk compare`` run in a child process.

Pick a reference and candidates from the library, optionally a text and prompts; the
results table (size, bpw, PPL, PPL ratio, KLD, same-top %, tok/s), a plot of KL divergence
against size, the greedy answers side by side, and the HTML report to export.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.page_models.compare_runs import (
    CompareOptions,
    CompareRun,
    Outcome,
    progress_fraction,
    progress_status,
)
from app.pages.compare_results import CompareResultsView
from app.storage.app_settings import AppSettings
from app.widgets.checkbox_style import use_visible_checkboxes
from app.widgets.common import Banner, page_header, scroll_column, set_button_role
from app.workers.cli_job import CliJob
from app.workers.library_events import library_events, scan_library
from app.workers.thread_worker import start_worker, wait_for_workers
from backend.core.units import human_bytes
from backend.hub.library import LibraryEntry
from backend.jobs.events import ProgressEvent

log = logging.getLogger(__name__)

PROGRESS_STEPS = 1000


class ComparePage(QWidget):
    """Reference + candidates -> table, plot, answers and report."""

    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.state: dict[str, Any] = settings.pages.setdefault("compare", {})
        self.entries: list[LibraryEntry] = []
        self.job: CliJob | None = None
        self.run: CompareRun | None = None  # the last run started (its outcome once it ends)
        self.shown: CompareRun | None = None  # the run whose results are on screen
        self.pick_file: Callable[[str, str], str] = self._pick_file
        self.pick_save: Callable[[str, str], str] = self._pick_save

        outer = QVBoxLayout(self)
        outer.setContentsMargins(28, 22, 28, 22)
        outer.setSpacing(12)
        outer.addWidget(
            page_header(
                "Compare",
                "What a quant costs: perplexity and KL divergence against a reference on "
                "the same text, top-token agreement, speed, and the answers side by side.",
            )
        )
        self.banner = Banner()
        outer.addWidget(self.banner)
        row = QHBoxLayout()
        row.setSpacing(16)
        row.addWidget(scroll_column(self._build_controls(), 400, self._build_run()), 0)
        self.results = CompareResultsView()
        self.results.export_button.clicked.connect(self.export_report)
        row.addWidget(self.results, 1)
        outer.addLayout(row, 1)
        library_events().library_changed.connect(self.refresh_library)
        self.refresh_library()
        self._load_last_run()
        self._update_controls()

    # -- building -------------------------------------------------------------------------
    def _build_controls(self) -> QWidget:
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)

        models = QGroupBox("Models")
        mv = QVBoxLayout(models)
        mv.addWidget(QLabel("Reference (F16, BF16 or Q8_0 is best)"))
        self.reference_combo = QComboBox()
        self.reference_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.reference_combo.setMinimumContentsLength(20)
        self.reference_combo.currentIndexChanged.connect(lambda _i: self._fill_candidates())
        mv.addWidget(self.reference_combo)
        mv.addWidget(QLabel("Candidates (same tokenizer)"))
        self.candidate_list = QListWidget()
        self.candidate_list.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.candidate_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.candidate_list.setMinimumHeight(110)
        self.candidate_list.itemChanged.connect(lambda _i: self._update_controls())
        mv.addWidget(self.candidate_list, 1)
        v.addWidget(models, 1)

        evaluation = QGroupBox("Evaluation")
        form = QFormLayout(evaluation)
        text_row = QWidget()
        th = QHBoxLayout(text_row)
        th.setContentsMargins(0, 0, 0, 0)
        self.text_edit = QLineEdit(str(self.state.get("text", "")))
        self.text_edit.setPlaceholderText("default: Python docstrings")
        self.text_edit.setClearButtonEnabled(True)
        browse = QPushButton("Browse…")
        browse.setToolTip("Choose a UTF-8 text file")
        browse.clicked.connect(self._browse_text)
        th.addWidget(self.text_edit, 1)
        th.addWidget(browse)
        self.prompts_edit = QPlainTextEdit(str(self.state.get("prompts", "")))
        self.prompts_edit.setPlaceholderText("one prompt per line (default: a built-in set)")
        self.prompts_edit.setFixedHeight(72)
        self.ctx_spin = QSpinBox()
        self.ctx_spin.setRange(8, 8192)
        self.ctx_spin.setValue(int(self.state.get("ctx", 512)))
        self.ctx_spin.setSuffix(" tokens")
        self.chunks_spin = QSpinBox()
        self.chunks_spin.setRange(0, 100_000)
        self.chunks_spin.setValue(int(self.state.get("chunks", 32)))
        self.chunks_spin.setSpecialValueText("whole text")
        self.answers_check = QCheckBox("Answers side by side")
        self.answers_check.setChecked(bool(self.state.get("answers", True)))
        self.speed_check = QCheckBox("Measure tok/s")
        self.speed_check.setChecked(bool(self.state.get("speed", True)))
        self.threads_spin = QSpinBox()
        self.threads_spin.setRange(1, 256)
        self.threads_spin.setValue(int(self.state.get("threads", min(8, os.cpu_count() or 1))))
        form.addRow("Text", text_row)
        form.addRow("Prompts", self.prompts_edit)
        form.addRow("Chunk size", self.ctx_spin)
        form.addRow("Chunks", self.chunks_spin)
        form.addRow("Threads", self.threads_spin)
        checks = QHBoxLayout()
        checks.addWidget(self.answers_check)
        checks.addWidget(self.speed_check)
        form.addRow(checks)
        use_visible_checkboxes(evaluation)
        v.addWidget(evaluation)
        return box

    def _build_run(self) -> QWidget:
        """Run, Cancel, progress and status, pinned below the scrolling form."""
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        buttons = QHBoxLayout()
        self.run_button = set_button_role(QPushButton("Run comparison"), "primary")
        self.run_button.clicked.connect(self.start)
        self.cancel_button = set_button_role(QPushButton("Cancel"), "danger")
        self.cancel_button.clicked.connect(self.cancel)
        buttons.addWidget(self.run_button, 1)
        buttons.addWidget(self.cancel_button)
        self.progress = QProgressBar()
        self.progress.setRange(0, PROGRESS_STEPS)
        self.progress.setValue(0)
        self.progress.setTextVisible(False)
        self.status = QLabel()
        self.status.setProperty("muted", True)
        self.status.setWordWrap(True)
        v.addLayout(buttons)
        v.addWidget(self.progress)
        v.addWidget(self.status)
        return box

    # -- library --------------------------------------------------------------------------
    def refresh_library(self) -> None:
        start_worker(
            self,
            scan_library,
            self._on_library,
            lambda msg: log.warning("library scan failed: %s", msg),
        )

    def _on_library(self, entries: list[LibraryEntry]) -> None:
        self.entries = [e for e in entries if e.format == "gguf" and not e.error]
        current = self.reference_combo.currentData() or self.state.get("reference")
        self.reference_combo.blockSignals(True)
        self.reference_combo.clear()
        for e in self.entries:
            self.reference_combo.addItem(f"{e.name}  ·  {e.file_type or '?'}", e.path)
            self.reference_combo.setItemData(
                self.reference_combo.count() - 1, e.path, Qt.ItemDataRole.ToolTipRole
            )
        index = self.reference_combo.findData(current) if current else -1
        if index < 0:  # prefer the highest-precision file as the reference
            ranked = sorted(
                range(len(self.entries)), key=lambda i: -(self.entries[i].bits_per_weight or 0)
            )
            index = ranked[0] if ranked else -1
        self.reference_combo.setCurrentIndex(index)
        self.reference_combo.blockSignals(False)
        self._fill_candidates()

    def _fill_candidates(self) -> None:
        checked = set(self.checked_candidates()) or set(self.state.get("candidates", []))
        reference = self.reference_combo.currentData()
        self.candidate_list.blockSignals(True)
        self.candidate_list.clear()
        for e in self.entries:
            if e.path == reference:
                continue
            size = human_bytes(e.size_bytes)
            item = QListWidgetItem(f"{e.name}  ·  {e.file_type or '?'}  ·  {size}")
            item.setData(Qt.ItemDataRole.UserRole, e.path)
            item.setToolTip(e.path)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(
                Qt.CheckState.Checked if e.path in checked else Qt.CheckState.Unchecked
            )
            self.candidate_list.addItem(item)
        self.candidate_list.blockSignals(False)
        self._update_controls()

    def set_reference(self, path: str) -> bool:
        index = self.reference_combo.findData(path)
        if index >= 0:
            self.reference_combo.setCurrentIndex(index)
        return index >= 0

    def set_candidates(self, paths: list[str]) -> None:
        for i in range(self.candidate_list.count()):
            item = self.candidate_list.item(i)
            item.setCheckState(
                Qt.CheckState.Checked
                if item.data(Qt.ItemDataRole.UserRole) in paths
                else Qt.CheckState.Unchecked
            )

    def checked_candidates(self) -> list[str]:
        out = []
        for i in range(self.candidate_list.count()):
            item = self.candidate_list.item(i)
            if item.checkState() == Qt.CheckState.Checked:
                out.append(str(item.data(Qt.ItemDataRole.UserRole)))
        return out

    def _browse_text(self) -> None:
        path = self.pick_file("Evaluation text", "Text files (*.txt *.md);;All files (*)")
        if path:
            self.text_edit.setText(path)

    def _pick_file(self, title: str, filters: str) -> str:
        return QFileDialog.getOpenFileName(self, title, str(Path.home()), filters)[0]

    def _pick_save(self, title: str, suggested: str) -> str:
        return QFileDialog.getSaveFileName(self, title, suggested, "HTML (*.html)")[0]

    # -- running --------------------------------------------------------------------------
    def _update_controls(self) -> None:
        running = self.job is not None
        ready = bool(self.reference_combo.currentData()) and bool(self.checked_candidates())
        self.run_button.setEnabled(ready and not running)
        self.cancel_button.setEnabled(running)
        report = self.shown.report if self.shown is not None else None
        self.results.export_button.setEnabled(report is not None and not running)
        if not running and not ready and not self.status.text():
            self.status.setText(
                "Tick at least one candidate to compare with the reference."
                if self.entries
                else "Reading the library…"
            )

    def start(self) -> bool:
        reference = self.reference_combo.currentData()
        candidates = self.checked_candidates()
        if self.job is not None or not reference or not candidates:
            return False
        text = self.text_edit.text().strip()
        if text and not Path(text).is_file():
            self.status.setText(f"The text file does not exist: {text}")
            return False
        options = CompareOptions(
            str(reference),
            candidates,
            text=text,
            prompts=[p.strip() for p in self.prompts_edit.toPlainText().splitlines() if p.strip()],
            ctx=self.ctx_spin.value(),
            chunks=self.chunks_spin.value(),
            answers=self.answers_check.isChecked(),
            speed=self.speed_check.isChecked(),
            threads=self.threads_spin.value(),
        )
        self.state.update(options.state())
        run = CompareRun.create()
        self.results.log_view.clear()
        self.banner.hide()
        job = CliJob(options.arguments(run.folder), self)
        job.progress_reported.connect(self._on_progress)
        job.log_line.connect(self.results.log_view.appendPlainText)
        job.succeeded.connect(self._on_result)
        job.failed.connect(self._on_failed)
        job.finished.connect(self._on_finished)
        self.job, self.run = job, run
        self.progress.setValue(0)
        self.status.setText("Starting…")
        job.start()
        self._update_controls()
        return True

    def cancel(self) -> None:
        if self.job is not None:
            self.status.setText("Cancelling…")
            self.job.cancel()

    def _on_progress(self, event: ProgressEvent) -> None:
        fraction = progress_fraction(event)
        if fraction is not None:
            self.progress.setValue(int(PROGRESS_STEPS * fraction))
        self.status.setText(progress_status(event))
        if event.message:
            self.results.log_view.appendPlainText(
                f"[{event.stage}] {event.done}/{event.total} {event.message}"
            )

    def _on_result(self, payload: dict[str, Any]) -> None:
        run = self.run
        assert run is not None
        run.finished(payload)
        self.state["last_run"] = str(run.folder)
        self._show(run)
        failures = run.gate_failures
        self.status.setText("Done." + (" " + "; ".join(failures) if failures else ""))
        self.progress.setValue(PROGRESS_STEPS)

    def _on_failed(self, message: str) -> None:
        cancelled = self.job is not None and self.job.cancelled
        if self.run is not None:
            self.run.outcome = Outcome.CANCELLED if cancelled else Outcome.FAILED
        self.status.setText("Cancelled." if cancelled else "Failed.")
        if not cancelled:
            self.banner.show_message(f"The comparison failed: {message}", "error")
            self.results.show_log()
        self.progress.setValue(0)

    def _on_finished(self) -> None:
        job = self.job
        self.job = None
        if job is not None:
            job.deleteLater()
        self._update_controls()

    # -- results --------------------------------------------------------------------------
    def _load_last_run(self) -> None:
        try:
            run = CompareRun.last(self.state.get("last_run"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("could not read the last comparison: %s", exc)
            return
        if run is not None:
            self._show(run)
            self.status.setText(f"Showing the last run ({run.folder.name}).")

    def _show(self, run: CompareRun) -> None:
        assert run.result is not None
        self.shown = run
        self.results.show_result(run.result)
        self._update_controls()

    def export_report(self) -> str | None:
        report = self.shown.report if self.shown is not None else None
        if report is None:
            return None
        suggested = str(Path.home() / f"quantdesk-compare-{report.parent.name}.html")
        target = self.pick_save("Export the HTML report", suggested)
        if not target:
            return None
        part = Path(target + ".part")
        shutil.copyfile(report, part)
        os.replace(part, target)
        self.status.setText(f"Report saved to {target}.")
        return target

    # -- lifecycle ------------------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._update_controls()

    def shutdown(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self.job.wait(10_000)
        wait_for_workers(self)
