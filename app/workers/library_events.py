"""One app-wide signal, ``library_changed``: a page that adds or deletes models emits it,
and every page that lists the library refreshes."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal


class LibraryEvents(QObject):
    library_changed = Signal()


_events: LibraryEvents | None = None


def library_events() -> LibraryEvents:
    global _events
    if _events is None:
        _events = LibraryEvents()
    return _events


def scan_library() -> list[object]:
    """The library's entries (reads GGUF headers: run it in a worker)."""
    from backend.hub.library import ModelLibrary

    return list(ModelLibrary().entries())
