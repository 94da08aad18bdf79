"""The GET/DELETE routes of one model's server through the router: llama-server's /props
and /slots (``?model=`` or the unnamed-request model) and stored Responses, asked of every
resident model in turn."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import openai
import pytest
from openai import OpenAI

from backend.router.runner import RouterHandle

pytestmark = pytest.mark.model


def test_props_and_slots_reach_the_named_or_the_only_model(
    start_router: Callable[..., RouterHandle],
) -> None:
    router = start_router()
    base = router.base_url
    # several models in the library and none loaded: say which to name
    r = httpx.get(f"{base}/props", timeout=60)
    assert r.status_code == 400 and "alpha" in r.json()["error"]["message"]
    # ?model= names one (llama-server's router does the same): loaded on demand
    r = httpx.get(f"{base}/props", params={"model": "alpha"}, timeout=300)
    assert r.status_code == 200, r.text
    props = r.json()
    assert props["total_slots"] == 2 and props["default_generation_settings"]["n_ctx"] > 0
    assert router.pool.entry("alpha").state == "loaded"
    # one model loaded: a bare /props and /slots are its
    assert httpx.get(f"{base}/props", timeout=60).json() == props
    slots = httpx.get(f"{base}/slots", timeout=60)
    assert slots.status_code == 200 and len(slots.json()) == 2
    assert router.pool.entry("beta").state == "unloaded"
    r = httpx.get(f"{base}/props", params={"model": "nope"}, timeout=60)
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_a_stored_response_is_found_in_the_model_that_made_it(
    start_router: Callable[..., RouterHandle],
) -> None:
    router = start_router()
    client = OpenAI(base_url=f"{router.base_url}/v1", api_key="unused", max_retries=0)
    made = {
        model: client.responses.create(
            model=model, input="Say hello.", max_output_tokens=4, temperature=0
        )
        for model in ("alpha", "beta")
    }
    for model, response in made.items():
        again = client.responses.retrieve(response.id)
        assert again.id == response.id and again.model == model
        assert again.output_text == response.output_text
    # a follow-up through the model that holds it
    follow = client.responses.create(
        model="beta",
        input="And again.",
        previous_response_id=made["beta"].id,
        max_output_tokens=4,
        temperature=0,
    )
    assert follow.status in ("completed", "incomplete")
    client.responses.delete(made["alpha"].id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(made["alpha"].id)
    body = httpx.get(f"{router.base_url}/v1/responses/{made['alpha'].id}", timeout=60).json()
    assert body["error"]["code"] == "response_not_found"
    r = httpx.delete(f"{router.base_url}/v1/responses/resp_unknown", timeout=60)
    assert r.status_code == 404
