"""The router's HTTP/1.1 client to its children (backend/router/upstream.py), against a real
socket server whose every byte the test writes: streamed pieces arrive as they are sent,
connections are reused, a stale one is replaced, and a body that breaks off is an error."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from backend.router import upstream as upstream_mod
from backend.router.upstream import UpstreamError, UpstreamPool

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


async def _serve(handler: Handler) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


def test_chunked_pieces_arrive_as_sent_and_the_connection_is_reused() -> None:
    peers: list[tuple[str, int]] = []
    requests: list[tuple[bytes, bytes]] = []
    go_on = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername"))
        while not reader.at_eof():
            try:
                requests.append(await _read_request(reader))
            except asyncio.IncompleteReadError:
                break
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n7\r\ndata: 1\r\n"
            )
            await writer.drain()
            await go_on.wait()
            writer.write(b"7\r\ndata: 2\r\n0\r\n\r\n")
            await writer.drain()
        writer.close()

    async def scenario() -> None:
        server, url = await _serve(handler)
        pool = UpstreamPool()
        try:
            for n in range(2):
                go_on.clear()
                conn = await pool.exchange(
                    url, "POST", "/v1/chat?x=1", {"authorization": "Bearer k"}, b'{"n": %d}' % n
                )
                status, headers = await conn.response_head()
                assert status == 200
                assert (b"content-type", b"text/event-stream") in headers
                pieces = conn.body()
                # the first piece comes while the server still holds back the second
                assert await asyncio.wait_for(anext(pieces), 5) == b"data: 1"
                go_on.set()
                assert [p async for p in pieces] == [b"data: 2"]
                pool.release(conn)
        finally:
            pool.close()
            server.close()

    asyncio.run(scenario())
    assert len(peers) == 1  # the second exchange reused the kept-alive connection
    head, body = requests[1]
    assert head.startswith(b"POST /v1/chat?x=1 HTTP/1.1\r\n")
    assert b"authorization: Bearer k\r\n" in head
    assert body == b'{"n": 1}'


def test_a_content_length_body_and_a_stale_connection_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await _read_request(reader)
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 5\r\n\r\nnope!")
        await writer.drain()
        writer.close()  # as a server whose keep-alive timer ran out

    async def scenario() -> None:
        server, url = await _serve(handler)
        pool = UpstreamPool()
        try:
            for _ in range(2):
                conn = await pool.exchange(url, "GET", "/props", {}, b"")
                assert conn.status == 404
                assert b"".join([p async for p in conn.body()]) == b"nope!"
                pool.release(conn)
                await asyncio.sleep(0.05)  # the close reaches the client
        finally:
            pool.close()
            server.close()

    # keep the closed connection "fresh" so that the pool tries it and must reconnect
    monkeypatch.setattr(upstream_mod, "_IDLE_REUSE_S", 60.0)
    asyncio.run(scenario())
    assert connections == 2


def test_a_body_that_breaks_off_is_an_upstream_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        writer.transport.abort()  # the model's server died mid-answer

    async def scenario() -> list[bytes]:
        server, url = await _serve(handler)
        pool = UpstreamPool()
        got: list[bytes] = []
        try:
            conn = await pool.exchange(url, "POST", "/v1/completions", {}, b"{}")
            with pytest.raises(UpstreamError, match="closed the connection"):
                async for piece in conn.body():
                    got.append(piece)
            pool.release(conn)  # a broken connection is never kept
            assert pool._idle[url] == []
        finally:
            pool.close()
            server.close()
        return got

    assert asyncio.run(scenario()) == [b"hello"]


def test_no_server_is_an_upstream_error() -> None:
    async def scenario() -> None:
        server, url = await _serve(lambda r, w: asyncio.sleep(0))
        server.close()
        await server.wait_closed()
        with pytest.raises(UpstreamError, match="cannot connect"):
            await UpstreamPool().exchange(url, "POST", "/v1/completions", {}, b"{}")

    asyncio.run(scenario())


def test_an_exchange_cancelled_before_the_answer_closes_its_connection() -> None:
    """A client that leaves while a non-streamed answer is computed: the child must see its
    connection close (that is how it learns to cancel the work)."""
    closed = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        if await reader.read() == b"":  # no answer: wait for the client to go
            closed.set()

    async def scenario() -> None:
        server, url = await _serve(handler)
        try:
            pool = UpstreamPool()
            task = asyncio.ensure_future(pool.exchange(url, "POST", "/v1/chat", {}, b"{}"))
            await asyncio.sleep(0.2)
            task.cancel()
            await asyncio.wait_for(closed.wait(), 5)
        finally:
            server.close()

    asyncio.run(scenario())
