"""llama-server's GET /props, POST /apply-template, GET /slots and llamacpp:* metrics on the
real server and SmolLM2, with the shapes llama.cpp's clients and tests read
(tools/server/tests/unit/test_completion.py's slot checks, test_security.py, test_metrics)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from backend.router.metrics_relabel import merge_metrics
from backend.settings.default_model import DEFAULT_MODEL_FILE
from benchmarks.peer_servers import (
    DEFAULT_LLAMA_SERVER,
    Knobs,
    ServerSpec,
    llama_server_argv,
    started,
)
from tests.server.conftest import LiveServer, start_server, wait_healthy

HTTP = httpx.Client(timeout=120.0)
KEY = "sk-this-is-the-secret-key"
SLOTS, SLOT_CTX = 8, 2048  # the live server: 16,384 cells, a stream per slot
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name a colour."},
]


def get(server: LiveServer, path: str) -> Any:
    r = HTTP.get(f"{server.base_url}{path}")
    assert r.status_code == 200, r.text
    return r.json()


def test_props(live_server: LiveServer) -> None:
    props = get(live_server, "/props")
    assert props["model_path"] == DEFAULT_MODEL_FILE  # the file name, never its folder
    assert props["total_slots"] == SLOTS
    settings = props["default_generation_settings"]
    assert settings["n_ctx"] == SLOT_CTX  # per slot, as llama-server reports it
    params = settings["params"]
    assert params["temperature"] == 0.8 and params["top_k"] == 40 and params["seed"] == 1
    assert params["n_predict"] == 512  # --max-tokens-limit of the test server
    assert props["modalities"] == {"vision": False, "audio": False}
    assert "<|im_start|>" in props["chat_template"]
    assert props["build_info"].startswith("quantdesk-")
    assert props["model_alias"] == "SmolLM2-135M-Instruct"


def test_apply_template_is_the_prompt_chat_uses(live_server: LiveServer) -> None:
    r = HTTP.post(f"{live_server.base_url}/apply-template", json={"messages": MESSAGES})
    assert r.status_code == 200, r.text
    prompt = r.json()["prompt"]
    assert "Name a colour." in prompt and prompt.endswith("<|im_start|>assistant\n")
    tokens = HTTP.post(
        f"{live_server.base_url}/tokenize", json={"content": prompt, "add_special": True}
    ).json()["tokens"]
    chat = HTTP.post(
        f"{live_server.base_url}/v1/chat/completions",
        json={"messages": MESSAGES, "max_tokens": 1},
    ).json()
    assert chat["usage"]["prompt_tokens"] == len(tokens)
    bad = HTTP.post(f"{live_server.base_url}/apply-template", json={"messages": []})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "messages"


def _idle(server: LiveServer) -> list[dict[str, Any]]:
    """/slots once no slot processes (a cancelled stream frees its slot within a step)."""
    for _ in range(200):
        slots: list[dict[str, Any]] = get(server, "/slots")
        if not any(s["is_processing"] for s in slots):
            return slots
        time.sleep(0.05)
    raise AssertionError(f"a slot still processes: {slots}")


def test_slots_idle_and_busy(live_server: LiveServer) -> None:
    slots = _idle(live_server)
    assert [s["id"] for s in slots] == list(range(SLOTS))
    assert all(s["n_ctx"] == SLOT_CTX and s["is_processing"] is False for s in slots)
    body = {
        "prompt": "Write a very long book.",
        "n_predict": 500,  # under the test server's --max-tokens-limit (512)
        "ignore_eos": True,
        "seed": 42,
        "temperature": 1.0,
        "stream": True,
    }
    with HTTP.stream("POST", f"{live_server.base_url}/completion", json=body) as r:
        lines = r.iter_lines()
        first = next(json.loads(line[6:]) for line in lines if line.startswith("data: "))
        busy = [s for s in get(live_server, "/slots") if s["is_processing"]]
        assert len(busy) == 1, busy
        slot = busy[0]
        assert slot["n_prompt_tokens"] == first["tokens_evaluated"]
        assert slot["next_token"][0]["n_decoded"] >= 1
        decoded = slot["next_token"][0]["n_decoded"]
        assert slot["next_token"][0]["n_remain"] == 500 - decoded
        assert slot["params"]["seed"] == 42 and slot["params"]["n_predict"] == 500
        assert "prompt" not in slot and "generated" not in slot
    _idle(live_server)  # closing the stream cancelled the sequence


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_llamacpp_metrics_beside_ours(live_server: LiveServer) -> None:
    HTTP.post(f"{live_server.base_url}/completion", json={"prompt": "Hi", "n_predict": 4})
    text = HTTP.get(f"{live_server.base_url}/metrics").text
    stats = live_server.stats()
    families = _families(text)

    def value(name: str) -> float:
        return float(families[name].samples[0].value)

    assert "# TYPE llamacpp:prompt_tokens_total counter" in text
    assert "# TYPE llamacpp:requests_processing gauge" in text
    # counters: the parser names the family without _total
    assert value("llamacpp:tokens_predicted") == stats["tokens"]["generated_total"] >= 4
    assert value("llamacpp:prompt_tokens") == stats["tokens"]["prompt_decoded_total"]
    assert value("llamacpp:prompt_tokens_cached") == stats["prefix_cache"]["tokens_saved"]
    kv = stats["kv"]
    assert value("llamacpp:kv_cache_usage_ratio") == kv["cells_used"] / kv["cells_total"]
    assert value("llamacpp:kv_cache_tokens") == kv["cells_used"]
    assert value("llamacpp:requests_processing") == stats["requests"]["running"] == 0
    assert value("llamacpp:requests_deferred") == stats["requests"]["queued"] == 0
    for name in ("llamacpp:prompt_tokens_seconds", "llamacpp:predicted_tokens_seconds"):
        assert value(name) >= 0.0
    assert value("llamacpp:prompt_seconds") == stats["tokens"]["prompt_seconds_total"] > 0
    assert value("llamacpp:tokens_predicted_seconds") == stats["tokens"]["generation_seconds_total"]
    assert value("llamacpp:n_tokens_max") == stats["tokens"]["longest_sequence"] >= 5
    assert value("llamacpp:n_decode") == stats["step"]["decode_calls"] >= 4
    assert value("llamacpp:n_busy_slots_per_decode") == stats["step"]["sequences_per_decode"] >= 1
    assert value("llamacpp:spec_decode_num_drafts") == stats["speculative"]["drafts"]
    assert "quantdesk_generated_tokens" in families  # ours stay
    # the library router's relabelling keeps them, one family each, with the model label
    merged = _families(merge_metrics({"a": text, "b": text}))
    samples = merged["llamacpp:requests_processing"].samples
    assert sorted(s.labels["model"] for s in samples) == ["a", "b"]
    assert merge_metrics({"a": text}).count("# TYPE llamacpp:prompt_tokens_total") == 1


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[LiveServer]:
    server = start_server(api_key=KEY, ctx_size=1024, parallel=1)
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()


def test_native_routes_are_behind_the_key(keyed_server: LiveServer) -> None:
    url = keyed_server.base_url
    for method, path, body in (
        ("GET", "/props", None),
        ("GET", "/slots", None),
        ("POST", "/apply-template", {"messages": MESSAGES}),
        ("POST", "/completion", {"prompt": "Hi", "n_predict": 2}),
        ("POST", "/completions", {"prompt": "Hi", "n_predict": 2}),
    ):
        for headers in ({}, {"Authorization": "Bearer invalid-key"}):
            r = HTTP.request(method, f"{url}{path}", json=body, headers=headers)
            assert r.status_code == 401, (path, headers)
            assert r.json()["error"]["code"] == "invalid_api_key"
        r = HTTP.request(method, f"{url}{path}", json=body, headers={"x-api-key": KEY})
        assert r.status_code == 200, (path, r.text)
    # test_security.py's shapes: a bare prompt to /completions, with either header
    for headers in ({"Authorization": f"Bearer {KEY}"}, {"X-Api-Key": KEY}):
        r = HTTP.post(
            f"{url}/completions",
            json={"prompt": "I believe the meaning of life is", "n_predict": 8},
            headers=headers,
        )
        assert r.status_code == 200 and "error" not in r.json() and "content" in r.json()
    slots = HTTP.get(f"{url}/slots", headers={"x-api-key": KEY}).json()
    assert [s["id"] for s in slots] == [0] and slots[0]["n_ctx"] == 1024


@pytest.mark.skipif(not DEFAULT_LLAMA_SERVER.is_file(), reason="llama-server not built")
def test_our_llamacpp_metrics_are_llama_servers_names_and_types(
    live_server: LiveServer, smollm2_path: Path, tmp_path: Path
) -> None:
    """A dashboard built on llama-server's /metrics finds every family it reads here, of
    the same type (the peer: llama-server --metrics from the same llama.cpp, one request
    each; its per-draft-position family only appears with speculative decoding)."""

    def names(url: str, path: str) -> dict[str, str]:
        HTTP.post(f"{url}{path}", json={"prompt": "Hi", "n_predict": 4}).raise_for_status()
        text = HTTP.get(f"{url}/metrics").text
        return {
            f.name: f.type
            for f in text_string_to_metric_families(text)
            if f.name.startswith("llamacpp:")
        }

    spec = ServerSpec(
        "llama-server", llama_server_argv(DEFAULT_LLAMA_SERVER), extra_flags=["--metrics"]
    )
    knobs = Knobs(smollm2_path, 2, 1, 2048, 512, 512)
    with started(spec, knobs, tmp_path / "peer.log", 120) as (url, _proc):
        theirs = names(url, "/completion")
    ours = names(live_server.base_url, "/completion")
    assert theirs, "llama-server served no llamacpp: families"
    assert {n: t for n, t in theirs.items() if n in ours} == theirs, set(theirs) - set(ours)
