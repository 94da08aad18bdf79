"""``quantdesk chat``: chat from a terminal, with the MCP tools of ``mcp.json``.

    quantdesk chat                         # interactive: /tools, /model NAME, /clear, /bye
    quantdesk chat "Summarise this" < notes.txt   # one shot: the answer on stdout
    quantdesk chat --mcp mcp.json --yes --tool-choice required "What is the secret word?"

Tool calls ask before they run (y: once, a: always for that tool, n: deny) unless
``--yes``; a one-shot chat without a terminal to ask on denies them. Calls and their
results are shown on stderr, the answer on stdout (Markdown rendered on a terminal).
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from pathlib import Path
from typing import Any

import httpx

from backend.core.errors import ConfigError
from backend.entrypoints.chat_repl import Terminal, repl
from backend.entrypoints.chat_server import chat_server, pick_model
from backend.mcp_tools.chat_stream import ChatError
from backend.mcp_tools.mcp_config import default_mcp_path, load_mcp_config
from backend.mcp_tools.mcp_hub import McpError, McpHub, reason
from backend.mcp_tools.tool_loop import LoopCallbacks, ToolLoop


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "chat",
        help="chat from the terminal, with MCP tools",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("prompt", nargs="?", help="one question: answer it and exit (stdin adds to it)")
    p.add_argument("-m", "--model", help="the model (default: the served one)")
    p.add_argument("--system", help="a system prompt")
    p.add_argument("--url", help="the server (default: one on :8080, or one started here)")
    p.add_argument("--api-key", help="the server's key (default: $QUANTDESK_API_KEY)")
    p.add_argument("--mcp", type=Path, help="an mcp.json (default: QUANTDESK_HOME/mcp.json)")
    p.add_argument("--no-tools", action="store_true", help="no MCP servers for this chat")
    p.add_argument("--yes", action="store_true", help="run every tool call without asking")
    p.add_argument(
        "--tool-choice",
        choices=("auto", "required"),
        default="auto",
        help="required: the first step must call a tool (scripts, tests)",
    )
    p.add_argument("--max-tokens", type=int, default=None, help="the most tokens a reply has")
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature")
    p.set_defaults(handler=run)


def _hub(args: argparse.Namespace) -> McpHub | None:
    if args.no_tools:
        return None
    path = args.mcp or default_mcp_path()
    if args.mcp is not None and not path.is_file():
        raise ConfigError(f"--mcp {path}: no such file")
    specs = load_mcp_config(path)
    return McpHub(specs) if specs else None


def run(args: argparse.Namespace) -> int:
    import os

    api_key = args.api_key or os.environ.get("QUANTDESK_API_KEY") or None
    for noisy in ("httpx", "mcp"):  # a line per request would bury the chat
        logging.getLogger(noisy).setLevel(logging.WARNING)
    hub = _hub(args)
    try:
        with chat_server(args.url, api_key) as url:
            term = Terminal(assume_yes=args.yes)
            asked = (("max_tokens", args.max_tokens), ("temperature", args.temperature))
            sampling = {k: v for k, v in asked if v is not None}
            loop = ToolLoop(
                url,
                pick_model(url, api_key, args.model),
                hub,
                term.approve,
                api_key=api_key,
                tool_choice=None if args.tool_choice == "auto" else args.tool_choice,
                sampling=sampling,
            )
            messages = [{"role": "system", "content": args.system}] if args.system else []
            if args.prompt is None and sys.stdin.isatty():
                return repl(loop, messages, term)
            return _one_shot(loop, messages, term, args.prompt or "")
    except (ChatError, McpError, httpx.HTTPError) as exc:
        sys.stderr.write(f"quantdesk chat: {reason(exc)}\n")
        return 1
    finally:
        if hub is not None:
            hub.close()


def _one_shot(loop: ToolLoop, messages: list[dict[str, Any]], term: Terminal, prompt: str) -> int:
    piped = "" if sys.stdin.isatty() else sys.stdin.read()
    text = "\n\n".join(part for part in (prompt, piped) if part.strip())
    if not text:
        raise ConfigError("nothing to ask: give a prompt or pipe text in")
    messages.append({"role": "user", "content": text})
    cancel = threading.Event()
    try:
        loop.run(messages, term.callbacks(), cancel)
    except KeyboardInterrupt:
        cancel.set()
        return 130
    finally:
        term.end_reply()
    return 0


__all__ = ["LoopCallbacks", "register", "run"]
