"""The tool loop of a chat that can act, without Qt: the chat window's page model and the
terminal chat both drive it.

Each step streams the model's reply with the enabled MCP servers' tools declared; its tool
calls run (each asked for first: once, always for that tool, or deny) and their results go
back as tool messages, until the model answers in text or the step limit is reached. A
result longer than ``result_chars`` is cut with a note (it counts against the context).
Every call, allowed or not, is reported to ``on_call`` so that the transcript shows it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from backend.mcp_tools.chat_stream import ChatError, StreamedReply, stream_chat
from backend.mcp_tools.mcp_hub import McpHub, McpTool

Decision = Literal["once", "always", "deny"]
Approve = Callable[[McpTool, dict[str, Any]], Decision]
DENIED = "The user denied this tool call; it did not run."
MAX_STEPS = 8
RESULT_CHARS = 8000


@dataclass
class ToolCallRecord:
    """One tool call as the transcript shows it."""

    tool: str  # server__tool
    arguments: dict[str, Any]
    result: str = ""
    is_error: bool = False
    denied: bool = False
    seconds: float = 0.0


@dataclass
class LoopCallbacks:
    on_text: Callable[[str], None] = lambda _t: None
    on_reasoning: Callable[[str], None] = lambda _t: None
    on_call: Callable[[ToolCallRecord], None] = lambda _r: None


@dataclass
class ToolLoop:
    base_url: str
    model: str
    hub: McpHub | None
    approve: Approve
    api_key: str | None = None
    servers: list[str] | None = None  # those enabled for this chat (None: all)
    max_steps: int = MAX_STEPS
    result_chars: int = RESULT_CHARS
    tool_choice: str | dict[str, Any] | None = None  # the first step's (chat's values)
    sampling: dict[str, Any] = field(default_factory=dict)
    always: set[str] = field(default_factory=set)  # tools allowed for the rest of the chat

    def tools(self) -> dict[str, McpTool]:
        """The enabled servers' tools by their chat name (servers start here)."""
        if self.hub is None:
            return {}
        names = self.hub.names() if self.servers is None else self.servers
        found: dict[str, McpTool] = {}
        for name in names:
            for tool in self.hub.ensure(name):
                found[tool.openai_tool()["function"]["name"]] = tool
        return found

    def check_model(self, client: httpx.Client) -> None:
        """A model without tool support says so at once (its capabilities, as served)."""
        r = client.get("/v1/models")
        for card in r.json().get("data", []) if r.status_code == 200 else []:
            caps = card.get("capabilities")
            if card.get("id") == self.model and isinstance(caps, list) and "tools" not in caps:
                raise ChatError(
                    f"{self.model} does not take tools (its chat template renders none); "
                    "choose a model whose capabilities include tools"
                )

    def run(
        self, messages: list[dict[str, Any]], callbacks: LoopCallbacks, cancel: threading.Event
    ) -> list[dict[str, Any]]:
        """Run the loop on ``messages``; the messages it adds (assistant replies and tool
        results), the last one the model's answer."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        added: list[dict[str, Any]] = []
        with httpx.Client(base_url=self.base_url, headers=headers, timeout=None) as client:
            tools = self.tools()
            if tools:
                self.check_model(client)
            for step in range(self.max_steps):
                body: dict[str, Any] = {"model": self.model, "messages": messages + added}
                body |= self.sampling
                if tools:
                    body["tools"] = [t.openai_tool() for t in tools.values()]
                    if step == 0 and self.tool_choice:
                        body["tool_choice"] = self.tool_choice
                reply = stream_chat(client, body, callbacks.on_text, callbacks.on_reasoning, cancel)
                added.append(reply.message())
                if reply.cancelled or not reply.calls:
                    return added
                added += self._run_calls(reply, tools, callbacks, cancel)
                if cancel.is_set():
                    return added
            note = f"(stopped after {self.max_steps} tool steps)"
            callbacks.on_text(note)
            added.append({"role": "assistant", "content": note})
        return added

    def _run_calls(
        self,
        reply: StreamedReply,
        tools: dict[str, McpTool],
        callbacks: LoopCallbacks,
        cancel: threading.Event,
    ) -> list[dict[str, Any]]:
        out = []
        for call in reply.calls:
            try:
                arguments = json.loads(call.arguments) if call.arguments else {}
            except ValueError:
                arguments = {}
            record = ToolCallRecord(call.name, arguments if isinstance(arguments, dict) else {})
            tool = tools.get(call.name)
            if tool is None:
                record.result, record.is_error = f"no tool named {call.name}", True
            elif cancel.is_set():
                record.result, record.denied = "cancelled before it ran", True
            elif call.name in self.always or self._approved(tool, record):
                t0 = time.perf_counter()
                outcome = self.hub.call(tool, record.arguments) if self.hub else None
                record.seconds = time.perf_counter() - t0
                record.result = outcome.text if outcome else ""
                record.is_error = bool(outcome and outcome.is_error)
                record.result = self._cut(record.result)
            else:
                record.result, record.denied = DENIED, True
            callbacks.on_call(record)
            out.append({"role": "tool", "tool_call_id": call.id, "content": record.result})
        return out

    def _approved(self, tool: McpTool, record: ToolCallRecord) -> bool:
        decision = self.approve(tool, record.arguments)
        if decision == "always":
            self.always.add(record.tool)
        return decision != "deny"

    def _cut(self, text: str) -> str:
        if len(text) <= self.result_chars:
            return text
        return (
            text[: self.result_chars]
            + f"\n[cut: the tool returned {len(text):,} characters; the first "
            f"{self.result_chars:,} are shown]"
        )
