"""The chat window's MCP tools without Qt: the servers of ``mcp.json``, started when a chat
first needs them, switched on or off per chat, and the servers whose tools run without
asking (remembered in the settings). It hands the page a :class:`ToolLoop` for a reply,
with an approval that asks the page only when it must."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from backend.mcp_tools.mcp_config import McpConfigError, McpServerSpec, load_mcp_config
from backend.mcp_tools.mcp_hub import McpError, McpHub, McpTool
from backend.mcp_tools.tool_loop import Decision, ToolLoop

# what the page's question answers: the loop's decisions, and "server": always, remembered
Answer = Literal["once", "always", "server", "deny"]
Ask = Callable[[McpTool, dict[str, Any]], Answer]


@dataclass(frozen=True)
class ServerRow:
    """A server as the Tools panel lists it."""

    name: str
    state: str  # stopped, starting, ready, failed
    error: str | None
    tools: tuple[str, ...]
    enabled: bool
    always: bool  # its tools run without asking


class ChatTools:
    """``memory``: the chat page's settings dict (``always_allow`` lives there)."""

    def __init__(self, memory: dict[str, Any], config: Path | None = None) -> None:
        self.memory = memory
        self.config = config
        self.specs: list[McpServerSpec] = []
        self.error: str | None = None
        self.hub: McpHub | None = None
        self.disabled: set[str] = set()  # switched off in this chat
        self.always_tools: set[str] = set()  # "always for this tool", for this chat
        self.reload()

    @property
    def always_servers(self) -> set[str]:
        value = self.memory.get("always_allow", [])
        return {str(v) for v in value} if isinstance(value, list) else set()

    def _remember_always(self, server: str) -> None:
        self.memory["always_allow"] = sorted(self.always_servers | {server})

    def reload(self) -> None:
        """Read mcp.json again (the running servers stop)."""
        self.close()
        try:
            self.specs, self.error = load_mcp_config(self.config), None
        except McpConfigError as exc:
            self.specs, self.error = [], str(exc)
        self.hub = McpHub(self.specs) if self.specs else None

    def new_chat(self) -> None:
        self.disabled.clear()
        self.always_tools.clear()

    def set_enabled(self, name: str, on: bool) -> None:
        (self.disabled.discard if on else self.disabled.add)(name)

    def enabled(self) -> list[str]:
        return [s.name for s in self.specs if s.name not in self.disabled]

    def rows(self) -> list[ServerRow]:
        out = []
        for spec in self.specs:
            state, error = self.hub.state(spec.name) if self.hub else ("stopped", None)
            tools = tuple(t.name for t in self.hub.tools_of(spec.name)) if self.hub else ()
            out.append(
                ServerRow(
                    spec.name,
                    state,
                    error,
                    tools,
                    spec.name not in self.disabled,
                    spec.name in self.always_servers,
                )
            )
        return out

    def start(self, name: str) -> str | None:
        """Start ``name`` now (blocking: a worker's job); its error, if it failed."""
        if self.hub is None:
            return "no MCP servers"
        try:
            self.hub.ensure(name)
        except McpError as exc:
            return str(exc)
        return None

    def loop(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        ask: Ask,
        sampling: dict[str, Any],
    ) -> ToolLoop | None:
        """The tool loop of one reply; None when no server is on in this chat."""
        servers = self.enabled()
        if self.hub is None or not servers:
            return None
        return ToolLoop(
            base_url,
            model,
            self.hub,
            lambda tool, args: self._approve(ask, tool, args),
            api_key=api_key or None,
            servers=servers,
            sampling=sampling,
            always=self.always_tools,  # the loop adds to it: kept for the chat
        )

    def _approve(self, ask: Ask, tool: McpTool, arguments: dict[str, Any]) -> Decision:
        if tool.server in self.always_servers:
            return "once"
        answer = ask(tool, arguments)
        if answer == "server":
            self._remember_always(tool.server)
            return "once"
        return answer

    def close(self) -> None:
        if self.hub is not None:
            self.hub.close()
            self.hub = None
