"""DNS rebinding: on loopback, only local Host names (and --allowed-host ones) get in."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from backend.entrypoints.main import build_parser
from backend.server.app_factory import create_app
from backend.server.host_check import host_name
from backend.settings import EngineSettings, ServerSettings
from backend.settings.flags import settings_from_args
from tests.server.conftest import LiveServer

HTTP = httpx.Client(timeout=60.0)


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8080",
        "127.0.0.1.nip.io",
        "localhost.evil.example",
        "evil.localhost.example:80",
    ],
)
def test_a_forged_host_is_refused(live_server: LiveServer, host: str) -> None:
    for method, path in (("GET", "/v1/stats"), ("GET", "/v1/models"), ("POST", "/v1/completions")):
        r = HTTP.request(
            method,
            f"{live_server.base_url}{path}",
            headers={"Host": host},
            json={"prompt": "Hi", "max_tokens": 1},
        )
        assert r.status_code == 403, (host, path, r.text)
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert err["code"] == "host_not_allowed" and "--allowed-host" in err["message"]
        assert "SmolLM2" not in r.text


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:1234", "LocalHost:8080", "127.0.0.1", "127.0.0.1:8080", "[::1]:8080"],
)
def test_local_hosts_are_answered(live_server: LiveServer, host: str) -> None:
    r = HTTP.get(f"{live_server.base_url}/v1/models", headers={"Host": host})
    assert r.status_code == 200, r.text


def test_a_request_without_host_is_answered(live_server: LiveServer) -> None:
    """HTTP/1.0 needs no Host; rebinding needs a browser, and browsers always send one."""
    port = live_server.handle.port
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]


def _status(server: ServerSettings, host: str) -> int:
    """Status of GET /health through the app's middleware (no model loaded: 503 if let in)."""
    app = create_app(EngineSettings.model_validate({}), server)

    async def call() -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            r = await client.get("/health", headers={"Host": host})
            return r.status_code

    return asyncio.run(call())


def test_allowed_host_flag_lets_a_name_in() -> None:
    args = build_parser().parse_args(
        ["serve", "--allowed-host", "Box.Lan", "--allowed-host", "proxy.internal:8443"]
    )
    settings = settings_from_args(ServerSettings, args)
    assert settings.allowed_hosts == ["Box.Lan", "proxy.internal:8443"]
    assert _status(settings, "box.lan:8080") == 503
    assert _status(settings, "proxy.internal") == 503
    assert _status(settings, "evil.example") == 403


def test_no_host_check_off_loopback() -> None:
    """Bound to the network, clients use names we cannot know; the API key guards it."""
    settings = ServerSettings(host="0.0.0.0", api_key="k")
    assert _status(settings, "my-server.lan") == 503


def test_host_name_parsing() -> None:
    assert host_name("LOCALHOST:80") == "localhost"
    assert host_name("[::1]:8080") == "[::1]"
    assert host_name("::1") == "[::1]"
    assert host_name("example.com.") == "example.com"
    assert host_name("127.0.0.1:1") == "127.0.0.1"
