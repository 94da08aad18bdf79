"""HTTP/1.1 to a child server at the cost of a byte copy: the router's hop.

httpx (httpcore, h11 and anyio under it) spent ~0.7 ms of the router's CPU on every
streamed token: on a 2-core host that is time taken from llama.cpp's threads, and the
library's default path measured 0.90-0.94x llama-server at one client. This client writes
the request itself, parses the child's answer with httptools (C, the parser uvicorn uses)
and hands the body on as it arrives, without decoding it. Connections are kept alive and
reused per child, and one that was idle too long is not reused (uvicorn closes idle ones
after 5 s).

Only what a child server answers is supported: a status line, headers and a body framed
by Content-Length, chunked encoding or the end of the connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import cast

import httptools

log = logging.getLogger(__name__)

# A kept-alive connection idle longer than this is closed, not reused: uvicorn (the child)
# closes its side after 5 s, and a request written into a closing connection is lost.
_IDLE_REUSE_S = 2.0
_MAX_IDLE_PER_CHILD = 16
# Body bytes buffered from the child before reading from it pauses (a slow client).
_HIGH_WATER = 1 << 20


class UpstreamError(ConnectionError):
    """The child closed the connection, or sent what is not HTTP, before the answer ended."""


class UpstreamConnection(asyncio.Protocol):
    """One connection to a child; one exchange at a time."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.idle_since = time.monotonic()
        self._reset()

    def _reset(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._headers: list[tuple[bytes, bytes]] = []
        self._head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pieces: deque[bytes] = deque()
        self._buffered = 0
        self._wake: asyncio.Future[None] | None = None
        self._complete = False
        self._keep_alive = False
        self._error: UpstreamError | None = None
        self._got_bytes = False
        self.status = 0

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def data_received(self, data: bytes) -> None:
        self._got_bytes = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(UpstreamError("the model's server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(UpstreamError(f"the model's server sent what is not HTTP: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._complete:
            return
        if self._head.done() and not self._head.exception() and self._framed_by_close():
            self._complete = True  # a body framed by the end of the connection ends here
            self._wakeup()
            return
        why = f": {exc}" if exc else ""
        self._fail(UpstreamError(f"the model's server closed the connection{why}"))

    def _framed_by_close(self) -> bool:
        names = {name for name, _ in self._headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        if not self._head.done():
            self._head.set_result(None)

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)
        self._buffered += len(body)
        if self._buffered > _HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
        self._wakeup()

    def on_message_complete(self) -> None:
        self._keep_alive = self._parser.should_keep_alive()  # llhttp forgets it after this
        self._complete = True
        self._wakeup()

    def _fail(self, error: UpstreamError) -> None:
        if self._error is None:
            self._error = error
        if not self._head.done():
            self._head.set_exception(error)
            self._head.exception()  # retrieved: nobody may be waiting for it
        if self.transport is not None:
            self.transport.close()
        self._wakeup()

    def _wakeup(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    # the exchange
    def send_request(self, head: bytes, body: bytes) -> None:
        assert self.transport is not None
        self.transport.writelines((head, body))

    async def response_head(self) -> tuple[int, list[tuple[bytes, bytes]]]:
        await self._head
        return self.status, self._headers

    @property
    def fresh_failure(self) -> bool:
        """Failed before a byte of the answer came back (the request can be sent again)."""
        return self._error is not None and not self._got_bytes

    async def body(self) -> AsyncIterator[bytes]:
        """The answer's body as it arrives; raises :class:`UpstreamError` when it breaks off."""
        while True:
            while self._pieces:
                piece = self._pieces.popleft()
                self._buffered -= len(piece)
                if self.transport is not None and self._buffered <= _HIGH_WATER // 2:
                    self.transport.resume_reading()
                yield piece
            if self._complete:
                return
            if self._error is not None:
                raise self._error
            self._wake = asyncio.get_running_loop().create_future()
            try:
                await self._wake
            finally:
                self._wake = None

    @property
    def reusable(self) -> bool:
        return (
            self._complete
            and self._error is None
            and not self.lost
            and self._keep_alive
            and self.transport is not None
            and not self.transport.is_closing()
        )

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def reset_for_reuse(self) -> None:
        self._reset()
        self.idle_since = time.monotonic()


class UpstreamPool:
    """Kept-alive connections to the children, by base URL (``http://127.0.0.1:PORT``)."""

    def __init__(self) -> None:
        self._idle: dict[str, list[UpstreamConnection]] = {}
        self._closed = False

    async def _connect(self, base_url: str) -> UpstreamConnection:
        host, _, port = base_url.removeprefix("http://").rpartition(":")
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            lambda: UpstreamConnection(base_url), host, int(port)
        )
        return conn

    def _take_idle(self, base_url: str) -> UpstreamConnection | None:
        idle = self._idle.get(base_url, [])
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if not conn.lost and now - conn.idle_since < _IDLE_REUSE_S:
                return conn
            conn.abort()
        return None

    async def exchange(
        self, base_url: str, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> UpstreamConnection:
        """Send one request and wait for the answer's status line and headers. A kept-alive
        connection that turns out closed before answering is replaced by a fresh one once."""
        head = _request_head(method, target, base_url, headers, len(body))
        conn = self._take_idle(base_url)
        if conn is not None:
            try:
                return await _send(conn, head, body)
            except UpstreamError:
                if not conn.fresh_failure:
                    raise
                log.debug("a kept-alive connection to %s was closed; reconnecting", base_url)
        try:
            conn = await self._connect(base_url)
        except OSError as exc:
            raise UpstreamError(f"cannot connect to the model's server: {exc}") from exc
        return await _send(conn, head, body)

    def release(self, conn: UpstreamConnection) -> None:
        """Keep ``conn`` for the next request to its child if its exchange ended cleanly."""
        idle = self._idle.setdefault(conn.key, [])
        if self._closed or not conn.reusable or len(idle) >= _MAX_IDLE_PER_CHILD:
            conn.abort()
            return
        conn.reset_for_reuse()
        idle.append(conn)

    def close(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.abort()
        self._idle.clear()


async def _send(conn: UpstreamConnection, head: bytes, body: bytes) -> UpstreamConnection:
    """Write the request and wait for the answer's head. Cancelled (the client left) or
    failed, the connection is dropped: the child sees it close and cancels the work."""
    conn.send_request(head, body)
    try:
        await conn.response_head()
    except BaseException:
        conn.abort()
        raise
    return conn


def _request_head(
    method: str, target: str, base_url: str, headers: dict[str, str], length: int
) -> bytes:
    host = base_url.removeprefix("http://")
    lines = [f"{method} {target} HTTP/1.1", f"host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if length or method not in ("GET", "HEAD"):
        lines.append(f"content-length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
