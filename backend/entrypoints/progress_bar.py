"""A terminal progress bar for downloads, written to a text stream (stderr by default)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from backend.core.units import human_bytes, human_duration, text_bar
from backend.hub.download_progress import DownloadProgress


class TerminalProgressBar:
    """Redraws one line per file with ``\\r``; at most ~10 redraws a second."""

    def __init__(self, stream: TextIO | None = None, width: int = 28) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self._last_draw = 0.0
        self._current: tuple[str, str] | None = None

    def __call__(self, p: DownloadProgress) -> None:
        key = (p.repo_id, p.filename)
        if self._current is not None and self._current != key:
            self.stream.write("\n")
        self._current = key
        now = time.monotonic()
        final = p.stage in ("verifying", "done")
        if not final and now - self._last_draw < 0.1:
            return
        self._last_draw = now
        fraction = p.fraction or 0.0
        bar = text_bar(fraction, self.width)
        name = p.filename if len(p.filename) <= 40 else "…" + p.filename[-39:]
        if p.stage == "downloading":
            tail = f"{human_bytes(p.bytes_per_s)}/s ETA {human_duration(p.eta_s)}"
        else:
            tail = p.stage
        line = (
            f"\r[{p.file_index}/{p.file_count}] {name} [{bar}] {fraction * 100:5.1f}% "
            f"{human_bytes(p.done_bytes)}/{human_bytes(p.total_bytes)} {tail}"
        )
        self.stream.write(line.ljust(100))
        if p.stage == "done":
            self.stream.write("\n")
            self._current = None
        self.stream.flush()
