"""Bridge engine events (scheduler thread) into an asyncio consumer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from backend.engine.request_types import EngineEvent, ErrorEvent, FinishEvent


class EventStream:
    """``sink`` is handed to the engine; iterate to receive events until the finish."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[EngineEvent] = asyncio.Queue()

    def sink(self, event: EngineEvent) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, event)

    async def __aiter__(self) -> AsyncIterator[EngineEvent]:
        while True:
            event = await self._queue.get()
            yield event
            if isinstance(event, FinishEvent | ErrorEvent):
                return
