"""Events for clients, gathered during a step and handed over in one burst.

The scheduler delivers right before each ``llama_decode``, which releases the GIL for the
whole forward pass: the server's event loop then formats and sends them while the model
runs, instead of contending for the GIL with the scheduler's own Python work.
"""

from __future__ import annotations

import logging

from backend.engine.request_types import EngineEvent, EventSink

log = logging.getLogger(__name__)


class Outbox:
    """Events waiting for their sinks. Only the thread that drives the scheduler uses it."""

    def __init__(self) -> None:
        self._events: list[tuple[EventSink, EngineEvent]] = []

    def put(self, sink: EventSink, event: EngineEvent) -> None:
        self._events.append((sink, event))

    def deliver(self) -> None:
        """Hand every gathered event to its sink; a sink that raises is logged and the
        others still get theirs (a broken client must not take the engine down)."""
        events, self._events = self._events, []
        for sink, event in events:
            try:
                sink(event)
            except Exception:
                log.exception("event sink failed")
