"""``quantdesk chat`` in a terminal's place: a one-shot question with the word server's
tools, forced to call one, answers with the word on stdout; a bad mcp.json is one line
naming the entry and a non-zero exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_interactive_in_a_terminal(tools_server: LiveServer, mcp_json: Path) -> None:
    """In a pseudo-terminal: the commands, a reply rendered as it streams, and /bye."""
    import pty
    import select
    import time

    argv = [sys.executable, "-m", "backend.entrypoints.main", "chat", "--url",
            tools_server.base_url, "--mcp", str(mcp_json), "--max-tokens", "12"]  # fmt: skip
    pid, fd = pty.fork()
    if pid == 0:  # the child: the chat, on the terminal's side
        os.chdir(ROOT)
        os.execv(sys.executable, argv)
    seen = b""

    def read_until(marker: bytes, after: int = 0, timeout: float = 120) -> int:
        """Read until ``marker`` appears past ``after``; where it ends."""
        nonlocal seen
        deadline = time.monotonic() + timeout
        while marker not in seen[after:] and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    break
        assert marker in seen[after:], seen.decode(errors="replace")[-2000:]
        return seen.index(marker, after) + len(marker)

    read_until(b">>> ")
    os.write(fd, b"/tools\r")
    read_until(b"words__secret_word")
    os.write(fd, b"/model SmolLM2-135M-Instruct\r")
    read_until(b"model: SmolLM2-135M-Instruct")
    os.write(fd, b"Say hello.\r")
    start = read_until(b"Say hello.")  # the terminal's echo of the typed line
    shown = read_until(b"\x1b[?25h", start)  # the reply drawn live (its cursor back)
    assert len(seen[start:shown]) > 40
    read_until(b">>> ", shown)  # and the prompt again
    os.write(fd, b"/bye\r")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.WEXITSTATUS(status) == 0


@pytest.mark.model
def test_without_a_server_it_starts_one(tmp_path: Path) -> None:
    """No --url and nothing on :8080 (or a QuantDesk server there, which it then uses)."""
    env = {**os.environ, "QUANTDESK_HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "backend.entrypoints.main", "chat", "--no-tools"]
    done = subprocess.run(
        [*argv, "--max-tokens", "4", "Hi"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_what_tools_say_is_shown_as_text_not_markup() -> None:
    """A result or a name with rich's markup in it (``[/x]`` would raise) prints as is."""
    import io

    from rich.console import Console

    from backend.entrypoints.chat_repl import Terminal
    from backend.mcp_tools.tool_loop import ToolCallRecord

    out = io.StringIO()
    term = Terminal(err=Console(file=out, width=200))
    term.callbacks().on_call(ToolCallRecord("x__[b]y", {"q": "[/x]"}, result="[/bold] [red]ok"))
    term.callbacks().on_reasoning("[/think]")
    text = out.getvalue()
    assert "x__[b]y" in text and '"[/x]"' in text and "[/bold] [red]ok" in text
    assert "[/think]" in text
