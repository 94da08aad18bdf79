"""The chat window's tools without Qt (app/page_models/chat_tools.py, the worker's
run_tool_reply and the saved conversation): a reply that calls the word server, the
"always for this server" answer remembered, a server switched off, a bad mcp.json shown,
and the calls sent again with the next turn."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from app.page_models.chat_tools import ChatTools
from app.storage.chat_store import ChatMessage, Conversation
from app.workers.chat_stream import run_tool_reply
from backend.mcp_tools.mcp_hub import McpTool
from tests.server.conftest import LiveServer

MODEL = "SmolLM2-135M-Instruct"
ASK = [{"role": "user", "content": "Call the secret_word tool, then tell me the word."}]


def test_a_reply_with_tools_and_the_remembered_answer(
    tools_server: LiveServer, mcp_json: Path, word: tuple[str, Path]
) -> None:
    memory: dict[str, Any] = {}
    tools = ChatTools(memory, mcp_json)
    asked: list[McpTool] = []
    try:
        assert [(r.name, r.state, r.enabled) for r in tools.rows()] == [("words", "stopped", True)]

        def ask(tool: McpTool, _args: dict[str, Any]) -> Any:
            asked.append(tool)
            return "server"

        loop = tools.loop(tools_server.base_url, MODEL, None, ask, {"temperature": 0})
        assert loop is not None
        loop.tool_choice = "required"
        events: list[Any] = []
        meta = run_tool_reply(loop, ASK, events.append, threading.Event())
        calls = [value for kind, value in events if kind == "call"]
        text = "".join(value for kind, value in events if kind == "text")
        assert [c["tool"] for c in calls] == ["words__secret_word"]
        assert calls[0]["result"].endswith(f"{word[0]}.") and word[0] in text
        assert meta["tool_calls"] == 1 and meta["steps"][1]["role"] == "tool"
        assert memory["always_allow"] == ["words"]  # remembered in the settings
        row = tools.rows()[0]
        assert row.state == "ready" and "secret_word" in row.tools and row.always

        again = tools.loop(tools_server.base_url, MODEL, None, ask, {"temperature": 0})
        assert again is not None
        again.tool_choice = "required"
        run_tool_reply(again, ASK, lambda _e: None, threading.Event())
        assert len(asked) == 1  # the server's tools now run without asking

        tools.set_enabled("words", False)
        assert tools.loop(tools_server.base_url, MODEL, None, ask, {}) is None
        tools.new_chat()
        assert tools.rows()[0].enabled

        # the calls go back with the next turn, before the answer they led to
        conversation = Conversation(
            messages=[
                ChatMessage(role="user", content=ASK[0]["content"]),
                ChatMessage(role="assistant", content=text, steps=meta["steps"], calls=calls),
            ]
        )
        sent = conversation.api_messages()
        assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant"]
        assert sent[1]["tool_calls"][0]["function"]["name"] == "words__secret_word"
    finally:
        tools.close()


def test_a_bad_mcp_json_is_shown(tmp_path: Path) -> None:
    bad = tmp_path / "mcp.json"
    bad.write_text(json.dumps({"mcpServers": {"notes": {"args": []}}}), encoding="utf-8")
    tools = ChatTools({}, bad)
    assert tools.rows() == [] and tools.error is not None and '"notes"' in tools.error
    assert tools.loop("http://127.0.0.1:1", MODEL, None, lambda t, a: "once", {}) is None
    tools.close()
