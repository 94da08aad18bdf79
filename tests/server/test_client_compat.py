"""What clients other than the openai SDK send: IDE plugins, browser apps, LangChain,
hand-written SSE parsers. Each case is a request shape seen in the wild."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.server.conftest import LiveServer
from tests.server.test_api_features import ASK, MODEL, WEATHER_TOOL

HTTP = httpx.Client(timeout=120)


def _chat(server: LiveServer, path: str = "/v1/chat/completions", **body: Any) -> httpx.Response:
    body = {"model": MODEL, "max_tokens": 8, "temperature": 0, **body}
    return HTTP.post(f"{server.base_url}{path}", json=body)


def test_text_parts_are_joined_by_newlines(live_server: LiveServer) -> None:
    """Cline and others send a message as several text parts; they must not run together."""
    parts = [{"type": "text", "text": "Name a colour."}, {"type": "text", "text": "One word."}]
    as_parts = _chat(live_server, messages=[{"role": "user", "content": parts}]).json()
    joined = "Name a colour.\nOne word."
    as_text = _chat(live_server, messages=[{"role": "user", "content": joined}]).json()
    glued = _chat(live_server, messages=[{"role": "user", "content": joined.replace("\n", "")}])
    assert as_parts["usage"]["prompt_tokens"] == as_text["usage"]["prompt_tokens"]
    assert as_parts["choices"][0]["message"] == as_text["choices"][0]["message"]
    assert glued.json()["usage"]["prompt_tokens"] != as_text["usage"]["prompt_tokens"]


def test_an_image_part_is_a_clear_400(live_server: LiveServer) -> None:
    parts = [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]
    r = _chat(live_server, messages=[{"role": "user", "content": parts}])
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "messages" and "image_url" in err["message"]
    assert "text only" in err["message"]


def test_developer_messages_are_system_messages(live_server: LiveServer) -> None:
    for_system = _chat(live_server, messages=[{"role": "system", "content": "Be brief."}, *ASK])
    for_developer = _chat(
        live_server, messages=[{"role": "developer", "content": "Be brief."}, *ASK]
    )
    assert for_developer.status_code == 200
    usage = for_developer.json()["usage"]
    assert usage["prompt_tokens"] == for_system.json()["usage"]["prompt_tokens"]
    # the same tokens: all but the last come from the system request's cached prompt
    assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"] - 1
    assert for_developer.json()["choices"] == for_system.json()["choices"]


def test_explicit_nulls_mean_defaults(live_server: LiveServer) -> None:
    r = _chat(
        live_server,
        messages=ASK,
        stream=None,
        n=None,
        ignore_eos=None,
        logprobs=None,
        stream_options={"include_usage": None},
    )
    assert r.status_code == 200, r.text
    assert len(r.json()["choices"]) == 1
    c = HTTP.post(
        f"{live_server.base_url}/v1/completions",
        json={"prompt": "Hi", "max_tokens": 4, "echo": None, "stream": None, "logprobs": None},
    )
    assert c.status_code == 200, c.text


def test_sse_events_end_with_a_blank_line_and_no_carriage_returns(
    live_server: LiveServer,
) -> None:
    """Parsers that split the stream on "\\n\\n", as OpenAI and llama-server frame it."""
    with HTTP.stream(
        "POST",
        f"{live_server.base_url}/v1/chat/completions",
        json={"model": MODEL, "messages": ASK, "max_tokens": 6, "stream": True},
    ) as r:
        raw = b"".join(r.iter_bytes()).decode()
    assert "\r" not in raw
    events = [e for e in raw.split("\n\n") if e.strip()]
    assert all(e.startswith("data: ") for e in events), events[:3]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"


def test_routes_answer_without_the_v1_prefix(live_server: LiveServer) -> None:
    """Clients configured with the server root as base URL (llama-server serves both)."""
    arrivals = live_server.handle.app.state.engine.arrivals
    opened = arrivals.opened
    r = _chat(live_server, path="/chat/completions", messages=ASK)
    assert r.status_code == 200 and r.json()["object"] == "chat.completion"
    c = HTTP.post(f"{live_server.base_url}/completions", json={"prompt": "Hi", "max_tokens": 2})
    assert c.status_code == 200 and c.json()["object"] == "text_completion"
    models = HTTP.get(f"{live_server.base_url}/models").json()
    assert models["object"] == "list" and models["data"][0]["id"] == MODEL
    assert arrivals.opened == opened + 2 and arrivals.pending == 0


def test_cors_preflight_with_the_sdk_headers(live_server: LiveServer) -> None:
    """openai-node in a browser sends x-stainless-* headers; the preflight must allow them."""
    r = HTTP.options(
        f"{live_server.base_url}/v1/chat/completions",
        headers={
            "Origin": "http://allowed.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type,x-stainless-os,"
            "x-stainless-lang,x-stainless-retry-count",
        },
    )
    assert r.status_code == 200, r.text
    assert r.headers["access-control-allow-origin"] == "http://allowed.example"
    assert "x-stainless-os" in r.headers["access-control-allow-headers"].lower()


def test_a_json_answer_is_not_taken_for_a_call_of_an_undeclared_tool(
    live_server: LiveServer,
) -> None:
    """With tools offered but not forced, an answer that happens to be JSON with a "name"
    key stays content: only calls of declared functions are tool calls."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    r = _chat(
        live_server,
        messages=[{"role": "user", "content": "Make up a person."}],
        tools=[WEATHER_TOOL],
        tool_choice="auto",
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
        max_tokens=40,
    )
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] != "tool_calls"
    assert "tool_calls" not in choice["message"]
    person = json.loads(choice["message"]["content"])
    assert set(person) == {"name", "age"}


def test_the_model_name_is_matched_as_people_type_it(live_server: LiveServer) -> None:
    """Typed into a plugin's settings: any case, with or without .gguf (and, with one model
    served, any other name reaches it too: see test_errors)."""
    file_name = live_server.handle.app.state.engine.model_path.name
    for name in ("smollm2-135m-instruct", "SMOLLM2-135M-INSTRUCT", file_name, file_name.upper()):
        r = _chat(live_server, model=name, messages=ASK, max_tokens=1)
        assert r.status_code == 200, (name, r.text)
    r = live_server.client().models.retrieve(file_name.upper())
    assert r.id == "SmolLM2-135M-Instruct"
