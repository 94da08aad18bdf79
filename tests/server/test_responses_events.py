"""The Responses event writer on text as the engine hands it over: a message, then a tool
call parsed out of the same text, in the order and with the indexes the SDK checks. (The
live tests force calls by grammar, so the model never writes text before a call there.)"""

from __future__ import annotations

import json
from typing import Any

from backend.engine.request_types import FinishEvent
from backend.server.responses.event_writer import ResponseEventWriter
from backend.server.responses.response_object import base_response
from backend.server.responses.schemas import ResponsesRequest


def _writer(tools: frozenset[str] | None) -> ResponseEventWriter:
    body = ResponsesRequest.model_validate({"input": "Hi"})
    return ResponseEventWriter(base_response(body, "resp_1", 0, "m"), tools)


def _finish(reason: str = "stop") -> FinishEvent:
    return FinishEvent(reason, 5, 7, 0, None, None)  # type: ignore[arg-type]


def _run(writer: ResponseEventWriter, pieces: list[str], reason: str = "stop") -> list[Any]:
    events = writer.started()
    for piece in pieces:
        events += writer.feed(piece)
    return events + writer.finished(_finish(reason))


CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def test_text_then_a_call_are_two_items_in_order() -> None:
    writer = _writer(frozenset({"get_weather"}))
    text = "Let me check." + CALL
    events = _run(writer, [text[i : i + 5] for i in range(0, len(text), 5)])
    types = [e["type"] for e in events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    first_call = types.index("response.function_call_arguments.delta")
    assert types[first_call - 4 : first_call] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
    ]
    assert types[first_call:] == [
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == "Let me check."
    final = events[-1]["response"]
    message, call = final["output"]
    assert message["type"] == "message" and message["content"][0]["text"] == deltas
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [e["output_index"] for e in added] == [0, 1]
    assert final["status"] == "completed"
    assert final["usage"]["input_tokens"] == 5 and final["usage"]["output_tokens"] == 7


def test_a_call_alone_has_no_message() -> None:
    writer = _writer(frozenset({"get_weather"}))
    events = _run(writer, ["\n", CALL])
    assert [item["type"] for item in events[-1]["response"]["output"]] == ["function_call"]
    assert "response.output_text.delta" not in {e["type"] for e in events}


def test_a_call_of_an_undeclared_function_stays_text() -> None:
    writer = _writer(frozenset({"other"}))
    events = _run(writer, [CALL])
    (message,) = events[-1]["response"]["output"]
    assert message["type"] == "message" and message["content"][0]["text"] == CALL


def test_an_empty_answer_is_an_empty_message() -> None:
    events = _run(_writer(None), [])
    (message,) = events[-1]["response"]["output"]
    assert message["content"][0]["text"] == ""
    assert [e["type"] for e in events][2:] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]


def test_whitespace_alone_is_still_the_answer() -> None:
    events = _run(_writer(None), [" ", "\n"])
    (message,) = events[-1]["response"]["output"]
    assert message["content"][0]["text"] == " \n"
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == " \n"


def test_length_makes_it_incomplete() -> None:
    events = _run(_writer(None), ["Once upon"], reason="length")
    final = events[-1]
    assert final["type"] == "response.incomplete"
    assert final["response"]["status"] == "incomplete"
    assert final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["response"]["output"][0]["status"] == "incomplete"


def test_failure_closes_the_open_message() -> None:
    writer = _writer(None)
    events = writer.started() + writer.feed("Half an ans") + writer.failed("boom", "server_error")
    types = [e["type"] for e in events]
    assert types[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.failed",
    ]
    failed = events[-1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "server_error", "message": "boom"}
