"""A request without ``model`` in router mode (llama.vscode's /infill sends none): the one
loaded model answers; else the first ``-m`` model; else a 400 that lists the library."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from backend.router.runner import RouterHandle
from tests.router.conftest import EMBEDDED

pytestmark = pytest.mark.model

UNNAMED = {"prompt": "Once upon a time", "max_tokens": 2}


def _ask(router: RouterHandle) -> httpx.Response:
    return httpx.post(f"{router.base_url}/v1/completions", json=UNNAMED, timeout=300)


def _post(router: RouterHandle, path: str, model: str) -> None:
    r = httpx.post(f"{router.base_url}{path}", json={"model": model}, timeout=300)
    assert r.status_code == 200, r.text


def test_the_one_loaded_model_answers_else_a_400_listing_the_library(
    start_router: Callable[..., RouterHandle],
) -> None:
    router = start_router()
    r = _ask(router)
    assert r.status_code == 400
    error = r.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (
        "model_required",
        "model",
        "invalid_request_error",
    )
    assert "no model is loaded" in error["message"]
    assert error["message"].endswith(f"alpha, beta, {EMBEDDED}")
    _post(router, "/models/load", "beta")
    r = _ask(router)
    assert r.status_code == 200 and r.json()["model"] == "beta"
    _post(router, "/models/load", "alpha")
    r = _ask(router)
    assert r.status_code == 400 and "2 models are loaded" in r.json()["error"]["message"]
    assert router.pool.entry(EMBEDDED).loads == 0  # nothing was loaded to answer


def test_the_first_preloaded_model_answers_when_several_are_loaded(
    start_router: Callable[..., RouterHandle],
) -> None:
    router = start_router(preload=["beta", "alpha"])
    while any(router.pool.entry(m).state != "loaded" for m in ("alpha", "beta")):
        assert "failed" not in {router.pool.entry(m).state for m in ("alpha", "beta")}
        time.sleep(0.1)
    r = _ask(router)
    assert r.status_code == 200 and r.json()["model"] == "beta"
    _post(router, "/models/unload", "beta")
    r = _ask(router)  # exactly one loaded: it comes first
    assert r.status_code == 200 and r.json()["model"] == "alpha"
    _post(router, "/models/unload", "alpha")
    r = _ask(router)  # none loaded: the first -m model loads again
    assert r.status_code == 200 and r.json()["model"] == "beta"
    assert router.pool.entry("beta").loads == 2
