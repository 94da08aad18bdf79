"""Errors under /v1/messages in Anthropic's shape, ``{"type": "error", "error": {"type",
"message"}}``, with their statuses; the anthropic SDK raises its matching exceptions. Keys
are taken as ``x-api-key`` (ANTHROPIC_API_KEY) and as a bearer token (ANTHROPIC_AUTH_TOKEN).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from tests.server.conftest import LiveServer, start_server, wait_healthy
from tests.server.test_anthropic_messages import TIMEOUT, client

KEY = "sk-anthropic-test"
MODEL = "SmolLM2-135M-Instruct"
HI = [{"role": "user", "content": "hi"}]


def post(server: LiveServer, body: Any, path: str = "/v1/messages", **kw: Any) -> httpx.Response:
    return httpx.post(f"{server.base_url}{path}", json=body, timeout=TIMEOUT, **kw)


def anthropic_error(r: httpx.Response, status: int, type_: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"type", "error"} and body["type"] == "error"
    assert set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == type_
    assert body["error"]["message"]
    return str(body["error"]["message"])


@pytest.mark.parametrize(
    "body",
    [
        {"max_tokens": 8},  # no messages
        {"max_tokens": 8, "messages": []},
        {"messages": HI},  # no max_tokens
        {"max_tokens": 0, "messages": HI},
        {"max_tokens": 8, "messages": [{"role": "tool", "content": "x"}]},
        {"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "video"}]}]},
        {"max_tokens": 8, "messages": HI, "temperature": 1.5},
        {"max_tokens": 8, "messages": HI, "tool_choice": {"type": "tool"}},
        {"max_tokens": 8, "messages": HI, "stop_sequences": ["x"] * 17},
    ],
)
def test_invalid_requests_are_400(live_server: LiveServer, body: dict[str, Any]) -> None:
    anthropic_error(post(live_server, body), 400, "invalid_request_error")


def test_bad_json_and_wrong_method(live_server: LiveServer) -> None:
    r = httpx.post(
        f"{live_server.base_url}/v1/messages",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
        timeout=TIMEOUT,
    )
    anthropic_error(r, 400, "invalid_request_error")
    r = httpx.get(f"{live_server.base_url}/v1/messages", timeout=TIMEOUT)
    anthropic_error(r, 405, "invalid_request_error")


def test_other_routes_keep_openais_shape(live_server: LiveServer) -> None:
    r = post(live_server, {"messages": []}, "/v1/chat/completions")
    assert r.status_code == 400 and set(r.json()) == {"error"}


def test_images_are_a_clear_400(live_server: LiveServer) -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
    }
    content = [image, {"type": "text", "text": "What is this?"}]
    with pytest.raises(anthropic.BadRequestError) as info:
        client(live_server).messages.create(
            model=MODEL,
            max_tokens=8,
            messages=[{"role": "user", "content": content}],
        )
    message = info.value.body["error"]["message"]
    assert "messages[0].content[0]" in message and "text only" in message
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [image]}
    r = post(
        live_server,
        {"messages": [{"role": "user", "content": [result]}]},
        "/v1/messages/count_tokens",
    )
    assert "image" in anthropic_error(r, 400, "invalid_request_error")


def test_context_overflow_says_prompt_is_too_long(live_server: LiveServer) -> None:
    """Anthropic's words for a prompt past the context; the numbers are ours (a slot holds
    16,384 / 8 tokens)."""
    long = [{"role": "user", "content": "word " * 5000}]
    for path, body in (
        ("/v1/messages", {"max_tokens": 8, "messages": long}),
        ("/v1/messages", {"max_tokens": 8, "messages": long, "stream": True}),
        ("/v1/messages/count_tokens", {"messages": long}),
    ):
        message = anthropic_error(post(live_server, body, path), 400, "invalid_request_error")
        assert message.startswith("prompt is too long") and "2048" in message
    with pytest.raises(anthropic.BadRequestError):
        client(live_server).messages.create(model=MODEL, max_tokens=8, messages=long)


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[LiveServer]:
    server = start_server(api_key=KEY, ctx_size=1024, parallel=1)
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()


def test_keys_as_x_api_key_or_bearer(keyed_server: LiveServer) -> None:
    url = keyed_server.base_url
    for sdk in (
        anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0),  # x-api-key
        anthropic.Anthropic(base_url=url, auth_token=KEY, max_retries=0),  # Bearer
    ):
        message = sdk.messages.create(model=MODEL, max_tokens=2, messages=HI)
        assert message.usage.output_tokens > 0
        assert sdk.messages.count_tokens(model=MODEL, messages=HI).input_tokens > 0
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=url, api_key="wrong", max_retries=0).messages.create(
            model=MODEL,
            max_tokens=2,
            messages=HI,
        )
    r = post(keyed_server, {"max_tokens": 2, "messages": HI})
    anthropic_error(r, 401, "authentication_error")
    # x-api-key opens the OpenAI routes too; their errors keep OpenAI's shape
    r = post(keyed_server, {"messages": HI, "max_tokens": 1}, "/v1/chat/completions")
    assert r.status_code == 401 and set(r.json()) == {"error"}
    r = post(
        keyed_server,
        {"messages": HI, "max_tokens": 1},
        "/v1/chat/completions",
        headers={"x-api-key": KEY},
    )
    assert r.status_code == 200, r.text


def test_anthropic_headers_and_query_are_accepted(keyed_server: LiveServer) -> None:
    headers = {
        "x-api-key": KEY,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
    }
    r = post(
        keyed_server, {"max_tokens": 2, "messages": HI}, "/v1/messages?beta=true", headers=headers
    )
    assert r.status_code == 200, r.text
    assert r.json()["type"] == "message"
    r = post(keyed_server, {"messages": HI}, "/v1/messages/count_tokens?beta=true", headers=headers)
    assert r.status_code == 200 and r.json()["input_tokens"] > 0


def test_edge_errors_are_anthropic_shaped(live_server: LiveServer) -> None:
    """The answers made before any route, the body limit's 413 and the Host check's 403,
    are Anthropic's shape under /v1/messages (the SDK raises its own exceptions for them)
    and stay OpenAI's elsewhere."""
    big = {"max_tokens": 2, "messages": [{"role": "user", "content": "x" * (9 * 1024 * 1024)}]}
    for path in ("/v1/messages", "/v1/messages/count_tokens?beta=true"):
        message = anthropic_error(post(live_server, big, path), 413, "request_too_large")
        assert "--max-body-bytes" in message
        evil = {"Host": "evil.test"}
        r = post(live_server, {"max_tokens": 2, "messages": HI}, path, headers=evil)
        assert "--allowed-host" in anthropic_error(r, 403, "permission_error")
    r = post(live_server, {"prompt": "x" * (9 * 1024 * 1024)}, "/v1/completions")
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    r = post(live_server, {"prompt": "Hi"}, "/v1/completions", headers={"Host": "evil.test"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "host_not_allowed"
    sdk = anthropic.Anthropic(
        base_url=live_server.base_url,
        api_key="x",
        max_retries=0,
        default_headers={"Host": "evil.test"},
    )
    with pytest.raises(anthropic.PermissionDeniedError) as info:
        sdk.messages.create(model=MODEL, max_tokens=2, messages=HI)  # type: ignore[arg-type]
    assert info.value.body is not None and "--allowed-host" in str(info.value.body)
    with pytest.raises(anthropic.APIStatusError) as too_large:
        client(live_server).messages.create(
            model=MODEL,
            max_tokens=2,
            messages=big["messages"],  # type: ignore[arg-type]
        )
    assert too_large.value.status_code == 413
    assert isinstance(too_large.value.body, dict)
    assert too_large.value.body["error"]["type"] == "request_too_large"
