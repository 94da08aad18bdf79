"""The tool loop against the served model and the word server: a forced call brings the
word the model cannot guess into its answer; a denied call does not run and the model is
told; a huge result is cut; a model without tools says so at once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from backend.mcp_tools.chat_stream import ChatError
from backend.mcp_tools.mcp_config import load_mcp_config
from backend.mcp_tools.mcp_hub import McpHub, McpTool
from backend.mcp_tools.tool_loop import DENIED, LoopCallbacks, ToolCallRecord, ToolLoop
from tests.server.conftest import LiveServer, live_server  # noqa: F401

MODEL = "SmolLM2-135M-Instruct"
ASK = "Call the secret_word tool, then tell me the secret word it returned."
GREEDY = {"temperature": 0, "seed": 1, "max_tokens": 60}


def _loop(server: LiveServer, hub: McpHub, approve: Any, **kw: Any) -> ToolLoop:
    return ToolLoop(server.base_url, MODEL, hub, approve, sampling=GREEDY, **kw)


def _run(loop: ToolLoop, text: str = ASK) -> tuple[list[dict[str, Any]], list[ToolCallRecord]]:
    calls: list[ToolCallRecord] = []
    added = loop.run(
        [{"role": "user", "content": text}], LoopCallbacks(on_call=calls.append), threading.Event()
    )
    return added, calls


def test_a_forced_call_brings_the_word_into_the_answer(
    tools_server: LiveServer, mcp_json: Path, word: tuple[str, Path]
) -> None:
    hub = McpHub(load_mcp_config(mcp_json))
    asked: list[str] = []
    try:
        loop = _loop(tools_server, hub, lambda t, a: asked.append(t.name) or "once",
                     tool_choice="required", servers=["words"])  # fmt: skip
        added, calls = _run(loop)
    finally:
        hub.close()
    assert asked == ["secret_word"]
    assert [c.tool for c in calls] == ["words__secret_word"]
    assert calls[0].result == f"The secret word is {word[0]}." and not calls[0].denied
    assert added[1] == {"role": "tool", "tool_call_id": added[0]["tool_calls"][0]["id"],
                        "content": calls[0].result}  # fmt: skip
    assert word[0] in (added[-1]["content"] or "")  # the model read the result
    assert word[1].read_text().count("secret_word") == 1


def test_a_denied_call_does_not_run_and_the_model_is_told(
    tools_server: LiveServer, mcp_json: Path, word: tuple[str, Path]
) -> None:
    hub = McpHub(load_mcp_config(mcp_json))
    try:
        added, calls = _run(_loop(tools_server, hub, lambda t, a: "deny", tool_choice="required"))
    finally:
        hub.close()
    assert calls and all(c.denied for c in calls)
    assert not word[1].exists()  # the tool never ran
    assert added[1]["role"] == "tool" and added[1]["content"] == DENIED
    assert word[0] not in json.dumps(added)


def test_always_allows_that_tool_for_the_rest_of_the_chat(
    tools_server: LiveServer, mcp_json: Path, word: tuple[str, Path]
) -> None:
    hub = McpHub(load_mcp_config(mcp_json))
    asked: list[McpTool] = []
    try:
        loop = _loop(tools_server, hub, lambda t, a: asked.append(t) or "always",
                     tool_choice="required")  # fmt: skip
        _run(loop)
        _run(loop)
    finally:
        hub.close()
    assert len(asked) == 1 and word[1].read_text().count("secret_word") == 2


def test_a_huge_result_is_cut_with_a_note(tools_server: LiveServer, mcp_json: Path) -> None:
    hub = McpHub(load_mcp_config(mcp_json))
    try:
        loop = _loop(tools_server, hub, lambda t, a: "once", result_chars=2000,
                     tool_choice={"type": "function", "function": {"name": "words__big_report"}})  # type: ignore[arg-type]  # fmt: skip
        added, calls = _run(loop, "Show me the report.")
    finally:
        hub.close()
    assert calls[0].tool == "words__big_report"
    assert (
        len(calls[0].result) < 2200
        and "[cut: the tool returned 380,000 characters" in calls[0].result
    )
    assert added[1]["content"] == calls[0].result


def test_a_model_without_tools_says_so_at_once(
    live_server: LiveServer,  # noqa: F811
    mcp_json: Path,
) -> None:
    hub = McpHub(load_mcp_config(mcp_json))
    try:
        with pytest.raises(ChatError, match="does not take tools"):
            _run(_loop(live_server, hub, lambda t, a: "once"))
    finally:
        hub.close()


def test_the_step_limit_and_cancel(tools_server: LiveServer, mcp_json: Path) -> None:
    hub = McpHub(load_mcp_config(mcp_json))
    try:
        limited = _loop(tools_server, hub, lambda t, a: "once", tool_choice="required",
                        max_steps=1)  # fmt: skip
        added, calls = _run(limited)
        assert len(calls) == 1 and added[-1] == {
            "role": "assistant",
            "content": "(stopped after 1 tool steps)",
        }
        cancel = threading.Event()
        stopped = _loop(tools_server, hub, lambda t, a: "once", tool_choice="required")
        after: list[ToolCallRecord] = []

        def on_call(record: ToolCallRecord) -> None:
            after.append(record)
            cancel.set()  # the user stops the reply while the first call runs

        added = stopped.run(
            [{"role": "user", "content": ASK}], LoopCallbacks(on_call=on_call), cancel
        )
        assert len(after) == 1 and [m["role"] for m in added] == ["assistant", "tool"]
    finally:
        hub.close()
