"""Forward one request to a model's child server and stream its answer back, byte for byte.

The model stays acquired (never evicted) until the last byte is sent. A client that goes
away closes the upstream connection, so the child cancels the sequence; a child that
dies mid-answer ends the stream with an error event, OpenAI's or under /v1/messages
Anthropic's (or a 502 before the first byte).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from urllib.parse import quote, urlencode

import anyio
import httpx
from fastapi import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from backend.router.child_server import ChildServer
from backend.router.errors import ModelCrashedError
from backend.router.model_pool import ModelPool
from backend.router.upstream import UpstreamConnection, UpstreamError, UpstreamPool
from backend.server.anthropic import errors as anthropic_errors
from backend.server.errors import error_body
from backend.server.generation import ClientDisconnectedError, wait_disconnected

log = logging.getLogger(__name__)

# request headers the child needs; its Authorization is the router's own key for it
_FORWARD_REQUEST = ("content-type", "accept", "x-request-id")
# response headers that describe the connection, not the answer
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "date", "server", "content-length"}
)


def new_upstream_client() -> httpx.AsyncClient:
    """One pooled client for the router's own calls to the children (stats, stored
    responses): no read timeout. Proxied requests go through :class:`UpstreamPool`."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(None, connect=10.0),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
    )


async def _crash_error(
    pool: ModelPool, child: ChildServer, model_id: str, exc: Exception
) -> ModelCrashedError:
    await pool.settle(child)
    entry = pool.entry(model_id)
    why = entry.error if entry.state == "failed" else f"the connection to it failed: {exc}"
    return ModelCrashedError(f"the model '{model_id}' stopped while answering: {why}")


def _target(request: Request, drop_query: tuple[str, ...]) -> str:
    """The request's path as the client sent it, and its query less ``drop_query``."""
    raw_path = request.scope.get("raw_path")
    path = raw_path.decode("latin-1") if raw_path else quote(request.url.path)
    query = [(k, v) for k, v in request.query_params.multi_items() if k not in drop_query]
    return f"{path}?{urlencode(query)}" if query else path


async def proxy(
    request: Request,
    pool: ModelPool,
    upstreams: UpstreamPool,
    model_id: str,
    body: bytes,
    ttl_s: float | None,
    *,
    method: str = "POST",
    drop_query: tuple[str, ...] = (),
) -> Response:
    """Acquire ``model_id`` (loading it if needed), send ``body`` to the same path on its
    child (with the query, less the ``drop_query`` parameters the router took for itself)
    and stream the answer back."""
    stack = contextlib.AsyncExitStack()
    child = await stack.enter_async_context(pool.acquire(model_id, ttl_s=ttl_s))
    watch = asyncio.ensure_future(wait_disconnected(request))
    try:
        headers = {k: v for k, v in request.headers.items() if k in _FORWARD_REQUEST}
        send = upstreams.exchange(
            child.base_url, method, _target(request, drop_query), headers | child.headers, body
        )
        conn = await _unless_client_leaves(watch, send)
    except BaseException as exc:
        watch.cancel()
        with anyio.CancelScope(shield=True):
            await stack.aclose()
        if isinstance(exc, UpstreamError):
            raise await _crash_error(pool, child, model_id, exc) from None
        raise

    status, raw_headers = await conn.response_head()
    event_stream = any(
        k == b"content-type" and v.startswith(b"text/event-stream") for k, v in raw_headers
    )

    async def on_break(exc: UpstreamError) -> bytes | None:
        """The last bytes of an answer whose child stopped (None: end the connection)."""
        if not event_stream:
            return None
        err = await _crash_error(pool, child, model_id, exc)
        log.warning("%s", err)
        return _stream_error(request.url.path, err)

    async def finish() -> None:
        watch.cancel()
        upstreams.release(conn)
        await stack.aclose()

    kept = [(k, v) for k, v in raw_headers if k.decode("latin-1") not in _HOP_BY_HOP]
    return RelayResponse(status, kept, conn, watch, on_break, finish)


class RelayResponse(Response):
    """The child's answer, its body sent on piece by piece as it arrives; when the client
    goes away the child's connection is dropped, so that the child cancels its work."""

    def __init__(
        self,
        status: int,
        headers: list[tuple[bytes, bytes]],
        conn: UpstreamConnection,
        watch: asyncio.Future[None],
        on_break: Callable[[UpstreamError], Awaitable[bytes | None]],
        finish: Callable[[], Awaitable[None]],
    ) -> None:
        self.status_code = status
        self.background = None
        self.raw_headers = headers
        self._conn, self._watch, self._on_break, self._finish = conn, watch, on_break, finish
        self._relaying = True

    def _client_left(self, watch: asyncio.Future[None]) -> None:
        if self._relaying and not watch.cancelled():
            self._conn.abort()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._watch.add_done_callback(self._client_left)
        try:
            start = {"status": self.status_code, "headers": self.raw_headers}
            await send({"type": "http.response.start", **start})
            try:
                async for piece in self._conn.body():
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
            except UpstreamError as exc:
                if self._watch.done():
                    return  # the client left: nobody reads the rest
                last = await self._on_break(exc)
                if last is None:
                    raise
                await send({"type": "http.response.body", "body": last, "more_body": True})
            self._relaying = False
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._relaying = False
            with anyio.CancelScope(shield=True):
                await self._finish()
        if self.background is not None:  # FastAPI hands every returned response its tasks
            await self.background()


def _stream_error(path: str, err: ModelCrashedError) -> bytes:
    """The event that ends a stream whose model stopped: Anthropic's ``error`` event under
    /v1/messages (what the SDKs and Claude Code read), else an OpenAI ``data:`` error."""
    if anthropic_errors.is_messages_path(path):
        payload = anthropic_errors.error_body(err.status, str(err))
        return f"event: error\ndata: {json.dumps(payload)}\n\n".encode()
    return f"data: {json.dumps(error_body(str(err), err.type_, None, err.code))}\n\n".encode()


async def _unless_client_leaves(
    watch: asyncio.Future[None], exchange: Coroutine[Any, Any, UpstreamConnection]
) -> UpstreamConnection:
    """Send and wait for the child's response headers; if the client disconnects first (a
    non-streamed answer comes whole), the upstream request is dropped so that the child
    cancels its work."""
    send = asyncio.ensure_future(exchange)
    try:
        both: set[asyncio.Future[Any]] = {send, watch}
        done, _ = await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        send.cancel()
        raise
    if send not in done:
        send.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await send  # cancelled, the exchange drops its connection
        raise ClientDisconnectedError()
    return send.result()
