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
from collections.abc import AsyncIterator

import anyio
import httpx
from fastapi import Request
from starlette.responses import Response, StreamingResponse

from backend.router.child_server import ChildServer
from backend.router.errors import ModelCrashedError
from backend.router.model_pool import ModelPool
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
    """One pooled client for every child: no read timeout (a generation may take long)."""
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


async def proxy(
    request: Request,
    pool: ModelPool,
    client: httpx.AsyncClient,
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
    try:
        headers = {k: v for k, v in request.headers.items() if k in _FORWARD_REQUEST}
        params = httpx.QueryParams(
            [(k, v) for k, v in request.query_params.multi_items() if k not in drop_query]
        )
        upstream_request = client.build_request(
            method,
            f"{child.base_url}{request.url.path}",
            params=params,
            content=body or None,
            headers={**headers, **child.headers},
        )
        upstream = await _send_unless_client_leaves(request, client, upstream_request)
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            await stack.aclose()
        if isinstance(exc, httpx.TransportError):
            raise await _crash_error(pool, child, model_id, exc) from None
        raise

    event_stream = upstream.headers.get("content-type", "").startswith("text/event-stream")

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        except httpx.TransportError as exc:
            if not event_stream:
                raise
            err = await _crash_error(pool, child, model_id, exc)
            log.warning("%s", err)
            yield _stream_error(request.url.path, err)
        finally:
            with anyio.CancelScope(shield=True):
                await upstream.aclose()
                await stack.aclose()

    response_headers = {k: v for k, v in upstream.headers.items() if k not in _HOP_BY_HOP}
    return StreamingResponse(relay(), status_code=upstream.status_code, headers=response_headers)


def _stream_error(path: str, err: ModelCrashedError) -> bytes:
    """The event that ends a stream whose model stopped: Anthropic's ``error`` event under
    /v1/messages (what the SDKs and Claude Code read), else an OpenAI ``data:`` error."""
    if anthropic_errors.is_messages_path(path):
        payload = anthropic_errors.error_body(err.status, str(err))
        return f"event: error\ndata: {json.dumps(payload)}\n\n".encode()
    return f"data: {json.dumps(error_body(str(err), err.type_, None, err.code))}\n\n".encode()


async def _send_unless_client_leaves(
    request: Request, client: httpx.AsyncClient, upstream_request: httpx.Request
) -> httpx.Response:
    """Send and wait for the child's response headers; if the client disconnects first (a
    non-streamed answer comes whole), the upstream request is dropped so that the child
    cancels its work."""
    send = asyncio.ensure_future(client.send(upstream_request, stream=True))
    watch = asyncio.ensure_future(wait_disconnected(request))
    try:
        done, _ = await asyncio.wait({send, watch}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        send.cancel()
        raise
    finally:
        watch.cancel()
    if send not in done:
        send.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await send
        raise ClientDisconnectedError()
    return send.result()
