"""Download one Hub file into the library in a thread, with progress, cancel and resume.

``backend.hub.download_manager`` keeps the partial bytes under ``.downloads/``, so
starting the same download again after a cancel (or a crash) resumes where it stopped.
"""

from __future__ import annotations

import logging
import threading
import time

from PySide6.QtCore import QThread, Signal

from backend.core.errors import QuantDeskError
from backend.hub.download_manager import DownloadProgress, pull
from backend.hub.errors import DownloadCancelledError

log = logging.getLogger(__name__)

# At most this many progress signals per second reach the GUI.
_REPORT_EVERY_S = 0.1


class DownloadWorker(QThread):
    """``progressed(DownloadProgress)``, then ``succeeded(list[str])``, ``cancelled()`` or
    ``failed(message)``."""

    progressed = Signal(object)
    succeeded = Signal(object)
    cancelled = Signal()
    failed = Signal(str)

    def __init__(self, repo_id: str, filename: str | None) -> None:
        super().__init__()
        self.repo_id = repo_id
        self.filename = filename
        self._cancel = threading.Event()
        self._last_report = 0.0

    def cancel(self) -> None:
        self._cancel.set()

    def _on_progress(self, p: DownloadProgress) -> None:
        now = time.monotonic()
        if p.stage == "downloading" and now - self._last_report < _REPORT_EVERY_S:
            return
        self._last_report = now
        self.progressed.emit(p)

    def run(self) -> None:
        try:
            files = [self.filename] if self.filename else None  # None: the repo's model files
            paths = pull(self.repo_id, files, progress=self._on_progress, cancel=self._cancel)
        except DownloadCancelledError:
            self.cancelled.emit()
            return
        except QuantDeskError as exc:
            self.failed.emit(str(exc))
            return
        except Exception as exc:  # report, never crash the window
            log.exception("download crashed")
            self.failed.emit(f"{type(exc).__name__}: {exc}")
            return
        self.succeeded.emit([str(p) for p in paths])
