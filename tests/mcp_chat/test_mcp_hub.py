"""The MCP servers through the official SDK: a real stdio server and a real streamable
HTTP one; a call that hangs or a server that dies fails that call only."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.mcp_tools.mcp_config import McpServerSpec
from backend.mcp_tools.mcp_hub import McpError, McpHub
from tests.mcp_chat.conftest import stdio_entry


def _stdio(word: tuple[str, Path], name: str = "words") -> McpServerSpec:
    entry = stdio_entry(word)
    return McpServerSpec(name, str(entry["command"]), tuple(entry["args"]), dict(entry["env"]))  # type: ignore[arg-type,call-overload]


def test_a_stdio_server_starts_on_demand_and_its_tools_run(word: tuple[str, Path]) -> None:
    hub = McpHub([_stdio(word)], call_timeout_s=3)
    try:
        assert hub.state("words") == ("stopped", None)
        tools = {t.name: t for t in hub.ensure("words")}
        assert set(tools) == {"secret_word", "big_report", "hang", "crash"}
        assert hub.state("words")[0] == "ready"
        assert tools["secret_word"].openai_tool()["function"]["name"] == "words__secret_word"
        outcome = hub.call(tools["secret_word"], {})
        assert outcome.text == f"The secret word is {word[0]}." and not outcome.is_error

        hung = hub.call(tools["hang"], {})
        assert hung.is_error and "did not answer within 3 s" in hung.text
        assert hub.call(tools["secret_word"], {}).text.endswith(f"{word[0]}.")  # still there

        died = hub.call(tools["crash"], {})
        assert died.is_error
        again = hub.call(tools["secret_word"], {})  # started again for the next call
        assert again.text.endswith(f"{word[0]}.") or again.is_error
    finally:
        hub.close()
    assert hub.state("words")[0] in ("stopped", "failed")


def test_a_streamable_http_server(http_words: str, word: tuple[str, Path]) -> None:
    hub = McpHub([McpServerSpec("web", url=http_words)])
    try:
        tools = {t.name: t for t in hub.ensure("web")}
        assert hub.call(tools["secret_word"], {}).text == f"The secret word is {word[0]}."
    finally:
        hub.close()


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text(
        "import sys\nsys.stderr.write('no such database: notes.db\\n')\nsys.exit(2)\n"
    )
    hub = McpHub([McpServerSpec("bad", "python3", (str(script),))])
    try:
        with pytest.raises(McpError, match="bad failed") as info:
            hub.ensure("bad")
        state, error = hub.state("bad")
        assert state == "failed" and error is not None and "no such database" in error
        assert "no such database" in str(info.value)
    finally:
        hub.close()
