"""Tool calls at their edges, in each dialect, on the real model: names with quotes and
backslashes, parameters with ``$defs``/``$ref`` in a forced call, ``parallel_tool_calls``
false in chat, a call cut off by ``max_tokens``, and an answer in bare JSON while tools are
declared (it streams instead of arriving whole at the end)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import jsonschema
import pytest

from backend.server.tool_calls import tool_call_grammar
from tests.server.conftest import LiveServer

MODEL = "SmolLM2-135M-Instruct"
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]
CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}},
    "required": ["city"],
    "additionalProperties": False,
}
# parameters that name their parts in $defs, one of them recursive through "#"
DEFS_PARAMS = {
    "type": "object",
    "properties": {
        "place": {"$ref": "#/$defs/Place"},
        "unit": {"$ref": "#/definitions/Unit"},
    },
    "required": ["place", "unit"],
    "additionalProperties": False,
    "$defs": {
        "Place": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 12}},
            "required": ["city"],
            "additionalProperties": False,
        }
    },
    "definitions": {"Unit": {"enum": ["celsius", "fahrenheit"]}},
}
# a second tool whose $defs uses the same name for something else
OTHER_PARAMS = {
    "type": "object",
    "properties": {"place": {"$ref": "#/$defs/Place"}},
    "required": ["place"],
    "additionalProperties": False,
    "$defs": {"Place": {"type": "integer", "minimum": 1, "maximum": 9}},
}


def tool(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def anthropic_client(server: LiveServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)


@pytest.mark.parametrize("name", ['say"hi"', "back\\slash", "tab\there"])
def test_odd_tool_names_are_called_in_every_dialect(live_server: LiveServer, name: str) -> None:
    client = live_server.client()
    r = client.chat.completions.create(
        model=MODEL,
        messages=ASK,  # type: ignore[arg-type]
        tools=[tool(name, CITY)],  # type: ignore[list-item]
        tool_choice={"type": "function", "function": {"name": name}},
        max_tokens=60,
        temperature=0,
    )
    calls = r.choices[0].message.tool_calls
    assert calls is not None and len(calls) == 1
    assert calls[0].function.name == name  # type: ignore[union-attr]
    jsonschema.validate(json.loads(calls[0].function.arguments), CITY)  # type: ignore[union-attr]

    message = anthropic_client(live_server).messages.create(
        model=MODEL,
        max_tokens=60,
        messages=ASK,  # type: ignore[arg-type]
        tools=[{"name": name, "input_schema": CITY}],  # type: ignore[list-item]
        tool_choice={"type": "tool", "name": name},
        extra_body={"temperature": 0},
    )
    uses = [b for b in message.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == name and message.stop_reason == "tool_use"

    response = client.responses.create(
        model=MODEL,
        input="What's the weather in Paris?",
        tools=[{"type": "function", "name": name, "parameters": CITY}],  # type: ignore[list-item]
        tool_choice={"type": "function", "name": name},
        max_output_tokens=60,
        temperature=0,
    )
    assert [(i.type, getattr(i, "name", None)) for i in response.output] == [
        ("function_call", name)
    ]


def test_forced_calls_with_defs_and_refs(live_server: LiveServer) -> None:
    client = live_server.client()
    r = client.chat.completions.create(
        model=MODEL,
        messages=ASK,  # type: ignore[arg-type]
        tools=[tool("get_weather", DEFS_PARAMS)],  # type: ignore[list-item]
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=80,
        temperature=0,
    )
    calls = r.choices[0].message.tool_calls
    assert calls is not None and len(calls) == 1
    jsonschema.validate(json.loads(calls[0].function.arguments), DEFS_PARAMS)  # type: ignore[union-attr]

    message = anthropic_client(live_server).messages.create(
        model=MODEL,
        max_tokens=80,
        messages=ASK,  # type: ignore[arg-type]
        tools=[  # type: ignore[list-item]
            {"name": "get_weather", "input_schema": DEFS_PARAMS},
            {"name": "pick", "input_schema": OTHER_PARAMS},
        ],
        tool_choice={"type": "any"},
        extra_body={"temperature": 0},
    )
    uses = [b for b in message.content if b.type == "tool_use"]
    assert len(uses) == 1
    schema = DEFS_PARAMS if uses[0].name == "get_weather" else OTHER_PARAMS
    jsonschema.validate(uses[0].input, schema)


def test_same_def_names_in_two_tools_stay_apart() -> None:
    """Each tool's ``Place`` is its own rule: the grammar keeps both shapes."""
    grammar = tool_call_grammar(
        [
            {"name": "get_weather", "parameters": DEFS_PARAMS},
            {"name": "pick", "parameters": OTHER_PARAMS},
        ]
    )
    assert "tool0-Place ::=" in grammar and "tool1-Place ::=" in grammar
    assert "tool0-Unit ::=" in grammar
    recursive = {"type": "object", "properties": {"child": {"$ref": "#"}}}
    assert "tool0 ::=" in tool_call_grammar([{"name": "tree", "parameters": recursive}])


def _exactly(text: str) -> str:
    return f"root ::= {json.dumps(text)}"


def _call(city: str) -> str:
    body = {"name": "get_weather", "arguments": {"city": city}}
    return f"<tool_call>\n{json.dumps(body)}\n</tool_call>"


TWO_CALLS = _exactly(_call("Paris") + "\n" + _call("Rome"))


def test_chat_parallel_tool_calls_false_stops_after_one(live_server: LiveServer) -> None:
    client = live_server.client()
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "messages": ASK,
        "tools": [tool("get_weather", CITY)],
        "max_tokens": 120,
        "extra_body": {"grammar": TWO_CALLS},
    }
    both = client.chat.completions.create(**kwargs)
    calls = both.choices[0].message.tool_calls or []
    assert [json.loads(c.function.arguments)["city"] for c in calls] == ["Paris", "Rome"]  # type: ignore[union-attr]
    one = client.chat.completions.create(parallel_tool_calls=False, **kwargs)
    calls = one.choices[0].message.tool_calls or []
    assert [json.loads(c.function.arguments)["city"] for c in calls] == ["Paris"]  # type: ignore[union-attr]
    assert one.choices[0].finish_reason == "tool_calls"
    # generation ended after the first call instead of writing the second
    assert one.usage is not None and both.usage is not None
    assert one.usage.completion_tokens < both.usage.completion_tokens
    stream = client.chat.completions.create(parallel_tool_calls=False, stream=True, **kwargs)
    deltas = [
        call
        for chunk in stream
        for choice in chunk.choices
        for call in choice.delta.tool_calls or []
    ]
    assert len(deltas) == 1 and deltas[0].index == 0
    assert json.loads(deltas[0].function.arguments)["city"] == "Paris"  # type: ignore[union-attr]


def test_chat_call_cut_off_by_max_tokens_is_no_text(live_server: LiveServer) -> None:
    client = live_server.client()
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "messages": ASK,
        "tools": [tool("get_weather", CITY)],
        "tool_choice": "required",
        "max_tokens": 6,
        "temperature": 0,
    }
    r = client.chat.completions.create(**kwargs)
    choice = r.choices[0]
    assert choice.finish_reason == "length" and not choice.message.tool_calls
    assert "<tool_call" not in (choice.message.content or "")
    text, reasons = [], []
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            text.append(c.delta.content or "")
            assert not c.delta.tool_calls
            reasons.append(c.finish_reason)
    assert "<tool_call" not in "".join(text) and reasons[-1] == "length"


ANSWER = {"answer": "The weather in Paris is mild and sunny today, with a light breeze."}


def test_bare_json_answer_streams_with_tools_declared(live_server: LiveServer) -> None:
    """A JSON answer that cannot be a call streams as it is written, not at the end."""
    client = live_server.client()
    stream = client.chat.completions.create(
        model=MODEL,
        messages=ASK,  # type: ignore[arg-type]
        tools=[tool("get_weather", CITY)],  # type: ignore[list-item]
        max_tokens=80,
        stream=True,
        extra_body={"grammar": _exactly(json.dumps(ANSWER))},
    )
    pieces = [
        c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content
    ]
    assert json.loads("".join(pieces)) == ANSWER
    assert len(pieces) > 5  # piece by piece, not one chunk at the end
    # a bare call is still held and read as a call
    bare = {"name": "get_weather", "arguments": {"city": "Paris"}}
    stream = client.chat.completions.create(
        model=MODEL,
        messages=ASK,  # type: ignore[arg-type]
        tools=[tool("get_weather", CITY)],  # type: ignore[list-item]
        max_tokens=80,
        stream=True,
        extra_body={"grammar": _exactly(json.dumps(bare))},
    )
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    assert content == "" and len(calls) == 1
    assert json.loads(calls[0].function.arguments) == bare["arguments"]  # type: ignore[union-attr]
