"""An Ollama answer as it streams: NDJSON chunks (one object a line, never a blank one),
the final one with ``done_reason`` and Ollama's counts and durations (nanoseconds), or,
unstreamed, one object with all of it.

The text runs through chat's parsers: the reasoning split gives ``thinking``, the tool
call parser ``tool_calls`` (arguments as an object, as Ollama sends them).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from backend.engine.request_types import ErrorEvent, FinishEvent, TokenEvent
from backend.server.generation import ChoiceStreams, engine_error
from backend.server.reasoning import ReasoningSplit
from backend.server.tool_calls import ToolCall, ToolCallStream

Kind = Literal["chat", "generate"]


def created_at() -> str:
    """Ollama's timestamp: RFC 3339, UTC, with a fraction."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def loaded(kind: Kind, model: str, unloaded: bool) -> dict[str, Any]:
    """The answer to a request that only loads (or, ``keep_alive: 0``, unloads) a model."""
    body: dict[str, Any] = (
        {"message": {"role": "assistant", "content": ""}} if kind == "chat" else {"response": ""}
    )
    return {
        "model": model,
        "created_at": created_at(),
        **body,
        "done": True,
        "done_reason": "unload" if unloaded else "load",
    }


def ndjson(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode()


def tool_call(call: ToolCall, index: int) -> dict[str, Any]:
    try:
        arguments = json.loads(call.arguments) if call.arguments else {}
    except ValueError:
        arguments = {}
    if not isinstance(arguments, dict):
        arguments = {"value": arguments}
    return {"id": call.id, "function": {"index": index, "name": call.name, "arguments": arguments}}


@dataclass
class Answer:
    """One answer's shape: ``kind`` chat (``message``) or generate (``response``)."""

    kind: Kind
    model: str
    show_thinking: bool = True
    t0: float = field(default_factory=time.perf_counter)
    n_calls: int = 0

    def chunk(
        self, content: str = "", thinking: str = "", calls: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "created_at": created_at()}
        if self.kind == "chat":
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if thinking:
                message["thinking"] = thinking
            if calls:
                message["tool_calls"] = calls
            out["message"] = message
        else:
            out["response"] = content
            if thinking:
                out["thinking"] = thinking
            if calls:
                out["tool_calls"] = calls
        out["done"] = False
        return out

    def final(self, finish: FinishEvent, reason: str, **fields: Any) -> dict[str, Any]:
        total_ns = int((time.perf_counter() - self.t0) * 1e9)
        prompt_ns = int((finish.ttft_ms or 0.0) * 1e6)
        tps = finish.gen_tokens_per_s
        eval_ns = int(finish.completion_tokens / tps * 1e9) if tps else 0
        return {
            **fields,
            "done": True,
            "done_reason": reason,
            "total_duration": total_ns,
            "load_duration": 0,
            "prompt_eval_count": finish.prompt_tokens,
            "prompt_eval_duration": prompt_ns,
            "eval_count": finish.completion_tokens,
            "eval_duration": eval_ns,
        }

    def calls(self, found: list[ToolCall]) -> list[dict[str, Any]]:
        out = [tool_call(c, self.n_calls + k) for k, c in enumerate(found)]
        self.n_calls += len(out)
        return out


async def pieces(
    streams: ChoiceStreams,
    answer: Answer,
    split: ReasoningSplit | None,
    parser: ToolCallStream | None,
) -> AsyncIterator[dict[str, Any]]:
    """The answer's chunks as the tokens come: text, thinking and calls, then the final
    one (``done_reason`` stop or length); an engine error is raised."""
    async for _, event in streams:
        if isinstance(event, TokenEvent):
            thinking, text = split.feed(event.text) if split is not None else ("", event.text)
            found: list[ToolCall] = []
            if parser is not None:
                text, found = parser.feed(text)
            if not answer.show_thinking:
                thinking = ""
            if text or thinking or found:
                yield answer.chunk(text, thinking, answer.calls(found))
        elif isinstance(event, FinishEvent):
            thinking, text = split.finish() if split is not None else ("", "")
            found = []
            if parser is not None:
                more, found = parser.feed(text)
                rest, last = parser.finish()
                text, found = more + rest, found + last
            if not answer.show_thinking:
                thinking = ""
            if text or thinking or found:
                yield answer.chunk(text, thinking, answer.calls(found))
            reason = "length" if event.finish_reason == "length" else "stop"
            final = answer.chunk()
            yield answer.final(event, reason, **{k: v for k, v in final.items() if k != "done"})
            return
        elif isinstance(event, ErrorEvent):
            streams.cancel()
            raise engine_error(event)


async def ndjson_lines(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    """The chunks as NDJSON; an error once streaming has begun is one ``{"error"}`` line."""
    try:
        async for chunk in chunks:
            yield ndjson(chunk)
    except Exception as exc:  # the status line is sent: the error goes in the stream
        from backend.server.errors import to_api_error

        yield ndjson({"error": to_api_error(exc).message})


async def whole(chunks: AsyncIterator[dict[str, Any]], answer: Answer) -> dict[str, Any]:
    """The unstreamed answer: the chunks' text, thinking and calls in one object."""
    text: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    async for chunk in chunks:
        body = chunk.get("message", chunk)
        text.append(body.get("content", body.get("response", "")))
        thinking.append(body.get("thinking", ""))
        calls.extend(body.get("tool_calls") or [])
        if chunk.get("done"):
            final = chunk
    out = answer.chunk("".join(text), "".join(thinking), calls)
    return {**final, **{k: v for k, v in out.items() if k != "done"}}
