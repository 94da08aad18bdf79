"""Malformed bodies that once raised inside the server: each must be a 400 in OpenAI's
error shape, naming the field, never a 500 (issue 14)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.server.conftest import LiveServer

HTTP = httpx.Client(timeout=120.0)
MODEL = "SmolLM2-135M-Instruct"
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


def post(server: LiveServer, path: str, body: dict[str, Any]) -> httpx.Response:
    # json.dumps escapes a lone surrogate as "\ud800", as a hostile client would send it
    return HTTP.post(
        f"{server.base_url}{path}",
        content=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )


def assert_400(r: httpx.Response, param_part: str) -> dict[str, Any]:
    assert r.status_code == 400, r.text
    err: dict[str, Any] = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error"
    assert param_part in (err["param"] or ""), err
    assert "internal error" not in err["message"]
    return err


def chat_with_call(call: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 2,
        "messages": [
            {"role": "user", "content": "What is 1 + 2?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "x", "content": "3"},
        ],
    }


@pytest.mark.parametrize(
    ("call", "param_part"),
    [
        ({"id": "x"}, "function"),  # no function at all
        ({"id": "x", "type": "function", "function": {"arguments": "{}"}}, "name"),
        ({"id": "x", "type": "function", "function": "add"}, "function"),
        ({"id": "x", "type": "function", "function": {"name": 7, "arguments": "{}"}}, "name"),
        ("add", "tool_calls"),
    ],
    ids=["no-function", "no-name", "function-string", "name-number", "call-string"],
)
def test_malformed_assistant_tool_calls_are_400(
    live_server: LiveServer, call: Any, param_part: str
) -> None:
    err = assert_400(post(live_server, "/v1/chat/completions", chat_with_call(call)), param_part)
    assert "tool_calls" in err["param"]


@pytest.mark.parametrize(
    "tool_choice",
    [
        {"type": "function", "function": "add"},
        {"type": "function"},
        {"type": "function", "function": {}},
        {"type": "function", "function": {"name": ["add"]}},
    ],
    ids=["function-string", "no-function", "no-name", "name-list"],
)
def test_malformed_tool_choice_is_400(live_server: LiveServer, tool_choice: Any) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 2,
        "messages": [{"role": "user", "content": "Add 1 and 2."}],
        "tools": TOOLS,
        "tool_choice": tool_choice,
    }
    assert_400(post(live_server, "/v1/chat/completions", body), "tool_choice")


def test_a_well_formed_tool_conversation_still_works(live_server: LiveServer) -> None:
    call = {"id": "x", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    body = {**chat_with_call(call), "tools": TOOLS}
    body["tool_choice"] = {"type": "function", "function": {"name": "add"}}
    r = post(live_server, "/v1/chat/completions", body)
    assert r.status_code == 200, r.text


LONE = "\ud800"


def chat(**fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, **fields}


@pytest.mark.parametrize(
    ("path", "body", "param_part"),
    [
        ("/v1/chat/completions", chat(model=LONE), "model"),
        ("/v1/completions", {"model": LONE, "prompt": "Hi", "max_tokens": 2}, "model"),
        ("/v1/completions", {"prompt": "Hi", "grammar": f'root ::= "{LONE}"'}, "grammar"),
        ("/v1/chat/completions", chat(grammar=LONE), "grammar"),
        ("/v1/chat/completions", chat(messages=[{"role": "user", "content": LONE}]), "messages"),
        ("/v1/chat/completions", chat(stop=[LONE]), "stop"),
        ("/v1/completions", {"prompt": f"x{LONE}y", "max_tokens": 2, "stream": True}, "prompt"),
        ("/infill", {"input_prefix": LONE, "input_suffix": "", "n_predict": 2}, "input_prefix"),
    ],
    ids=[
        "chat-model",
        "completion-model",
        "completion-grammar",
        "chat-grammar",
        "chat-content",
        "chat-stop",
        "completion-prompt-stream",
        "infill-prefix",
    ],
)
def test_lone_surrogates_are_400(
    live_server: LiveServer, path: str, body: dict[str, Any], param_part: str
) -> None:
    err = assert_400(post(live_server, path, body), param_part)
    assert "surrogate" in err["message"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/embeddings", {"input": f"a{LONE}b"}),
        ("/tokenize", {"content": LONE}),
    ],
    ids=["embeddings", "tokenize"],
)
def test_lone_surrogates_elsewhere_are_400(
    live_server: LiveServer, path: str, body: dict[str, Any]
) -> None:
    r = post(live_server, path, body)
    assert r.status_code == 400, r.text
    assert "surrogate" in r.json()["error"]["message"]


def test_a_surrogate_pair_is_fine(live_server: LiveServer) -> None:
    """An astral character escaped as a valid pair (what json.dumps sends) is ordinary text."""
    body = {"prompt": "Smile \U0001f600", "max_tokens": 2}
    assert "\\ud83d\\ude00" in json.dumps(body)
    r = post(live_server, "/v1/completions", body)
    assert r.status_code == 200, r.text


def deep_body(prefix: str, depth: int = 100_000) -> bytes:
    """A JSON object whose unknown field ``junk`` is an array nested ``depth`` deep."""
    return f'{prefix}, "junk": {"[" * depth}{"]" * depth}}}'.encode()


CHAT = '{"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]'


@pytest.mark.parametrize(
    ("path", "prefix"),
    [
        ("/v1/chat/completions", CHAT),
        ("/v1/messages", CHAT),
        ("/api/chat", CHAT),
        ("/completion", '{"prompt": "hi", "n_predict": 2'),
        ("/v1/embeddings", '{"input": "hi"'),
    ],
    ids=["openai", "anthropic", "ollama", "native", "embeddings"],
)
def test_a_body_nested_past_the_decoder_is_a_400_naming_the_limit(
    live_server: LiveServer, path: str, prefix: str
) -> None:
    r = HTTP.post(
        f"{live_server.base_url}{path}",
        content=deep_body(prefix),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 400, r.text
    body = r.json()
    message = {
        "/v1/messages": lambda: body["error"]["message"],
        "/api/chat": lambda: body["error"],
    }.get(path, lambda: body["error"]["message"])()
    assert "nests arrays or objects deeper" in message and "levels" in message, body
    assert HTTP.get(f"{live_server.base_url}/health").status_code == 200
