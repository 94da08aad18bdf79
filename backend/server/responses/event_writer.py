"""A response's output items and its semantic stream events, built as text arrives.

The non-streamed answer is built by the same writer with its events dropped, so a
response reads the same either way. Order, as OpenAI's SDK checks it:
``response.created``, ``response.in_progress``; per message ``output_item.added``,
``content_part.added``, ``output_text.delta``..., ``output_text.done``,
``content_part.done``, ``output_item.done``; per function call ``output_item.added``,
``function_call_arguments.delta``, ``function_call_arguments.done``, ``output_item.done``;
then ``response.completed``, ``response.incomplete`` (max_output_tokens reached) or
``response.failed``. With ``parallel_tool_calls`` false a response has one function call
at most: calls after the first are dropped. A function call that max_output_tokens cut off
before its closing tag is left out (its raw ``<tool_call>`` markup is no text for the
client). A reasoning model's thinking (``backend/server/reasoning.py``) comes first, as a
``reasoning`` item with one ``reasoning_text`` part: ``output_item.added``,
``content_part.added``, ``reasoning_text.delta``..., ``reasoning_text.done``,
``content_part.done``, ``output_item.done``.
"""

from __future__ import annotations

from typing import Any

from backend.engine.request_types import FinishEvent
from backend.server.reasoning import ReasoningSplit
from backend.server.responses.response_object import new_item_id, usage
from backend.server.tool_calls import OPEN, ToolCall, ToolCallStream

Event = dict[str, Any]


class ResponseEventWriter:
    """Output items and events of one response. ``tool_names``: the functions whose calls
    are parsed out of the text (None: no tools, all text is the message); ``one_call``:
    keep the first call only (``parallel_tool_calls`` false); ``reasoning``: splits the
    thinking from the answer (None: all of it is answer)."""

    def __init__(
        self,
        response: dict[str, Any],
        tool_names: frozenset[str] | None,
        one_call: bool = False,
        reasoning: ReasoningSplit | None = None,
    ) -> None:
        self.response = response
        self._parser = ToolCallStream(tool_names) if tool_names is not None else None
        self._one_call = one_call
        self._reasoning = reasoning
        self._thought: dict[str, Any] | None = None  # the reasoning item being written
        self._thought_index = 0
        self._thought_text: list[str] = []
        self._sequence = 0
        self._message: dict[str, Any] | None = None  # the message item being written
        self._message_index = 0
        self._text: list[str] = []
        self._pending = ""  # leading whitespace, held until text shows there is a message

    def started(self) -> list[Event]:
        return [
            self._event("response.created", response=self.snapshot()),
            self._event("response.in_progress", response=self.snapshot()),
        ]

    def feed(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self._reasoning is not None:
            thought, text = self._reasoning.feed(text)
            events = self._thinking(thought)
        return events + self._answer(text)

    def _answer(self, text: str) -> list[Event]:
        if not text:
            return []
        events = self._close_thought(incomplete=False)
        if self._parser is None:
            return events + self._content(text)
        content, calls = self._parser.feed(text)
        return events + self._content(content) + self._calls(calls)

    def finished(self, finish: FinishEvent) -> list[Event]:
        events: list[Event] = []
        incomplete = finish.finish_reason == "length"
        if self._reasoning is not None:
            thought, text = self._reasoning.finish()
            events = self._thinking(thought) + self._answer(text)
        events += self._close_thought(incomplete)  # still open: it ran out of tokens thinking
        if self._parser is not None:
            rest, calls = self._parser.finish()
            if incomplete and not calls:
                rest = rest.partition(OPEN)[0]
            events += self._content(rest) + self._calls(calls)
        if self._message is None and not self.response["output"]:
            events += self._open_message()  # an empty answer is an empty message
            if self._pending:
                events.append(self._delta(self._pending))
        events += self._close_message(incomplete)
        self.response["usage"] = usage(finish)
        if incomplete:
            self.response["status"] = "incomplete"
            self.response["incomplete_details"] = {"reason": "max_output_tokens"}
            return [*events, self._event("response.incomplete", response=self.snapshot())]
        self.response["status"] = "completed"
        return [*events, self._event("response.completed", response=self.snapshot())]

    def failed(self, message: str, code: str) -> list[Event]:
        events = self._close_thought(incomplete=True) + self._close_message(incomplete=True)
        self.response["status"] = "failed"
        self.response["error"] = {"code": code, "message": message}
        return [*events, self._event("response.failed", response=self.snapshot())]

    def snapshot(self) -> dict[str, Any]:
        return {**self.response, "output": list(self.response["output"])}

    def _event(self, type_: str, **fields: Any) -> Event:
        event = {"type": type_, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _content(self, text: str) -> list[Event]:
        if not text:
            return []
        events: list[Event] = []
        if self._message is None:
            if not (self._pending + text).strip():
                self._pending += text
                return []
            text, self._pending = self._pending + text, ""
            events += self._open_message()
        events.append(self._delta(text))
        return events

    def _delta(self, text: str) -> Event:
        self._text.append(text)
        return self._event(
            "response.output_text.delta",
            item_id=self._item_id(),
            output_index=self._message_index,
            content_index=0,
            delta=text,
            logprobs=[],
        )

    def _open_message(self) -> list[Event]:
        self._message = {
            "id": new_item_id("msg"),
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        self._message_index = len(self.response["output"])
        return [
            self._event(
                "response.output_item.added",
                output_index=self._message_index,
                item=dict(self._message),
            ),
            self._event(
                "response.content_part.added",
                item_id=self._item_id(),
                output_index=self._message_index,
                content_index=0,
                part=_text_part(""),
            ),
        ]

    def _close_message(self, incomplete: bool) -> list[Event]:
        if self._message is None:
            return []
        part = _text_part("".join(self._text))
        item = {**self._message, "status": "incomplete" if incomplete else "completed"}
        item["content"] = [part]
        where = {"item_id": item["id"], "output_index": self._message_index}
        events = [
            self._event(
                "response.output_text.done",
                **where,
                content_index=0,
                text=part["text"],
                logprobs=[],
            ),
            self._event("response.content_part.done", **where, content_index=0, part=part),
            self._event("response.output_item.done", output_index=self._message_index, item=item),
        ]
        self.response["output"].append(item)
        self._message, self._text = None, []
        return events

    def _thinking(self, text: str) -> list[Event]:
        if not text:
            return []
        events: list[Event] = []
        if self._thought is None:
            self._thought = {
                "id": new_item_id("rs"),
                "type": "reasoning",
                "status": "in_progress",
                "summary": [],
                "content": [],
            }
            self._thought_index = len(self.response["output"])
            where = {"item_id": self._thought["id"], "output_index": self._thought_index}
            events += [
                self._event(
                    "response.output_item.added",
                    output_index=self._thought_index,
                    item=dict(self._thought),
                ),
                self._event(
                    "response.content_part.added", **where, content_index=0, part=_thought_part("")
                ),
            ]
        self._thought_text.append(text)
        events.append(
            self._event(
                "response.reasoning_text.delta",
                item_id=self._thought["id"],
                output_index=self._thought_index,
                content_index=0,
                delta=text,
            )
        )
        return events

    def _close_thought(self, incomplete: bool) -> list[Event]:
        if self._thought is None:
            return []
        part = _thought_part("".join(self._thought_text))
        item = {**self._thought, "status": "incomplete" if incomplete else "completed"}
        item["content"] = [part]
        where = {"item_id": item["id"], "output_index": self._thought_index}
        events = [
            self._event(
                "response.reasoning_text.done", **where, content_index=0, text=part["text"]
            ),
            self._event("response.content_part.done", **where, content_index=0, part=part),
            self._event("response.output_item.done", output_index=self._thought_index, item=item),
        ]
        self.response["output"].append(item)
        self._thought, self._thought_text = None, []
        return events

    def _calls(self, calls: list[ToolCall]) -> list[Event]:
        events: list[Event] = []
        for call in calls:
            if self._one_call and any(
                item["type"] == "function_call" for item in self.response["output"]
            ):
                break
            events += self._close_message(incomplete=False)  # text before a call is done
            self._pending = ""
            index = len(self.response["output"])
            item = {
                "id": new_item_id("fc"),
                "type": "function_call",
                "status": "in_progress",
                "call_id": call.id,
                "name": call.name,
                "arguments": "",
            }
            where = {"item_id": item["id"], "output_index": index}
            done = {**item, "status": "completed", "arguments": call.arguments}
            events += [
                self._event("response.output_item.added", output_index=index, item=item),
                self._event(
                    "response.function_call_arguments.delta", **where, delta=call.arguments
                ),
                self._event(
                    "response.function_call_arguments.done", **where, arguments=call.arguments
                ),
                self._event("response.output_item.done", output_index=index, item=done),
            ]
            self.response["output"].append(done)
        return events

    def _item_id(self) -> str:
        assert self._message is not None
        return str(self._message["id"])


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _thought_part(text: str) -> dict[str, Any]:
    return {"type": "reasoning_text", "text": text}
