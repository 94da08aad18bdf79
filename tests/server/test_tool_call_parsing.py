"""Tool calls in model output: only calls of declared functions count."""

from __future__ import annotations

import json

from backend.server.tool_calls import (
    ToolCallStream,
    parse_calls,
    render_messages_for_tools,
    tool_names,
)

NAMES = tool_names(
    [
        {"type": "function", "function": {"name": "get_weather", "parameters": {}}},
        {"type": "function", "function": {"name": "search"}},
    ]
)


def test_declared_names() -> None:
    assert {"get_weather", "search"} == set(NAMES)
    assert tool_names(None) == frozenset()


def test_bare_json_is_a_call_only_with_a_declared_name_and_a_call_shape() -> None:
    (call,) = parse_calls('{"name": "get_weather", "arguments": {"city": "Paris"}}', NAMES)
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert parse_calls('{"name": "Alice", "age": 3}', NAMES) == []
    assert parse_calls('{"name": "search", "age": 3}', NAMES) == []  # not a call's keys
    assert parse_calls('{"name": "Alice"}', NAMES) == []
    assert len(parse_calls('[{"name": "search", "parameters": {"q": "x"}}]', NAMES)) == 1


def test_a_tagged_call_of_an_undeclared_function_stays_text() -> None:
    text = 'Let me see. <tool_call>\n{"name": "delete_all", "arguments": {}}\n</tool_call>'
    stream = ToolCallStream(NAMES)
    content, calls = stream.feed(text)
    rest, more = stream.finish()
    assert calls == [] and more == [] and stream.calls == []
    assert "delete_all" in content + rest
    good = ToolCallStream(NAMES)
    good.feed('<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>')
    good.finish()
    assert [c.name for c in good.calls] == ["search"]


def test_text_after_a_streamed_call_keeps_its_spaces() -> None:
    """Only the newlines after a call's closing tag go; words after it stay apart."""
    stream = ToolCallStream(NAMES)
    out = ""
    chunks = ['<tool_call>\n{"name": "search", "arguments": {}}\n</tool_call>', "\n\n", "Done,"]
    for chunk in [*chunks, " both", " called."]:
        out += stream.feed(chunk)[0]
    out += stream.finish()[0]
    assert [c.name for c in stream.calls] == ["search"] and out == "Done, both called."


def test_streamed_bare_json_answer_comes_back_as_content() -> None:
    stream = ToolCallStream(NAMES)
    assert stream.feed('{"name": "Al') == ("", [])  # it may still be a call's name
    # "Alice" is no function's: the answer streams from here instead of at the end
    first, _ = stream.feed('ice", "age": ')
    second, _ = stream.feed("3}")
    rest, calls = stream.finish()
    assert first == '{"name": "Alice", "age": ' and second == "3}"
    assert calls == [] and json.loads(first + second + rest) == {"name": "Alice", "age": 3}


def test_templates_with_tool_support_get_arguments_as_objects() -> None:
    """Hugging Face templates write `arguments | tojson`; a JSON string would be quoted twice."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    out = render_messages_for_tools(messages, None, template_knows_tools=True)
    assert out[1]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    assert call["function"]["arguments"] == '{"city": "Paris"}'  # the request is not changed
    assert out[0] == messages[0] and out[2] == messages[2]
