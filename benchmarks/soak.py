#!/usr/bin/env python3
"""Soak: many streamed requests at a fixed concurrency against one ``quantdesk serve``.

Starts the server as a child process on 127.0.0.1 (a free port), sends ``--requests``
streamed chat requests from ``--concurrency`` clients (closed loop, distinct prompts,
``max_tokens`` with ``ignore_eos``), samples the server's RSS once a second, and reports
errors, the RSS at the start and the end, and the RSS trend over the second half (a
least-squares slope in MiB per 100 requests): a leak shows as a slope well above zero.
Writes ``soak.json`` into ``--out``.

  .venv/bin/python benchmarks/soak.py --requests 1000 --concurrency 16 -np 16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


def start_server(args: argparse.Namespace, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port_file = workdir / "port"
    log = (workdir / "server.log").open("wb")
    cmd = [
        sys.executable,
        "-m",
        "backend.entrypoints.main",
        "serve",
        "-m",
        args.model,
        "--port",
        "0",
    ]
    cmd += ["--port-file", str(port_file), "-c", str(args.ctx), "-np", str(args.parallel)]
    cmd += ["-t", str(args.threads)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: see {workdir / 'server.log'}")
        if port_file.exists():
            base = f"http://127.0.0.1:{port_file.read_text().strip()}"
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    return proc, base
            except httpx.TransportError:
                pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not become healthy in 300 s")


def sample_rss(pid: int, stop: threading.Event, out: list[tuple[float, int, float]]) -> None:
    proc = psutil.Process(pid)
    t0 = time.monotonic()
    while not stop.is_set():
        out.append((time.monotonic() - t0, proc.memory_info().rss, 0.0))
        stop.wait(1.0)


async def run_load(base: str, args: argparse.Namespace) -> dict[str, Any]:
    done = 0
    errors: list[str] = []
    finished_at: list[float] = []
    counter = iter(range(args.requests))
    t0 = time.monotonic()

    async def client(c: int, http: httpx.AsyncClient) -> None:
        nonlocal done
        for i in counter:
            body = {
                "messages": [
                    {"role": "user", "content": f"Request {i} from client {c}: tell a story."}
                ],
                "max_tokens": args.max_tokens,
                "ignore_eos": True,
                "stream": True,
            }
            try:
                chunks = 0
                async with http.stream("POST", f"{base}/v1/chat/completions", json=body) as r:
                    if r.status_code != 200:
                        errors.append(f"HTTP {r.status_code}: {(await r.aread())[:200]!r}")
                        continue
                    last = ""
                    async for line in r.aiter_lines():
                        if line.startswith("data: "):
                            chunks += 1
                            last = line
                    if last != "data: [DONE]":
                        errors.append(f"stream ended without [DONE]: {last[:200]}")
                        continue
                done += 1
                finished_at.append(time.monotonic() - t0)
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

    async with httpx.AsyncClient(timeout=300) as http:
        await asyncio.gather(*(client(c, http) for c in range(args.concurrency)))
    return {
        "completed": done,
        "errors": errors,
        "seconds": time.monotonic() - t0,
        "finished_at": finished_at,
    }


def slope_mib_per_100(samples: list[tuple[float, int]], finished_at: list[float]) -> float:
    """RSS trend over the second half of the run, in MiB per 100 completed requests."""
    if len(samples) < 4 or not finished_at:
        return 0.0
    half = samples[len(samples) // 2 :]
    xs = [sum(1 for f in finished_at if f <= t) for t, _ in half]
    ys = [rss / MIB for _, rss in half]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return 0.0
    return 100 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="streamed requests in all")
    parser.add_argument("--concurrency", type=int, default=16, help="clients at once")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens per reply")
    parser.add_argument("-m", "--model", default="default", help="GGUF path or 'default'")
    parser.add_argument("-c", "--ctx", type=int, default=8192, help="context size")
    parser.add_argument("-np", "--parallel", type=int, default=16, help="parallel slots")
    parser.add_argument("-t", "--threads", type=int, default=2, help="CPU threads")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "soak")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = start_server(args, Path(tmp))
        samples: list[tuple[float, int, float]] = []
        stop = threading.Event()
        sampler = threading.Thread(target=sample_rss, args=(proc.pid, stop, samples))
        rss_start = psutil.Process(proc.pid).memory_info().rss
        sampler.start()
        try:
            load = asyncio.run(run_load(base, args))
        finally:
            stop.set()
            sampler.join()
            alive = proc.poll() is None
            rss_end = psutil.Process(proc.pid).memory_info().rss if alive else 0
            proc.terminate()
            proc.wait(timeout=30)
    points = [(t, rss) for t, rss, _ in samples]
    result = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "completed": load["completed"],
        "errors": len(load["errors"]),
        "first_errors": load["errors"][:5],
        "seconds": round(load["seconds"], 1),
        "server_alive_at_end": alive,
        "rss_start_mib": round(rss_start / MIB, 1),
        "rss_end_mib": round(rss_end / MIB, 1),
        "rss_peak_mib": round(max(r for _, r in points) / MIB, 1) if points else None,
        "rss_slope_mib_per_100_requests_second_half": round(
            slope_mib_per_100(points, load["finished_at"]), 3
        ),
        "rss_samples_mib": [round(r / MIB, 1) for _, r in points],
    }
    (args.out / "soak.json").write_text(json.dumps(result, indent=2))
    shown = {k: v for k, v in result.items() if k != "rss_samples_mib"}
    print(json.dumps(shown, indent=2))
    return 0 if result["errors"] == 0 and alive else 1


if __name__ == "__main__":
    sys.exit(main())
