"""A real QuantDesk server on the embedded SmolLM2, in-process on a free loopback port."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from backend.server.runner import ServerHandle
from backend.settings import EngineSettings, ServerSettings


@dataclass
class LiveServer:
    handle: ServerHandle
    base_url: str
    api_key: str | None

    def client(self, **kwargs: object) -> OpenAI:
        return OpenAI(
            base_url=f"{self.base_url}/v1",
            api_key=self.api_key or "unused",
            max_retries=0,
            **kwargs,
        )  # type: ignore[arg-type]

    def stats(self) -> dict:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        r = httpx.get(f"{self.base_url}/v1/stats", headers=headers, timeout=10)
        r.raise_for_status()
        return r.json()


def wait_healthy(base_url: str, timeout: float = 120.0) -> list[int]:
    """Poll /health until 200; return the statuses seen."""
    seen: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status = httpx.get(f"{base_url}/health", timeout=5).status_code
            seen.append(status)
            if status == 200:
                return seen
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"server at {base_url} not healthy; saw {seen[-5:]}")


def child_base_url(proc: subprocess.Popen[str], port_file: Path, timeout: float = 120.0) -> str:
    """Wait for a ``quantdesk serve --port-file`` child to write its port; its base URL."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not port_file.exists() and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None and port_file.exists(), f"serve exited with {proc.returncode}"
    return f"http://127.0.0.1:{port_file.read_text().strip()}"


@contextmanager
def served_child(model: Path, folder: Path) -> Iterator[str]:
    """``quantdesk serve -m model`` as a child process (one thread, a free port); its base
    URL once healthy. Leaving checks that no test took it down, then stops it."""
    port_file = folder / "port"
    log_path = folder / "serve.log"
    command = [sys.executable, "-m", "backend.entrypoints.main", "serve", "-m", str(model)]
    command += ["--port", "0", "--port-file", str(port_file), "-t", "1"]
    with log_path.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        base = child_base_url(proc, port_file)
        wait_healthy(base)
        yield base
        assert proc.poll() is None, log_path.read_text()  # no test took it down
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def start_server(api_key: str | None = None, **engine_kw: object) -> LiveServer:
    # the default layout, a KV stream per slot: 8 slots of 2,048 cells
    engine_defaults: dict[str, object] = {"ctx_size": 16384, "parallel": 8, "threads": 2, "seed": 1}
    engine_defaults.update(engine_kw)
    engine = EngineSettings(**engine_defaults)  # type: ignore[arg-type]
    server = ServerSettings(
        host="127.0.0.1",
        port=0,
        api_key=api_key,
        cors_origins=["http://allowed.example"],
        max_tokens_limit=512,
        max_body_bytes=8 * 1024 * 1024,  # the limit tests send 9 MiB, not the default's 64+
    )
    handle = ServerHandle(engine, server)
    handle.start_thread()
    return LiveServer(handle, handle.base_url, api_key)


def serving(engine: EngineSettings, server: ServerSettings) -> Iterator[LiveServer]:
    """A fixture's body: a server on these settings, healthy, stopped afterwards."""
    handle = ServerHandle(engine, server)
    handle.start_thread()
    live = LiveServer(handle, handle.base_url, server.api_key)
    try:
        wait_healthy(live.base_url)
        yield live
    finally:
        handle.stop()


@pytest.fixture(scope="package")
def live_server() -> Iterator[LiveServer]:
    server = start_server()
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()


SLOTS = 4
SLOT_CELLS = 2048


@pytest.fixture(scope="package")
def slot_server() -> Iterator[LiveServer]:
    """A server with a KV stream per slot (the default layout)."""
    server = start_server(ctx_size=SLOTS * SLOT_CELLS, parallel=SLOTS)
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()


@pytest.fixture(params=["unified", "per-slot"])
def either_kv_server(request: pytest.FixtureRequest) -> LiveServer:
    """The same test against the unified-KV server and the per-slot one."""
    name = "live_server" if request.param == "unified" else "slot_server"
    server: LiveServer = request.getfixturevalue(name)
    return server
