"""What a browser, or any client, may see: CORS for loopback origins, the model's path, /docs.

CORS and /docs need no model: they run against an app whose model never loads. The path in
``/v1/models`` needs a loaded model and a loopback client, so a real server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.requests import Request

from backend.server import auth
from backend.server.app_factory import create_app
from backend.settings import EngineSettings, ServerSettings
from backend.settings.flags import settings_from_args
from tests.server.conftest import LiveServer, start_server, wait_healthy
from tests.server.test_serve_cli import _parse_serve

KEY = "s3cret"
BEARER = {"Authorization": f"Bearer {KEY}"}
SDK_HEADERS = "authorization,content-type,x-stainless-os,x-stainless-lang,x-stainless-retry-count"
LOOPBACK_ORIGINS = (
    "http://localhost:3000",
    "http://localhost",
    "https://localhost:8443",
    "http://127.0.0.1:5173",
    "http://[::1]:8000",
)
FOREIGN_ORIGINS = (
    "http://evil.example",
    "http://localhost.evil.example:3000",
    "http://127.0.0.1.evil.example",
    "http://localhost:3000.evil.example",
    "null",
)


def offline_app(**server_kw: object) -> TestClient:
    """The app without its lifespan: the model never loads, which CORS and /docs need not."""
    app = create_app(EngineSettings.model_validate({}), ServerSettings.model_validate(server_kw))
    return TestClient(app, base_url="http://127.0.0.1:8080")


def preflight(client: TestClient, origin: str, path: str = "/v1/chat/completions") -> Any:
    return client.options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": SDK_HEADERS,
        },
    )


# --- CORS ---


@pytest.mark.parametrize("origin", LOOPBACK_ORIGINS)
def test_a_loopback_origin_passes_the_preflight_without_any_flag(origin: str) -> None:
    """A web app on localhost:3000 needs no --cors-origin (as with Ollama); it used to get 405."""
    r = preflight(offline_app(), origin)
    assert r.status_code == 200, r.text
    assert r.headers["access-control-allow-origin"] == origin
    assert "x-stainless-os" in r.headers["access-control-allow-headers"].lower()


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
def test_a_foreign_origin_is_refused_unless_configured(origin: str) -> None:
    client = offline_app()
    r = preflight(client, origin)
    assert r.status_code != 200
    assert "access-control-allow-origin" not in r.headers
    simple = client.get("/health", headers={"Origin": origin})
    assert "access-control-allow-origin" not in simple.headers


def test_cors_origin_flag_adds_origins_and_star_allows_any() -> None:
    client = offline_app(cors_origins=["https://my.app"])
    assert preflight(client, "https://my.app").headers["access-control-allow-origin"] == (
        "https://my.app"
    )
    assert preflight(client, "http://localhost:3000").status_code == 200  # loopback still
    assert "access-control-allow-origin" not in preflight(client, "http://evil.example").headers
    anyone = preflight(offline_app(cors_origins=["*"]), "http://evil.example")
    assert anyone.status_code == 200 and anyone.headers["access-control-allow-origin"] == "*"


def test_llama_servers_cors_origins_list_and_localhost_keyword() -> None:
    """``--cors-origins a,b`` (llama-server's spelling) allows both; its ``localhost``
    keyword means loopback origins only, which this server allows anyway."""
    args = _parse_serve(
        ["--cors-origins", "https://a.app,https://b.app", "--cors-origin", "localhost"]
    )
    settings = settings_from_args(ServerSettings, args)
    assert settings.cors_origins == ["https://a.app", "https://b.app"]
    client = offline_app(**settings.model_dump())
    for origin in ("https://a.app", "https://b.app", "http://localhost:3000"):
        assert preflight(client, origin).headers["access-control-allow-origin"] == origin
    assert preflight(client, "https://c.app").status_code == 403
    loopback_only = settings_from_args(
        ServerSettings, _parse_serve(["--cors-origins", "localhost"])
    )
    assert loopback_only == ServerSettings()


def test_a_refused_preflight_is_a_json_error_in_the_dialects_shape() -> None:
    """A foreign origin's preflight gets a 403 whose body says why, as JSON: Anthropic's
    shape under /v1/messages, OpenAI's elsewhere (Starlette's own refusal is plain text)."""
    client = offline_app()
    r = preflight(client, "http://evil.example", "/v1/messages")
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == "permission_error"
    assert "origin" in body["error"]["message"] and "--cors-origin" in body["error"]["message"]
    r = preflight(client, "http://evil.example")
    assert r.status_code == 403 and r.json()["error"]["code"] == "cors_refused"
    assert set(r.json()) == {"error"}
    assert preflight(client, "http://localhost:3000", "/v1/messages").status_code == 200


def test_refusals_carry_cors_headers_so_the_page_can_read_them() -> None:
    """A 413 (body limit), 401 (key) or 503 (loading) reaches the page, not a 'CORS error'."""
    origin = {"Origin": "http://localhost:3000"}
    client = offline_app(api_key=KEY, max_body_bytes=1024)
    too_big = client.post("/v1/completions", content=b"x" * 2048, headers=origin)
    assert too_big.status_code == 413
    no_key = client.get("/v1/models", headers=origin)
    assert no_key.status_code == 401
    loading = client.get("/v1/models", headers=origin | BEARER)
    assert loading.status_code == 503
    for r in (too_big, no_key, loading):
        assert r.headers["access-control-allow-origin"] == "http://localhost:3000"


def test_a_real_server_answers_a_localhost_preflight(live_server: LiveServer) -> None:
    """The test server was started with --cors-origin http://allowed.example: both pass."""
    for origin in ("http://localhost:3000", "http://allowed.example"):
        r = httpx.options(
            f"{live_server.base_url}/v1/chat/completions",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": SDK_HEADERS,
            },
            timeout=30,
        )
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == origin


# --- /docs, /redoc, /openapi.json ---

DOC_PATHS = ("/docs", "/redoc", "/openapi.json")


def test_docs_need_the_key_when_one_is_set() -> None:
    client = offline_app(api_key=KEY)
    for path in DOC_PATHS:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = client.get(path, headers=headers)
            assert r.status_code == 401, path
            assert r.json()["error"]["code"] == "invalid_api_key"
    schema = client.get("/openapi.json", headers=BEARER)
    assert schema.status_code == 200 and "/v1/chat/completions" in schema.json()["paths"]
    for path in ("/docs", "/redoc"):
        page = client.get(path, headers=BEARER)
        assert page.status_code == 200 and "/openapi.json" in page.text


def test_docs_stay_open_on_a_keyless_server() -> None:
    client = offline_app()
    for path in DOC_PATHS:
        assert client.get(path).status_code == 200, path
    assert "/v1/models" in client.get("/openapi.json").json()["paths"]


# --- the model's path in /v1/models ---


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[LiveServer]:
    server = start_server(api_key=KEY, ctx_size=512, parallel=1)
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()


def _meta(base_url: str, headers: dict[str, str] | None = None) -> list[dict[str, object]]:
    listing = httpx.get(f"{base_url}/v1/models", headers=headers, timeout=30)
    listing.raise_for_status()
    card = listing.json()["data"][0]
    one = httpx.get(f"{base_url}/v1/models/{card['id']}", headers=headers, timeout=30)
    one.raise_for_status()
    return [card["meta"], one.json()["meta"]]


def test_a_keyless_server_shows_the_file_name_only(live_server: LiveServer) -> None:
    for meta in _meta(live_server.base_url):
        path = str(meta["path"])
        assert path.endswith(".gguf") and path == Path(path).name, path
        assert str(Path.home()) not in str(meta)


def test_the_full_path_needs_the_key_and_a_loopback_client(keyed_server: LiveServer) -> None:
    for meta in _meta(keyed_server.base_url, BEARER):  # the test client is on loopback
        full = Path(str(meta["path"]))
        assert full.is_absolute() and full.is_file(), full
    for path in ("/v1/models", "/v1/stats"):
        assert httpx.get(f"{keyed_server.base_url}{path}", timeout=30).status_code == 401


def _request(client_host: str, headers: dict[str, str], key: str | None) -> Request:
    settings = ServerSettings.model_validate({"api_key": key})
    app = create_app(EngineSettings.model_validate({}), settings)
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope = {"type": "http", "app": app, "client": (client_host, 50000), "headers": raw}
    return Request(scope)


def test_shows_local_paths_only_to_a_loopback_client_with_the_key() -> None:
    assert auth.shows_local_paths(_request("127.0.0.1", BEARER, KEY))
    assert auth.shows_local_paths(_request("::1", BEARER, KEY))
    assert not auth.shows_local_paths(_request("192.168.1.20", BEARER, KEY))  # remote, even keyed
    assert not auth.shows_local_paths(_request("127.0.0.1", {}, KEY))
    assert not auth.shows_local_paths(_request("127.0.0.1", {}, None))  # no key: anyone local
    assert not auth.shows_local_paths(_request("127.0.0.1", BEARER, None))
