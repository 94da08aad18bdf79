"""One streamed chat completion from a QuantDesk (or any OpenAI-compatible) server, read
into its text, reasoning and tool calls as the chunks arrive."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx


class ChatError(Exception):
    """The server refused the request or went away; the message is its own."""


@dataclass
class StreamedCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class StreamedReply:
    text: str = ""
    reasoning: str = ""
    calls: list[StreamedCall] = field(default_factory=list)
    finish_reason: str | None = None
    cancelled: bool = False

    def message(self) -> dict[str, Any]:
        """The reply as the assistant message of the next request."""
        out: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.calls
            ]
        return out


def _error_text(response: httpx.Response) -> str:
    try:
        body = json.loads(response.read())
    except ValueError:
        return response.text[:300]
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        return str(err.get("message", err))
    return str(err or body)


def sse_chunks(lines: Iterable[str], cancel: threading.Event) -> Iterator[dict[str, Any]]:
    """The JSON chunks of an OpenAI-style SSE stream, until ``[DONE]`` or ``cancel``;
    ChatError for an error the server sends in the stream."""
    for line in lines:
        if cancel.is_set():
            return
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        chunk = json.loads(data)
        if error := chunk.get("error"):
            raise ChatError(str(error.get("message", error) if isinstance(error, dict) else error))
        yield chunk


def stream_chat(
    client: httpx.Client,
    body: dict[str, Any],
    on_text: Callable[[str], None],
    on_reasoning: Callable[[str], None],
    cancel: threading.Event,
) -> StreamedReply:
    """POST ``body`` (streamed) to ``/v1/chat/completions``; text and reasoning go to the
    callbacks as they come. Stops early (``cancelled``) once ``cancel`` is set: leaving
    the stream drops the connection, and the server cancels the generation."""
    reply = StreamedReply()
    with client.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
        if r.status_code != 200:
            raise ChatError(f"HTTP {r.status_code}: {_error_text(r)}")
        for chunk in sse_chunks(r.iter_lines(), cancel):
            for choice in chunk.get("choices", []):
                delta = choice.get("delta") or {}
                if text := delta.get("content"):
                    reply.text += text
                    on_text(text)
                if thought := delta.get("reasoning_content"):
                    reply.reasoning += thought
                    on_reasoning(thought)
                for call in delta.get("tool_calls") or []:
                    index = int(call.get("index", len(reply.calls)))
                    while len(reply.calls) <= index:
                        reply.calls.append(StreamedCall())
                    slot = reply.calls[index]
                    slot.id = call.get("id") or slot.id
                    fn = call.get("function") or {}
                    slot.name += fn.get("name") or ""
                    slot.arguments += fn.get("arguments") or ""
                reply.finish_reason = choice.get("finish_reason") or reply.finish_reason
    reply.cancelled = cancel.is_set()
    return reply
