"""``quantdesk serve --rpc`` over two ``quantdesk worker`` processes on loopback ports
(CPU devices): the same greedy output as a local run, the layers held by the workers, and
what a client sees when a worker dies mid-stream."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest

from tests.rpc.conftest import QUANTDESK, Worker, needs_rpc
from tests.server.conftest import child_base_url, wait_healthy

pytestmark = [needs_rpc, pytest.mark.model]

# one slot, one thread, no drafting: the plainest engine, locally and over RPC
ENGINE = ["-t", "1", "-c", "1024", "-np", "1", "--spec-type", "none", "--seed", "1"]
PROMPT = "The three most important inventions of the twentieth century were"
MiB = 1 << 20


@contextmanager
def serve(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    """``quantdesk serve ARGS`` as a child process on a free port: (process, base URL, log)."""
    folder.mkdir(parents=True, exist_ok=True)
    port_file, log = folder / "port", folder / "serve.log"
    command = [*QUANTDESK, "serve", *args, "--port", "0", "--port-file", str(port_file)]
    with log.open("w") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
    try:
        base = child_base_url(proc, port_file)
        wait_healthy(base)
        yield proc, base, log
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=60)


def greedy(base: str, model: str | None = None) -> dict[str, object]:
    body: dict[str, object] = {"prompt": PROMPT, "max_tokens": 48, "temperature": 0, "logprobs": 1}
    if model:
        body["model"] = model
    answer = httpx.post(f"{base}/v1/completions", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    choice = answer.json()["choices"][0]
    return {"text": choice["text"], "tokens": choice["logprobs"]["tokens"]}


def rss(worker: Worker) -> int:
    return int(psutil.Process(worker.proc.pid).memory_info().rss)


def test_two_workers_give_the_local_greedy_output_and_hold_the_layers(
    start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    workers = [start_worker(), start_worker()]
    with serve(tmp_path / "local", "-m", "default", *ENGINE) as (_, base, _):
        local = greedy(base)
    idle = [rss(worker) for worker in workers]
    endpoints = ",".join(worker.endpoint for worker in workers)
    with serve(tmp_path / "rpc", "-m", "default", *ENGINE, "--rpc", endpoints) as (_, base, log):
        remote = greedy(base)  # -m with --rpc: a router's child serves it, loaded by now
        loaded = [rss(worker) for worker in workers]
        w0, w1 = (worker.endpoint for worker in workers)
        assert f"loading across RPC0 ({w0}), RPC1 ({w1})" in log.read_text()
    assert remote == local  # token for token
    assert len(local["tokens"]) == 48  # type: ignore[arg-type]
    # each worker holds part of the model's ~94 MiB of weights plus its KV, in its own memory
    for worker, before, after in zip(workers, idle, loaded, strict=True):
        assert after - before > 16 * MiB, (worker.endpoint, before, after)
    # the server gone, both workers are still up and free again for the next one
    for worker in workers:
        assert worker.proc.poll() is None
        assert "Client connection closed" in worker.output()


def _stream_until_error(
    base: str, model: str | None, on_first_token: Callable[[], None]
) -> tuple[list[str], float]:
    """Stream a long completion, call ``on_first_token`` once a token arrived; the lines
    read after it and the seconds from it to the end of the stream (or the broken connection)."""
    body: dict[str, object] = {
        "prompt": PROMPT,
        "max_tokens": 2000,
        "ignore_eos": True,
        "stream": True,
    }
    if model:
        body["model"] = model
    lines: list[str] = []
    started = 0.0
    try:
        with httpx.stream("POST", f"{base}/v1/completions", json=body, timeout=60) as answer:
            for line in answer.iter_lines():
                if not started and line.startswith("data: {"):
                    on_first_token()
                    started = time.monotonic()
                elif started and line:
                    lines.append(line)
    except httpx.TransportError as exc:
        lines.append(f"transport error: {type(exc).__name__}")
    return lines, time.monotonic() - started


def test_a_worker_killed_mid_stream_fails_the_request_and_the_router_stays_up(
    start_worker: Callable[..., Worker], tmp_path: Path, smollm2_path: Path
) -> None:
    """Router mode: the model server is a child process, so llama.cpp's abort on a lost
    worker (GGML_ABORT: "Remote RPC server crashed") takes down that child only."""
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    os.symlink(smollm2_path, home / "models" / "alpha.gguf")
    workers = [start_worker(), start_worker()]
    endpoints = ",".join(worker.endpoint for worker in workers)
    env = {"QUANTDESK_HOME": str(home)}
    with serve(tmp_path / "router", *ENGINE, "--rpc", endpoints, env=env) as (proc, base, _log):
        lines, seconds = _stream_until_error(base, "alpha", workers[1].proc.kill)
        print(f"stream ended {seconds:.2f} s after the worker was killed: {lines[-2:]}")
        errors = [line for line in lines if '"error"' in line]
        assert errors, lines[-5:]
        assert f"lost RPC worker {workers[1].endpoint}" in errors[-1]  # which one, by name
        assert workers[0].endpoint not in errors[-1]
        assert not any(
            line == "data: [DONE]" and i < len(lines) - 1 for i, line in enumerate(lines)
        )
        assert proc.poll() is None and httpx.get(f"{base}/health", timeout=10).status_code == 200
        # loading it again over the dead worker is refused with the worker's name, not a crash
        again = httpx.post(
            f"{base}/v1/completions",
            json={"model": "alpha", "prompt": "Hi", "max_tokens": 4},
            timeout=120,
        )
        assert again.status_code >= 500 and workers[1].endpoint in again.text, again.text
        assert proc.poll() is None
    assert workers[0].proc.poll() is None  # the live worker is unharmed


def test_serve_m_with_rpc_stays_up_when_its_worker_dies(
    start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    """``serve -m X --rpc ...`` serves X from a router's child process: llama.cpp aborts
    that child when a worker is lost, the stream ends with an error naming the worker, and
    the server (the router) stays up. Run as one process, it was aborted with the child."""
    workers = [start_worker(), start_worker()]
    endpoints = ",".join(worker.endpoint for worker in workers)
    with serve(tmp_path / "single", "-m", "default", *ENGINE, "--rpc", endpoints) as (
        proc,
        base,
        log,
    ):
        lines, seconds = _stream_until_error(base, None, workers[1].proc.kill)
        print(f"stream ended {seconds:.2f} s after the worker was killed: {lines[-2:]}")
        errors = [line for line in lines if '"error"' in line]
        assert errors and f"lost RPC worker {workers[1].endpoint}" in errors[-1], lines[-3:]
        assert "data: [DONE]" not in lines
        assert proc.poll() is None and httpx.get(f"{base}/health", timeout=10).status_code == 200
        assert "Remote RPC server crashed" in log.read_text()


def test_an_unreachable_worker_is_a_load_error_not_an_abort(tmp_path: Path) -> None:
    from tests.rpc.conftest import free_port

    done = subprocess.run(
        [
            *QUANTDESK,
            "serve",
            "-m",
            "default",
            *ENGINE,
            "--rpc",
            f"127.0.0.1:{free_port()}",
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and done.returncode != -signal.SIGABRT
    assert "unreachable" in done.stdout + done.stderr
