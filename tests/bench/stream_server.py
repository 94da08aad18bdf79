"""A tiny real HTTP server that streams OpenAI-style SSE with known timings, for testing the
load generator (the thing under test is the client; this is its fixture)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class StreamServerOptions:
    first_token_delay_s: float = 0.03
    prefill_s_per_word: float = 0.0
    """Extra time to first token per prompt word: a server without a prompt cache."""
    token_delay_s: float = 0.004
    send_usage: bool = True
    honour_ignore_eos: bool = True
    natural_stop_after: int = 5
    api_key: str | None = None
    model_id: str = "tiny-test-model"
    answer: Callable[[str], list[str]] | None = None
    """Content pieces to stream for a prompt (chat: the messages' contents joined by spaces),
    cut at max_tokens and, with ignore_eos honoured, padded to it; None: " t0", " t1", ..."""


@dataclass
class StreamServerState:
    options: StreamServerOptions
    bodies: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(state: StreamServerState) -> type[BaseHTTPRequestHandler]:
    opts = state.options

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _authorised(self) -> bool:
            if opts.api_key is None:
                return True
            if self.headers.get("Authorization") == f"Bearer {opts.api_key}":
                return True
            self._json(401, {"error": {"message": "invalid api key", "type": "auth"}})
            return False

        def do_GET(self) -> None:
            if not self._authorised():
                return
            if self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": opts.model_id}]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            if not self._authorised():
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.bodies.append(body)
            chat = self.path == "/v1/chat/completions"
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                self._json(404, {"error": {"message": "not found"}})
                return
            prompt = " ".join(m["content"] for m in body["messages"]) if chat else body["prompt"]
            n = int(body["max_tokens"])
            forced = opts.honour_ignore_eos and body.get("ignore_eos")
            pieces = opts.answer(prompt)[:n] if opts.answer else []
            if not forced:
                n = len(pieces) if opts.answer else min(n, opts.natural_stop_after)
            pieces += [f" t{i}" for i in range(len(pieces), n)]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            time.sleep(opts.first_token_delay_s + opts.prefill_s_per_word * len(prompt.split()))
            for i, piece in enumerate(pieces):
                if i:
                    time.sleep(opts.token_delay_s)
                choice: dict[str, Any] = (
                    {"index": 0, "delta": {"content": piece}, "finish_reason": None}
                    if chat
                    else {"index": 0, "text": piece, "finish_reason": None}
                )
                self._event({"choices": [choice]})
            last: dict[str, Any] = (
                {"index": 0, "delta": {}, "finish_reason": "length"}
                if chat
                else {"index": 0, "text": "", "finish_reason": "length"}
            )
            self._event({"choices": [last]})
            if opts.send_usage and (body.get("stream_options") or {}).get("include_usage"):
                usage = {
                    "prompt_tokens": len(prompt.split()),
                    "completion_tokens": n,
                    "total_tokens": len(prompt.split()) + n,
                }
                self._event({"choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, payload: dict[str, Any]) -> None:
            self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()

    return Handler


@contextmanager
def stream_server(
    options: StreamServerOptions | None = None,
) -> Iterator[tuple[str, StreamServerState]]:
    """Serve on 127.0.0.1 at a free port; yields ``(url, state)``."""
    state = StreamServerState(options or StreamServerOptions())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
