"""A tool-use round trip through /v1/messages with the anthropic SDK: tool_choice forces the
call (by chat's grammar), so the tiny model's answer is a call of the named tool; its
result goes back as a tool_result and the model answers in text. Streamed too."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import pytest

from tests.server.conftest import LiveServer
from tests.server.test_anthropic_messages import GREEDY, TIMEOUT, client, raw_events

MODEL = "SmolLM2-135M-Instruct"
WEATHER = {
    "name": "get_weather",
    "description": "The current weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
TIME = {
    "name": "get_time",
    "description": "The time in a time zone",
    "input_schema": {
        "type": "object",
        "properties": {"zone": {"type": "string", "maxLength": 20}},
        "required": ["zone"],
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def ask(server: LiveServer, **kwargs: Any) -> anthropic.types.Message:
    return client(server).messages.create(
        model=MODEL,
        max_tokens=60,
        extra_body=GREEDY,
        tools=[WEATHER, TIME],
        messages=ASK,
        **kwargs,
    )


@pytest.mark.parametrize(
    ("choice", "name"),
    [({"type": "tool", "name": "get_time"}, "get_time"), ({"type": "any"}, None)],
    ids=["tool", "any"],
)
def test_forced_call_is_a_tool_use_block(
    live_server: LiveServer, choice: dict[str, Any], name: str | None
) -> None:
    message = ask(live_server, tool_choice=choice)
    assert message.stop_reason == "tool_use"
    assert message.stop_sequence is None
    (call,) = [b for b in message.content if b.type == "tool_use"]
    assert call.id.startswith("toolu_")
    assert call.name == (name or call.name) and call.name in ("get_weather", "get_time")
    assert isinstance(call.input, dict)
    key = "zone" if call.name == "get_time" else "city"
    assert set(call.input) >= {key} and isinstance(call.input[key], str)


def test_tool_choice_none_answers_in_text(live_server: LiveServer) -> None:
    message = ask(live_server, tool_choice={"type": "none"})
    assert [b.type for b in message.content] == ["text"]
    assert message.stop_reason in ("end_turn", "max_tokens")


def test_round_trip(live_server: LiveServer) -> None:
    """tool_use -> tool_result -> an answer in text, as an agent loop runs it."""
    first = ask(live_server, tool_choice={"type": "tool", "name": "get_weather"})
    (call,) = [b for b in first.content if b.type == "tool_use"]
    assert call.name == "get_weather"

    def history(result: str) -> list[dict[str, Any]]:
        return [
            *ASK,
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call.id,
                        "content": [{"type": "text", "text": result}],
                    }
                ],
            },
        ]

    kwargs: dict[str, Any] = {"model": MODEL, "tools": [WEATHER], "tool_choice": {"type": "none"}}
    second = client(live_server).messages.create(
        max_tokens=30, extra_body=GREEDY, messages=history("Sunny, 25 C"), **kwargs
    )
    assert second.stop_reason in ("end_turn", "max_tokens")
    assert second.content[0].type == "text" and second.content[0].text.strip()
    # the call and its result are in the prompt
    tokens = client(live_server).messages.count_tokens(messages=history("Sunny, 25 C"), **kwargs)
    assert tokens.input_tokens == second.usage.input_tokens + (
        second.usage.cache_read_input_tokens or 0
    )
    fewer = client(live_server).messages.count_tokens(messages=history(""), **kwargs)
    assert fewer.input_tokens < tokens.input_tokens
    no_call = client(live_server).messages.count_tokens(messages=ASK, **kwargs)
    assert no_call.input_tokens < fewer.input_tokens


def test_streamed_tool_use(live_server: LiveServer) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 60,
        "temperature": 0,
        "tools": [WEATHER, TIME],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "messages": ASK,
    }
    plain = httpx.post(f"{live_server.base_url}/v1/messages", json=body, timeout=TIMEOUT).json()
    (call,) = [b for b in plain["content"] if b["type"] == "tool_use"]
    events = raw_events(live_server, {**body, "stream": True})
    events = [e for e in events if e["type"] != "ping"]  # one after message_start, more any time
    kinds = [e["type"] for e in events]
    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start, delta = events[1], events[2]
    assert start["index"] == 0 and start["content_block"]["type"] == "tool_use"
    assert start["content_block"]["name"] == "get_weather"
    assert start["content_block"]["input"] == {}
    assert start["content_block"]["id"].startswith("toolu_")
    assert delta["delta"]["type"] == "input_json_delta"
    assert json.loads(delta["delta"]["partial_json"]) == call["input"]
    assert events[4]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    # the SDK puts the streamed call together the same way
    sdk_body = {k: v for k, v in body.items() if k != "temperature"}
    with client(live_server).messages.stream(**sdk_body, extra_body=GREEDY) as stream:
        final = stream.get_final_message()
    (streamed,) = [b for b in final.content if b.type == "tool_use"]
    assert streamed.name == "get_weather" and streamed.input == call["input"]
    assert final.stop_reason == "tool_use"


def test_unknown_tool_choice_and_server_tools_are_400(live_server: LiveServer) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        ask(live_server, tool_choice={"type": "tool", "name": "launch"})
    assert "launch" in str(info.value)
    with pytest.raises(anthropic.BadRequestError) as info:
        client(live_server).messages.create(
            model=MODEL,
            max_tokens=4,
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
            messages=ASK,
        )
    assert "web_search_20250305" in str(info.value)


def test_a_call_cut_off_by_max_tokens_is_no_text(live_server: LiveServer) -> None:
    """max_tokens that ends a forced call before its closing tag: the answer says
    max_tokens, and the call's raw ``<tool_call>`` markup is not handed out as text (an
    agent would keep it in its history and show it to the model again)."""
    body = {
        "model": MODEL,
        "max_tokens": 6,
        "temperature": 0,
        "tools": [WEATHER],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "messages": ASK,
    }
    plain = httpx.post(f"{live_server.base_url}/v1/messages", json=body, timeout=TIMEOUT).json()
    assert plain["stop_reason"] == "max_tokens" and plain["usage"]["output_tokens"] == 6
    assert all("<tool_call>" not in b.get("text", "") for b in plain["content"]), plain
    events = raw_events(live_server, {**body, "stream": True})
    streamed = "".join(
        e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta"
    )
    assert "<tool_call>" not in streamed
    (delta,) = [e for e in events if e["type"] == "message_delta"]
    assert delta["delta"]["stop_reason"] == "max_tokens"
    assert events[-1]["type"] == "message_stop"
