"""The MCP servers of a chat, connected through the official SDK's ``Client``.

Each server starts when a chat first needs it (``ensure``) and holds its connection in a
task of the hub's own event loop (a daemon thread), so that callers on any thread (the
GUI's workers, the terminal chat) use plain blocking calls. A server has a state:
starting, ready, failed (with the last lines of its stderr) or stopped. A call that hangs
or a server that dies fails that call only, after ``call_timeout_s``; ``close`` stops
every server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from backend.mcp_tools.mcp_config import McpServerSpec

log = logging.getLogger(__name__)

State = Literal["stopped", "starting", "ready", "failed"]
T = TypeVar("T")
START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 60.0
_STDERR_LINES = 12


@dataclass(frozen=True)
class McpTool:
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]

    def openai_tool(self) -> dict[str, Any]:
        """The tool as chat completions declare it (named ``server__tool``: unique across
        servers, and the name a call comes back with)."""
        return {
            "type": "function",
            "function": {
                "name": f"{self.server}__{self.name}",
                "description": self.description,
                "parameters": self.input_schema or {"type": "object", "properties": {}},
            },
        }


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    is_error: bool


@dataclass
class _Server:
    spec: McpServerSpec
    state: State = "stopped"
    error: str | None = None
    tools: list[McpTool] = field(default_factory=list)
    client: Client | None = None
    stop: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None
    stderr: Path | None = None
    starting: asyncio.Lock = field(default_factory=asyncio.Lock)


def reason(exc: BaseException) -> str:
    """What went wrong, in words: the first error inside anyio's exception groups, with its
    type when its message alone says little."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpError(Exception):
    """A server could not start, or a call failed; the message says which and why."""


class McpHub:
    """The servers of one configuration. Thread-safe blocking API."""

    def __init__(self, specs: list[McpServerSpec], call_timeout_s: float = CALL_TIMEOUT_S):
        self._servers = {s.name: _Server(s) for s in specs}
        self.call_timeout_s = call_timeout_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._thread.start()
        self._logs = tempfile.TemporaryDirectory(prefix="qd-mcp-")

    # ---- blocking API ----------------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self._servers)

    def state(self, name: str) -> tuple[State, str | None]:
        server = self._servers[name]
        return server.state, server.error

    def tools_of(self, name: str) -> list[McpTool]:
        """The tools ``name`` listed when it started (none before)."""
        return list(self._servers[name].tools)

    def ensure(self, name: str) -> list[McpTool]:
        """Start ``name`` if it is not running; its tools. McpError when it cannot start."""
        return self._run(self._ensure(self._servers[name]), START_TIMEOUT_S + 5)

    def call(self, tool: McpTool, arguments: dict[str, Any]) -> ToolOutcome:
        """Run one tool call; a failure (a dead server, a timeout) is an error outcome."""
        try:
            return self._run(self._call(tool, arguments), self.call_timeout_s + 5)
        except McpError as exc:
            return ToolOutcome(str(exc), True)

    def close(self) -> None:
        """Stop every server and the hub's loop."""
        with contextlib.suppress(Exception):
            self._run(self._stop_all(), 15)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._logs.cleanup()

    # ---- on the hub's loop -----------------------------------------------------------------
    def _run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise McpError("the MCP server did not answer in time") from None

    async def _transport(self, server: _Server, stack: contextlib.AsyncExitStack) -> Any:
        """The server's transport; what it opens (the stderr log, the HTTP client, which
        the SDK leaves to its caller) closes with ``stack``."""
        spec = server.spec
        if spec.command:
            server.stderr = Path(self._logs.name) / f"{spec.name}-{id(server)}.log"
            params = StdioServerParameters(
                command=spec.command, args=list(spec.args), env=spec.env or None
            )
            errlog = stack.enter_context(server.stderr.open("w", encoding="utf-8"))
            return stdio_client(params, errlog=errlog)
        assert spec.url is not None
        http = await stack.enter_async_context(create_mcp_http_client(headers=spec.headers or None))
        return streamable_http_client(spec.url, http_client=http)

    def _stderr_tail(self, server: _Server) -> str:
        if server.stderr is None or not server.stderr.exists():
            return ""
        lines = server.stderr.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(lines[-_STDERR_LINES:])

    async def _ensure(self, server: _Server) -> list[McpTool]:
        async with server.starting:  # a second caller waits for the first start
            return await self._start(server)

    async def _start(self, server: _Server) -> list[McpTool]:
        if server.state == "ready" and server.task is not None and not server.task.done():
            return server.tools
        ready = asyncio.get_running_loop().create_future()
        server.state, server.error, server.stop = "starting", None, asyncio.Event()
        server.task = asyncio.create_task(self._hold(server, ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), START_TIMEOUT_S)
        except TimeoutError:
            server.task.cancel()
            self._failed(server, f"it did not start within {START_TIMEOUT_S:.0f} s")
        except Exception as exc:  # the connection failed: said in the state
            self._failed(server, reason(exc))
        if server.state != "ready":
            raise McpError(f"MCP server {server.spec.name} failed: {server.error}")
        return server.tools

    def _failed(self, server: _Server, why: str) -> None:
        tail = self._stderr_tail(server)
        server.state = "failed"
        server.error = why + (f"\n{tail}" if tail else "")

    async def _hold(self, server: _Server, ready: asyncio.Future[None]) -> None:
        """Open the connection, list the tools, then keep it until told to stop."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(
                    Client(await self._transport(server, stack))
                )
                server.tools = await self._list_tools(server.spec.name, client)
                server.client, server.state = client, "ready"
                ready.set_result(None)
                assert server.stop is not None
                await server.stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                self._failed(server, f"the connection ended: {reason(exc)}")
        finally:
            server.client = None
            if server.state != "failed":
                server.state = "stopped"

    @staticmethod
    async def _list_tools(name: str, client: Client) -> list[McpTool]:
        """Every tool, page after page."""
        tools: list[McpTool] = []
        cursor: str | None = None
        while True:
            listed = await client.list_tools(cursor=cursor)
            tools += [
                McpTool(name, t.name, t.description or "", dict(t.input_schema))
                for t in listed.tools
            ]
            cursor = listed.next_cursor
            if not cursor:
                return tools

    async def _call(self, tool: McpTool, arguments: dict[str, Any]) -> ToolOutcome:
        server = self._servers[tool.server]
        await self._ensure(server)
        client = server.client
        if client is None:
            raise McpError(f"MCP server {tool.server} is not connected")
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool.name, arguments), self.call_timeout_s
            )
        except TimeoutError:
            raise McpError(
                f"{tool.server}: {tool.name} did not answer within {self.call_timeout_s:g} s"
            ) from None
        except Exception as exc:
            if server.task is not None and server.task.done():
                self._failed(server, f"the server stopped: {reason(exc)}")
            raise McpError(f"{tool.server}: {tool.name} failed: {reason(exc)}") from None
        texts = [getattr(part, "text", None) or f"[{part.type} content]" for part in result.content]
        return ToolOutcome("\n".join(texts), bool(result.is_error))

    async def _stop_all(self) -> None:
        for server in self._servers.values():
            if server.stop is not None:
                server.stop.set()
        tasks = [s.task for s in self._servers.values() if s.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=10)
