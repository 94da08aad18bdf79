"""The router over HTTP with real clients: two models streaming at once through the
OpenAI SDK, one model's server killed while the other streams on, llama-server's
model-management routes, labelled stats and metrics."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import psutil
import pytest
from openai import OpenAI

from backend.hub.library import ModelLibrary
from backend.router.model_pool import WORKDIR_PREFIX, remove_stale_workdirs
from backend.router.runner import RouterHandle
from tests.router.conftest import EMBEDDED, model_servers
from tests.server.conftest import child_base_url, wait_healthy

pytestmark = pytest.mark.model

SERVE = [sys.executable, "-m", "backend.entrypoints.main", "serve", "--port", "0"]
SMALL = ["-c", "512", "-np", "1", "-t", "1"]
MESSAGES = [{"role": "user", "content": "Tell me a long story about a lighthouse."}]


@pytest.fixture
def q8_model(library: ModelLibrary, smollm2_path: Path) -> str:
    """A Q8_0 requantised from the embedded Q4_1, in the library: another id, other weights."""
    from quantize.quantizer import quantize_gguf

    result = quantize_gguf(
        smollm2_path, "Q8_0", library.root, allow_requantize=True, threads=2, model_name="smol"
    )
    return result.path.name.removesuffix(".gguf")


def _client(handle: RouterHandle, api_key: str = "unused") -> OpenAI:
    return OpenAI(base_url=f"{handle.base_url}/v1", api_key=api_key, max_retries=0)


def _models(handle: RouterHandle, path: str = "/v1/models") -> dict[str, dict[str, Any]]:
    data = httpx.get(f"{handle.base_url}{path}", timeout=30).json()["data"]
    return {card["id"]: card for card in data}


def test_a_q4_1_and_a_q8_0_stream_at_once(
    start_router: Callable[..., RouterHandle], q8_model: str
) -> None:
    router = start_router()
    client = _client(router)
    assert {c["status"]["value"] for c in _models(router).values()} == {"unloaded"}
    beta = q8_model
    texts: dict[str, list[str]] = {"alpha": [], beta: []}
    ids: dict[str, set[str]] = {"alpha": set(), beta: set()}

    def stream(model: str) -> None:
        for chunk in client.chat.completions.create(
            model=model, messages=MESSAGES, max_tokens=24, temperature=0, stream=True
        ):  # type: ignore[call-overload]
            ids[model].add(chunk.model)
            if chunk.choices and chunk.choices[0].delta.content:
                texts[model].append(chunk.choices[0].delta.content)

    threads = [threading.Thread(target=stream, args=(m,)) for m in texts for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(texts.values()), texts
    assert ids == {"alpha": {"alpha"}, beta: {beta}}
    cards = _models(router)
    for model in ("alpha", beta):
        assert cards[model]["status"]["value"] == "loaded"
        assert cards[model]["memory_bytes"] > 0
        assert router.pool.entry(model).loads == 1
    assert cards[EMBEDDED]["status"]["value"] == "unloaded"
    assert _models(router, "/models")[beta]["status"] == {"value": "loaded"}
    assert cards[beta]["memory_bytes"] > cards["alpha"]["memory_bytes"]  # 8-bit weights
    # each model's health, stats and metrics, labelled
    assert httpx.get(f"{router.base_url}/health", params={"model": "alpha"}).status_code == 200
    r = httpx.get(f"{router.base_url}/health", params={"model": EMBEDDED})
    assert (r.status_code, r.json()["status"]) == (503, "unloaded")
    stats = httpx.get(f"{router.base_url}/v1/stats", timeout=30).json()["data"]
    assert {s["model"]["id"] for s in stats} == {"alpha", beta}
    one = httpx.get(f"{router.base_url}/v1/stats", params={"model": beta}, timeout=30).json()
    assert one["model"]["id"] == beta and one["requests"]["completed"] == 2
    metrics = httpx.get(f"{router.base_url}/metrics", timeout=30).text
    assert 'quantdesk_requests_completed_total{model="alpha"} 2.0' in metrics
    assert f'quantdesk_requests_completed_total{{model="{beta}"}} 2.0' in metrics
    assert metrics.count("# TYPE quantdesk_requests_completed_total counter") == 1
    assert f'quantdesk_router_model_in_flight{{model="{beta}"}} 0.0' in metrics
    assert 'quantdesk_router_model_memory_bytes{model="alpha"}' in metrics


def test_killing_one_model_leaves_the_other_streaming(
    start_router: Callable[..., RouterHandle],
) -> None:
    router = start_router()
    client = _client(router)
    first_chunk = {m: threading.Event() for m in ("alpha", "beta")}
    killed = threading.Event()
    after_kill: dict[str, int] = {"alpha": 0, "beta": 0}
    finish: dict[str, str | None] = {}
    errors: dict[str, BaseException] = {}

    def stream(model: str) -> None:
        try:
            for chunk in client.chat.completions.create(
                model=model,
                messages=MESSAGES,
                max_tokens=160,
                temperature=0,
                stream=True,
                extra_body={"ignore_eos": True},
            ):  # type: ignore[call-overload]
                first_chunk[model].set()
                if killed.is_set():
                    after_kill[model] += 1
                if chunk.choices and chunk.choices[0].finish_reason:
                    finish[model] = chunk.choices[0].finish_reason
        except openai.APIError as exc:
            errors[model] = exc
        finally:
            first_chunk[model].set()

    threads = {m: threading.Thread(target=stream, args=(m,)) for m in first_chunk}
    for t in threads.values():
        t.start()
    for event in first_chunk.values():
        event.wait(timeout=300)
    child = router.pool.entry("alpha").child
    assert child is not None
    os.kill(child.pid, signal.SIGKILL)
    killed.set()
    for t in threads.values():
        t.join(timeout=300)
    # alpha's stream ends with an OpenAI-shaped error; beta's runs to its end
    assert "alpha" in errors and "stopped while answering" in str(errors["alpha"])
    assert "beta" not in errors and finish.get("beta") == "length"
    assert after_kill["beta"] > 0
    assert _models(router)["alpha"]["status"] == {
        "value": "unloaded",
        "failed": True,
        "error": router.pool.entry("alpha").error,
    }
    # the next request loads alpha again
    answer = client.chat.completions.create(model="alpha", messages=MESSAGES, max_tokens=4)
    assert answer.model == "alpha" and router.pool.entry("alpha").loads == 2


def test_model_management_routes(start_router: Callable[..., RouterHandle]) -> None:
    router = start_router(models_autoload=False)
    client = _client(router)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gamma", messages=MESSAGES, max_tokens=4)
    assert info.value.code == "model_not_found" and "alpha" in info.value.message
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="alpha", messages=MESSAGES, max_tokens=4)
    assert info.value.code == "model_not_loaded"
    r = httpx.post(f"{router.base_url}/models/load", json={"model": "alpha"}, timeout=300)
    assert r.status_code == 200 and r.json()["success"] is True
    answer = client.chat.completions.create(model="ALPHA.gguf", messages=MESSAGES, max_tokens=4)
    assert answer.model == "alpha"
    vectors = client.embeddings.create(model="alpha", input=["hello", "world"])
    assert vectors.model == "alpha" and len(vectors.data) == 2
    # requests without a model reach the one resident model, as with a single server
    r = httpx.post(f"{router.base_url}/tokenize", json={"content": "hello world"}, timeout=30)
    assert r.status_code == 200 and r.json()["tokens"]
    r = httpx.post(f"{router.base_url}/models/unload", json={"model": "alpha"}, timeout=60)
    assert r.status_code == 200 and _models(router)["alpha"]["status"]["value"] == "unloaded"
    r = httpx.post(f"{router.base_url}/models/load", json={"model": "nope"}, timeout=30)
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_eight_first_requests_over_http_cause_one_load(
    start_router: Callable[..., RouterHandle],
) -> None:
    router = start_router()
    client = _client(router)
    results: list[str] = []

    def ask() -> None:
        answer = client.completions.create(model="beta", prompt="Once upon", max_tokens=4)
        results.append(answer.model)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["beta"] * 8
    assert router.pool.entry("beta").loads == 1


def test_serve_with_two_models_preloads_and_pins_them(
    library: ModelLibrary, tmp_path: Path, smollm2_path: Path
) -> None:
    port_file = tmp_path / "port"
    log_path = tmp_path / "serve.log"
    lib = ["--models-dir", str(library.root)]
    with log_path.open("w") as out:
        proc = subprocess.Popen(
            [*SERVE, "-m", "default", "-m", "alpha", "--port-file", str(port_file), *SMALL, *lib],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            base = child_base_url(proc, port_file)  # type: ignore[arg-type]
            wait_healthy(base)
            cards: dict[str, Any] = {}
            while not cards or any(cards[m]["status"]["value"] != "loaded" for m in cards):
                assert proc.poll() is None, log_path.read_text()
                data = httpx.get(f"{base}/v1/models", timeout=30).json()["data"]
                cards = {c["id"]: c for c in data if c["id"] in (EMBEDDED, "alpha")}
                time.sleep(0.2)
            assert all(card["pinned"] for card in cards.values())
            assert _models_of(base)["beta"]["status"]["value"] == "unloaded"
            children = model_servers(psutil.Process(proc.pid))
            assert len(children) == 2
            proc.kill()  # even a router killed outright takes its models' servers along
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    _, alive = psutil.wait_procs(children, timeout=60)
    assert alive == []


def _models_of(base: str) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in httpx.get(f"{base}/v1/models", timeout=30).json()["data"]}


def _cancelled(router: RouterHandle, model: str) -> tuple[int, int]:
    stats = httpx.get(f"{router.base_url}/v1/stats", params={"model": model}, timeout=30).json()
    return stats["requests"]["cancelled"], stats["requests"]["running"]


def test_a_client_that_leaves_cancels_the_models_sequence(
    start_router: Callable[..., RouterHandle],
) -> None:
    router = start_router()
    router.pool.store.set("alpha", {"ctx_size": 8192, "parallel": 1})  # room for a long answer
    body = {"model": "alpha", "messages": MESSAGES, "max_tokens": 6000, "ignore_eos": True}
    with httpx.stream(
        "POST", f"{router.base_url}/v1/chat/completions", json={**body, "stream": True}, timeout=300
    ) as r:
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")
    while _cancelled(router, "alpha") != (1, 0):  # the child cancelled the stream's sequence
        time.sleep(0.1)
    # a non-streamed answer comes whole: leaving before it drops the upstream request too
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{router.base_url}/v1/chat/completions", json=body, timeout=3)
    while _cancelled(router, "alpha") != (2, 0):
        time.sleep(0.1)
    assert router.pool.entry("alpha").in_flight == 0


def test_the_router_asks_for_its_key(start_router: Callable[..., RouterHandle]) -> None:
    router = start_router(api_key="sk-router")
    with pytest.raises(openai.AuthenticationError):
        _client(router).chat.completions.create(model="alpha", messages=MESSAGES, max_tokens=4)
    assert router.pool.entry("alpha").loads == 0  # nothing loads for a client without the key
    r = httpx.post(f"{router.base_url}/models/load", json={"model": "alpha"}, timeout=30)
    assert r.status_code == 401
    answer = _client(router, "sk-router").chat.completions.create(
        model="alpha", messages=MESSAGES, max_tokens=4
    )
    assert answer.model == "alpha"
    # the model's own server, on loopback, takes only the router's key for it
    child = router.pool.entry("alpha").child
    assert child is not None
    r = httpx.get(f"{child.base_url}/v1/models", headers={"Authorization": "Bearer sk-router"})
    assert r.status_code == 401


def test_a_model_that_does_not_fit_is_a_503_saying_needed_and_free(
    start_router: Callable[..., RouterHandle],
) -> None:
    router = start_router(memory_budget="64M")
    with pytest.raises(openai.InternalServerError) as info:
        _client(router).chat.completions.create(model="alpha", messages=MESSAGES, max_tokens=4)
    error = info.value
    assert error.status_code == 503 and error.code == "insufficient_memory"
    assert "it needs" in error.message and "of the 64.0 MiB memory budget is free" in error.message
    assert error.response.headers["retry-after"] == "5"
    assert router.pool.entry("alpha").loads == 0
    assert _models(router)["alpha"]["status"] == {
        "value": "unloaded",
        "failed": True,
        "error": router.pool.entry("alpha").error,
    }
    r = httpx.get(f"{router.base_url}/health", params={"model": "nope"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_load_pins_and_unpins_a_model(start_router: Callable[..., RouterHandle]) -> None:
    """POST /models/load with "pin": a pinned model is never evicted for another (with
    --models-max 1 the other is refused), "pin": false lets it go without a reload."""
    router = start_router(models_max=1)
    load = f"{router.base_url}/models/load"
    r = httpx.post(load, json={"model": "alpha", "pin": True}, timeout=300)
    assert r.status_code == 200 and r.json()["pinned"] is True
    assert _models(router)["alpha"]["pinned"] is True
    r = httpx.post(load, json={"model": "beta"}, timeout=300)
    assert r.status_code == 503 and r.json()["error"]["code"] == "insufficient_memory"
    assert "pinned" in r.json()["error"]["message"]
    r = httpx.post(load, json={"model": "alpha", "pin": False}, timeout=300)
    assert r.status_code == 200 and r.json()["pinned"] is False
    assert router.pool.entry("alpha").loads == 1  # unpinned in place, not reloaded
    r = httpx.post(load, json={"model": "beta"}, timeout=300)
    assert r.status_code == 200
    cards = _models(router)
    assert cards["beta"]["status"]["value"] == "loaded"
    assert cards["alpha"]["status"]["value"] == "unloaded"  # evicted for beta


def test_a_router_killed_outright_leaves_no_work_folder_for_the_next_one() -> None:
    """The router's work folder (its models' logs and port files) is named after its pid;
    a router that starts removes those of routers that no longer run."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{dead.pid}-"))
    (stale / "alpha-1").mkdir()
    (stale / "alpha-1" / "serve.log").write_text("a log")
    mine = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))
    try:
        remove_stale_workdirs()
        assert not stale.exists()
        assert mine.is_dir()  # a running router's folder stays
    finally:
        shutil.rmtree(mine, ignore_errors=True)


def test_a_body_nested_past_the_decoder_is_a_400_naming_the_limit(
    start_router: Callable[..., RouterHandle],
) -> None:
    """The router reads the body's model before any child does: the same 400 (a 500 once)."""
    router = start_router()
    depth = 100_000
    body = '{"model": "alpha", "junk": ' + "[" * depth + "]" * depth + "}"
    r = httpx.post(
        f"{router.base_url}/v1/chat/completions",
        content=body.encode(),
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert r.status_code == 400, r.text
    assert "nests arrays or objects deeper" in r.json()["error"]["message"]


def test_the_router_serves_its_openapi_with_the_routes_it_forwards(
    start_router: Callable[..., RouterHandle],
) -> None:
    """/openapi.json, /docs and /redoc (405 in library mode once): the router's own routes
    and those a model's server answers behind it, loading no model to say so."""
    router = start_router(models_autoload=False)
    schema = httpx.get(f"{router.base_url}/openapi.json", timeout=30).json()
    paths = schema["paths"]
    forwarded = ["/v1/chat/completions", "/v1/messages", "/v1/responses", "/api/chat"]
    assert all(path in paths for path in forwarded), sorted(paths)
    assert "/models/load" in paths and "post" in paths["/models/load"]  # the router's own
    assert schema["info"]["title"] == "QuantDesk router"
    for page in ("/docs", "/redoc"):
        r = httpx.get(f"{router.base_url}{page}", timeout=30)
        assert r.status_code == 200 and "openapi.json" in r.text
    assert httpx.get(f"{router.base_url}/v1/models", timeout=30).json()["data"]


def test_model_events_stream_as_llama_servers_router_sends_them(
    start_router: Callable[..., RouterHandle],
) -> None:
    """GET /models/sse: each state change of a model as a ``data:`` line in llama-server's
    shape; the stream ends when the router stops."""
    router = start_router(models_autoload=False)
    events: list[dict[str, Any]] = []
    listening = threading.Event()

    def listen() -> None:
        with httpx.stream("GET", f"{router.base_url}/models/sse", timeout=60) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            listening.set()
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line.removeprefix("data: ")))

    reader = threading.Thread(target=listen, daemon=True)
    reader.start()
    assert listening.wait(30)
    for action in ("load", "unload"):
        r = httpx.post(f"{router.base_url}/models/{action}", json={"model": "alpha"}, timeout=120)
        assert r.status_code == 200, r.text
    deadline = time.monotonic() + 30
    while len(events) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert events == [
        {"model": "alpha", "event": "model_status", "data": {"status": s}}
        for s in ("loading", "loaded", "unloaded")
    ]
    router.stop()
    reader.join(timeout=15)
    assert not reader.is_alive()
