"""Poll ``/v1/stats`` off the GUI thread and hand each snapshot over by signal."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import httpx
from PySide6.QtCore import QThread, Signal

log = logging.getLogger(__name__)


class StatsPoller(QThread):
    """A thread that GETs ``{base_url}/v1/stats`` every ``interval_s`` until stopped."""

    stats_received = Signal(object)
    poll_failed = Signal(str)

    def __init__(self, base_url: str, api_key: str = "", interval_s: float = 0.25) -> None:
        super().__init__()
        self.base_url = base_url
        self.interval_s = interval_s
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        failures = 0
        with httpx.Client(base_url=self.base_url, headers=self._headers, timeout=2.0) as client:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    response = client.get("/v1/stats")
                    response.raise_for_status()
                    data: dict[str, Any] = response.json()
                    data["_received_at"] = time.monotonic()
                    self.stats_received.emit(data)
                    failures = 0
                except (httpx.HTTPError, ValueError) as exc:
                    failures += 1
                    if failures in (1, 10):  # say it once, and again if it persists
                        self.poll_failed.emit(str(exc))
                    log.debug("stats poll failed: %s", exc)
                wait = self.interval_s - (time.monotonic() - started)
                self._stop.wait(max(0.0, wait))
