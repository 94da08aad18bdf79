#!/usr/bin/env python3
"""RPC workers on one machine: tok/s of ``quantdesk serve`` alone against ``quantdesk serve
--rpc`` over two ``quantdesk worker`` processes on loopback ports (issue 20).

Both servers serve the embedded model with the same knobs (``-t``, ``-np``, ``-c``, no
drafting) and stay up the whole run; the workers use ``-t`` threads each and compute the
layers one after the other, so both sides compute with the same threads at a time. Each pass
measures, for each concurrency level, ``c`` streams of ``--max-tokens`` tokens (ignore_eos)
at once, local and RPC taking turns in an order that alternates from pass to pass; the
figure is aggregate generated tokens/s, and the per-token cost of RPC at concurrency 1 is
``1/rpc - 1/local``. Writes JSON to --out and prints a table (medians over the passes).
The machine is shared: read the ratios, not the absolute numbers.

  .venv/bin/python -m benchmarks.rpc_loopback --passes 3 --concurrency 1,8
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx

from backend.llama.rpc_errors import RpcEndpointError
from backend.llama.rpc_probe import probe_worker

ROOT = Path(__file__).resolve().parents[1]
QUANTDESK = [sys.executable, "-m", "backend.entrypoints.main"]
PROMPT = "Write a long story about a lighthouse keeper and the sea."


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _process(command: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _worker(stack: ExitStack, threads: int, logs: Path) -> str:
    port = _free_port()
    endpoint = f"127.0.0.1:{port}"
    command = [*QUANTDESK, "worker", "--port", str(port), "-t", str(threads)]
    proc = stack.enter_context(_process(command, logs / f"worker-{port}.log"))
    deadline = time.monotonic() + 60
    while True:
        try:
            probe_worker(endpoint, timeout_s=2)
            return endpoint
        except RpcEndpointError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _server(stack: ExitStack, knobs: list[str], logs: Path, name: str) -> str:
    port_file = logs / f"{name}.port"
    command = [*QUANTDESK, "serve", "-m", "default", *knobs, "--port", "0"]
    command += ["--port-file", str(port_file)]
    proc = stack.enter_context(_process(command, logs / f"{name}.log"))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} server exited; see {logs / name}.log")
        if port_file.exists() and port_file.read_text().strip():
            base = f"http://127.0.0.1:{port_file.read_text().strip()}"
            try:
                if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                    return base
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    raise TimeoutError(f"{name} server not healthy")


def _stream(base: str, max_tokens: int) -> int:
    body = {"prompt": PROMPT, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0}
    answer = httpx.post(f"{base}/v1/completions", json=body, timeout=600)
    answer.raise_for_status()
    return int(answer.json()["usage"]["completion_tokens"])


def _wave(base: str, concurrency: int, max_tokens: int) -> float:
    """Aggregate generated tokens/s of ``concurrency`` requests at once."""
    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(pool.map(lambda _: _stream(base, max_tokens), range(concurrency)))
    return tokens / (time.monotonic() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("-t", "--threads", type=int, default=1)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "rpc-loopback"
    )
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    parallel = max(levels)
    knobs = ["-t", str(args.threads), "-np", str(parallel), "-c", str(512 * parallel)]
    knobs += ["--spec-type", "none", "--seed", "1"]
    runs: dict[str, dict[int, list[float]]] = {
        "local": {c: [] for c in levels},
        "rpc": {c: [] for c in levels},
    }
    with tempfile.TemporaryDirectory(prefix="rpc-bench-") as tmp, ExitStack() as stack:
        logs = Path(tmp)
        endpoints = [_worker(stack, args.threads, logs) for _ in range(2)]
        bases = {
            "local": _server(stack, knobs, logs, "local"),
            "rpc": _server(stack, [*knobs, "--rpc", ",".join(endpoints)], logs, "rpc"),
        }
        for base in bases.values():  # warm-up
            _wave(base, 1, 8)
        for index in range(args.passes):
            order = ["local", "rpc"] if index % 2 == 0 else ["rpc", "local"]
            for c in levels:
                for name in order:
                    runs[name][c].append(_wave(bases[name], c, args.max_tokens))
            print(f"pass {index + 1}/{args.passes} done", file=sys.stderr)
    result: dict[str, object] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "knobs": knobs,
        "max_tokens": args.max_tokens,
        "passes": args.passes,
        "tok_s": {name: {str(c): v for c, v in by_c.items()} for name, by_c in runs.items()},
    }
    rows = []
    for c in levels:
        local = statistics.median(runs["local"][c])
        rpc = statistics.median(runs["rpc"][c])
        ratios = [r / loc for r, loc in zip(runs["rpc"][c], runs["local"][c], strict=True)]
        row = {
            "concurrency": c,
            "local_tok_s": round(local, 1),
            "rpc_tok_s": round(rpc, 1),
            "rpc_over_local": round(statistics.median(ratios), 3),
            "added_ms_per_token_step": round(1000 * (1 / rpc - 1 / local) * c, 2),
        }
        rows.append(row)
        print(json.dumps(row))
    result["summary"] = rows
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rpc-loopback.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
