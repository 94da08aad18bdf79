"""Where ``quantdesk chat`` talks: the server at ``--url``, the one already running on the
default port, or a library server it starts for the chat (stopped when the chat ends)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from backend.core.errors import ConfigError

DEFAULT_URL = "http://127.0.0.1:8080"
START_TIMEOUT_S = 180.0


def healthy(url: str, api_key: str | None = None) -> bool:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        return httpx.get(f"{url}/health", headers=headers, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def chat_server(url: str | None, api_key: str | None) -> Iterator[str]:
    """The base URL to chat with; a server started here lives as long as the block."""
    if url is not None:
        if not healthy(url, api_key):
            raise ConfigError(f"no QuantDesk server answers at {url}")
        yield url
        return
    if healthy(DEFAULT_URL, api_key):
        yield DEFAULT_URL
        return
    with tempfile.TemporaryDirectory(prefix="qd-chat-") as tmp:
        port_file = Path(tmp) / "port"
        argv = [sys.executable, "-m", "backend.entrypoints.main", "serve", "--port", "0"]
        log = (Path(tmp) / "serve.log").open("w")
        proc = subprocess.Popen(
            [*argv, "--port-file", str(port_file)], stdout=log, stderr=subprocess.STDOUT
        )
        try:
            sys.stderr.write("starting a QuantDesk server for this chat...\n")
            yield _wait_started(proc, port_file)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            log.close()


def _wait_started(proc: subprocess.Popen[bytes], port_file: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ConfigError(f"the server for this chat exited with {proc.returncode}")
        if port_file.is_file() and (text := port_file.read_text().strip()):
            url = f"http://127.0.0.1:{text}"
            if healthy(url):
                return url
        time.sleep(0.1)
    raise ConfigError("the server for this chat did not start in time")


def pick_model(url: str, api_key: str | None, wanted: str | None) -> str:
    """``wanted``, or the served model (a loaded one of a library server, else its first)."""
    if wanted:
        return wanted
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    cards = httpx.get(f"{url}/v1/models", headers=headers, timeout=30).json().get("data", [])
    if not cards:
        raise ConfigError(f"the server at {url} serves no model")
    loaded = [c for c in cards if (c.get("status") or {}).get("value", "loaded") == "loaded"]
    return str((loaded or cards)[0]["id"])
