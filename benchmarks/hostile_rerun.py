#!/usr/bin/env python3
"""Rerun issue 14's hostile requests against a child ``quantdesk serve`` and report:

- server deaths: after each case, is the process alive and is /health 200? (a dead server
  is restarted so the remaining cases still run);
- the longest /health stall while each case is prepared (a thread polls /health every
  20 ms during the case);
- orphaned sequences: 8 non-streamed clients with a 1 s timeout, then how many
  sequences still run one engine step later.

  .venv/bin/python benchmarks/hostile_rerun.py [--out bench-results/hostile]

Writes ``hostile.json`` into --out and prints a table. Loopback only; bounded in count.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
MSG = [{"role": "user", "content": "Give me a JSON object."}]


def _schema(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"schema": schema}}


def _chat(**extra: Any) -> tuple[str, dict[str, Any] | bytes]:
    return "/v1/chat/completions", {"messages": MSG, "max_tokens": 32, **extra}


CASES: dict[str, Callable[[], tuple[str, dict[str, Any] | bytes]]] = {
    "json_object + ignore_eos": lambda: _chat(
        response_format={"type": "json_object"}, ignore_eos=True
    ),
    "grammar + ignore_eos": lambda: _chat(grammar='root ::= "yes" | "no"', ignore_eos=True),
    "json_schema const + ignore_eos": lambda: _chat(
        response_format=_schema({"const": 1}), ignore_eos=True
    ),
    "maxItems 1e6": lambda: _chat(
        response_format=_schema(
            {"type": "array", "items": {"type": "integer"}, "maxItems": 1_000_000}
        )
    ),
    "maxLength 1e6": lambda: _chat(
        response_format=_schema({"type": "string", "maxLength": 1_000_000})
    ),
    "grammar nested 100k": lambda: _chat(
        grammar="root ::= " + "(" * 100_000 + '"a"' + ")" * 100_000
    ),
    "grammar no next token": lambda: _chat(grammar='root ::= "\\x00"'),
    "enum of 100k": lambda: _chat(
        response_format=_schema({"enum": [f"v{i}" for i in range(100_000)]})
    ),
    "20 MB prompt": lambda: ("/v1/completions", {"prompt": "word " * 4_000_000, "max_tokens": 1}),
    "4 MB completion prompt": lambda: (
        "/v1/completions",
        {"prompt": "word " * 800_000, "max_tokens": 1},
    ),
    "4 MB embedding input": lambda: ("/v1/embeddings", {"input": "word " * 800_000}),
    "100k tiny messages": lambda: _chat(messages=[{"role": "user", "content": "hi"}] * 100_000),
    "4,000 messages of 1 KB": lambda: _chat(
        messages=[{"role": "user", "content": "word " * 200}] * 4_000
    ),
    "100k stop strings": lambda: _chat(stop=[f"s{i}" for i in range(100_000)]),
    "tool_calls without function": lambda: _chat(
        messages=[*MSG, {"role": "assistant", "tool_calls": [{"id": "x"}]}]
    ),
    "tool call without name": lambda: _chat(
        messages=[
            *MSG,
            {"role": "assistant", "tool_calls": [{"id": "x", "function": {"arguments": "{}"}}]},
        ]
    ),
    "function as a string": lambda: _chat(
        messages=[*MSG, {"role": "assistant", "tool_calls": [{"id": "x", "function": "f"}]}]
    ),
    "tool_choice.function a string": lambda: _chat(
        tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
        tool_choice={"type": "function", "function": "f"},
    ),
    "lone surrogate in model": lambda: (
        "/v1/chat/completions",
        b'{"model": "\\ud800", "messages": [{"role": "user", "content": "hi"}]}',
    ),
    "lone surrogate in grammar": lambda: (
        "/v1/chat/completions",
        b'{"grammar": "root ::= \\"\\ud800\\"", "messages": [{"role": "user", "content": "hi"}]}',
    ),
}


class Server:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.base = ""

    def start(self) -> None:
        port_file = self.workdir / "port"
        port_file.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "backend.entrypoints.main",
            "serve",
            "-m",
            "default",
            "--port",
            "0",
        ]
        cmd += ["--port-file", str(port_file), "-c", "4096", "-np", "8", "-t", "2"]
        log = (self.workdir / "server.log").open("ab")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if port_file.exists():
                self.base = f"http://127.0.0.1:{port_file.read_text().strip()}"
                try:
                    if httpx.get(f"{self.base}/health", timeout=2).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
            time.sleep(0.1)
        raise SystemExit("the server did not start")

    def alive(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            return httpx.get(f"{self.base}/health", timeout=10).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def run_case(server: Server, path: str, body: dict[str, Any] | bytes) -> dict[str, Any]:
    stalls: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=30) as http:
            while not stop.is_set():
                t0 = time.monotonic()
                try:
                    http.get(f"{server.base}/health")
                except httpx.TransportError:
                    break
                stalls.append(time.monotonic() - t0)
                stop.wait(0.02)

    poller = threading.Thread(target=poll)
    poller.start()
    t0 = time.monotonic()
    try:
        if isinstance(body, bytes):
            r = httpx.post(
                f"{server.base}{path}",
                content=body,
                headers={"content-type": "application/json"},
                timeout=300,
            )
        else:
            r = httpx.post(f"{server.base}{path}", json=body, timeout=300)
        status: int | str = r.status_code
        message = r.json().get("error", {}).get("message", "")[:120] if r.status_code >= 400 else ""
    except httpx.HTTPError as exc:
        status, message = type(exc).__name__, str(exc)[:120]
    seconds = time.monotonic() - t0
    stop.set()
    poller.join()
    return {
        "status": status,
        "seconds": round(seconds, 2),
        "health_max_s": round(max(stalls, default=0.0), 3),
        "message": message,
    }


def orphans(server: Server) -> dict[str, Any]:
    """8 clients give up after 1 s; how many sequences are left running, and how soon."""
    before = httpx.get(f"{server.base}/v1/stats", timeout=30).json()
    body = {"messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 400}
    body["ignore_eos"] = True

    def client() -> None:
        with contextlib.suppress(httpx.TimeoutException):
            httpx.post(f"{server.base}/v1/chat/completions", json=body, timeout=1.0)

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gave_up = time.monotonic()
    left: list[tuple[float, int]] = []
    while time.monotonic() - gave_up < 10:
        stats = httpx.get(f"{server.base}/v1/stats", timeout=30).json()
        running = stats["requests"]["running"] + stats["requests"]["queued"]
        left.append((round(time.monotonic() - gave_up, 2), running))
        if running == 0:
            break
        time.sleep(0.05)
    after = httpx.get(f"{server.base}/v1/stats", timeout=30).json()
    return {
        "running_after": left[-1][1],
        "seconds_to_zero": left[-1][0] if left[-1][1] == 0 else None,
        "cancelled": after["requests"]["cancelled"] - before["requests"]["cancelled"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "hostile")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    deaths = 0
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp))
        server.start()
        try:
            for name, make in CASES.items():
                path, body = make()
                result = run_case(server, path, body)
                result["server_alive"] = server.alive()
                if not result["server_alive"]:
                    deaths += 1
                    server.stop()
                    server.start()
                results[name] = result
                print(f"{name:<32} {result}", flush=True)
            results["orphans"] = orphans(server)
        finally:
            server.stop()
    summary = {
        "cases": len(CASES),
        "server_deaths": deaths,
        "longest_health_stall_s": max(
            r["health_max_s"] for k, r in results.items() if k != "orphans"
        ),
        "orphans": results["orphans"],
    }
    (args.out / "hostile.json").write_text(json.dumps({"summary": summary, **results}, indent=2))
    print(json.dumps(summary, indent=2))
    return 0 if deaths == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
