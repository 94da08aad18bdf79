"""Models page: the local library, Hugging Face Hub search with fit badges, and a download queue."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from app.pages.models_hub import HubTab
from app.pages.models_library import LibraryTab
from app.storage.app_settings import AppSettings
from app.widgets.common import Banner, page_header
from app.workers.thread_worker import wait_for_workers


class ModelsPage(QWidget):
    """Two tabs: the library (:class:`LibraryTab`) and the Hub with downloads (:class:`HubTab`).
    ``load_requested(value)``: the library's Load ('default' or a GGUF path); the window
    loads it in the server and answers with :meth:`show_load_result`."""

    load_requested = Signal(str)

    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        state: dict[str, Any] = settings.pages.setdefault("models", {})
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
        self.library = LibraryTab(self.banner)
        self.library.load_requested.connect(self.load_requested)
        self.hub = HubTab(settings, state, self.banner)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.library, "Library")
        self.tabs.addTab(self.hub, "Hugging Face Hub")
        outer.addWidget(self.tabs, 1)

    def showEvent(self, event: QShowEvent) -> None:
        """Pick up models added since the page was last shown."""
        super().showEvent(event)
        if self.library.entries:
            self.library.refresh()

    def show_load_result(self, name: str, problem: str | None) -> None:
        """Say what became of a Load: ``problem`` is why it could not be (``None``: it is on
        its way)."""
        if problem is not None:
            self.banner.show_message(f"Could not load {name}: {problem}", "warning")
        else:
            self.banner.show_message(
                f"Loading {name} in the server; the Server page lists it under Resident "
                "models, and the Chat page can pick it.",
                "info",
            )

    def shutdown(self) -> None:
        """Cancel the running download and wait for every worker of both tabs."""
        wait_for_workers(self, 10_000)
