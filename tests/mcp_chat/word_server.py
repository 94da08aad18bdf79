"""A real MCP server for the tests, written with the official SDK: a word the model cannot
guess (``WORD`` in the environment), a result too big to send whole, a call that hangs and
one that kills the server. Run as ``python -m tests.mcp_chat.word_server`` (stdio) or
served over streamable HTTP by :func:`http_app`."""

from __future__ import annotations

import os
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("words")


@server.tool()
def secret_word() -> str:
    """The secret word of the day."""
    calls = os.environ.get("WORD_CALLS")
    if calls:  # the tests count the calls that really ran
        with open(calls, "a", encoding="utf-8") as fh:
            fh.write("secret_word\n")
    return f"The secret word is {os.environ.get('WORD', 'missing')}."


@server.tool()
def big_report() -> str:
    """A very long report."""
    return "line of the report\n" * 20_000


@server.tool()
def hang() -> str:
    """Never answers."""
    time.sleep(3600)
    return "late"


@server.tool()
def crash() -> str:
    """Kills the server."""
    os._exit(3)


def http_app() -> object:
    return server.streamable_http_app()


if __name__ == "__main__":
    server.run()
