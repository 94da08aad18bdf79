"""Models page: the local library, Hugging Face Hub search with fit badges, and a download queue."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from app.pages.models_hub import HubTab
from app.pages.models_library import LibraryTab
from app.storage.app_settings import AppSettings
from app.widgets.common import Banner, page_header
from app.workers.thread_worker import wait_for_workers


class ModelsPage(QWidget):
    """Two tabs: the library (:class:`LibraryTab`) and the Hub with downloads (:class:`HubTab`)."""

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

    def shutdown(self) -> None:
        """Cancel the running download and wait for every worker of both tabs."""
        wait_for_workers(self, 10_000)
