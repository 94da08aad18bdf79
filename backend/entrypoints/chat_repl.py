"""The terminal side of ``quantdesk chat``: the answer as it streams (Markdown rendered on
a terminal, plain text into a pipe), tool calls and their results on stderr, the question
before a tool runs, and the interactive loop with its commands."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape

from backend.mcp_tools.chat_stream import ChatError
from backend.mcp_tools.mcp_hub import McpError, McpTool, reason
from backend.mcp_tools.tool_loop import Decision, LoopCallbacks, ToolCallRecord, ToolLoop

HELP = '/tools  /model NAME  /clear  /bye   (a line of """ starts and ends a multi-line message)'


@dataclass
class Terminal:
    assume_yes: bool = False
    out: Console = field(default_factory=lambda: Console(highlight=False))
    err: Console = field(default_factory=lambda: Console(stderr=True, highlight=False))
    _text: str = ""
    _live: Live | None = None

    def approve(self, tool: McpTool, arguments: dict[str, Any]) -> Decision:
        if self.assume_yes:
            return "once"
        self.end_reply()
        if not sys.stdin.isatty():
            name = escape(f"{tool.server}__{tool.name}")
            self.err.print(f"[yellow]denied {name}[/]: no terminal to ask on")
            return "deny"
        shown = escape(json.dumps(arguments, ensure_ascii=False))
        name = escape(f"{tool.server}__{tool.name}")
        answer = self.err.input(f"Run [bold]{name}[/] {shown}? \\[y]es / \\[a]lways / \\[n]o ")
        return {"y": "once", "a": "always"}.get(answer.strip().lower()[:1], "deny")  # type: ignore[return-value]

    def callbacks(self) -> LoopCallbacks:
        return LoopCallbacks(
            on_text=self._on_text, on_reasoning=self._on_reasoning, on_call=self._on_call
        )

    def _on_text(self, text: str) -> None:
        if not self.out.is_terminal:
            sys.stdout.write(text)
            sys.stdout.flush()
            self._text += text
            return
        self._text += text
        if self._live is None:
            self._live = Live(Markdown(self._text), console=self.out, refresh_per_second=8)
            self._live.start()
        self._live.update(Markdown(self._text))

    def _on_reasoning(self, text: str) -> None:
        self.err.print(f"[dim]{escape(text)}[/]", end="")

    def _on_call(self, record: ToolCallRecord) -> None:
        self.end_reply()
        # what tools and servers say is text, never markup
        args = escape(json.dumps(record.arguments, ensure_ascii=False))
        head = f"[cyan]tool[/] {escape(record.tool)} {args}"
        if record.denied:
            self.err.print(f"{head} [yellow]not run[/]: {escape(record.result)}")
            return
        status = "[red]error[/]" if record.is_error else f"{record.seconds:.1f} s"
        result = record.result if len(record.result) <= 400 else record.result[:400] + "..."
        self.err.print(f"{head} ({status})\n  [dim]{escape(result)}[/]")

    def end_reply(self) -> None:
        """End the answer shown so far: stop its live Markdown, or end its line in a pipe."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        elif self._text:
            sys.stdout.write("\n")
            sys.stdout.flush()
        self._text = ""


def _read_message(term: Terminal) -> str | None:
    line = term.out.input("[bold green]>>> [/]")
    if line.strip() != '"""':
        return line
    lines = []
    while (more := term.out.input("... ")).strip() != '"""':
        lines.append(more)
    return "\n".join(lines)


def repl(loop: ToolLoop, messages: list[dict[str, Any]], term: Terminal) -> int:
    term.err.print(f"chatting with [bold]{escape(loop.model)}[/]; {escape(HELP)}")
    while True:
        try:
            text = _read_message(term)
        except (EOFError, KeyboardInterrupt):
            term.out.print()
            return 0
        if text is None or not text.strip():
            continue
        command, _, rest = text.strip().partition(" ")
        if command == "/bye":
            return 0
        if command == "/clear":
            del messages[1 if messages and messages[0]["role"] == "system" else 0 :]
            continue
        if command == "/model":
            loop.model = rest.strip() or loop.model
            term.err.print(f"model: {escape(loop.model)}")
            continue
        if command == "/tools":
            try:
                tools = loop.tools()
            except Exception as exc:  # a server that fails to start says why
                term.err.print(f"[red]{escape(reason(exc))}[/]")
                continue
            for name, tool in tools.items():
                term.err.print(f"  {escape(name)}: {escape(tool.description)}")
            if not tools:
                term.err.print("  no MCP tools (QUANTDESK_HOME/mcp.json, or --mcp FILE)")
            continue
        messages.append({"role": "user", "content": text})
        cancel = threading.Event()
        try:
            messages += loop.run(messages, term.callbacks(), cancel)
        except KeyboardInterrupt:
            cancel.set()
            term.err.print("[yellow](stopped)[/]")
        except (ChatError, McpError, httpx.HTTPError) as exc:
            term.err.print(f"[red]{escape(reason(exc))}[/]")
            messages.pop()
        finally:
            term.end_reply()
