"""Responses with function tools and structured output (issue 19), through the official
SDK on the real model: tool_choice forces the call, so that the tiny model's output is
deterministic in shape; text.format is enforced by the same grammar as chat's."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pydantic

from tests.server.conftest import LiveServer

MODEL = "SmolLM2-135M-Instruct"
PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": PARAMETERS,
}
ASK = "What's the weather in Paris?"


def _forced_call(server: LiveServer) -> Any:
    return server.client().responses.create(
        model=MODEL,
        input=ASK,
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=60,
        temperature=0,
    )


def test_forced_function_call_round_trip(live_server: LiveServer) -> None:
    client = live_server.client()
    first = _forced_call(live_server)
    assert first.status == "completed"
    assert [item.type for item in first.output] == ["function_call"]
    call = first.output[0]
    assert call.name == "get_weather" and call.status == "completed"
    assert call.call_id.startswith("call_") and call.id.startswith("fc_")
    jsonschema.validate(json.loads(call.arguments), PARAMETERS)
    assert first.output_text == ""

    # the result goes back as function_call_output, chained by previous_response_id
    result = {"type": "function_call_output", "call_id": call.call_id, "output": '{"temp": 21}'}
    chained = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[result],  # type: ignore[list-item]
        tools=[WEATHER],  # type: ignore[list-item]
        max_output_tokens=16,
        temperature=0,
    )
    assert chained.status in ("completed", "incomplete")
    assert chained.usage is not None and first.usage is not None
    assert chained.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens

    # ... or with the whole conversation sent again (store=false clients such as Codex):
    # the same prompt
    replayed = client.responses.create(
        model=MODEL,
        input=[
            {"role": "user", "content": ASK},
            call.model_dump(exclude_none=True),  # type: ignore[list-item]
            result,  # type: ignore[list-item]
        ],
        tools=[WEATHER],  # type: ignore[list-item]
        max_output_tokens=16,
        temperature=0,
        store=False,
    )
    assert replayed.usage is not None
    assert replayed.usage.input_tokens == chained.usage.input_tokens


def test_forced_function_call_streams(live_server: LiveServer) -> None:
    with live_server.client().responses.stream(
        model=MODEL,
        input=ASK,
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice="required",
        max_output_tokens=60,
        temperature=0,
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    types = [e.type for e in events]
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, done = events[2], events[5]
    assert added.type == "response.output_item.added" and added.item.type == "function_call"
    assert added.item.status == "in_progress" and added.item.arguments == ""
    assert done.type == "response.output_item.done" and done.item.type == "function_call"
    arguments = events[4]
    assert arguments.type == "response.function_call_arguments.done"
    assert arguments.item_id == added.item.id == done.item.id
    jsonschema.validate(json.loads(arguments.arguments), PARAMETERS)
    call = final.output[0]
    assert call.type == "function_call" and call.arguments == arguments.arguments
    assert call.name == "get_weather"


def test_text_format_json_schema_is_enforced(live_server: LiveServer) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    r = live_server.client().responses.create(
        model=MODEL,
        input="Describe a person as JSON.",
        text={
            "format": {"type": "json_schema", "name": "person", "schema": schema, "strict": True}
        },
        max_output_tokens=80,
        temperature=0.7,
        extra_body={"seed": 3},
    )
    assert r.status == "completed", r.output_text
    jsonschema.validate(json.loads(r.output_text, strict=True), schema)
    assert r.text is not None and r.text.format is not None
    assert r.text.format.type == "json_schema"


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=20)
    age: int


def test_sdk_parse_with_a_pydantic_model(live_server: LiveServer) -> None:
    """``client.responses.parse(text_format=Model)``: the SDK's strict schema, parsed back."""
    r = live_server.client().responses.parse(
        model=MODEL,
        input="Describe a person.",
        text_format=Person,
        max_output_tokens=80,
        temperature=0,
    )
    assert r.status == "completed"
    assert isinstance(r.output_parsed, Person)


def test_text_format_json_object_parses(live_server: LiveServer) -> None:
    r = live_server.client().responses.create(
        model=MODEL,
        input='Return a JSON object with keys "name" and "age" for a cat named Tom aged 3.',
        text={"format": {"type": "json_object"}},
        max_output_tokens=300,
        temperature=0,
    )
    assert r.status == "completed", r.output_text
    assert isinstance(json.loads(r.output_text, strict=True), dict)


def test_a_call_cut_off_by_max_output_tokens_is_no_text(live_server: LiveServer) -> None:
    """max_output_tokens that ends a forced call before its closing tag: the response is
    incomplete, and the call's raw ``<tool_call>`` markup is not handed out as output
    text (Codex would keep it in the conversation it sends back)."""
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "input": ASK,
        "tools": [WEATHER],
        "tool_choice": "required",
        "max_output_tokens": 6,
        "temperature": 0,
    }
    client = live_server.client()
    r = client.responses.create(**kwargs)
    assert r.status == "incomplete" and r.usage is not None and r.usage.output_tokens == 6
    assert r.incomplete_details is not None
    assert r.incomplete_details.reason == "max_output_tokens"
    assert "<tool_call>" not in r.output_text
    assert all(item.type != "function_call" for item in r.output)
    events = list(client.responses.create(stream=True, **kwargs))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert "<tool_call>" not in deltas
    last = events[-1]
    assert last.type == "response.incomplete"
    assert "<tool_call>" not in last.response.output_text


def _exactly(text: str) -> str:
    """A grammar that lets the model write ``text`` and nothing else."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'root ::= "{escaped}"'


def _call(city: str) -> str:
    arguments = {"city": city, "unit": "celsius"}
    return (
        f"<tool_call>\n{json.dumps({'name': 'get_weather', 'arguments': arguments})}\n</tool_call>"
    )


def test_parallel_tool_calls_false_keeps_the_first_call(live_server: LiveServer) -> None:
    """Two calls in one answer (the grammar makes the model write them) are two
    function_call items; with parallel_tool_calls false (as Codex sends it) only the first."""
    client = live_server.client()
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "input": "What's the weather in Paris and in Rome?",
        "tools": [WEATHER],
        "max_output_tokens": 120,
        "extra_body": {"grammar": _exactly(_call("Paris") + "\n" + _call("Rome"))},
    }
    both = client.responses.create(**kwargs)
    assert [json.loads(item.arguments)["city"] for item in both.output] == ["Paris", "Rome"]  # type: ignore[union-attr]
    one = client.responses.create(parallel_tool_calls=False, **kwargs)
    assert one.parallel_tool_calls is False and one.status == "completed"
    assert [item.type for item in one.output] == ["function_call"]
    assert json.loads(one.output[0].arguments)["city"] == "Paris"  # type: ignore[union-attr]
    with client.responses.stream(parallel_tool_calls=False, **kwargs) as stream:
        events = list(stream)
        final = stream.get_final_response()
    added = [e for e in events if e.type == "response.output_item.added"]
    assert len(added) == 1 and [item.type for item in final.output] == ["function_call"]
