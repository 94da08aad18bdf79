"""Generated text as Anthropic content blocks, built once for both answers: each step
returns the stream events it makes (``content_block_start``, ``content_block_delta``,
``content_block_stop``), and :attr:`ContentBlocks.blocks` is the finished ``content``.

Tool calls are read by chat's parser (:class:`~backend.server.tool_calls.ToolCallStream`):
text before a call streams as a text block, and each call becomes a ``tool_use`` block
whose input arrives whole, in one ``input_json_delta``, once the call's closing tag has.
With ``disable_parallel_tool_use`` an answer has one ``tool_use`` block at most: calls
after the first are dropped. A call that ``max_tokens`` cut off before its closing tag is
no text for the client: it is left out, and the answer's ``stop_reason`` says
``max_tokens``. A reasoning model's thinking (``backend/server/reasoning.py``) comes first,
as a ``thinking`` block streamed in ``thinking_delta``s and closed by a ``signature_delta``
(its ``signature`` is empty: nothing here signs it).
"""

from __future__ import annotations

import json
from typing import Any

from backend.server.reasoning import ReasoningSplit
from backend.server.tool_calls import OPEN, ToolCall, ToolCallStream

Event = dict[str, Any]


def tool_use_id(call: ToolCall) -> str:
    """Anthropic's ``toolu_`` ids for chat's ``call_`` ones."""
    return "toolu_" + call.id.removeprefix("call_")


def tool_input(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object ``tool_use.input`` must be ({} when they are not one:
    only a call the grammar did not force can have other arguments)."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class ContentBlocks:
    def __init__(
        self,
        tool_names: frozenset[str] | None,
        one_call: bool = False,
        reasoning: ReasoningSplit | None = None,
    ) -> None:
        """``tool_names``: the tools the request declares; None: no tools, all text.
        ``one_call``: keep the first call only (``disable_parallel_tool_use``).
        ``reasoning``: splits the thinking from the answer (None: all of it is answer)."""
        self._parser = ToolCallStream(tool_names) if tool_names is not None else None
        self._one_call = one_call
        self._reasoning = reasoning
        self.blocks: list[dict[str, Any]] = []
        self._thinking: dict[str, Any] | None = None  # the open thinking block
        self._text: dict[str, Any] | None = None  # the open text block
        self._blank = ""  # whitespace that opens no text block of its own

    @property
    def used_tools(self) -> bool:
        return any(block["type"] == "tool_use" for block in self.blocks)

    def feed(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self._reasoning is not None:
            thinking, text = self._reasoning.feed(text)
            events = self._add_thinking(thinking)
        return events + self._add_answer(text)

    def _add_answer(self, text: str) -> list[Event]:
        if not text:
            return []
        events = self._close_thinking()
        if self._parser is None:
            return events + self._add_text(text)
        content, calls = self._parser.feed(text)
        return events + self._add_text(content) + self._add_calls(calls)

    def finish(self, truncated: bool = False) -> list[Event]:
        """The text held back and the open block closed: the content is complete.
        ``truncated``: the answer ran out of tokens (a call still open is dropped, not
        shown as its raw ``<tool_call>`` markup)."""
        events: list[Event] = []
        if self._reasoning is not None:
            thinking, text = self._reasoning.finish()
            events = self._add_thinking(thinking) + self._add_answer(text)
        events += self._close_thinking()
        if self._parser is not None:
            rest, calls = self._parser.finish()
            if truncated and not calls:
                rest = rest.partition(OPEN)[0]
            events += self._add_text(rest) + self._add_calls(calls)
        return events + self._close_text()

    def _add_thinking(self, text: str) -> list[Event]:
        if not text:
            return []
        events: list[Event] = []
        if self._thinking is None:
            self._thinking = {"type": "thinking", "thinking": "", "signature": ""}
            events.append(self._start(dict(self._thinking), self._thinking))
        self._thinking["thinking"] += text
        events.append(self._delta({"type": "thinking_delta", "thinking": text}))
        return events

    def _close_thinking(self) -> list[Event]:
        if self._thinking is None:
            return []
        self._thinking = None
        return [self._delta({"type": "signature_delta", "signature": ""}), self._stop()]

    def _add_text(self, text: str) -> list[Event]:
        if not text:
            return []
        events: list[Event] = []
        if self._text is None:
            self._blank += text
            if not self._blank.strip():
                return []
            text, self._blank = self._blank, ""
            self._text = {"type": "text", "text": ""}
            events.append(self._start({"type": "text", "text": ""}, self._text))
        self._text["text"] += text
        events.append(self._delta({"type": "text_delta", "text": text}))
        return events

    def _add_calls(self, calls: list[ToolCall]) -> list[Event]:
        events: list[Event] = []
        for call in calls:
            if self._one_call and self.used_tools:
                break
            events += self._close_text()
            self._blank = ""
            arguments = tool_input(call.arguments)
            block = {"type": "tool_use", "id": tool_use_id(call), "name": call.name}
            events.append(self._start({**block, "input": {}}, {**block, "input": arguments}))
            partial = json.dumps(arguments, ensure_ascii=False)
            events.append(self._delta({"type": "input_json_delta", "partial_json": partial}))
            events.append(self._stop())
        return events

    def _close_text(self) -> list[Event]:
        if self._text is None:
            return []
        self._text = None
        return [self._stop()]

    def _start(self, announced: dict[str, Any], block: dict[str, Any]) -> Event:
        self.blocks.append(block)
        return {
            "type": "content_block_start",
            "index": len(self.blocks) - 1,
            "content_block": announced,
        }

    def _delta(self, delta: dict[str, Any]) -> Event:
        return {"type": "content_block_delta", "index": len(self.blocks) - 1, "delta": delta}

    def _stop(self) -> Event:
        return {"type": "content_block_stop", "index": len(self.blocks) - 1}
