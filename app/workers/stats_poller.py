"""Poll ``/v1/stats`` off the GUI thread: a generator run by a :class:`ThreadWorker`, which
yields each body parsed into the server's :class:`StatsSnapshot`, stamped when it arrived."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import NamedTuple

import httpx
from pydantic import ValidationError
from PySide6.QtCore import QObject

from app.workers.thread_worker import ThreadWorker
from backend.engine.stats_model import StatsSnapshot

log = logging.getLogger(__name__)


class StatsReading(NamedTuple):
    """One snapshot and the ``time.monotonic()`` at which its response arrived."""

    received_at: float
    snapshot: StatsSnapshot


def poll_stats(
    base_url: str, api_key: str, interval_s: float, stop: threading.Event
) -> Iterator[StatsReading]:
    """GET ``{base_url}/v1/stats`` every ``interval_s`` and yield each snapshot, with the
    time its response arrived, until ``stop``.

    A failed poll (no answer, an error status, a body that is not a snapshot) is skipped;
    it is logged once, and again if it persists.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    failures = 0
    with httpx.Client(base_url=base_url, headers=headers, timeout=2.0) as client:
        while not stop.is_set():
            started = time.monotonic()
            try:
                response = client.get("/v1/stats")
                received_at = time.monotonic()
                response.raise_for_status()
                snapshot = StatsSnapshot.model_validate_json(response.content)
            except (httpx.HTTPError, ValidationError) as exc:
                failures += 1
                if failures in (1, 10):  # say it once, and again if it persists
                    log.info("stats poll failed: %s", exc)
                log.debug("stats poll failed: %s", exc)
            else:
                failures = 0
                yield StatsReading(received_at, snapshot)
            stop.wait(max(0.0, interval_s - (time.monotonic() - started)))


def stats_poller(
    base_url: str, api_key: str = "", interval_s: float = 0.25, parent: QObject | None = None
) -> ThreadWorker:
    """A worker, not yet started, whose ``yielded`` signal carries one :class:`StatsReading`
    per poll;
    ``cancel()`` stops it within one interval (or one request's 2 s timeout)."""
    worker = ThreadWorker(
        lambda: poll_stats(base_url, api_key, interval_s, worker.cancel_event), parent
    )
    return worker
