"""The Models page's Library tab: the local models, a filter, Load (in the running server,
beside the models it holds), Show in folder and Delete."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.widgets.common import Banner, list_table, set_button_role, table_item
from app.workers.library_events import library_events, scan_library
from app.workers.thread_worker import start_worker
from backend.core.units import human_bytes
from backend.hub.library import LibraryEntry, ModelLibrary

LIBRARY_COLUMNS = ("Name", "Type", "Size", "Parameters", "bpw", "Architecture", "Context", "Source")


def parameters_text(n: int | None) -> str:
    if not n:
        return "–"
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.0f} M"


def library_cells(entry: LibraryEntry) -> list[str]:
    """The texts of ``entry``'s row, in :data:`LIBRARY_COLUMNS` order."""
    source = {"download": entry.repo_id or "Hub"}.get(entry.source, entry.source)
    return [
        entry.name,
        entry.file_type or ("unreadable" if entry.error else "–"),
        human_bytes(entry.size_bytes),
        parameters_text(entry.parameter_count),
        f"{entry.bits_per_weight:.2f}" if entry.bits_per_weight else "–",
        entry.architecture or "–",
        f"{entry.context_length:,}" if entry.context_length else "–",
        source,
    ]


def matches(entry: LibraryEntry, wanted: str) -> bool:
    """Whether the filter text ``wanted`` (lower case) is in the entry's name, type,
    architecture or repo."""
    fields = (entry.name, entry.file_type, entry.architecture, entry.repo_id)
    return wanted in " ".join(str(x) for x in fields if x).lower()


def load_value(entry: LibraryEntry) -> str | None:
    """What "Load" asks the server for: 'default' for the embedded model, a GGUF's path;
    ``None`` for what the server cannot load (a safetensors folder, an unreadable file)."""
    if entry.format != "gguf" or entry.error:
        return None
    return "default" if entry.source == "embedded" else entry.path


class LibraryTab(QWidget):
    """The library's table; it re-reads the library whenever a page changes it.
    ``load_requested(value)``: load the selected model ('default' or a path) in the server."""

    load_requested = Signal(str)

    def __init__(self, banner: Banner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.banner = banner
        self.entries: list[LibraryEntry] = []
        self._scanning = False
        self._rescan = False
        # hooks that tests replace: a confirmation dialog and the file manager
        self.confirm: Callable[[str, str], bool] = self._ask
        self.open_url: Callable[[QUrl], object] = QDesktopServices.openUrl

        v = QVBoxLayout(self)
        v.setContentsMargins(14, 14, 14, 14)
        v.setSpacing(10)
        row = QHBoxLayout()
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter by name, type or architecture")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(lambda _t: self._fill())
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        self.load_button = set_button_role(QPushButton("Load"), "primary")
        self.load_button.setToolTip(
            "Load the selected model in the server, beside the models it holds (the server "
            "starts with it when it is not running)"
        )
        self.load_button.clicked.connect(self.load_selected)
        self.reveal_button = QPushButton("Show in folder")
        self.reveal_button.clicked.connect(self.reveal_selected)
        self.delete_button = set_button_role(QPushButton("Delete…"), "danger")
        self.delete_button.clicked.connect(self.delete_selected)
        row.addWidget(self.filter_edit, 1)
        row.addWidget(self.refresh_button)
        row.addWidget(self.load_button)
        row.addWidget(self.reveal_button)
        row.addWidget(self.delete_button)
        v.addLayout(row)
        self.table = list_table(LIBRARY_COLUMNS)
        self.table.itemSelectionChanged.connect(self._on_selection)
        v.addWidget(self.table, 1)
        self.detail = QLabel()
        self.detail.setProperty("muted", True)
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        v.addWidget(self.detail)
        self._on_selection()
        library_events().library_changed.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        """Scan the library in a worker; the table fills when it answers."""
        if self._scanning:
            self._rescan = True
            return
        self._scanning = True
        if not self.entries:
            self.detail.setText("Reading the library…")
        start_worker(
            self, scan_library, self._on_library, self._on_library_error, self._on_scan_cancelled
        )

    def _on_library(self, entries: list[LibraryEntry]) -> None:
        self._scanning = False
        self.entries = entries
        self._fill()
        if self._rescan:
            self._rescan = False
            self.refresh()

    def _on_scan_cancelled(self) -> None:
        self._scanning = False
        self._rescan = False

    def _on_library_error(self, message: str) -> None:
        self._scanning = False
        self.banner.show_message(f"Could not read the model library: {message}", "error")

    def _fill(self) -> None:
        wanted = self.filter_edit.text().strip().lower()
        selected = self.selected_entry()
        table = self.table
        table.setRowCount(0)
        for entry in (e for e in self.entries if matches(e, wanted)):
            r = table.rowCount()
            table.insertRow(r)
            name, *rest = library_cells(entry)
            tip = entry.path if not entry.error else f"{entry.path}\n{entry.error}"
            cells = [table_item(name, tip), *map(table_item, rest)]
            cells[0].setData(Qt.ItemDataRole.UserRole, entry.path)
            for c, cell in enumerate(cells):
                table.setItem(r, c, cell)
            if selected is not None and entry.path == selected.path:
                table.selectRow(r)
        self._on_selection()

    def selected_entry(self) -> LibraryEntry | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        item = self.table.item(rows[0].row(), 0)
        path = item.data(Qt.ItemDataRole.UserRole) if item else None
        return next((e for e in self.entries if e.path == path), None)

    def select_path(self, path: str) -> bool:
        for r in range(self.table.rowCount()):
            item = self.table.item(r, 0)
            if item is not None and item.data(Qt.ItemDataRole.UserRole) == path:
                self.table.selectRow(r)
                return True
        return False

    def _on_selection(self) -> None:
        entry = self.selected_entry()
        self.load_button.setEnabled(entry is not None and load_value(entry) is not None)
        self.reveal_button.setEnabled(entry is not None)
        self.delete_button.setEnabled(entry is not None and entry.removable)
        if entry is None:
            n = len(self.entries)
            size = sum(e.size_bytes for e in self.entries)
            self.detail.setText(
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
        self.detail.setText("  ·  ".join(facts))

    def load_selected(self) -> None:
        entry = self.selected_entry()
        value = load_value(entry) if entry is not None else None
        if value is not None:
            self.load_requested.emit(value)

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
