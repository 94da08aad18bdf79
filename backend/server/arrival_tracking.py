"""Tell the engine which generation requests are on their way (see backend.engine.arrivals).

An ASGI middleware opens an arrival when a generation request comes in, before its body
is read and validated; :func:`submitted` closes it once the request's sequences are in
the engine's queue. Whatever happens in between (a 4xx, a disconnect), it is closed when
the request ends. The arrival travels in a context variable, so routes need not pass it.
"""

from __future__ import annotations

from contextvars import ContextVar

from starlette.types import ASGIApp, Receive, Scope, Send

from backend.engine.arrivals import Arrival

GENERATION_PATHS = frozenset(
    {"/v1/chat/completions", "/v1/completions", "/chat/completions", "/completions", "/infill"}
)

_current: ContextVar[Arrival | None] = ContextVar("quantdesk_arrival", default=None)


def submitted() -> None:
    """The current request's sequences are queued in the engine."""
    arrival = _current.get()
    if arrival is not None:
        arrival.done()


class ArrivalTracking:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        generation = (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] in GENERATION_PATHS
        )
        engine = getattr(scope["app"].state, "engine", None) if generation else None
        if engine is None or not engine.ready:
            await self.app(scope, receive, send)
            return
        arrival = engine.arrivals.begin()
        token = _current.set(arrival)
        try:
            await self.app(scope, receive, send)
        finally:
            arrival.done()
            _current.reset(token)
