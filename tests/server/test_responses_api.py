"""OpenAI's Responses API (issue 19) through the official SDK on the real server and model:
plain, streamed, stored and chained responses, and its errors."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.server.conftest import LiveServer

MODEL = "SmolLM2-135M-Instruct"
TIMEOUT = 120


def _chat_prompt_tokens(server: LiveServer, messages: list[dict[str, Any]]) -> int:
    """The prompt tokens chat completions counts for ``messages``."""
    r = server.client().chat.completions.create(
        model=MODEL,
        messages=messages,
        max_tokens=1,
        temperature=0,  # type: ignore[arg-type]
    )
    assert r.usage is not None
    return r.usage.prompt_tokens


def _error(exc: openai.APIStatusError) -> dict[str, Any]:
    body = exc.response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


def test_plain_response_is_the_chat_prompt(live_server: LiveServer) -> None:
    client = live_server.client()
    r = client.responses.create(
        model=MODEL,
        instructions="You are a terse assistant.",
        input="Say hello to Ada.",
        max_output_tokens=24,
        temperature=0,
    )
    assert r.id.startswith("resp_") and r.object == "response"
    assert r.status in ("completed", "incomplete")
    assert [item.type for item in r.output] == ["message"]
    message = r.output[0]
    assert message.type == "message" and message.id.startswith("msg_")
    assert message.role == "assistant"
    assert [part.type for part in message.content] == ["output_text"]
    assert r.output_text and r.output_text == message.content[0].text  # type: ignore[union-attr]
    assert r.usage is not None
    assert 0 < r.usage.output_tokens <= 24
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    # the same prompt as chat completions renders for the same conversation
    assert r.usage.input_tokens == _chat_prompt_tokens(
        live_server,
        [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "Say hello to Ada."},
        ],
    )
    assert r.instructions == "You are a terse assistant." and r.max_output_tokens == 24


def test_max_output_tokens_makes_it_incomplete(live_server: LiveServer) -> None:
    r = live_server.client().responses.create(
        model=MODEL,
        input="Tell a long story about a dragon.",
        max_output_tokens=3,
        extra_body={"ignore_eos": True},
    )
    assert r.status == "incomplete"
    assert r.incomplete_details is not None
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage is not None and r.usage.output_tokens == 3
    assert r.output[0].type == "message" and r.output[0].status == "incomplete"


def test_streamed_events_in_the_sdk_order(live_server: LiveServer) -> None:
    client = live_server.client()
    with client.responses.stream(
        model=MODEL, input="Name three colours.", max_output_tokens=24, temperature=0
    ) as stream:
        events = list(stream)
    last = events[-1]
    assert last.type in ("response.completed", "response.incomplete")
    final = last.response
    types = [e.type for e in events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert types[-4:-1] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    middle = set(types[4:-4])
    assert middle == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    created = events[0]
    assert created.type == "response.created" and created.response.status == "in_progress"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas and deltas == final.output_text
    done = next(e for e in events if e.type == "response.output_text.done")
    assert done.type == "response.output_text.done" and done.text == deltas
    assert final.id == created.response.id
    assert final.usage is not None and final.usage.output_tokens > 0


def test_streamed_incomplete_ends_with_response_incomplete(live_server: LiveServer) -> None:
    stream = live_server.client().responses.create(
        model=MODEL,
        input="Tell a long story.",
        max_output_tokens=4,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    events = list(stream)
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details is not None
    assert last.response.incomplete_details.reason == "max_output_tokens"
    assert last.response.usage is not None and last.response.usage.output_tokens == 4


def test_sse_event_names_match_their_types(live_server: LiveServer) -> None:
    """The wire format: ``event: <type>`` then ``data: {"type": <type>, ...}``, with no
    chat-style ``[DONE]``; also served at /responses without /v1, as llama-server does."""
    body = {"input": "Hi", "max_output_tokens": 4, "stream": True}
    with httpx.stream("POST", f"{live_server.base_url}/responses", json=body, timeout=TIMEOUT) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line and not line.startswith(":")]
    names = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    datas = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    assert len(names) == len(datas) > 4
    assert "[DONE]" not in datas
    assert names == [json.loads(d)["type"] for d in datas]


def test_stored_response_is_retrieved_then_deleted(live_server: LiveServer) -> None:
    client = live_server.client()
    r = client.responses.create(model=MODEL, input="Count to three.", max_output_tokens=8)
    assert r.store is True
    got = client.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text and got.status == r.status
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError) as gone:
        client.responses.retrieve(r.id)
    error = _error(gone.value)
    assert r.id in error["message"] and error["code"] == "response_not_found"
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)


def test_store_false_keeps_nothing(live_server: LiveServer) -> None:
    client = live_server.client()
    r = client.responses.create(model=MODEL, input="Hi", max_output_tokens=4, store=False)
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)


def test_previous_response_id_continues_the_conversation(live_server: LiveServer) -> None:
    client = live_server.client()
    first = client.responses.create(
        model=MODEL,
        instructions="Answer in one short sentence.",
        input="My name is Ada.",
        max_output_tokens=12,
        temperature=0,
    )
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input="What is my name?",
        max_output_tokens=12,
        temperature=0,
    )
    assert second.previous_response_id == first.id
    assert second.usage is not None
    # the prompt holds the first turn and its answer; instructions do not carry over
    assert second.usage.input_tokens == _chat_prompt_tokens(
        live_server,
        [
            {"role": "user", "content": "My name is Ada."},
            {"role": "assistant", "content": first.output_text},
            {"role": "user", "content": "What is my name?"},
        ],
    )
    # a chain of three reaches back to the first turn
    third = client.responses.create(
        model=MODEL, previous_response_id=second.id, input="Thanks.", max_output_tokens=4
    )
    assert third.usage is not None and third.usage.input_tokens > second.usage.input_tokens


def test_unknown_previous_response_id_is_a_404(live_server: LiveServer) -> None:
    client = live_server.client()
    for stream in (False, True):
        with pytest.raises(openai.NotFoundError) as err:
            client.responses.create(
                model=MODEL, previous_response_id="resp_nope", input="Hi", stream=stream
            )
        error = _error(err.value)
        assert error["param"] == "previous_response_id" and "resp_nope" in error["message"]
        assert error["type"] == "invalid_request_error"


def test_codex_shaped_request(live_server: LiveServer) -> None:
    """What Codex CLI sends: instructions and a developer message (one system message for
    the template), input_text parts, a reasoning item, hosted tools beside function tools
    (left out), store false, and the fields it sets that a local model has no use for."""
    r = live_server.client().responses.create(
        model=MODEL,
        instructions="You are a coding agent.",
        input=[
            {"type": "message", "role": "developer", "content": "Work in /tmp/project."},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "List the files."}],
            },
        ],
        tools=[
            {
                "type": "function",
                "name": "shell",
                "description": "Run a command",
                "strict": False,
                "parameters": {
                    "type": "object",
                    "properties": {"command": {"type": "array", "items": {"type": "string"}}},
                    "required": ["command"],
                },
            },
            {"type": "web_search"},
        ],
        tool_choice="auto",
        parallel_tool_calls=False,
        store=False,
        stream=False,
        include=["reasoning.encrypted_content"],
        prompt_cache_key="session-1",
        max_output_tokens=8,
        temperature=0,
    )
    assert r.status in ("completed", "incomplete")
    assert r.usage is not None and r.usage.input_tokens > 0


def test_error_shapes(live_server: LiveServer) -> None:
    client = live_server.client()
    cases: list[tuple[dict[str, Any], str]] = [
        (
            {
                "input": [
                    {
                        "role": "user",
                        "content": [{"type": "input_image", "image_url": "data:,"}],
                    }
                ]
            },
            "input",  # a text-only model: its image is refused as chat refuses it
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f_1"}]}]},
            "input[0].content",
        ),
        ({"input": "Hi", "tool_choice": {"type": "file_search"}}, "tool_choice"),
        (
            {"input": "Hi", "text": {"format": {"type": "json_schema", "name": "x"}}},
            "text.format.schema",
        ),
        ({"input": "Hi", "text": {"format": {"type": "yaml"}}}, "text.format"),
        ({"input": "Hi", "background": True}, "background"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input.0"),
        ({"input": "Hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({}, "input"),
    ]
    for body, param in cases:
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model=MODEL, **body)
        error = _error(err.value)
        assert error["param"] == param, (body, error)
        assert error["type"] == "invalid_request_error"
    # a function tool_choice that names no declared tool, and tool_choice with no tools
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(
            model=MODEL,
            input="Hi",
            tools=[{"type": "function", "name": "f", "parameters": {"type": "object"}}],
            tool_choice={"type": "function", "name": "g"},
        )
    assert _error(err.value)["param"] == "tool_choice"
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="Hi", tool_choice="required")


def test_context_overflow_is_a_400_in_openai_shape(live_server: LiveServer) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        live_server.client().responses.create(model=MODEL, input="word " * 5000, stream=True)
    assert _error(err.value)["code"] == "context_length_exceeded"


def test_a_failed_generation_ends_with_response_failed(live_server: LiveServer) -> None:
    """A grammar no token can continue (see test_engine_survives) fails in the engine after
    the stream began: the stream ends with response.failed and its error; unstreamed, the
    same request is a 400."""
    client = live_server.client()
    dead_end = {"grammar": 'root ::= "\\x00"'}
    events = list(
        client.responses.create(
            model=MODEL, input="Hi", max_output_tokens=8, stream=True, extra_body=dead_end
        )
    )
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    last = events[-1]
    assert last.type == "response.failed"
    assert last.response.status == "failed" and last.response.error is not None
    assert last.response.error.code == "invalid_prompt"
    assert "grammar" in last.response.error.message
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="Hi", max_output_tokens=8, extra_body=dead_end)
    assert "grammar" in _error(err.value)["message"]
