"""Tools through Ollama's chat: a forced call (QuantDesk's ``tool_choice``, by chat's
grammar) comes back as Ollama's ``tool_calls`` with arguments as an object, which the
official client's models read; a round trip with the call and its result in the history."""

from __future__ import annotations

import json

import httpx
import ollama

from tests.ollama.conftest import GREEDY, MODEL, client
from tests.server.conftest import LiveServer

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def test_a_forced_call_is_ollamas_tool_calls_with_object_arguments(
    ollama_server: LiveServer,
) -> None:
    body = {
        "model": MODEL,
        "messages": ASK,
        "tools": [WEATHER],
        "tool_choice": "required",
        "options": {**GREEDY, "num_predict": 60},
    }
    url = f"{ollama_server.base_url}/api/chat"
    whole = ollama.ChatResponse.model_validate(
        httpx.post(url, json={**body, "stream": False}, timeout=120).json()
    )
    (call,) = whole.message.tool_calls or []
    assert call.function.name == "get_weather"
    assert isinstance(call.function.arguments, dict) and "city" in call.function.arguments
    with httpx.stream("POST", url, json=body, timeout=120) as r:
        parts = [ollama.ChatResponse.model_validate(json.loads(line)) for line in r.iter_lines()]
    streamed = [c for p in parts for c in p.message.tool_calls or []]
    assert [c.function.model_dump() for c in streamed] == [call.function.model_dump()]


def test_a_tool_round_trip_with_the_official_client(ollama_server: LiveServer) -> None:
    history = [
        *ASK,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "18 degrees and sunny", "tool_name": "get_weather"},
    ]
    answer = client(ollama_server).chat(
        model=MODEL, messages=history, tools=[WEATHER], options={**GREEDY, "num_predict": 20}
    )
    assert answer.done and answer.message.role == "assistant"
