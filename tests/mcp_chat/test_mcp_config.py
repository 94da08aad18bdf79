"""mcp.json in the format Claude Desktop, LM Studio and Cursor use; a bad entry is named."""

from __future__ import annotations

import json

import pytest

from backend.mcp_tools.mcp_config import McpConfigError, parse_mcp_config


def test_stdio_and_http_entries_as_other_apps_write_them() -> None:
    text = json.dumps(
        {
            "mcpServers": {
                "files": {"command": "npx", "args": ["-y", "server-files", "."], "env": {"A": "1"}},
                "notes": {"url": "http://127.0.0.1:9000/mcp", "headers": {"X-Key": "k"}},
                "typed": {"type": "streamable-http", "url": "https://example.org/mcp"},
                "off": {"command": "x", "disabled": True},
            }
        }
    )
    files, notes, typed = parse_mcp_config(text)
    assert (files.transport, files.command, files.args, files.env) == (
        "stdio",
        "npx",
        ("-y", "server-files", "."),
        {"A": "1"},
    )
    assert (notes.transport, notes.url, notes.headers) == (
        "http",
        "http://127.0.0.1:9000/mcp",
        {"X-Key": "k"},
    )
    assert typed.url == "https://example.org/mcp"


@pytest.mark.parametrize(
    ("servers", "words"),
    [
        ({"broken": {"args": ["x"]}}, 'server "broken" needs "command"'),
        ({"old": {"type": "sse", "url": "http://h/sse"}}, 'server "old": transport "sse"'),
        ({"bad-args": {"command": "x", "args": "y"}}, 'server "bad-args": "args"'),
        ({"bad-env": {"command": "x", "env": {"A": 1}}}, 'server "bad-env": "env"'),
        ({"ftp": {"url": "ftp://h/x"}}, 'server "ftp" needs'),
    ],
)
def test_a_bad_entry_is_named(servers: dict[str, object], words: str) -> None:
    with pytest.raises(McpConfigError, match=words.replace("(", r"\(")):
        parse_mcp_config(json.dumps({"mcpServers": servers}))


def test_not_json_or_not_the_format() -> None:
    with pytest.raises(McpConfigError, match="not valid JSON"):
        parse_mcp_config("{nope")
    with pytest.raises(McpConfigError, match="mcpServers"):
        parse_mcp_config(json.dumps({"servers": {}}))
