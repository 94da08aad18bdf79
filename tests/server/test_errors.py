"""Every error answers in OpenAI's shape with the documented status."""

from __future__ import annotations

import httpx
import pytest

from backend.server.errors import ApiError
from backend.server.generation import route_model
from tests.server.conftest import LiveServer, start_server, wait_healthy

HTTP = httpx.Client(timeout=120.0)


def _assert_openai_error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["message"]
    return err


def test_bad_json_is_400(live_server: LiveServer) -> None:
    r = HTTP.post(
        f"{live_server.base_url}/v1/chat/completions",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    _assert_openai_error(r, 400)


def test_bad_parameter_is_400(live_server: LiveServer) -> None:
    r = HTTP.post(
        f"{live_server.base_url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "temperature": 7},
    )
    err = _assert_openai_error(r, 400)
    assert err["param"] == "temperature"
    r = HTTP.post(f"{live_server.base_url}/v1/chat/completions", json={"messages": []})
    _assert_openai_error(r, 400)


def test_context_overflow_is_400_and_names_the_numbers(live_server: LiveServer) -> None:
    r = HTTP.post(
        f"{live_server.base_url}/v1/completions", json={"prompt": "word " * 5000, "max_tokens": 10}
    )
    err = _assert_openai_error(r, 400)
    assert err["code"] == "context_length_exceeded"
    assert "2048" in err["message"]  # a slot's stream: 16384 / 8
    # max_tokens past the room left is cut to it: the answer ends when the context is full
    r = HTTP.post(
        f"{live_server.base_url}/v1/completions",
        json={"prompt": "word " * 1990, "max_tokens": 500, "ignore_eos": True},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"] == 2048


def test_any_model_name_reaches_the_one_served_model(live_server: LiveServer) -> None:
    """Plugins ship preset names (gpt-4o, gpt-17): with one model served, llama-server and
    QuantDesk answer with it; the reply names the model that answered."""
    r = live_server.client().chat.completions.create(
        model="gpt-17", messages=[{"role": "user", "content": "hi"}], max_tokens=2
    )
    assert r.model == "SmolLM2-135M-Instruct"


def test_with_several_models_an_unknown_name_is_a_404_listing_them() -> None:
    served = {"chat-model": {"chat-model"}, "embedder": {"embedder", "embedder.gguf"}}
    assert route_model(served, "EMBEDDER.gguf") == "embedder"
    assert route_model(served, None) == "chat-model"
    with pytest.raises(ApiError) as info:
        route_model(served, "gpt-4o")
    assert info.value.status == 404 and info.value.code == "model_not_found"
    assert "chat-model, embedder" in info.value.message
    assert route_model({"only": {"only"}}, "gpt-4o") == "only"


def test_unknown_route_is_404_in_openai_shape(live_server: LiveServer) -> None:
    _assert_openai_error(HTTP.get(f"{live_server.base_url}/v1/nope"), 404)


def test_unknown_fields_are_ignored(live_server: LiveServer) -> None:
    r = HTTP.post(
        f"{live_server.base_url}/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2,
            "user": "me",
            "metadata": {"a": 1},
            "some_future_field": True,
        },
    )
    assert r.status_code == 200, r.text


def test_cors_allow_list(live_server: LiveServer) -> None:
    url = f"{live_server.base_url}/v1/models"
    ok = HTTP.options(
        url, headers={"Origin": "http://allowed.example", "Access-Control-Request-Method": "GET"}
    )
    assert ok.headers.get("access-control-allow-origin") == "http://allowed.example"
    bad = HTTP.get(url, headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in bad.headers


def test_api_key_and_busy_queue() -> None:
    """A server with a key: 401s; with one sequence and a queue of one: 429 + Retry-After."""
    server = start_server(api_key="s3cret", parallel=1, max_queue=1, prefix_cache_entries=0)
    try:
        wait_healthy(server.base_url)
        url = f"{server.base_url}/v1/completions"
        body = {"prompt": "Hello", "max_tokens": 200, "ignore_eos": True}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            err = _assert_openai_error(HTTP.post(url, json=body, headers=headers), 401)
            assert err["code"] == "invalid_api_key"
        assert HTTP.get(f"{server.base_url}/health").status_code == 200  # health stays open
        auth = {"Authorization": "Bearer s3cret"}
        statuses: list[int] = []
        retry_after: list[str | None] = []

        import threading

        def fire() -> None:
            r = HTTP.post(url, json=body, headers=auth, timeout=120)
            statuses.append(r.status_code)
            if r.status_code == 429:
                _assert_openai_error(r, 429)
                retry_after.append(r.headers.get("retry-after"))

        threads = [threading.Thread(target=fire) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert statuses.count(200) >= 2 and statuses.count(429) >= 1, statuses
        assert all(v and int(v) >= 1 for v in retry_after)
        assert server.stats()["requests"]["rejected_busy"] >= 1
    finally:
        server.handle.stop()
