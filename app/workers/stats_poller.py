"""Poll ``/v1/stats`` off the GUI thread: a generator run by a :class:`ThreadWorker`, which
yields each body parsed into the server's :class:`StatsSnapshot`, stamped when it arrived.

A library server (``quantdesk serve`` without ``-m``) answers ``/v1/stats`` with every
loaded model's snapshot; the poller then yields them added up (``combine_snapshots``), or
one model's (``/v1/stats?model=ID``) while ``model()`` names one, and every few polls the
models and their states from ``/v1/models`` as a :class:`ModelsReading`."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import httpx
from pydantic import ValidationError
from PySide6.QtCore import QObject

from app.page_models.router_models import ModelCard, combine_snapshots
from app.page_models.server_memory_view import ServerMemory
from app.workers.router_client import RouterRequestError, list_models
from app.workers.server_memory import server_memory
from app.workers.thread_worker import ThreadWorker
from backend.engine.stats_model import StatsSnapshot

log = logging.getLogger(__name__)


class StatsReading(NamedTuple):
    """One snapshot and the ``time.monotonic()`` at which its response arrived; with a
    server pid, the memory of the whole server read just after."""

    received_at: float
    snapshot: StatsSnapshot
    memory: ServerMemory | None = None


class ModelsReading(NamedTuple):
    """The models of ``/v1/models`` and their states, at ``time.monotonic()``."""

    received_at: float
    models: list[ModelCard]


def snapshot_of(content: bytes) -> StatsSnapshot | None:
    """A ``/v1/stats`` body as one snapshot: a single server's as it is, a library server's
    list added up (``None`` while no model is loaded)."""
    body: Any = json.loads(content)
    if isinstance(body, dict) and body.get("object") == "list":
        data = body.get("data") or []
        return combine_snapshots([StatsSnapshot.model_validate(item) for item in data])
    return StatsSnapshot.model_validate(body)


def poll_stats(
    base_url: str,
    api_key: str,
    interval_s: float,
    stop: threading.Event,
    model: Callable[[], str | None] = lambda: None,
    models_every: int = 0,
    server_pid: int | None = None,
) -> Iterator[StatsReading | ModelsReading]:
    """GET ``{base_url}/v1/stats`` every ``interval_s`` and yield each snapshot, with the
    time its response arrived, until ``stop``. While ``model()`` names a model, its stats
    alone (``?model=ID``). With ``models_every`` > 0, every that many polls (the first
    included) also GET ``/v1/models`` and yield a :class:`ModelsReading`. With
    ``server_pid``, each reading carries the RSS of that process and its children (a
    library server's router and model servers: the snapshots count only the models').

    A failed poll (no answer, an error status, a body that is not a snapshot) is skipped;
    it is logged once, and again if it persists.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    failures = 0
    polls = 0
    with httpx.Client(base_url=base_url, headers=headers, timeout=2.0) as client:
        while not stop.is_set():
            started = time.monotonic()
            if models_every > 0 and polls % models_every == 0:
                try:
                    models = list_models(client)
                except (httpx.HTTPError, RouterRequestError, ValueError) as exc:
                    log.debug("models poll failed: %s", exc)
                else:
                    yield ModelsReading(time.monotonic(), models)
            polls += 1
            chosen = model()
            try:
                params = {"model": chosen} if chosen else None
                response = client.get("/v1/stats", params=params)
                received_at = time.monotonic()
                response.raise_for_status()
                snapshot = snapshot_of(response.content)
            except (httpx.HTTPError, ValidationError, ValueError) as exc:
                failures += 1
                if failures in (1, 10):  # say it once, and again if it persists
                    log.info("stats poll failed: %s", exc)
                log.debug("stats poll failed: %s", exc)
            else:
                failures = 0
                if snapshot is not None:
                    memory = server_memory(server_pid) if server_pid else None
                    yield StatsReading(received_at, snapshot, memory)
            stop.wait(max(0.0, interval_s - (time.monotonic() - started)))


def stats_poller(
    base_url: str,
    api_key: str = "",
    interval_s: float = 0.25,
    parent: QObject | None = None,
    *,
    model: Callable[[], str | None] = lambda: None,
    models_every: int = 0,
    server_pid: int | None = None,
) -> ThreadWorker:
    """A worker, not yet started, whose ``yielded`` signal carries one :class:`StatsReading`
    per poll (and a :class:`ModelsReading` every ``models_every`` polls); ``cancel()`` stops
    it within one interval (or one request's 2 s timeout)."""
    worker = ThreadWorker(
        lambda: poll_stats(
            base_url, api_key, interval_s, worker.cancel_event, model, models_every, server_pid
        ),
        parent,
    )
    return worker
