"""Models page: the local library, Hugging Face Hub search with fit badges, and a download queue."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.app_settings import AppSettings
from app.theme import human_bytes
from app.widgets.common import Banner, ElidedLabel, page_header, set_button_role
from app.widgets.fit_badge import FitBadge, FitVerdict, remote_fits
from app.workers.download_worker import DownloadWorker
from app.workers.hub_call import run_call, wait_for_calls
from app.workers.library_events import library_events, scan_library
from backend.hub.download_manager import DownloadProgress
from backend.hub.hub_search import HubModel, RepoListing, list_repo_files, search_models
from backend.hub.library import LibraryEntry, ModelLibrary

log = logging.getLogger(__name__)

LIBRARY_COLUMNS = ("Name", "Type", "Size", "Parameters", "bpw", "Architecture", "Context", "Source")
FILE_COLUMNS = ("File", "Quant", "Size", "Fit on this machine")
KINDS = {"GGUF models": "gguf", "Safetensors (to quantise)": "safetensors", "Any": "any"}
SORTS = {"Most downloaded": "downloads", "Most liked": "likes", "Recently updated": "recent"}


def _params(n: int | None) -> str:
    if not n:
        return "–"
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.0f} M"


def _item(text: str, sort_value: float | str | None = None) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
    if sort_value is not None:
        item.setData(Qt.ItemDataRole.UserRole + 1, sort_value)
    return item


def _count(n: int | None) -> str:
    if n is None:
        return "–"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    return f"{n / 1e3:.1f}k" if n >= 1000 else str(n)


class DownloadRow(QFrame):
    """One queued download: name, progress bar, status, and Cancel / Resume / Remove."""

    def __init__(self, repo_id: str, filename: str | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        self.repo_id = repo_id
        self.filename = filename
        self.state = "queued"  # queued, downloading, verifying, done, cancelled, failed
        self.worker: DownloadWorker | None = None
        self.paths: list[str] = []
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 8, 8, 8)
        lay.setSpacing(4)
        top = QHBoxLayout()
        self.name = ElidedLabel(f"{repo_id} / {filename or 'model files'}")
        self.name.setStyleSheet("font-weight: 600;")
        self.action = QPushButton("Cancel")
        self.action.setFixedWidth(90)
        self.remove = set_button_role(QPushButton("✕"), "flat")
        self.remove.setToolTip("Remove from the list")
        top.addWidget(self.name, 1)
        top.addWidget(self.action)
        top.addWidget(self.remove)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setValue(0)
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(10)
        self.status = QLabel("Queued")
        self.status.setProperty("muted", True)
        lay.addLayout(top)
        lay.addWidget(self.bar)
        lay.addWidget(self.status)
        self.set_state("queued")

    def set_state(self, state: str, text: str | None = None) -> None:
        self.state = state
        labels = {
            "queued": "Queued",
            "downloading": "Downloading…",
            "verifying": "Verifying…",
            "done": "In the library",
            "cancelled": "Cancelled: resume continues from the bytes already downloaded",
            "failed": "Failed",
        }
        self.status.setText(text or labels.get(state, state))
        active = state in ("queued", "downloading", "verifying")
        self.action.setVisible(state != "done")
        self.action.setText("Cancel" if active else "Resume")
        self.remove.setVisible(not active)
        if state == "done":
            self.bar.setValue(1000)

    def show_progress(self, p: DownloadProgress) -> None:
        fraction = p.fraction
        if fraction is not None:
            self.bar.setValue(int(fraction * 1000))
        total = human_bytes(p.total_bytes) if p.total_bytes else "?"
        if p.stage == "verifying":
            self.set_state("verifying", f"Verifying checksum… {human_bytes(p.done_bytes)}")
            return
        if p.stage != "downloading":
            return
        text = f"{human_bytes(p.done_bytes)} of {total}"
        if p.bytes_per_s > 0:
            text += f"  ·  {human_bytes(p.bytes_per_s)}/s"
        if p.eta_s is not None:
            text += f"  ·  {int(p.eta_s) // 60}:{int(p.eta_s) % 60:02d} left"
        self.set_state("downloading", text)


class ModelsPage(QWidget):
    """Library, Hub search (with a fit badge for each file) and downloads."""

    library_refreshed = Signal()
    search_finished = Signal()
    files_listed = Signal()
    fits_ready = Signal()
    download_finished = Signal(str)  # final state: done, cancelled or failed

    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.state: dict[str, Any] = settings.pages.setdefault("models", {})
        self.entries: list[LibraryEntry] = []
        self.results: list[HubModel] = []
        self.listing: RepoListing | None = None
        self.downloads: list[DownloadRow] = []
        self._scanning = False
        self._rescan = False
        self._repo_tag = ""
        # hooks that tests replace: a confirmation dialog and the file manager
        self.confirm: Callable[[str, str], bool] = self._ask
        self.open_url: Callable[[QUrl], object] = QDesktopServices.openUrl

        outer = QVBoxLayout(self)
        outer.setContentsMargins(28, 22, 28, 22)
        outer.setSpacing(12)
        outer.addWidget(
            page_header(
                "Models",
                "Your local library, and GGUF models from the Hugging Face Hub with a "
                "check that they fit this machine.",
            )
        )
        self.banner = Banner()
        outer.addWidget(self.banner)
        self.tabs = QTabWidget()
        self.tabs.addTab(self._build_library_tab(), "Library")
        self.tabs.addTab(self._build_hub_tab(), "Hugging Face Hub")
        outer.addWidget(self.tabs, 1)
        library_events().library_changed.connect(self.refresh_library)
        self.refresh_library()

    # -- library tab ----------------------------------------------------------------------
    def _build_library_tab(self) -> QWidget:
        tab = QWidget()
        v = QVBoxLayout(tab)
        v.setContentsMargins(14, 14, 14, 14)
        v.setSpacing(10)
        row = QHBoxLayout()
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter by name, type or architecture")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(lambda _t: self._fill_library())
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh_library)
        self.reveal_button = QPushButton("Show in folder")
        self.reveal_button.clicked.connect(self.reveal_selected)
        self.delete_button = set_button_role(QPushButton("Delete…"), "danger")
        self.delete_button.clicked.connect(self.delete_selected)
        row.addWidget(self.filter_edit, 1)
        row.addWidget(self.refresh_button)
        row.addWidget(self.reveal_button)
        row.addWidget(self.delete_button)
        v.addLayout(row)
        self.library_table = QTableWidget(0, len(LIBRARY_COLUMNS))
        self.library_table.setHorizontalHeaderLabels(list(LIBRARY_COLUMNS))
        self._setup_table(self.library_table)
        header = self.library_table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.library_table.itemSelectionChanged.connect(self._on_library_selection)
        v.addWidget(self.library_table, 1)
        self.library_detail = QLabel()
        self.library_detail.setProperty("muted", True)
        self.library_detail.setWordWrap(True)
        self.library_detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        v.addWidget(self.library_detail)
        self._on_library_selection()
        return tab

    @staticmethod
    def _setup_table(table: QTableWidget) -> None:
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.verticalHeader().setVisible(False)
        table.verticalHeader().setDefaultSectionSize(34)
        table.setShowGrid(False)
        table.setAlternatingRowColors(False)
        table.setWordWrap(False)
        table.horizontalHeader().setDefaultAlignment(Qt.AlignmentFlag.AlignLeft)
        table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

    def refresh_library(self) -> None:
        """Scan the library in a worker; the table fills when it answers."""
        if self._scanning:
            self._rescan = True
            return
        self._scanning = True
        if not self.entries:
            self.library_detail.setText("Reading the library…")
        run_call(self, scan_library, self._on_library, self._on_library_error)

    def _on_library(self, entries: list[LibraryEntry]) -> None:
        self._scanning = False
        self.entries = entries
        self._fill_library()
        self.library_refreshed.emit()
        if self._rescan:
            self._rescan = False
            self.refresh_library()

    def _on_library_error(self, message: str) -> None:
        self._scanning = False
        self.banner.show_message(f"Could not read the model library: {message}", "error")

    def _fill_library(self) -> None:
        wanted = self.filter_edit.text().strip().lower()
        selected = self.selected_entry()
        table = self.library_table
        table.setSortingEnabled(False)
        table.setRowCount(0)
        for entry in self.entries:
            hay = " ".join(
                str(x)
                for x in (entry.name, entry.file_type, entry.architecture, entry.repo_id)
                if x
            ).lower()
            if wanted and wanted not in hay:
                continue
            r = table.rowCount()
            table.insertRow(r)
            name = _item(entry.name)
            name.setData(Qt.ItemDataRole.UserRole, entry.path)
            name.setToolTip(entry.path if not entry.error else f"{entry.path}\n{entry.error}")
            source = {
                "embedded": "embedded",
                "download": entry.repo_id or "Hub",
                "local": "local",
            }.get(entry.source, entry.source)
            cells = [
                name,
                _item(entry.file_type or ("unreadable" if entry.error else "–")),
                _item(human_bytes(entry.size_bytes)),
                _item(_params(entry.parameter_count)),
                _item(f"{entry.bits_per_weight:.2f}" if entry.bits_per_weight else "–"),
                _item(entry.architecture or "–"),
                _item(f"{entry.context_length:,}" if entry.context_length else "–"),
                _item(source),
            ]
            for c, cell in enumerate(cells):
                table.setItem(r, c, cell)
            if selected is not None and entry.path == selected.path:
                table.selectRow(r)
        self._on_library_selection()

    def selected_entry(self) -> LibraryEntry | None:
        rows = (
            self.library_table.selectionModel().selectedRows()
            if hasattr(self, "library_table")
            else []
        )
        if not rows:
            return None
        item = self.library_table.item(rows[0].row(), 0)
        path = item.data(Qt.ItemDataRole.UserRole) if item else None
        return next((e for e in self.entries if e.path == path), None)

    def select_library_path(self, path: str) -> bool:
        for r in range(self.library_table.rowCount()):
            item = self.library_table.item(r, 0)
            if item is not None and item.data(Qt.ItemDataRole.UserRole) == path:
                self.library_table.selectRow(r)
                return True
        return False

    def _on_library_selection(self) -> None:
        entry = self.selected_entry()
        self.reveal_button.setEnabled(entry is not None)
        self.delete_button.setEnabled(entry is not None and entry.removable)
        if entry is None:
            n = len(self.entries)
            size = sum(e.size_bytes for e in self.entries)
            self.library_detail.setText(
                f"{n} model{'s' if n != 1 else ''}, {human_bytes(size)} in "
                f"{ModelLibrary().root}. Download more from the Hugging Face Hub tab, or "
                "make your own on the Quantise page."
                if self.entries
                else ""
            )
            return
        facts = [entry.path]
        if entry.has_chat_template:
            facts.append("has a chat template")
        if entry.source == "embedded":
            facts.append("the embedded model ships with QuantDesk and cannot be deleted")
        if entry.error:
            facts.append(f"problem: {entry.error}")
        self.library_detail.setText("  ·  ".join(facts))

    def reveal_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None:
            return
        path = Path(entry.path)
        folder = path if path.is_dir() else path.parent
        self.open_url(QUrl.fromLocalFile(str(folder)))

    def delete_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None or not entry.removable:
            return
        question = (
            f"Delete {entry.name} ({human_bytes(entry.size_bytes)}) from disk?\n\n"
            f"{entry.path}\n\nThis cannot be undone."
        )
        if not self.confirm("Delete model", question):
            return
        try:
            ModelLibrary().delete_path(entry.path)
        except Exception as exc:  # QuantDeskError or OSError: say so, keep going
            self.banner.show_message(f"Could not delete {entry.name}: {exc}", "error")
            return
        self.banner.show_message(f"Deleted {entry.name}.", "info")
        library_events().library_changed.emit()

    def _ask(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(
            self,
            title,
            text,
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        return answer == QMessageBox.StandardButton.Yes

    # -- hub tab --------------------------------------------------------------------------
    def _build_hub_tab(self) -> QWidget:
        tab = QWidget()
        v = QVBoxLayout(tab)
        v.setContentsMargins(14, 14, 14, 14)
        v.setSpacing(10)
        row = QHBoxLayout()
        self.search_edit = QLineEdit(str(self.state.get("query", "")))
        self.search_edit.setPlaceholderText("Search the Hub, e.g. qwen2.5 instruct gguf")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.returnPressed.connect(self.search)
        self.kind_combo = QComboBox()
        self.kind_combo.addItems(list(KINDS))
        self.sort_combo = QComboBox()
        self.sort_combo.addItems(list(SORTS))
        self.search_button = set_button_role(QPushButton("Search"), "primary")
        self.search_button.clicked.connect(self.search)
        row.addWidget(self.search_edit, 1)
        row.addWidget(self.kind_combo)
        row.addWidget(self.sort_combo)
        row.addWidget(self.search_button)
        v.addLayout(row)

        split = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        self.results_list = QListWidget()
        self.results_list.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.results_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.results_list.currentRowChanged.connect(self._on_result_selected)
        self.results_note = QLabel("Search for a model to see results here.")
        self.results_note.setProperty("muted", True)
        self.results_note.setWordWrap(True)
        lv.addWidget(self.results_list, 1)
        lv.addWidget(self.results_note)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(8, 0, 0, 0)
        self.repo_title = ElidedLabel("Pick a search result to see its files.")
        self.repo_title.setStyleSheet("font-weight: 600; font-size: 15px;")
        self.files_table = QTableWidget(0, len(FILE_COLUMNS))
        self.files_table.setHorizontalHeaderLabels(list(FILE_COLUMNS))
        self._setup_table(self.files_table)
        self.files_table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.files_table.itemSelectionChanged.connect(self._update_download_button)
        self.files_table.doubleClicked.connect(lambda _i: self.download_selected())
        brow = QHBoxLayout()
        self.fit_note = QLabel()
        self.fit_note.setProperty("muted", True)
        self.fit_note.setWordWrap(True)
        self.download_button = set_button_role(QPushButton("Download"), "primary")
        self.download_button.clicked.connect(self.download_selected)
        brow.addWidget(self.fit_note, 1)
        brow.addWidget(self.download_button)
        rv.addWidget(self.repo_title)
        rv.addWidget(self.files_table, 1)
        rv.addLayout(brow)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([420, 640])
        v.addWidget(split, 3)

        queue_title = QLabel("Downloads")
        queue_title.setStyleSheet("font-weight: 600; color: #c9d0dc;")
        v.addWidget(queue_title)
        self.queue_area = QScrollArea()
        self.queue_area.setWidgetResizable(True)
        self.queue_area.setMinimumHeight(120)
        holder = QWidget()
        self.queue_layout = QVBoxLayout(holder)
        self.queue_layout.setContentsMargins(0, 0, 4, 0)
        self.queue_layout.setSpacing(6)
        self.queue_empty = QLabel(
            "No downloads yet. Pick a file above and press Download; "
            "a cancelled download resumes where it stopped."
        )
        self.queue_empty.setProperty("muted", True)
        self.queue_layout.addWidget(self.queue_empty)
        self.queue_layout.addStretch(1)
        self.queue_area.setWidget(holder)
        v.addWidget(self.queue_area, 1)
        self._update_download_button()
        return tab

    def search(self) -> None:
        query = self.search_edit.text().strip()
        self.state["query"] = query
        kind = KINDS[self.kind_combo.currentText()]
        sort = SORTS[self.sort_combo.currentText()]
        self.search_button.setEnabled(False)
        self.results_note.setText("Searching…")
        self.banner.hide()
        run_call(
            self,
            lambda: search_models(
                query,
                kind=kind,
                sort=sort,  # type: ignore[arg-type]
                limit=40,
            ),
            self._on_results,
            self._on_search_error,
        )

    def _on_results(self, results: list[HubModel]) -> None:
        self.search_button.setEnabled(True)
        self.results = results
        self.results_list.clear()
        for m in results:
            extra = f"↓ {_count(m.downloads)}   ♥ {_count(m.likes)}   {m.kind}"
            if m.gated:
                extra += "   gated"
            item = QListWidgetItem(f"{m.repo_id}\n{extra}")
            item.setToolTip(m.repo_id)
            self.results_list.addItem(item)
        self.results_note.setText(
            f"{len(results)} result{'s' if len(results) != 1 else ''}."
            if results
            else "No models match that search."
        )
        self.search_finished.emit()

    def _on_search_error(self, message: str) -> None:
        self.search_button.setEnabled(True)
        self.results_note.setText("Search failed.")
        offline = any(w in message.lower() for w in ("offline", "cannot reach", "connect"))
        text = (
            f"The Hugging Face Hub is not reachable, so search is unavailable: {message}. "
            "Your library still works."
            if offline
            else message
        )
        self.banner.show_message(text, "warning" if offline else "error")
        self.search_finished.emit()

    def _on_result_selected(self, row: int) -> None:
        if not 0 <= row < len(self.results):
            return
        self.open_repo(self.results[row].repo_id)

    def open_repo(self, repo_id: str) -> None:
        """List a repo's files (in a worker), then check their fit (in another)."""
        self._repo_tag = repo_id
        self.listing = None
        self.repo_title.set_full_text(f"{repo_id}: loading files…")
        self.files_table.setRowCount(0)
        self.fit_note.setText("")
        self._update_download_button()
        run_call(
            self,
            lambda: list_repo_files(repo_id),
            lambda listing: self._on_listing(repo_id, listing),
            lambda msg: self._on_listing_error(repo_id, msg),
        )

    def _on_listing_error(self, repo_id: str, message: str) -> None:
        if repo_id != self._repo_tag:
            return
        self.repo_title.set_full_text(repo_id)
        self.banner.show_message(message, "error")
        self.files_listed.emit()

    def _on_listing(self, repo_id: str, listing: RepoListing) -> None:
        if repo_id != self._repo_tag:
            return
        self.listing = listing
        files = listing.gguf_files or (
            listing.source_files() if listing.is_safetensors_source else []
        )
        self.repo_title.set_full_text(
            f"{listing.repo_id}  ·  {len(listing.gguf_files)} GGUF file(s)"
            if listing.gguf_files
            else f"{listing.repo_id}  ·  Hugging Face model (download it to quantise)"
            if listing.is_safetensors_source
            else f"{listing.repo_id}  ·  no model files"
        )
        table = self.files_table
        table.setRowCount(0)
        for f in files:
            r = table.rowCount()
            table.insertRow(r)
            name = _item(f.path)
            name.setData(Qt.ItemDataRole.UserRole, f.path)
            name.setToolTip(f.path)
            table.setItem(r, 0, name)
            table.setItem(r, 1, _item(f.quant or ("–" if f.kind != "gguf" else "?")))
            table.setItem(r, 2, _item(human_bytes(f.size) if f.size is not None else "?"))
            if f.kind == "gguf":
                badge = FitBadge()
                holder = QWidget()
                holder.setStyleSheet("background: transparent;")
                h = QHBoxLayout(holder)
                h.setContentsMargins(4, 4, 4, 4)
                h.addWidget(badge)
                h.addStretch(1)
                table.setCellWidget(r, 3, holder)
                holder.setProperty("badge_path", f.path)
            else:
                table.setItem(r, 3, _item("–"))
        if files:
            table.selectRow(0)
        self._update_download_button()
        self.files_listed.emit()
        ggufs = [f.path for f in listing.gguf_files]
        if ggufs:
            self.fit_note.setText(
                "Checking each file's fit with your Server settings "
                f"(context {self.settings.server.ctx_size:,}, "
                f"{self.settings.server.parallel} parallel)…"
            )
            knobs = self.settings.server.model_copy()
            run_call(
                self,
                lambda: remote_fits(repo_id, ggufs, knobs, listing.revision),
                lambda fits: self._on_fits(repo_id, fits),
                lambda msg: self._on_fits(repo_id, {}, msg),
            )

    def badge(self, row: int) -> FitBadge | None:
        holder = self.files_table.cellWidget(row, 3)
        return holder.findChild(FitBadge) if holder is not None else None

    def _on_fits(self, repo_id: str, fits: dict[str, FitVerdict], error: str = "") -> None:
        if repo_id != self._repo_tag:
            return
        for r in range(self.files_table.rowCount()):
            item = self.files_table.item(r, 0)
            badge = self.badge(r)
            if item is None or badge is None:
                continue
            path = item.data(Qt.ItemDataRole.UserRole)
            badge.set_verdict(fits.get(path, FitVerdict("unknown", error or "not checked")))
        k = self.settings.server
        self.fit_note.setText(
            f"Fit: weights + KV cache for context {k.ctx_size:,} × {k.parallel} parallel "
            "(the Server page's settings) against free memory now. Hover a badge for details."
            if not error
            else f"Could not check the fit: {error}"
        )
        self.fits_ready.emit()

    def selected_file(self) -> str | None:
        rows = self.files_table.selectionModel().selectedRows()
        if not rows:
            return None
        item = self.files_table.item(rows[0].row(), 0)
        return str(item.data(Qt.ItemDataRole.UserRole)) if item else None

    def _update_download_button(self) -> None:
        listing = self.listing
        if listing is not None and not listing.gguf_files and listing.is_safetensors_source:
            self.download_button.setText("Download model folder")
            self.download_button.setEnabled(True)
            return
        self.download_button.setText("Download")
        self.download_button.setEnabled(listing is not None and self.selected_file() is not None)

    # -- downloads ------------------------------------------------------------------------
    def download_selected(self) -> None:
        listing = self.listing
        if listing is None:
            return
        if listing.gguf_files:
            name = self.selected_file()
            if name is None:
                return
            self.enqueue(listing.repo_id, name)
        elif listing.is_safetensors_source:
            self.enqueue(listing.repo_id, None)

    def enqueue(self, repo_id: str, filename: str | None) -> DownloadRow:
        """Queue a download (one runs at a time); an identical active one is reused."""
        for row in self.downloads:
            if row.repo_id == repo_id and row.filename == filename and row.state != "done":
                if row.state in ("cancelled", "failed"):
                    self._resume(row)
                return row
        row = DownloadRow(repo_id, filename)
        row.action.clicked.connect(lambda: self._on_row_action(row))
        row.remove.clicked.connect(lambda: self._remove_row(row))
        self.downloads.append(row)
        self.queue_empty.hide()
        self.queue_layout.insertWidget(self.queue_layout.count() - 1, row)
        self._pump()
        return row

    def _on_row_action(self, row: DownloadRow) -> None:
        if row.state in ("queued",):
            row.set_state("cancelled", "Cancelled before it started")
            self.download_finished.emit("cancelled")
        elif row.state in ("downloading", "verifying") and row.worker is not None:
            row.worker.cancel()
            row.status.setText("Cancelling…")
        elif row.state in ("cancelled", "failed"):
            self._resume(row)

    def _resume(self, row: DownloadRow) -> None:
        row.set_state("queued", "Queued to resume")
        self._pump()

    def _remove_row(self, row: DownloadRow) -> None:
        if row.state in ("queued", "downloading", "verifying"):
            return
        self.downloads.remove(row)
        row.setParent(None)
        row.deleteLater()
        self.queue_empty.setVisible(not self.downloads)

    def _pump(self) -> None:
        if any(r.worker is not None for r in self.downloads):
            return
        row = next((r for r in self.downloads if r.state == "queued"), None)
        if row is None:
            return
        worker = DownloadWorker(row.repo_id, row.filename)
        row.worker = worker
        worker.progressed.connect(row.show_progress)
        worker.succeeded.connect(lambda paths: self._on_download_done(row, paths))
        worker.cancelled.connect(lambda: self._on_download_end(row, "cancelled", None))
        worker.failed.connect(lambda msg: self._on_download_end(row, "failed", msg))
        worker.finished.connect(lambda: self._on_worker_finished(row))
        row.set_state("downloading", "Starting…")
        worker.start()

    def _on_download_done(self, row: DownloadRow, paths: list[str]) -> None:
        row.paths = paths
        row.set_state("done", "In the library: " + ", ".join(Path(p).name for p in paths))
        library_events().library_changed.emit()

    def _on_download_end(self, row: DownloadRow, state: str, message: str | None) -> None:
        row.set_state(state, f"Failed: {message}" if message else None)

    def _on_worker_finished(self, row: DownloadRow) -> None:
        worker = row.worker
        row.worker = None
        if worker is not None:
            worker.deleteLater()
        self.download_finished.emit(row.state)
        self._pump()

    # -- lifecycle ------------------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self.entries:
            self.refresh_library()

    def shutdown(self) -> None:
        for row in self.downloads:
            if row.worker is not None:
                row.worker.cancel()
                row.worker.wait(10_000)
        wait_for_calls(self)
