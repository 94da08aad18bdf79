"""What GET /models/sse streams: a model's state as it changes, in llama-server's router
events (``{"model", "event": "model_status", "data": {"status": ...}}``), so that an editor
built for llama-server's router sees models load and unload."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

# events a slow subscriber may fall behind by before its oldest are dropped
_BACKLOG = 256


class ModelEvents:
    """Subscribers and their queues; used on the router's event loop only."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self.closed = False

    def publish(self, model: str, event: str, data: dict[str, Any] | None = None) -> None:
        item: dict[str, Any] = {"model": model, "event": event}
        if data is not None:
            item["data"] = data
        for queue in self._queues:
            _offer(queue, item)

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[asyncio.Queue[dict[str, Any] | None]]:
        """A queue of every event from now on; None once the router closes."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(_BACKLOG)
        if self.closed:
            queue.put_nowait(None)
        self._queues.add(queue)
        try:
            yield queue
        finally:
            self._queues.discard(queue)

    def close(self) -> None:
        """End every stream (the router is stopping)."""
        self.closed = True
        for queue in self._queues:
            _offer(queue, None)


def _offer(queue: asyncio.Queue[dict[str, Any] | None], item: dict[str, Any] | None) -> None:
    """Queue ``item``; a subscriber that does not read loses its oldest event for it."""
    if queue.full():
        queue.get_nowait()
    queue.put_nowait(item)
