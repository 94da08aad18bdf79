"""One streamed request against an OpenAI-compatible server, timed on the client."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from backend.bench.config import BenchConfig
from backend.bench.results import RequestRecord


def build_body(
    config: BenchConfig,
    model: str | None,
    prompt: str,
    *,
    system: str = "",
    history: list[dict[str, str]] | None = None,
    max_tokens: int | None = None,
    ignore_eos: bool | None = None,
    chat: bool | None = None,
) -> dict[str, Any]:
    """The JSON body of one streaming request, by default with ``config``'s fixed output
    length. ``chat`` (default: ``config.endpoint``) sends ``messages``: ``system``, then
    ``history`` (earlier turns), then ``prompt`` as the user's message."""
    body: dict[str, Any] = {
        "max_tokens": config.max_tokens if max_tokens is None else max_tokens,
        "temperature": config.temperature,
        "stream": True,
    }
    if model:
        body["model"] = model
    if config.ignore_eos if ignore_eos is None else ignore_eos:
        body["ignore_eos"] = True
    if config.stream_usage:
        body["stream_options"] = {"include_usage": True}
    if config.endpoint == "chat" if chat is None else chat:
        messages = [{"role": "system", "content": system}] if system else []
        messages.extend(history or [])
        messages.append({"role": "user", "content": prompt})
        body["messages"] = messages
    else:
        body["prompt"] = f"{system}\n\n{prompt}" if system else prompt
    body.update(config.extra_body)
    return body


def endpoint_path(chat: bool) -> str:
    return "/chat/completions" if chat else "/completions"


def _content_of(chunk: dict[str, Any], chat: bool) -> str:
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    choice = choices[0]
    if chat:
        delta = choice.get("delta") or {}
        return str(delta.get("content") or "")
    return str(choice.get("text") or "")


def _error_text(status: int, raw: bytes) -> str:
    try:
        payload = json.loads(raw)
        message = payload.get("error", {}).get("message") or payload.get("detail") or payload
    except (ValueError, AttributeError):
        message = raw[:200].decode("utf-8", "replace")
    return f"HTTP {status}: {message}"


async def stream_request(
    client: httpx.AsyncClient, key: str, body: dict[str, Any]
) -> RequestRecord:
    """Send ``body`` (to the chat API when it has ``messages``) and time it: TTFT is request
    start to the first non-empty content chunk.

    Tokens are taken from ``usage.completion_tokens`` when the server streams it, else
    the content chunks are counted. Errors are recorded on the result, not raised.
    """
    chat = "messages" in body
    record = RequestRecord(key=key, start=time.perf_counter(), end=0.0)
    chunks = 0
    pieces: list[str] = []
    try:
        async with client.stream("POST", endpoint_path(chat), json=body) as response:
            if response.status_code != 200:
                record.error = _error_text(response.status_code, await response.aread())
                return record
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                now = time.perf_counter()
                try:
                    chunk = json.loads(payload)
                except ValueError:
                    record.error = f"bad stream chunk: {payload[:100]!r}"
                    return record
                if "error" in chunk:
                    err = chunk["error"]
                    record.error = str(err.get("message", err) if isinstance(err, dict) else err)
                    return record
                if content := _content_of(chunk, chat):
                    pieces.append(content)
                    chunks += 1
                    record.chunk_times.append(now)
                    if record.first_token is None:
                        record.first_token = now
                for choice in chunk.get("choices") or []:
                    if choice.get("finish_reason"):
                        record.finish_reason = str(choice["finish_reason"])
                usage = chunk.get("usage")
                if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
                    record.completion_tokens = int(usage["completion_tokens"])
                    record.tokens_from_usage = True
                    if usage.get("prompt_tokens") is not None:
                        record.prompt_tokens = int(usage["prompt_tokens"])
    except httpx.HTTPError as exc:
        record.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    finally:
        record.end = time.perf_counter()
        record.text = "".join(pieces)
    if not record.tokens_from_usage:
        record.completion_tokens = chunks
    return record
