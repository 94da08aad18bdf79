"""Refuse request bodies over a size limit with a 413, counting bytes as they arrive.

A declared ``Content-Length`` over the limit is refused before the body is read; a chunked
body, or one longer than it claimed, is cut off once the bytes received pass the limit.
The app's own answer to the cut-off body is then replaced by the 413.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.server.errors import error_body_for_path


class RequestTooLargeError(Exception):
    """Raised from ``receive`` once a body passes the limit."""


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, receive, send)
            return

        received = 0
        too_large = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    too_large = True
                    raise RequestTooLargeError
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if too_large:
                return  # the app's answer to a cut-off body; the 413 replaces it
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not too_large:
                raise
        if too_large and not started:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = (
            f"the request body is larger than this server's limit of {self.max_bytes} bytes "
            "(--max-body-bytes)"
        )
        body = error_body_for_path(
            scope["path"], 413, message, "invalid_request_error", "request_too_large"
        )
        await JSONResponse(body, status_code=413)(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server's HTTP parser rejects it
    return None
