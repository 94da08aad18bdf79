"""Download one Hub file (or a repo's model files) into the library: the job a
``ThreadWorker`` runs for the Models page's queue.

``backend.hub.download_manager`` keeps the partial bytes under ``.downloads/``, so
starting the same download again after a cancel (or a crash) resumes where it stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from backend.hub.download_manager import pull
from backend.hub.download_progress import DownloadProgress

# At most this many progress reports per second reach the GUI.
REPORT_EVERY_S = 0.1


def throttled(
    report: Callable[[DownloadProgress], None], every_s: float = REPORT_EVERY_S
) -> Callable[[DownloadProgress], None]:
    """``report``, but a ``downloading`` update within ``every_s`` of the last one is dropped
    (every other stage always passes)."""
    last = -every_s

    def forward(p: DownloadProgress) -> None:
        nonlocal last
        now = time.monotonic()
        if p.stage == "downloading" and now - last < every_s:
            return
        last = now
        report(p)

    return forward


def download(
    repo_id: str,
    filename: str | None,
    report: Callable[[DownloadProgress], None],
    cancel: threading.Event,
) -> list[str]:
    """Pull ``filename`` of ``repo_id`` (``None``: the repo's model files); the library paths.

    Raises ``DownloadCancelledError`` once ``cancel`` is set, ``QuantDeskError`` otherwise.
    """
    files = [filename] if filename else None
    paths = pull(repo_id, files, progress=throttled(report), cancel=cancel)
    return [str(p) for p in paths]
