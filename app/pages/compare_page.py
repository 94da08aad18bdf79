"""Compare page: what quantisation costs, from ``quantdesk compare`` run in a child process.

Pick a reference and candidates from the library, optionally a text and prompts; the
results table (size, bpw, PPL, PPL ratio, KLD, same-top %, tok/s), a plot of KL divergence
against size, the greedy answers side by side, and the HTML report to export.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.app_settings import AppSettings
from app.markdown_render import markdown_to_html
from app.theme import BAD, GOOD, MUTED, SERIES, SURFACE, TEXT, WARN, human_bytes
from app.widgets.checkbox_style import use_visible_checkboxes
from app.widgets.common import Banner, EmptyState, page_header, scroll_column, set_button_role
from app.workers.cli_job import CliJob
from app.workers.library_events import library_events, scan_library
from app.workers.thread_worker import start_worker, wait_for_workers
from backend.hub.library import LibraryEntry
from backend.settings import quantdesk_home

log = logging.getLogger(__name__)

RESULT_COLUMNS = ("Model", "Size", "bpw", "PPL", "PPL ratio", "KLD", "Same top %", "Gen tok/s")
RESULTS_FILE = "results.json"
REPORT_FILE = "report.html"
# KLD bands for the colour of the KLD cell (llama.cpp folklore: < 0.01 is hard to notice).
KLD_GOOD, KLD_WARN = 0.01, 0.1


def compare_arguments(
    reference: str,
    candidates: list[str],
    out_dir: Path,
    *,
    text: str = "",
    prompts_file: Path | None = None,
    ctx: int = 512,
    chunks: int = 0,
    answers: bool = True,
    speed: bool = True,
    threads: int | None = None,
) -> list[str]:
    """The ``quantdesk`` arguments of one run (``--progress-jsonl`` is added by CliJob)."""
    args = [
        "compare",
        "--reference",
        reference,
        *candidates,
        "--json",
        str(out_dir / RESULTS_FILE),
        "--report",
        str(out_dir / REPORT_FILE),
        "--ctx",
        str(ctx),
    ]
    if chunks:
        args += ["--chunks", str(chunks)]
    if text:
        args += ["--text", text]
    if prompts_file is not None:
        args += ["--prompts", str(prompts_file)]
    if not answers:
        args.append("--no-answers")
    if not speed:
        args.append("--no-speed")
    if threads:
        args += ["--threads", str(threads)]
    return args


def short_names(names: list[str]) -> list[str]:
    """Drop the prefix all names share ('SmolLM2-135M-Instruct-Q8_0' -> 'Q8_0')."""
    if len(names) < 2:
        return names
    seps = "-._ "
    prefix = names[0]
    for name in names[1:]:
        while not name.startswith(prefix):
            prefix = prefix[:-1]
    cut = len(prefix)
    if all(len(n) > cut and n[cut] in seps for n in names):
        cut += 1  # the prefix ends right before a separator in every name
    elif not (prefix and prefix[-1] in seps):
        cut = max(prefix.rfind(ch) for ch in seps) + 1
    short = [n[cut:] for n in names]
    return short if cut > 0 and all(short) else names


def runs_folder() -> Path:
    return quantdesk_home() / "compare"


def _fmt(value: Any, spec: str, missing: str = "–") -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return missing
    return format(number, spec) if math.isfinite(number) else missing


def _cell(text: str, tip: str = "", align_right: bool = True) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
    if tip:
        item.setToolTip(tip)
    if align_right:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


class ComparePage(QWidget):
    """Reference + candidates -> table, plot, answers and report."""

    run_finished = Signal(str)  # done, failed or cancelled
    library_loaded = Signal()

    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.state: dict[str, Any] = settings.pages.setdefault("compare", {})
        self.entries: list[LibraryEntry] = []
        self.job: CliJob | None = None
        self.run_dir: Path | None = None
        self.data: dict[str, Any] | None = None
        self._phases = 1
        self._outcome = "failed"
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
        row.addWidget(self._build_results(), 1)
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
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.setTextVisible(False)
        self.status = QLabel()
        self.status.setProperty("muted", True)
        self.status.setWordWrap(True)
        v.addLayout(buttons)
        v.addWidget(self.progress)
        v.addWidget(self.status)
        return box

    def _build_results(self) -> QWidget:
        box = QWidget()
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setProperty("muted", True)
        self.export_button = QPushButton("Export HTML report…")
        self.export_button.clicked.connect(self.export_report)
        head.addWidget(self.summary, 1)
        head.addWidget(self.export_button)
        v.addLayout(head)
        self.results_stack = QStackedWidget()
        self.empty = EmptyState(
            "compare",
            "No comparison yet",
            "Choose a reference (ideally F16 or Q8_0) and one or more quants of the same model, "
            "then run. Perplexity and KL divergence are measured on the same text; lower KLD "
            "means closer to the reference.",
        )
        self.tabs = QTabWidget()
        self.tabs.addTab(self._build_table_tab(), "Results")
        self.tabs.addTab(self._build_answers_tab(), "Answers")
        self.log_view = QPlainTextEdit()
        self.log_view.setObjectName("LogView")
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(5000)
        self.tabs.addTab(self.log_view, "Log")
        self.results_stack.addWidget(self.empty)
        self.results_stack.addWidget(self.tabs)
        v.addWidget(self.results_stack, 1)
        return box

    def _build_table_tab(self) -> QWidget:
        split = QSplitter(Qt.Orientation.Vertical)
        self.table = QTableWidget(0, len(RESULT_COLUMNS))
        self.table.setHorizontalHeaderLabels(list(RESULT_COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(32)
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        # narrow windows cut the model name; keep its end, where the quant type is
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        split.addWidget(self.table)
        card = QFrame()
        card.setObjectName("Card")
        lay = QVBoxLayout(card)
        lay.setContentsMargins(10, 8, 10, 6)
        title = QLabel(
            "Quality against size  ·  mean KL divergence vs file size (lower left is better)"
        )
        title.setStyleSheet("font-weight: 600; color: #c9d0dc;")
        lay.addWidget(title)
        self.plot = pg.PlotWidget()
        self.plot.setBackground(SURFACE)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.showGrid(x=True, y=True, alpha=0.12)
        self.plot.setLabel("bottom", "file size", units="MiB", color=MUTED)
        self.plot.setLabel("left", "mean KLD", color=MUTED)
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        for axis in ("left", "bottom"):
            self.plot.getAxis(axis).setTextPen(MUTED)
            self.plot.getAxis(axis).setPen(MUTED)
        lay.addWidget(self.plot, 1)
        split.addWidget(card)
        split.setSizes([230, 380])
        return split

    def _build_answers_tab(self) -> QWidget:
        tab = QWidget()
        v = QVBoxLayout(tab)
        v.setContentsMargins(10, 10, 10, 10)
        row = QHBoxLayout()
        row.addWidget(QLabel("Prompt"))
        self.prompt_combo = QComboBox()
        self.prompt_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.prompt_combo.currentIndexChanged.connect(self._show_answers)
        row.addWidget(self.prompt_combo, 1)
        v.addLayout(row)
        self.answers_area = QScrollArea()
        self.answers_area.setWidgetResizable(True)
        self.answers_holder = QWidget()
        self.answers_row = QHBoxLayout(self.answers_holder)
        self.answers_row.setContentsMargins(0, 0, 0, 0)
        self.answers_row.setSpacing(10)
        self.answers_area.setWidget(self.answers_holder)
        self.answer_views: list[QTextBrowser] = []
        self._answer_columns: list[QFrame] = []
        self.answers_note = QLabel("This run has no answers (they were switched off).")
        self.answers_note.setProperty("muted", True)
        v.addWidget(self.answers_area, 1)
        v.addWidget(self.answers_note)
        return tab

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
        self.library_loaded.emit()

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
        report = self.run_dir / REPORT_FILE if self.run_dir else None
        self.export_button.setEnabled(report is not None and report.is_file() and not running)
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
        prompts = [p.strip() for p in self.prompts_edit.toPlainText().splitlines() if p.strip()]
        self.state.update(
            reference=reference,
            candidates=candidates,
            text=text,
            prompts="\n".join(prompts),
            ctx=self.ctx_spin.value(),
            chunks=self.chunks_spin.value(),
            answers=self.answers_check.isChecked(),
            speed=self.speed_check.isChecked(),
            threads=self.threads_spin.value(),
        )
        run_dir = runs_folder() / time.strftime("%Y%m%d-%H%M%S")
        suffix = 1
        while run_dir.exists():
            run_dir = run_dir.with_name(f"{run_dir.name.split('_')[0]}_{suffix}")
            suffix += 1
        run_dir.mkdir(parents=True)
        prompts_file: Path | None = None
        if prompts and self.answers_check.isChecked():
            prompts_file = run_dir / "prompts.txt"
            prompts_file.write_text("\n".join(prompts) + "\n", encoding="utf-8")
        args = compare_arguments(
            str(reference),
            candidates,
            run_dir,
            text=text,
            prompts_file=prompts_file,
            ctx=self.ctx_spin.value(),
            chunks=self.chunks_spin.value(),
            answers=self.answers_check.isChecked(),
            speed=self.speed_check.isChecked(),
            threads=self.threads_spin.value(),
        )
        self._phases = 1 + len(candidates)
        self._outcome = "failed"
        self.log_view.clear()
        self.banner.hide()
        job = CliJob(args, self)
        job.progressed.connect(self._on_progress)
        job.log_line.connect(self.log_view.appendPlainText)
        job.succeeded.connect(lambda result: self._on_result(run_dir, result))
        job.failed.connect(self._on_failed)
        job.finished.connect(self._on_finished)
        self.job = job
        self.progress.setValue(0)
        self.status.setText("Starting…")
        job.start()
        self._update_controls()
        return True

    def cancel(self) -> None:
        if self.job is not None:
            self.status.setText("Cancelling…")
            self.job.cancel()

    def _on_progress(self, stage: str, done: int, total: int, message: str) -> None:
        phase = 0
        if stage.startswith("candidate "):
            try:
                phase = int(stage.split()[1].split("/")[0])
            except (IndexError, ValueError):
                phase = 0
        fraction = done / total if total else 0.0
        if stage != "answers":
            self.progress.setValue(int(1000 * (phase + fraction) / self._phases))
        what = {"reference": "Reference", "answers": "Speed and answers"}.get(
            stage, stage.capitalize()
        )
        detail = f"{done}/{total}" if total > 1 else ""
        self.status.setText(f"{what} {detail}  ·  {message}".replace("   ", " "))
        if message:
            self.log_view.appendPlainText(f"[{stage}] {done}/{total} {message}")

    def _on_result(self, run_dir: Path, result: dict[str, Any]) -> None:
        self._outcome = "done"
        self.run_dir = run_dir
        self.state["last_run"] = str(run_dir)
        self.show_results(result)
        failures = result.get("gate_failures") or []
        self.status.setText("Done." + (" " + "; ".join(failures) if failures else ""))
        self.progress.setValue(1000)

    def _on_failed(self, message: str) -> None:
        cancelled = self.job is not None and self.job.cancelled
        self._outcome = "cancelled" if cancelled else "failed"
        self.status.setText("Cancelled." if cancelled else "Failed.")
        if not cancelled:
            self.banner.show_message(f"The comparison failed: {message}", "error")
            self.tabs.setCurrentWidget(self.log_view)
            self.results_stack.setCurrentIndex(1)
        self.progress.setValue(0)

    def _on_finished(self) -> None:
        job = self.job
        self.job = None
        if job is not None:
            job.deleteLater()
        self._update_controls()
        self.run_finished.emit(self._outcome)

    # -- results --------------------------------------------------------------------------
    def _load_last_run(self) -> None:
        last = self.state.get("last_run")
        candidates = [Path(last)] if last else []
        if not candidates and runs_folder().is_dir():
            candidates = sorted((p for p in runs_folder().iterdir() if p.is_dir()), reverse=True)
        for folder in candidates:
            results = folder / RESULTS_FILE
            if results.is_file():
                try:
                    data = json.loads(results.read_text(encoding="utf-8"))
                    self.run_dir = folder
                    self.show_results(data)
                    self.status.setText(f"Showing the last run ({folder.name}).")
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    log.warning("could not read %s: %s", results, exc)
                return

    def show_results(self, data: dict[str, Any]) -> None:
        self.data = data
        self.results_stack.setCurrentIndex(1)
        self._fill_table(data)
        self._plot(data)
        self._fill_answers(data)
        settings = data.get("settings", {})
        ref = data["reference"]
        scored = settings.get("scored_tokens")
        self.summary.setText(
            f"Reference {ref['name']}: PPL {_fmt(ref.get('ppl'), '.3f')}"
            + (f" over {int(scored):,} scored tokens" if scored else "")
            + (f", chunks of {settings['n_ctx']}" if settings.get("n_ctx") else "")
            + ". KLD and same-top % compare each token's full distribution with the "
            "reference's."
        )
        self.tabs.setCurrentIndex(0)
        self._update_controls()

    def _fill_table(self, data: dict[str, Any]) -> None:
        ref = data["reference"]
        rows: list[list[QTableWidgetItem]] = []
        ref_row = [
            _cell(f"{ref['name']} (ref)", f"reference: {ref.get('path', '')}", align_right=False),
            _cell(human_bytes(int(ref["size_bytes"]))),
            _cell(_fmt(ref.get("bpw"), ".2f")),
            _cell(_fmt(ref.get("ppl"), ".4f"), f"± {_fmt(ref.get('ppl_unc'), '.4f')}"),
            _cell("1.000"),
            _cell("0"),
            _cell("100.0"),
            _cell(_fmt(ref.get("gen_tok_s"), ".1f")),
        ]
        rows.append(ref_row)
        for c in data["candidates"]:
            kld = float(c.get("kld_mean", math.nan))
            kld_cell = _cell(
                _fmt(kld, ".5f"),
                f"p99 {_fmt(c.get('kld_p99'), '.4f')}, "
                f"median {_fmt(c.get('kld_median'), '.5f')}, "
                f"max {_fmt(c.get('kld_max'), '.4f')}",
            )
            if math.isfinite(kld):
                kld_cell.setForeground(
                    QColor(GOOD if kld < KLD_GOOD else WARN if kld < KLD_WARN else BAD)
                )
            rows.append(
                [
                    _cell(c["name"], c.get("path", ""), align_right=False),
                    _cell(human_bytes(int(c["size_bytes"]))),
                    _cell(_fmt(c.get("bpw"), ".2f")),
                    _cell(_fmt(c.get("ppl"), ".4f"), f"± {_fmt(c.get('ppl_unc'), '.4f')}"),
                    _cell(_fmt(c.get("ppl_ratio"), ".3f")),
                    kld_cell,
                    _cell(
                        _fmt(c.get("same_top_pct"), ".1f"),
                        f"RMS Δp {_fmt(c.get('rms_dp_pct'), '.2f')} %",
                    ),
                    _cell(_fmt(c.get("gen_tok_s"), ".1f")),
                ]
            )
        self.table.setRowCount(len(rows))
        for r, cells in enumerate(rows):
            for col, cell in enumerate(cells):
                self.table.setItem(r, col, cell)
        for col in range(self.table.columnCount()):
            item = self.table.item(0, col)
            if item is not None:
                item.setForeground(QColor(MUTED))

    def _plot(self, data: dict[str, Any]) -> None:
        plot = self.plot
        plot.clear()
        ref = data["reference"]
        names = short_names([str(ref["name"]), *[str(c["name"]) for c in data["candidates"]]])
        points: list[tuple[float, float, str, str]] = []  # x, y, label, colour
        for i, c in enumerate(data["candidates"]):
            kld = float(c.get("kld_mean", math.nan))
            if math.isfinite(kld):
                points.append(
                    (int(c["size_bytes"]) / 2**20, kld, names[i + 1], SERIES[i % len(SERIES)])
                )
        ref_x = int(ref["size_bytes"]) / 2**20
        all_x = [p[0] for p in points] + [ref_x]
        lo, hi = min(all_x), max(all_x)
        span = hi - lo or hi * 0.2 or 1.0
        mid = (lo + hi) / 2
        for x, y, label, colour in points:
            plot.plot(
                [x],
                [y],
                pen=None,
                symbol="o",
                symbolSize=11,
                symbolBrush=colour,
                symbolPen=None,
                name=label,
            )
            text = pg.TextItem(label, color=TEXT, anchor=(0, 1.1) if x <= mid else (1, 1.1))
            text.setPos(x, y)
            plot.addItem(text)
        plot.plot(
            [ref_x],
            [0.0],
            pen=None,
            symbol="d",
            symbolSize=12,
            symbolBrush=MUTED,
            symbolPen=None,
            name=f"{names[0]} (reference)",
        )
        ref_label = pg.TextItem(
            f"{names[0]} (reference)", color=MUTED, anchor=(0, 1.1) if ref_x <= mid else (1, 1.1)
        )
        ref_label.setPos(ref_x, 0.0)
        plot.addItem(ref_label)
        plot.setXRange(lo - 0.15 * span, hi + 0.15 * span, padding=0)
        top = max((p[1] for p in points), default=0.01)
        plot.setYRange(0, top * 1.3 or 0.01, padding=0)

    def plotted_points(self) -> int:
        """How many candidates the plot shows (for tests and the screenshot)."""
        items = self.plot.getPlotItem().listDataItems()
        return max(0, len(items) - 1)

    def _fill_answers(self, data: dict[str, Any]) -> None:
        answers = data.get("answers") or []
        self.prompt_combo.blockSignals(True)
        self.prompt_combo.clear()
        for a in answers:
            prompt = str(a["prompt"])
            self.prompt_combo.addItem(prompt if len(prompt) < 90 else prompt[:87] + "…")
        self.prompt_combo.blockSignals(False)
        for column in self._answer_columns:
            column.setParent(None)
            column.deleteLater()
        self._answer_columns = []
        self.answer_views = []
        names = [
            f"{data['reference']['name']} (reference)",
            *[c["name"] for c in data["candidates"]],
        ]
        for name in names if answers else []:
            column = QFrame()
            column.setObjectName("Card")
            column.setMinimumWidth(170)
            cv = QVBoxLayout(column)
            cv.setContentsMargins(10, 8, 10, 10)
            title = QLabel(name)
            title.setStyleSheet("font-weight: 600; color: #c9d0dc;")
            title.setWordWrap(True)
            view = QTextBrowser()
            view.setOpenExternalLinks(False)
            cv.addWidget(title)
            cv.addWidget(view, 1)
            self.answers_row.addWidget(column, 1)
            self._answer_columns.append(column)
            self.answer_views.append(view)
        self.answers_note.setVisible(not answers)
        self._show_answers(0)

    def _show_answers(self, index: int) -> None:
        answers = (self.data or {}).get("answers") or []
        if not 0 <= index < len(answers):
            return
        a = answers[index]
        texts = [str(a["reference"]), *[str(t) for t in a["candidates"]]]
        for view, text in zip(self.answer_views, texts, strict=False):
            view.setHtml(markdown_to_html(text))
            view.setProperty("answer_text", text)
        self.prompt_combo.setToolTip(str(a["prompt"]))

    def answer_texts(self) -> list[str]:
        return [str(view.property("answer_text") or "") for view in self.answer_views]

    def export_report(self) -> str | None:
        if self.run_dir is None or not (self.run_dir / REPORT_FILE).is_file():
            return None
        suggested = str(Path.home() / f"quantdesk-compare-{self.run_dir.name}.html")
        target = self.pick_save("Export the HTML report", suggested)
        if not target:
            return None
        part = Path(target + ".part")
        shutil.copyfile(self.run_dir / REPORT_FILE, part)
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
