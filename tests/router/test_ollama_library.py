"""Ollama's API over the library (the router), through the official client: the library
listed and shown without loading anything, keep_alive as the unload timer (0 unloads,
/api/ps says so), load requests, copy and delete (never the embedded model), and a pull of
an ``hf.co/...`` name from the stand-in Hub that is then chatted with by that name."""

from __future__ import annotations

import time
from collections.abc import Callable

import ollama
import pytest

from backend.router.runner import RouterHandle
from tests.hub.conftest import GGUF_FILE, GGUF_REPO, hub, hub_server, tiny_safetensors  # noqa: F401
from tests.hub.hub_stand_in import HubStandIn
from tests.router.conftest import EMBEDDED

GREEDY = {"temperature": 0, "seed": 1, "num_predict": 4}
HELLO = [{"role": "user", "content": "Hello"}]


def _ps(c: ollama.Client) -> list[str]:
    return [m.model or "" for m in c.ps().models]


def _wait_unloaded(c: ollama.Client, name: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while name in _ps(c):
        assert time.monotonic() < deadline, f"{name} still loaded"
        time.sleep(0.2)


def test_the_library_is_listed_and_keep_alive_loads_and_unloads(
    start_router: Callable[..., RouterHandle],
) -> None:
    router = start_router()
    c = ollama.Client(host=router.base_url)
    names = {m.model for m in c.list().models}
    assert {f"{EMBEDDED}:latest", "alpha:latest", "beta:latest"} <= names
    shown = c.show("alpha")
    assert shown.capabilities == ["completion"] and shown.modelinfo
    assert _ps(c) == []  # nothing loaded by listing or showing

    answer = c.chat(model="alpha:latest", messages=HELLO, options=GREEDY, keep_alive=0)
    assert answer.done and answer.eval_count
    _wait_unloaded(c, "alpha:latest")  # unloaded once answered

    assert c.generate(model="beta", prompt="", keep_alive="10m").done_reason == "load"
    (running,) = c.ps().models
    assert running.model == "beta:latest" and running.expires_at is not None
    left = running.expires_at.timestamp() - time.time()
    assert 500 < left <= 600
    assert c.chat(model="beta", messages=[], keep_alive=0).done_reason == "unload"
    assert _ps(c) == []


def test_copy_and_delete_and_the_embedded_model_stays(
    start_router: Callable[..., RouterHandle],
) -> None:
    router = start_router()
    c = ollama.Client(host=router.base_url)
    assert c.copy("alpha", "gamma").status == "success"
    assert "gamma:latest" in {m.model for m in c.list().models}
    for taken_or_outside in ("gamma", "beta", "../outside", "/etc/x", ".hidden"):
        with pytest.raises(ollama.ResponseError) as refused:
            c.copy("alpha", taken_or_outside)
        assert refused.value.status_code == 400, taken_or_outside
    assert c.chat(model="gamma", messages=HELLO, options=GREEDY).done
    assert c.delete("gamma").status == "success"
    assert "gamma:latest" not in {m.model for m in c.list().models}
    assert "alpha:latest" in {m.model for m in c.list().models}  # the source is kept
    with pytest.raises(ollama.ResponseError) as info:
        c.delete(EMBEDDED)
    assert info.value.status_code == 400
    with pytest.raises(ollama.ResponseError) as missing:
        c.delete("no-such-model")
    assert missing.value.status_code == 404


def test_pull_an_hf_name_from_the_hub_and_chat_with_it(
    start_router: Callable[..., RouterHandle],
    hub: HubStandIn,  # noqa: F811
) -> None:
    router = start_router()
    c = ollama.Client(host=router.base_url)
    name = f"hf.co/{GGUF_REPO}:Q4_1"
    progress = list(c.pull(name, stream=True))
    statuses = [p.status for p in progress]
    assert statuses[0] == "pulling manifest" and statuses[-1] == "success"
    pulling = [p for p in progress if (p.status or "").startswith("pulling ") and p.total]
    assert pulling and pulling[-1].completed == pulling[-1].total
    assert (pulling[-1].digest or "").startswith("sha256:")
    assert any(GGUF_FILE.removesuffix(".gguf") in (m.model or "") for m in c.list().models)
    answer = c.chat(model=name, messages=HELLO, options=GREEDY)
    assert answer.done and answer.eval_count
    assert c.pull(name).status == "success"  # again: already there, nothing fetched
    with pytest.raises(ollama.ResponseError) as registry:
        c.pull("llama3.2")
    assert registry.value.status_code == 400 and "hf.co/" in registry.value.error
    with pytest.raises(ollama.ResponseError) as absent:
        c.pull(f"hf.co/{GGUF_REPO}:Q8_0")
    assert absent.value.status_code == 404
