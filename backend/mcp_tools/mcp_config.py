"""``QUANTDESK_HOME/mcp.json``: the ``mcpServers`` format of Claude Desktop, LM Studio and
Cursor, so that a user pastes theirs and it works.

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
        "notes": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer x"}}
    }}

A server is stdio (``command``, ``args``, ``env``) or streamable HTTP (``url``,
``headers``); an entry that is neither, or of a transport not supported (``sse``), is an
error that names it. ``disabled: true`` leaves an entry out, as LM Studio does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.core.errors import ConfigError
from backend.settings.paths import quantdesk_home

HTTP_TYPES = ("http", "streamable-http", "streamableHttp")


class McpConfigError(ConfigError):
    """mcp.json cannot be read, or one of its entries is wrong (the message names it)."""


@dataclass(frozen=True)
class McpServerSpec:
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


def default_mcp_path() -> Path:
    return quantdesk_home() / "mcp.json"


def _strings(value: Any, what: str, name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise McpConfigError(f'mcp.json: server "{name}": "{what}" must map names to strings')
    return dict(value)


def _spec(name: str, entry: Any) -> McpServerSpec:
    if not isinstance(entry, dict):
        raise McpConfigError(f'mcp.json: server "{name}" must be an object')
    kind = entry.get("type")
    if kind == "sse" or (kind is not None and kind != "stdio" and kind not in HTTP_TYPES):
        raise McpConfigError(
            f'mcp.json: server "{name}": transport "{kind}" is not supported (stdio, or '
            "streamable HTTP with a url)"
        )
    command, url = entry.get("command"), entry.get("url") or entry.get("serverUrl")
    if isinstance(command, str) and command:
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise McpConfigError(f'mcp.json: server "{name}": "args" must be a list of strings')
        return McpServerSpec(name, command, tuple(args), _strings(entry.get("env"), "env", name))
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        return McpServerSpec(name, url=url, headers=_strings(entry.get("headers"), "headers", name))
    raise McpConfigError(
        f'mcp.json: server "{name}" needs "command" (a stdio server) or an http(s) "url" '
        "(a streamable HTTP server)"
    )


def parse_mcp_config(text: str) -> list[McpServerSpec]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise McpConfigError(f"mcp.json is not valid JSON: {exc}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError('mcp.json must be an object with "mcpServers": {name: server}')
    return [
        _spec(str(name), entry)
        for name, entry in servers.items()
        if not (isinstance(entry, dict) and entry.get("disabled") is True)
    ]


def load_mcp_config(path: Path | None = None) -> list[McpServerSpec]:
    """The servers of ``path`` (default: ``QUANTDESK_HOME/mcp.json``); none if it is absent."""
    path = path or default_mcp_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise McpConfigError(f"cannot read {path}: {exc.strerror}") from None
    return parse_mcp_config(text)
