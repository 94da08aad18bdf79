"""Hostile but cheap-to-send requests: the server stays live and frees what nobody waits for.

Issue 14: a big request prepared on the event loop froze every client for seconds; a body
had no size limit; lists (messages, stop strings, n, embedding inputs) had no bounds; and a
non-streamed request kept generating after its client had timed out.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import LiveServer, served_child

MODEL = "SmolLM2-135M-Instruct"
# The goal: /health answers within this while another request is prepared.
# The goal is 0.5 s; benchmarks/hostile_rerun.py measures it (0.07 s). The server
# runs as a child process, so the test process's own pauses (a garbage collection of a
# full-suite heap held /health for 1.9 s in CI when the server shared it) are not counted
# as the server's; the bound leaves room for a busy machine. Before the fix these cases
# stalled /health for 1.1-1.9 s quiet and 5 s and more on a busy machine.
HEALTH_BOUND_S = 1.0
MiB = 1024 * 1024


def _post_raw(
    base: str, path: str, content: bytes | Iterator[bytes], timeout: float = 120
) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    with httpx.Client(timeout=timeout) as http:
        return http.post(f"{base}{path}", content=content, headers=headers)


def _worst_health_during(base: str, path: str, body: bytes) -> tuple[float, httpx.Response]:
    """Send ``body`` to ``path`` while another client polls /health; the slowest answer."""
    latencies: list[float] = []
    sending = threading.Event()
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=60) as http:
            while not done.is_set():
                in_flight = sending.is_set()  # a poll that starts while the request is
                start = time.perf_counter()  # in flight counts, even if it ends after it
                r = http.get(f"{base}/health")
                if in_flight:
                    latencies.append(time.perf_counter() - start)
                assert r.status_code == 200
                time.sleep(0.01)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        time.sleep(0.1)
        sending.set()
        response = _post_raw(base, path, body)
    finally:
        done.set()
        poller.join(timeout=60)
    assert latencies, "no /health answer while the request was in flight"
    return max(latencies), response


def _big_prompt(n_bytes: int) -> str:
    return ("lorem ipsum dolor sit amet " * (n_bytes // 27 + 1))[:n_bytes]


HOSTILE: dict[str, tuple[str, dict[str, Any]]] = {
    "completion-4MiB": ("/v1/completions", {"prompt": _big_prompt(4 * MiB), "max_tokens": 4}),
    "chat-4000-messages": (
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": _big_prompt(1000)} for _ in range(4000)],
            "max_tokens": 4,
        },
    ),
    "embedding-4MiB": ("/v1/embeddings", {"input": _big_prompt(4 * MiB)}),
    "tokenize-4MiB": ("/tokenize", {"content": _big_prompt(4 * MiB)}),
}


@pytest.fixture(scope="module")
def child_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``quantdesk serve`` in a process of its own: its base URL."""
    with served_child(smollm2_path, tmp_path_factory.mktemp("hostile-serve")) as base:
        yield base


@pytest.mark.parametrize("case", list(HOSTILE))
def test_health_stays_live_while_a_big_request_is_prepared(child_server: str, case: str) -> None:
    path, payload = HOSTILE[case]
    body = json.dumps(payload).encode()
    assert len(body) < 8 * MiB  # under the default body limit: it is really prepared
    worst, r = _worst_health_during(child_server, path, body)
    # too long for the context (400) or, for /tokenize, answered (200): never a 5xx
    assert r.status_code in (200, 400), r.text[:300]
    assert worst < HEALTH_BOUND_S, f"/health took {worst:.2f} s during {case}"


def test_an_oversized_body_gets_413_quickly(live_server: LiveServer) -> None:
    base = live_server.base_url
    body = json.dumps({"prompt": _big_prompt(20 * MiB), "max_tokens": 4}).encode()
    start = time.perf_counter()
    r = _post_raw(base, "/v1/completions", body)
    took = time.perf_counter() - start
    assert r.status_code == 413, r.text[:300]
    assert r.json() == {
        "error": {
            "message": r.json()["error"]["message"],
            "type": "invalid_request_error",
            "param": None,
            "code": "request_too_large",
        }
    }
    assert "8388608" in r.json()["error"]["message"]
    assert took < 5, took

    # chunked: no Content-Length to trust, the bytes are counted as they arrive
    def chunks() -> Iterator[bytes]:
        for i in range(0, len(body), MiB):
            yield body[i : i + MiB]

    r = _post_raw(base, "/v1/chat/completions", chunks())
    assert r.status_code == 413, r.text[:300]
    assert r.json()["error"]["code"] == "request_too_large"
    # the connection is still usable and the server answers normally afterwards
    ok = httpx.post(f"{base}/v1/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=60)
    assert ok.status_code == 200


def test_lists_beyond_their_limits_get_a_clear_400(live_server: LiveServer) -> None:
    base = live_server.base_url
    msg = {"role": "user", "content": "hi"}
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("/v1/chat/completions", {"messages": [msg] * 4097, "max_tokens": 1}, "messages"),
        (
            "/v1/chat/completions",
            {"messages": [msg], "max_tokens": 1, "stop": [f"s{i}" for i in range(17)]},
            "stop",
        ),
        ("/v1/completions", {"prompt": "hi", "max_tokens": 1, "n": 9}, "n"),
        ("/v1/completions", {"prompt": "hi", "max_tokens": 1, "best_of": 9}, "best_of"),
        ("/v1/chat/completions", {"messages": [msg], "max_tokens": 1, "n": 9}, "n"),
        ("/v1/embeddings", {"input": ["hi"] * 257}, "input"),
    ]
    with httpx.Client(timeout=60) as http:
        for path, payload, param in cases:
            start = time.perf_counter()
            r = http.post(f"{base}{path}", json=payload)
            assert r.status_code == 400, (path, param, r.status_code, r.text[:300])
            error = r.json()["error"]
            assert error["type"] == "invalid_request_error"
            assert error["param"] == param, error
            assert "at most" in error["message"], error  # names the limit, not the context
            assert time.perf_counter() - start < 2
        # the limits themselves are allowed
        r = http.post(
            f"{base}/v1/chat/completions",
            json={"messages": [msg], "max_tokens": 1, "stop": [f"s{i}" for i in range(16)]},
        )
        assert r.status_code == 200, r.text[:300]


def _steps_to_settle(server: LiveServer, cancelled_before: int, expected: int) -> tuple[int, dict]:
    """Engine steps from now until nothing runs or waits and ``expected`` more sequences
    were cancelled (counted in steps, not seconds: a step's length depends on the CPU)."""
    steps_before = server.stats()["step"]["steps"]
    deadline = time.monotonic() + 30
    while True:
        stats = server.stats()
        requests = stats["requests"]
        idle = requests["running"] == 0 and requests["queued"] == 0
        if idle and requests["cancelled"] - cancelled_before >= expected:
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return stats["step"]["steps"] - steps_before, requests


def _time_out(base: str, path: str, payload: dict[str, Any]) -> None:
    with pytest.raises(httpx.TimeoutException), httpx.Client(timeout=1.0) as http:
        http.post(f"{base}{path}", json=payload)


def test_non_streamed_requests_are_cancelled_when_their_clients_time_out(
    live_server: LiveServer,
) -> None:
    base = live_server.base_url
    before = live_server.stats()["requests"]["cancelled"]
    payload = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Tell me a very long story."}],
        "max_tokens": 400,
        "ignore_eos": True,
    }
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: _time_out(base, "/v1/chat/completions", payload), range(8)))
    # all 8 clients have gone: their sequences stop within about one step (before the
    # fix they ran on, 400 tokens each, for nobody)
    steps, requests = _steps_to_settle(live_server, before, 8)
    assert (requests["running"], requests["queued"]) == (0, 0), requests
    assert requests["cancelled"] - before == 8, requests
    assert steps <= 3, steps


def test_many_choices_are_cancelled_when_the_client_times_out(live_server: LiveServer) -> None:
    base = live_server.base_url
    before = live_server.stats()["requests"]["cancelled"]
    payload = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 400, "n": 8}
    _time_out(base, "/v1/completions", {**payload, "ignore_eos": True})
    steps, requests = _steps_to_settle(live_server, before, 8)
    assert (requests["running"], requests["queued"]) == (0, 0), requests
    assert requests["cancelled"] - before == 8, requests
    assert steps <= 3, steps


def test_a_long_embedding_batch_stops_when_its_client_leaves(live_server: LiveServer) -> None:
    base = live_server.base_url
    text = "word " * 1500  # ~1,500 tokens: one input per decode in the 2,048-token context
    with httpx.Client(timeout=120) as http:
        start = time.perf_counter()
        assert http.post(f"{base}/v1/embeddings", json={"input": text}).status_code == 200
        one = time.perf_counter() - start
    # 200 such inputs: 200 decodes, far past the client's 1 s timeout
    _time_out(
        base, "/v1/embeddings", {"model": MODEL, "input": [f"{i} {text}" for i in range(200)]}
    )
    # the embedding context is free again after about one decode, not 200
    start = time.perf_counter()
    r = httpx.post(f"{base}/v1/embeddings", json={"input": "hello"}, timeout=120)
    assert r.status_code == 200, r.text[:300]
    waited = time.perf_counter() - start
    assert waited < max(5.0, 10 * one), (waited, one)


def test_a_stop_string_past_the_length_limit_is_a_400(live_server: LiveServer) -> None:
    r = httpx.post(
        f"{live_server.base_url}/v1/completions",
        json={"prompt": "Once", "max_tokens": 2, "stop": ["x" * 5000]},
        timeout=30,
    )
    assert r.status_code == 400
    assert "at most 1024 characters" in r.json()["error"]["message"]
