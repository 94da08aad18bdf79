"""The router's own failures (unknown model, no model named, not enough memory, a load
that fails) answer every OpenAI path with OpenAI's error body, streamed requests too, and
the official SDK raises the matching error class."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from backend.hub.library import ModelLibrary
from backend.router.runner import RouterHandle
from tests.hub.gguf_writer import copy_with_metadata

pytestmark = pytest.mark.model

MESSAGES = [{"role": "user", "content": "hi"}]
# every OpenAI-style path the router forwards, with a body it would forward
OPENAI_PATHS: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"messages": MESSAGES, "stream": True},
    "/v1/completions": {"prompt": "hi"},
    "/v1/embeddings": {"input": "hi"},
    "/infill": {"input_prefix": "a", "input_suffix": "b"},
}


def _error(r: httpx.Response, status: int) -> dict[str, Any]:
    """The error of an OpenAI-shaped error answer (and nothing else in the body)."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    error: dict[str, Any] = body["error"]
    return error


def _post_all(router: RouterHandle, model: str, status: int) -> list[dict[str, Any]]:
    """POST every OpenAI path for ``model``; each answer's error (all with ``status``)."""
    errors = []
    for path, body in OPENAI_PATHS.items():
        r = httpx.post(f"{router.base_url}{path}", json={**body, "model": model}, timeout=300)
        errors.append(_error(r, status))
    return errors


def test_unknown_model_and_no_model_named(start_router: Callable[..., RouterHandle]) -> None:
    router = start_router()
    for error in _post_all(router, "nope", 404):
        assert (error["type"], error["param"], error["code"]) == (
            "not_found_error",
            "model",
            "model_not_found",
        )
        assert error["message"].startswith("the model 'nope' does not exist; this server serves:")
    for path, body in OPENAI_PATHS.items():
        error = _error(httpx.post(f"{router.base_url}{path}", json=body, timeout=60), 400)
        assert (error["type"], error["code"]) == ("invalid_request_error", "model_required")
    client = OpenAI(base_url=f"{router.base_url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        client.embeddings.create(model="nope", input="hi")
    assert info.value.code == "model_not_found"


def test_not_enough_memory_is_an_openai_503(start_router: Callable[..., RouterHandle]) -> None:
    router = start_router(memory_budget="64M")
    for error in _post_all(router, "alpha", 503):
        assert (error["type"], error["code"]) == ("server_error", "insufficient_memory")
        assert "of the 64.0 MiB memory budget is free" in error["message"]


def test_a_failed_load_is_an_openai_503_for_every_waiter(
    start_router: Callable[..., RouterHandle], library: ModelLibrary, smollm2_path: Path
) -> None:
    # a header that reads well but promises experts the file lacks: llama.cpp refuses it
    broken = {"llama.expert_count": 4, "llama.expert_used_count": 2}
    copy_with_metadata(smollm2_path, library.root / "broken.gguf", broken)
    router = start_router()
    client = OpenAI(base_url=f"{router.base_url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="broken", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    assert info.value.status_code == 503 and info.value.code == "model_load_failed"
    message = info.value.body["message"]  # type: ignore[index]
    assert message.startswith("model broken failed to load (its server exited with code")
    for error in _post_all(router, "broken", 503):  # tried again each time, and says so
        assert (error["type"], error["code"]) == ("server_error", "model_load_failed")
    assert router.pool.entry("broken").loads == 1 + len(OPENAI_PATHS)
    cards = httpx.get(f"{router.base_url}/v1/models", timeout=30).json()["data"]
    card = next(c for c in cards if c["id"] == "broken")
    # llama-server's router says a failed model is unloaded, and failed
    assert card["status"]["value"] == "unloaded" and card["status"]["failed"] is True
    assert "failed to load" in card["status"]["error"]
