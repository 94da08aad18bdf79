"""The Models page's Hugging Face Hub tab: search, a repo's files with a fit badge each,
and the download queue."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.page_models.download_queue import Download, DownloadQueue, DownloadState
from app.page_models.fit_adapter import FitVerdict, remote_fits
from app.storage.app_settings import AppSettings
from app.widgets.common import Banner, ElidedLabel, list_table, set_button_role, table_item
from app.widgets.download_list import DownloadList
from app.widgets.fit_badge import FitBadge
from app.workers.download_job import download
from app.workers.library_events import library_events
from app.workers.thread_worker import ThreadWorker, start_worker
from backend.core.units import human_bytes
from backend.hub.hub_search import (
    HubModel,
    ModelKind,
    RepoListing,
    SortKey,
    list_repo_files,
    search_models,
)

FILE_COLUMNS = ("File", "Quant", "Size", "Fit on this machine")
KINDS: dict[str, ModelKind] = {
    "GGUF models": "gguf",
    "Safetensors (to quantise)": "safetensors",
    "Any": "any",
}
SORTS: dict[str, SortKey] = {
    "Most downloaded": "downloads",
    "Most liked": "likes",
    "Recently updated": "recent",
}


def count_text(n: int | None) -> str:
    """A download or like count, short: 950, 12.3k, 4.5M."""
    if n is None:
        return "–"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    return f"{n / 1e3:.1f}k" if n >= 1000 else str(n)


class HubTab(QWidget):
    """Search the Hub, list a repo's files with their fit, and download them one at a time."""

    def __init__(
        self,
        settings: AppSettings,
        state: dict[str, Any],
        banner: Banner,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.state = state
        self.banner = banner
        self.results: list[HubModel] = []
        self.listing: RepoListing | None = None
        self.downloads = DownloadQueue()
        self.download_worker: ThreadWorker | None = None
        self._repo_tag = ""
        self._build()

    def _build(self) -> None:
        v = QVBoxLayout(self)
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
        self.files_table = list_table(FILE_COLUMNS)
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
        self.download_list = DownloadList()
        v.addWidget(self.download_list, 1)
        self._update_download_button()

    def search(self) -> None:
        query = self.search_edit.text().strip()
        self.state["query"] = query
        kind = KINDS[self.kind_combo.currentText()]
        sort = SORTS[self.sort_combo.currentText()]
        self.search_button.setEnabled(False)
        self.results_note.setText("Searching…")
        self.banner.hide()
        start_worker(
            self,
            lambda: search_models(query, kind=kind, sort=sort, limit=40),
            self._on_results,
            self._on_search_error,
            self._on_search_cancelled,
        )

    def _on_results(self, results: list[HubModel]) -> None:
        self.search_button.setEnabled(True)
        self.results = results
        self.results_list.clear()
        for m in results:
            extra = f"↓ {count_text(m.downloads)}   ♥ {count_text(m.likes)}   {m.kind}"
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

    def _on_search_cancelled(self) -> None:
        self.search_button.setEnabled(True)
        self.results_note.setText("Search cancelled.")

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
        start_worker(
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

    def _on_listing(self, repo_id: str, listing: RepoListing) -> None:
        if repo_id != self._repo_tag:
            return
        self.listing = listing
        files = listing.gguf_files or (
            listing.source_files() if listing.is_safetensors_source else []
        )
        vision = "  ·  reads images (its projector comes with it)" if listing.has_projector else ""
        self.repo_title.set_full_text(
            f"{listing.repo_id}  ·  {len(listing.gguf_files)} GGUF file(s){vision}"
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
            name = table_item(f.path, f.path)
            name.setData(Qt.ItemDataRole.UserRole, f.path)
            table.setItem(r, 0, name)
            table.setItem(r, 1, table_item(f.quant or ("–" if f.kind != "gguf" else "?")))
            table.setItem(r, 2, table_item(human_bytes(f.size) if f.size is not None else "?"))
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
                table.setItem(r, 3, table_item("–"))
        if files:
            table.selectRow(0)
        self._update_download_button()
        ggufs = [f.path for f in listing.gguf_files]
        if ggufs:
            self.fit_note.setText(
                "Checking each file's fit with your Server settings "
                f"(context {self.settings.server.ctx_size:,}, "
                f"{self.settings.server.parallel} parallel)…"
            )
            knobs = self.settings.server.model_copy()
            start_worker(
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

    def enqueue(self, repo_id: str, filename: str | None) -> Download:
        """Queue a download (one runs at a time); an identical unfinished one is reused."""
        item, new = self.downloads.add(repo_id, filename)
        if new:
            row = self.download_list.add(item)
            row.action.clicked.connect(lambda: self._on_row_action(item))
            row.remove.clicked.connect(lambda: self._remove(item))
        self._pump()
        return item

    def _on_row_action(self, item: Download) -> None:
        if item.active:
            if self.downloads.cancel(item) and self.download_worker is not None:
                self.download_worker.cancel()
        else:
            self.downloads.resume(item)
        self._pump()

    def _remove(self, item: Download) -> None:
        if self.downloads.remove(item):
            self.download_list.drop(item)

    def _pump(self) -> None:
        """Start the next queued download if none runs, and show every row's state."""
        item = None if self.download_worker is not None else self.downloads.start_next()
        if item is not None:

            def job() -> list[str]:
                return download(item.repo_id, item.filename, worker.report, worker.cancel_event)

            worker = ThreadWorker(job, self)
            worker.yielded.connect(lambda p: self.downloads.progressed(item, p))
            worker.yielded.connect(lambda _p: self.download_list.refresh())
            worker.returned.connect(lambda paths: self.downloads.succeeded(item, paths))
            worker.cancelled.connect(lambda: self.downloads.cancelled(item))
            worker.errored.connect(lambda message: self.downloads.failed(item, message))
            worker.finished.connect(lambda: self._on_download_ended(item))
            self.download_worker = worker
            worker.start()
        self.download_list.refresh()

    def _on_download_ended(self, item: Download) -> None:
        if self.download_worker is not None:
            self.download_worker.deleteLater()
        self.download_worker = None
        if item.state is DownloadState.DONE:
            library_events().library_changed.emit()
        self._pump()
