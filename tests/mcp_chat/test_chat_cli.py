"""``quantdesk chat`` in a terminal's place: a one-shot question with the word server's
tools, forced to call one, answers with the word on stdout; a bad mcp.json is one line
naming the entry and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.server.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]


def _chat(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "backend.entrypoints.main", "chat", *args]
    return subprocess.run(
        argv, input=stdin, capture_output=True, text=True, timeout=300, cwd=ROOT, check=False
    )


def test_one_shot_with_a_forced_tool_call(
    tools_server: LiveServer, mcp_json: Path, word: tuple[str, Path]
) -> None:
    done = _chat(
        "--url", tools_server.base_url, "--mcp", str(mcp_json), "--yes",
        "--tool-choice", "required", "--temperature", "0", "--max-tokens", "60",
        "Call the secret_word tool, then tell me the secret word it returned.",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert word[0] in done.stdout  # the answer, on stdout
    assert "words__secret_word" in done.stderr  # the call, shown on stderr


def test_without_yes_and_no_terminal_the_call_is_denied(
    tools_server: LiveServer, mcp_json: Path, word: tuple[str, Path]
) -> None:
    done = _chat(
        "--url", tools_server.base_url, "--mcp", str(mcp_json), "--tool-choice", "required",
        "--max-tokens", "60", "What is the secret word?",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "denied words__secret_word" in done.stderr
    assert not word[1].exists() and word[0] not in done.stdout


def test_piped_text_and_a_bad_config(tools_server: LiveServer, tmp_path: Path) -> None:
    piped = _chat("--url", tools_server.base_url, "--no-tools", "--max-tokens", "8", "Summarise:",
                  stdin="The sea is blue and wide.")  # fmt: skip
    assert piped.returncode == 0 and piped.stdout.strip()
    bad = tmp_path / "mcp.json"
    bad.write_text(json.dumps({"mcpServers": {"notes": {"args": ["x"]}}}), encoding="utf-8")
    done = _chat("--url", tools_server.base_url, "--mcp", str(bad), "Hi")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("quantdesk: error: mcp.json: server")
    assert '"notes"' in done.stderr
