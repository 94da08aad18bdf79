"""Stream one chat completion (SSE) from the server: a callback per text delta; or run a
reply through the MCP tool loop (:func:`run_tool_reply`).

Plain Python: the chat page runs them in a ``ThreadWorker``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from backend.core.errors import QuantDeskError
from backend.mcp_tools.chat_stream import ChatError, sse_chunks
from backend.mcp_tools.mcp_hub import McpError
from backend.mcp_tools.tool_loop import LoopCallbacks, ToolCallRecord, ToolLoop

log = logging.getLogger(__name__)


class ChatReplyError(QuantDeskError):
    """The reply could not start or was cut off; the message is for the user."""


def _error_text(response: httpx.Response) -> str:
    try:
        body = json.loads(response.read())
        message = body.get("error", {}).get("message") or body.get("detail") or body
    except (ValueError, AttributeError):
        message = response.text[:300]
    return f"HTTP {response.status_code}: {message}"


def stream_reply(
    base_url: str,
    payload: dict[str, Any],
    api_key: str,
    on_delta: Callable[[str | tuple[str, str]], None],
    cancel: threading.Event,
) -> dict[str, Any]:
    """POST ``/v1/chat/completions`` with ``stream: true``; ``on_delta(text)`` as text arrives
    (a reasoning model's thinking as ``on_delta(("thinking", text))``).

    Returns the reply's meta: ``ttft_ms``, ``tokens``, ``tokens_per_s``, ``finish_reason``
    and ``cancelled`` (``cancel`` set: the reply stops, what arrived is kept). Raises
    :class:`ChatReplyError` in plain words.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    body = {**payload, "stream": True, "stream_options": {"include_usage": True}}
    started = time.monotonic()
    first: float | None = None
    deltas = 0
    usage_tokens: int | None = None
    finish_reason: str | None = None
    timeout = httpx.Timeout(10.0, read=300.0)
    try:
        with (
            httpx.Client(base_url=base_url, headers=headers, timeout=timeout) as client,
            client.stream("POST", "/v1/chat/completions", json=body) as response,
        ):
            if response.status_code != 200:
                raise ChatReplyError(_error_text(response))
            for chunk in sse_chunks(response.iter_lines(), cancel):
                usage = chunk.get("usage") or {}
                if usage.get("completion_tokens") is not None:
                    usage_tokens = int(usage["completion_tokens"])
                for choice in chunk.get("choices") or []:
                    if thought := (choice.get("delta") or {}).get("reasoning_content"):
                        on_delta(("thinking", thought))
                    text = (choice.get("delta") or {}).get("content") or ""
                    if choice.get("finish_reason"):
                        finish_reason = choice["finish_reason"]
                    if text:
                        if first is None:
                            first = time.monotonic()
                        deltas += 1
                        on_delta(text)
    except httpx.ConnectError as exc:
        raise ChatReplyError("Cannot reach the server. Is it running?") from exc
    except ChatError as exc:  # the server's own error, sent in the stream
        raise ChatReplyError(str(exc)) from exc
    except (httpx.HTTPError, ValueError) as exc:
        if not cancel.is_set():
            raise ChatReplyError(f"The reply was cut off: {exc}") from exc
    end = time.monotonic()
    tokens = usage_tokens if usage_tokens is not None else deltas
    gen_s = end - first if first is not None else 0.0
    return {
        "ttft_ms": round((first - started) * 1000, 1) if first is not None else None,
        "tokens": tokens,
        "tokens_per_s": round((tokens - 1) / gen_s, 1) if gen_s > 0 and tokens > 1 else None,
        "finish_reason": finish_reason,
        "cancelled": cancel.is_set(),
    }


def run_tool_reply(
    loop: ToolLoop,
    messages: list[dict[str, Any]],
    report: Callable[[object], None],
    cancel: threading.Event,
) -> dict[str, Any]:
    """A reply through the tool loop: ``report(("text" | "thinking" | "call", value))`` as
    it goes. Returns the meta ``stream_reply`` gives, with ``steps`` (the calls and their
    results, to send again with the next turns) and ``tool_calls`` (how many)."""
    calls: list[dict[str, Any]] = []

    def on_call(record: ToolCallRecord) -> None:
        call = dataclasses.asdict(record)
        calls.append(call)
        report(("call", call))

    callbacks = LoopCallbacks(
        on_text=lambda text: report(("text", text)),
        on_reasoning=lambda text: report(("thinking", text)),
        on_call=on_call,
    )
    started = time.monotonic()
    try:
        added = loop.run(messages, callbacks, cancel)
    except httpx.ConnectError as exc:
        raise ChatReplyError("Cannot reach the server. Is it running?") from exc
    except (ChatError, McpError) as exc:
        raise ChatReplyError(str(exc)) from exc
    final = added[-1] if added else {}
    answered = final.get("role") == "assistant" and not final.get("tool_calls")
    steps = added[:-1] if answered else added  # stopped after a call: its result is the end
    # the steps' own text is part of the reply's text, which follows them: sent once
    steps = [{**m, "content": None} if m.get("tool_calls") else m for m in steps]
    return {
        "steps": steps,
        "tool_calls": len(calls),
        "seconds": round(time.monotonic() - started, 1),
        "cancelled": cancel.is_set(),
    }
