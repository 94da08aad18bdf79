"""POST /v1/messages and /v1/messages/count_tokens with the official anthropic SDK, on the
real server and SmolLM2: plain and streamed answers, stop reasons, usage, count_tokens, and
the message shapes Claude Code sends."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import jsonschema
import pydantic
import pytest

from tests.server.conftest import LiveServer

TIMEOUT = 120
MODEL = "SmolLM2-135M-Instruct"
QUESTION = [{"role": "user", "content": "Write a sentence about the sea."}]
# the SDK no longer types sampling fields; the API (and this server) still takes them
GREEDY = {"temperature": 0}


def client(server: LiveServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key="unused", max_retries=0)


def raw_events(server: LiveServer, body: dict[str, Any], path: str = "/v1/messages") -> list[dict]:
    """The stream's events as sent: each SSE event's name and its data."""
    events = []
    with httpx.stream("POST", f"{server.base_url}{path}", json=body, timeout=TIMEOUT) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: ") :])
                assert data["type"] == name  # the SDKs read only named events
                events.append(data)
    return events


def prompt_tokens(usage: Any) -> int:
    return int(usage.input_tokens + (usage.cache_read_input_tokens or 0))


def test_plain_answer_is_chats_answer(live_server: LiveServer) -> None:
    """A translation onto chat: the same prompt, greedy, gives chat's text and token counts."""
    message = client(live_server).messages.create(
        model="claude-code-local", max_tokens=24, extra_body=GREEDY, messages=QUESTION
    )
    assert message.type == "message" and message.role == "assistant"
    assert message.id.startswith("msg_")
    assert message.model == MODEL
    assert [b.type for b in message.content] == ["text"]
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.stop_sequence is None
    chat = live_server.client().chat.completions.create(
        model="x", max_tokens=24, temperature=0, messages=QUESTION
    )
    assert message.content[0].text == chat.choices[0].message.content
    assert chat.usage is not None
    assert prompt_tokens(message.usage) == chat.usage.prompt_tokens
    assert message.usage.output_tokens == chat.usage.completion_tokens
    expected = "max_tokens" if chat.choices[0].finish_reason == "length" else "end_turn"
    assert message.stop_reason == expected


def test_max_tokens_stops_the_answer(live_server: LiveServer) -> None:
    message = client(live_server).messages.create(
        model=MODEL, max_tokens=3, extra_body=GREEDY, messages=QUESTION
    )
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 3


def test_stream_events_in_the_order_the_sdk_expects(live_server: LiveServer) -> None:
    body = {"model": MODEL, "max_tokens": 24, "temperature": 0, "messages": QUESTION}
    events = raw_events(live_server, {**body, "stream": True})
    assert [e["type"] for e in events[:2]] == ["message_start", "ping"]
    events = [events[0]] + [e for e in events[1:] if e["type"] != "ping"]  # pings come any time
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"}
    start = events[0]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] > 0
    assert events[1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    plain = httpx.post(f"{live_server.base_url}/v1/messages", json=body, timeout=TIMEOUT).json()
    assert text == plain["content"][0]["text"]
    delta = events[-2]
    assert delta["delta"] == {"stop_reason": plain["stop_reason"], "stop_sequence": None}
    assert delta["usage"]["output_tokens"] == plain["usage"]["output_tokens"]


def test_sdk_stream_builds_the_same_message(live_server: LiveServer) -> None:
    kwargs: dict[str, Any] = {"model": MODEL, "max_tokens": 24, "extra_body": GREEDY}
    with client(live_server).messages.stream(messages=QUESTION, **kwargs) as stream:
        streamed = stream.get_final_message()
    plain = client(live_server).messages.create(messages=QUESTION, **kwargs)
    assert [(b.type, b.text) for b in streamed.content] == [(b.type, b.text) for b in plain.content]
    assert streamed.stop_reason == plain.stop_reason
    assert streamed.usage.output_tokens == plain.usage.output_tokens
    assert prompt_tokens(streamed.usage) == prompt_tokens(plain.usage)


def test_stop_sequence_is_named(live_server: LiveServer) -> None:
    """The answer stops before the stop sequence and says which one matched."""
    kwargs: dict[str, Any] = {"model": MODEL, "max_tokens": 40, "extra_body": GREEDY}
    free = client(live_server).messages.create(messages=QUESTION, **kwargs).content[0].text
    words = free.split()
    assert len(words) > 4, free
    stop = " " + words[3]
    cut = free[: free.index(stop)]
    message = client(live_server).messages.create(
        messages=QUESTION, stop_sequences=["never in it", stop], **kwargs
    )
    assert message.content[0].text == cut
    assert message.stop_reason == "stop_sequence"
    assert message.stop_sequence == stop
    events = raw_events(
        live_server,
        {
            "model": MODEL,
            "max_tokens": 40,
            "messages": QUESTION,
            "stop_sequences": [stop],
            "stream": True,
            **GREEDY,
        },
    )
    assert events[-2]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": stop}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"system": "You are a poet."},
        {"system": [{"type": "text", "text": "You are a poet."}]},
        {
            "tools": [
                {
                    "name": "get_weather",
                    "description": "The weather in a city",
                    "input_schema": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                }
            ]
        },
    ],
    ids=["messages", "system", "system-blocks", "tools"],
)
def test_count_tokens_is_the_prompt_the_engine_reports(
    live_server: LiveServer, extra: dict[str, Any]
) -> None:
    counted = client(live_server).messages.count_tokens(model=MODEL, messages=QUESTION, **extra)
    message = client(live_server).messages.create(
        model=MODEL, max_tokens=2, messages=QUESTION, **extra
    )
    assert counted.input_tokens == prompt_tokens(message.usage)
    chat_tools = [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t["description"],
                "parameters": t["input_schema"],
            },
        }
        for t in extra.get("tools", [])
    ]
    system = extra.get("system")
    if isinstance(system, list):
        system = system[0]["text"]
    chat = live_server.client().chat.completions.create(
        model="x",
        max_tokens=2,
        messages=([{"role": "system", "content": system}] if system else []) + QUESTION,
        **({"tools": chat_tools} if chat_tools else {}),
    )
    assert chat.usage is not None and counted.input_tokens == chat.usage.prompt_tokens


def count(server: LiveServer, body: dict[str, Any]) -> int:
    r = httpx.post(f"{server.base_url}/v1/messages/count_tokens", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return int(r.json()["input_tokens"])


def test_system_role_messages_join_the_system_prompt(live_server: LiveServer) -> None:
    """Claude Code >= 2.1.154 puts system-role messages inside ``messages`` (Ollama answered
    400, ollama #16372): they join the system prompt, in order."""
    inline = {
        "system": "You are a poet.",
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Answer briefly."}]},
            *QUESTION,
        ],
    }
    joined = {"system": "You are a poet.\n\nAnswer briefly.", "messages": QUESTION}
    assert count(live_server, inline) == count(live_server, joined)
    answers = [
        client(live_server).messages.create(model=MODEL, max_tokens=16, extra_body=GREEDY, **body)
        for body in (inline, joined)
    ]
    assert answers[0].content[0].text == answers[1].content[0].text


def test_claude_codes_billing_header_is_left_out(live_server: LiveServer) -> None:
    """Its ``cch=`` stamp changes on every request, so no two prompts would share a prefix."""

    def body(stamp: str) -> dict[str, Any]:
        header = (
            f"x-anthropic-billing-header: cc_version=2.1.160.a1f; cc_entrypoint=cli; cch={stamp};"
        )
        return {
            "system": [
                {"type": "text", "text": header},
                {"type": "text", "text": "You are a poet.", "cache_control": {"type": "ephemeral"}},
            ],
            "messages": QUESTION,
        }

    plain = count(live_server, {"system": "You are a poet.", "messages": QUESTION})
    assert count(live_server, body("a5145")) == count(live_server, body("0c9d2")) == plain


def test_a_changing_billing_header_does_not_break_prompt_caching(live_server: LiveServer) -> None:
    """Two Claude Code turns whose headers differ only in ``cch=``: the second reads the
    long system prompt from the cache (``cache_read_input_tokens``) instead of prefilling it."""
    system = "You are a careful coding agent. " + " ".join(
        f"Rule {i}: keep edits small and explain each one." for i in range(40)
    )

    def turn(stamp: str) -> anthropic.types.Message:
        header = (
            f"x-anthropic-billing-header: cc_version=2.1.160.a1f; cc_entrypoint=cli; cch={stamp};"
        )
        return client(live_server).messages.create(
            model=MODEL,
            max_tokens=4,
            system=[{"type": "text", "text": header}, {"type": "text", "text": system}],
            messages=QUESTION,
            extra_body=GREEDY,
        )

    first, second = turn("a5145"), turn("0c9d2")
    assert first.content[0].text == second.content[0].text
    total = second.usage.input_tokens + (second.usage.cache_read_input_tokens or 0)
    assert (second.usage.cache_read_input_tokens or 0) >= total - 8  # all but the last few


def test_keep_billing_header_keeps_the_line() -> None:
    from backend.server.anthropic.translation import system_text

    header = "x-anthropic-billing-header: cc_version=2.1.160.a1f; cc_entrypoint=cli; cch=a5145;"
    assert system_text(header + "\nYou are a poet.") == "You are a poet."
    assert system_text(header + "\nYou are a poet.", keep_billing_header=True).startswith(header)


def test_tool_results_as_block_arrays_and_errors(live_server: LiveServer) -> None:
    """tool_result content as a string or a block array (joined by newlines); ``is_error``
    reaches the model."""

    def conversation(result: Any, is_error: bool = False) -> dict[str, Any]:
        return {
            "messages": [
                {"role": "user", "content": "What is in notes.txt?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Let me read it."},
                        {
                            "type": "tool_use",
                            "id": "toolu_01",
                            "name": "Read",
                            "input": {"file_path": "notes.txt"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_01",
                            "content": result,
                            "is_error": is_error,
                        },
                        {"type": "text", "text": "Summarise it."},
                    ],
                },
            ],
        }

    blocks = [{"type": "text", "text": "line one"}, {"type": "text", "text": "line two"}]
    as_string = count(live_server, conversation("line one\nline two"))
    assert count(live_server, conversation(blocks)) == as_string
    assert count(live_server, conversation(blocks, is_error=True)) > as_string
    message = client(live_server).messages.create(
        model=MODEL, max_tokens=8, **conversation(blocks, is_error=True)
    )
    assert message.content and message.content[0].type == "text"


def test_claude_code_request_shape(live_server: LiveServer) -> None:
    """A request as Claude Code sends it: ``?beta=true`` and ``anthropic-beta``, system
    blocks with cache_control, metadata, thinking, earlier thinking blocks, a system-role
    message and tool_result blocks."""
    tools = [
        {
            "name": "Bash",
            "description": "Run a shell command",
            "input_schema": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        }
    ]
    message = client(live_server).beta.messages.create(
        model="claude-code-local",
        max_tokens=16,
        betas=["interleaved-thinking-2025-05-14", "context-management-2025-06-27"],
        system=[
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}
        ],
        metadata={"user_id": "user_abc_account_def_session_1"},
        thinking={"type": "enabled", "budget_tokens": 1024},
        tools=tools,
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "List the files."}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should run ls.", "signature": "sig"},
                    {
                        "type": "tool_use",
                        "id": "toolu_9",
                        "name": "Bash",
                        "input": {"command": "ls"},
                    },
                ],
            },
            {"role": "system", "content": "The user is in /home/me/project."},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_9",
                        "content": [{"type": "text", "text": "README.md\nsrc"}],
                    }
                ],
            },
        ],
    )
    assert message.type == "message"
    assert message.stop_reason in ("end_turn", "max_tokens", "tool_use")
    assert message.usage.output_tokens > 0


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def test_structured_output_follows_the_schema(live_server: LiveServer) -> None:
    """``output_config.format`` (what ``messages.parse(output_format=...)`` sends) and the
    beta's top-level ``output_format`` are enforced by chat's grammar: the text parses and
    validates, plain and streamed."""

    class Person(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=20)
        age: int

    kwargs: dict[str, Any] = {"model": MODEL, "max_tokens": 80, "extra_body": GREEDY}
    ask = [{"role": "user", "content": "Describe a person."}]
    parsed = client(live_server).messages.parse(messages=ask, output_format=Person, **kwargs)
    assert parsed.stop_reason == "end_turn"
    assert isinstance(parsed.parsed_output, Person)
    fmt = {"type": "json_schema", "schema": PERSON}
    for extra in ({"output_config": {"format": fmt}}, {"output_format": fmt}):
        body = {"model": MODEL, "max_tokens": 80, "messages": ask, **GREEDY, **extra}
        plain = httpx.post(f"{live_server.base_url}/v1/messages", json=body, timeout=TIMEOUT)
        text = plain.json()["content"][0]["text"]
        jsonschema.validate(json.loads(text), PERSON)
        events = raw_events(live_server, {**body, "stream": True})
        deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
        assert "".join(deltas) == text
