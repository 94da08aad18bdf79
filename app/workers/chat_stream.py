"""Stream one chat completion (SSE) in a thread; a signal per text delta."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import httpx
from PySide6.QtCore import QThread, Signal

log = logging.getLogger(__name__)


def _error_text(response: httpx.Response) -> str:
    try:
        body = json.loads(response.read())
        message = body.get("error", {}).get("message") or body.get("detail") or body
    except (ValueError, AttributeError):
        message = response.text[:300]
    return f"HTTP {response.status_code}: {message}"


class ChatStreamWorker(QThread):
    """POST ``/v1/chat/completions`` with ``stream: true`` and report as it arrives.

    ``finished_reply(meta)`` carries ``ttft_ms``, ``tokens``, ``tokens_per_s``,
    ``finish_reason`` and ``cancelled``; ``failed(message)`` a plain-words error.
    """

    delta_received = Signal(str)
    finished_reply = Signal(object)
    failed = Signal(str)

    def __init__(self, base_url: str, payload: dict[str, Any], api_key: str = "") -> None:
        super().__init__()
        self.base_url = base_url
        self.payload = {**payload, "stream": True, "stream_options": {"include_usage": True}}
        self.api_key = api_key
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        started = time.monotonic()
        first: float | None = None
        deltas = 0
        usage_tokens: int | None = None
        finish_reason: str | None = None
        timeout = httpx.Timeout(10.0, read=300.0)
        try:
            with (
                httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout) as client,
                client.stream("POST", "/v1/chat/completions", json=self.payload) as response,
            ):
                if response.status_code != 200:
                    self.failed.emit(_error_text(response))
                    return
                for line in response.iter_lines():
                    if self._cancel.is_set():
                        break
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if chunk.get("error"):
                        self.failed.emit(str(chunk["error"].get("message", chunk["error"])))
                        return
                    usage = chunk.get("usage") or {}
                    if usage.get("completion_tokens") is not None:
                        usage_tokens = int(usage["completion_tokens"])
                    for choice in chunk.get("choices") or []:
                        text = (choice.get("delta") or {}).get("content") or ""
                        if choice.get("finish_reason"):
                            finish_reason = choice["finish_reason"]
                        if text:
                            if first is None:
                                first = time.monotonic()
                            deltas += 1
                            self.delta_received.emit(text)
        except httpx.ConnectError:
            self.failed.emit("Cannot reach the server. Is it running?")
            return
        except (httpx.HTTPError, ValueError) as exc:
            if not self._cancel.is_set():
                self.failed.emit(f"The reply was cut off: {exc}")
                return
        end = time.monotonic()
        tokens = usage_tokens if usage_tokens is not None else deltas
        gen_s = end - first if first is not None else 0.0
        self.finished_reply.emit(
            {
                "ttft_ms": round((first - started) * 1000, 1) if first is not None else None,
                "tokens": tokens,
                "tokens_per_s": round((tokens - 1) / gen_s, 1)
                if gen_s > 0 and tokens > 1
                else None,
                "finish_reason": finish_reason,
                "cancelled": self._cancel.is_set(),
            }
        )
