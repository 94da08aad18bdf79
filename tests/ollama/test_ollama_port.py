"""``--ollama-port``: a second loopback listener with the same routes and checks, and a
port that is taken (Ollama itself running) said plainly."""

from __future__ import annotations

import socket

import httpx
import ollama
import pytest

from backend.core.errors import ConfigError
from backend.server.runner import ServerHandle
from backend.settings import EngineSettings, ServerSettings
from tests.server.conftest import wait_healthy


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.model
def test_the_second_port_answers_ollama_clients_with_the_same_key() -> None:
    port = _free_port()
    settings = ServerSettings(port=0, ollama_port=port, api_key="secret")
    handle = ServerHandle(EngineSettings(ctx_size=2048, parallel=1, threads=2), settings)
    handle.start_thread()
    try:
        wait_healthy(handle.base_url)
        assert handle.ollama_port == port
        ollama_url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{ollama_url}/api/tags", timeout=10).status_code == 401
        keyed = ollama.Client(host=ollama_url, headers={"Authorization": "Bearer secret"})
        assert [m.model for m in keyed.list().models] == ["SmolLM2-135M-Instruct:latest"]
        answer = keyed.generate(
            model="SmolLM2-135M-Instruct", prompt="Hi", options={"num_predict": 2}
        )
        assert answer.done
        evil = {"Host": "evil.example"}
        bad_host = httpx.get(f"{ollama_url}/api/tags", headers=evil, timeout=10)
        assert bad_host.status_code == 403
    finally:
        handle.stop()


def test_a_taken_port_is_said_plainly() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"--ollama-port {port}: the port is taken"):
            ServerHandle(EngineSettings(), ServerSettings(port=0, ollama_port=port))
