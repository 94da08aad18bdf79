"""Speculative decoding through the API: llama-server's per-request fields, its
``timings.draft_n``/``draft_n_accepted``, the counters of /v1/stats and /metrics, and the
one-line refusals of ``quantdesk serve``. (Exactness is tested on the engine:
tests/engine/test_speculative.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.engine.test_speculative import REPEAT, _renamed, _vocab_variant
from tests.server.conftest import LiveServer, start_server, wait_healthy

HTTP = httpx.Client(timeout=120.0)


@pytest.fixture(scope="module")
def spec_server() -> Iterator[LiveServer]:
    server = start_server(
        ctx_size=2048,
        parallel=2,
        threads=1,  # a busy 2-core machine: see tests/engine/test_speculative.py
        spec_type="ngram-simple",
        spec_ngram_simple_size_n=4,
        spec_ngram_simple_size_m=12,
        spec_draft_policy="full",  # what these tests check is the reporting, not the policy
    )
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()


def _chat(server: LiveServer, **extra: Any) -> dict[str, Any]:
    body = {"messages": [{"role": "user", "content": REPEAT}], "temperature": 0, **extra}
    r = HTTP.post(f"{server.base_url}/v1/chat/completions", json=body)
    r.raise_for_status()
    return r.json()  # type: ignore[no-any-return]


def test_chat_reports_draft_tokens_and_the_stats_count_them(spec_server: LiveServer) -> None:
    before = spec_server.stats()["speculative"]
    timings = _chat(spec_server, max_tokens=60)["timings"]
    after = spec_server.stats()["speculative"]
    assert timings["draft_n"] > 0 and 0 < timings["draft_n_accepted"] <= timings["draft_n"]
    assert after["type"] == "ngram-simple"
    assert after["drafted"] - before["drafted"] == timings["draft_n"]
    assert after["accepted"] - before["accepted"] == timings["draft_n_accepted"]
    assert after["acceptance_rate"] == after["accepted"] / after["drafted"]
    metrics = HTTP.get(f"{spec_server.base_url}/metrics").text
    assert f"quantdesk_spec_draft_tokens_total {float(after['drafted'])}" in metrics
    assert "quantdesk_spec_acceptance_rate " in metrics


def test_speculative_n_max_0_turns_it_off_for_one_request(spec_server: LiveServer) -> None:
    before = spec_server.stats()["speculative"]
    answer = _chat(spec_server, max_tokens=60, **{"speculative.n_max": 0})
    assert answer["choices"][0]["message"]["content"]
    assert "draft_n" not in answer["timings"]  # as llama-server: only when it drafted
    assert spec_server.stats()["speculative"]["drafted"] == before["drafted"]
    # a minimum no draft reaches: nothing is verified either
    answer = _chat(spec_server, max_tokens=60, **{"speculative.n_min": 40})
    assert "draft_n" not in answer["timings"]
    assert spec_server.stats()["speculative"]["drafted"] == before["drafted"]
    bad = {"messages": [{"role": "user", "content": "hi"}], "speculative.n_max": -1}
    r = HTTP.post(f"{spec_server.base_url}/v1/chat/completions", json=bad)
    assert r.status_code == 400 and "speculative.n_max" in r.text


def test_completions_and_streams_carry_the_draft_timings(spec_server: LiveServer) -> None:
    url = spec_server.base_url
    prompt = f"Copy this text.\n\nText: {REPEAT}\n\nCopy: {REPEAT[:40]}"
    body = {"prompt": prompt, "max_tokens": 40, "temperature": 0}
    r = HTTP.post(f"{url}/v1/completions", json={**body, "speculative.n_max": 4})
    r.raise_for_status()
    assert r.json()["timings"]["draft_n"] > 0
    chunks = []
    with HTTP.stream("POST", f"{url}/v1/chat/completions", json=_stream_body()) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[len("data: ") :]))
    last = next(c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"])
    assert last["timings"]["draft_n_accepted"] > 0


def _stream_body() -> dict[str, Any]:
    messages = [{"role": "user", "content": REPEAT}]
    return {"messages": messages, "max_tokens": 60, "temperature": 0, "stream": True}


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backend.entrypoints.main", "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "QUANTDESK_MODEL": "default"},
    )


def test_serve_refuses_a_draft_model_with_another_vocabulary(tmp_path: Path) -> None:
    bad = _vocab_variant(tmp_path / "other-vocab.gguf", {"tokenizer.ggml.tokens": _renamed})
    r = _serve("-md", str(bad), "-c", "512", "-np", "1")
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert "other-vocab.gguf cannot draft for" in last and "token 1000 differs" in last
    r = _serve("--spec-type", "draft-simple", "-c", "512", "-np", "1")
    assert r.returncode != 0
    assert "needs a draft model (-md/--model-draft)" in r.stderr.strip().splitlines()[-1]
    r = _serve("--spec-type", "ngram-cache")
    assert r.returncode == 2 and "unknown speculative type ngram-cache" in r.stderr
