"""The Server page's model pickers (the served model and the draft model): the embedded
model, the library's files and recent ones, or a GGUF opened from disk, with what the file
holds written below."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.page_models.model_choices import describe, library_paths, model_choices, model_facts
from app.storage.app_settings import AppSettings
from app.workers.thread_worker import ThreadWorker

log = logging.getLogger(__name__)


class ModelPicker(QWidget):
    """A list of models and the chosen one's facts; the page puts it in a box.

    ``model_changed()`` when the user picks another model (from the list or a file);
    ``layers_read(n)`` when the shown model's layer count is known. The library is re-read
    in a thread by :meth:`scan_library`, and ``library_read(paths)`` hands what was read to
    another picker (:meth:`set_library`), so the draft picker never reads it twice.
    """

    model_changed = Signal()
    layers_read = Signal(int)
    library_read = Signal(list)

    def __init__(
        self, settings: AppSettings, parent: QWidget | None = None, open_text: str = "Open GGUF…"
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.scans = 0  # library scans finished
        self._library: list[Path] = []
        self._scan: ThreadWorker | None = None
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.combo = QComboBox()
        self.combo.setMinimumWidth(260)
        self.open_button = QPushButton(open_text)
        self.open_button.setToolTip("Choose a GGUF file on this computer")
        self.open_button.clicked.connect(self._open_gguf)
        row.addWidget(self.combo, 1)
        row.addWidget(self.open_button)
        self.info = QLabel()
        self.info.setProperty("muted", True)
        self.info.setWordWrap(True)
        v.addLayout(row)
        v.addWidget(self.info)
        self.combo.currentIndexChanged.connect(self._on_picked)

    def value(self) -> str:
        """The chosen model: a path, or 'default' (the embedded model)."""
        return str(self.combo.currentData() or "default")

    def select(self, value: str) -> None:
        """Show ``value`` chosen, adding it to the list if needed (no ``model_changed``)."""
        self.combo.blockSignals(True)
        self.combo.clear()
        values = []
        for choice in model_choices(self.settings.recent_models, self._library):
            self.combo.addItem(choice.label, choice.value)
            values.append(choice.value)
        if value not in values:
            self.combo.addItem(Path(value).name, value)
            values.append(value)
        self.combo.setCurrentIndex(values.index(value))
        self.combo.blockSignals(False)
        self._show_facts()

    def choose(self, value: str) -> None:
        """Choose a model for the user (remembered as recent): ``model_changed`` follows."""
        self.settings.remember_model(value)
        self.select(value)
        self.model_changed.emit()

    def _on_picked(self) -> None:
        self._show_facts()
        self.model_changed.emit()

    def _show_facts(self) -> None:
        facts = model_facts(self.value())
        if facts is None:
            self.info.setText("The model file cannot be read.")
            return
        self.info.setText(describe(facts))
        self.info.setToolTip(str(facts.path))
        if facts.n_layer:
            self.layers_read.emit(facts.n_layer)

    def _open_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a GGUF model", str(Path.home()), "GGUF models (*.gguf)"
        )
        if path:
            self.choose(path)

    # -- the library ----------------------------------------------------------------------
    def is_scanning(self) -> bool:
        return self._scan is not None

    def scan_library(self) -> None:
        """Re-read the hub library in a thread; the list updates when it is done."""
        if self._scan is not None:
            return
        scan = ThreadWorker(library_paths)
        scan.returned.connect(self.set_library)
        scan.errored.connect(lambda message: log.warning("library scan failed: %s", message))
        scan.finished.connect(self._on_scan_done)
        self._scan = scan
        scan.start()

    def set_library(self, paths: list[Path]) -> None:
        """Offer the library's ``paths`` (keeping the chosen model) and pass them on."""
        self._library = paths
        self.select(self.value())
        self.scans += 1
        self.library_read.emit(paths)

    def _on_scan_done(self) -> None:
        if self._scan is not None:
            self._scan.deleteLater()
        self._scan = None

    def shutdown(self) -> None:
        if self._scan is not None:
            self._scan.wait(10_000)
