"""A server on the embedded SmolLM2 with a template that renders tools, the word MCP
server (stdio and streamable HTTP) and an mcp.json naming them."""

from __future__ import annotations

import json
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from tests.ollama.conftest import TOOLS_TEMPLATE, templated_server
from tests.server.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="package")
def tools_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from templated_server(tmp_path_factory, TOOLS_TEMPLATE, ctx_size=8192, parallel=2)


@pytest.fixture
def word(tmp_path: Path) -> tuple[str, Path]:
    """A word no model can guess, and the file the server notes each call in."""
    return "qx" + secrets.token_hex(3), tmp_path / "calls.txt"


def stdio_entry(word: tuple[str, Path]) -> dict[str, object]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.mcp_chat.word_server"],
        "env": {"WORD": word[0], "WORD_CALLS": str(word[1]), "PYTHONPATH": str(ROOT)},
    }


@pytest.fixture
def mcp_json(tmp_path: Path, word: tuple[str, Path]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"words": stdio_entry(word)}}), encoding="utf-8")
    return path


@pytest.fixture
def http_words(word: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The word server over streamable HTTP, in this process."""
    monkeypatch.setenv("WORD", word[0])
    from tests.mcp_chat.word_server import http_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(http_app(), host="127.0.0.1", port=port, log_level="warning")  # type: ignore[arg-type]
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(timeout=10)
