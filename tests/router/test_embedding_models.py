"""An embedding-only GGUF (the tiny BERT) beside a chat model in one router: embeddings
go to the BERT model's server while a chat streams from SmolLM2's; the BERT model
refuses generation with a clear 400; the chat model still embeds as it always did."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from openai import OpenAI

from backend.hub.library import ModelLibrary
from backend.router.runner import RouterHandle
from tests.tiny_bert import HIDDEN

pytestmark = pytest.mark.model

SMOLLM2_DIM = 576
REFUSAL = "model 'tiny-bert' is an embedding model: it serves /v1/embeddings only"
TEXTS = ["the cat sat on the mat", "hello world", "a dog ran in the park"]


def _client(handle: RouterHandle) -> OpenAI:
    return OpenAI(base_url=f"{handle.base_url}/v1", api_key="unused", max_retries=0, timeout=300)


def _cards(handle: RouterHandle) -> dict[str, dict[str, Any]]:
    data = httpx.get(f"{handle.base_url}/v1/models", timeout=30).json()["data"]
    return {card["id"]: card for card in data}


def test_embeddings_go_to_the_bert_model_while_a_chat_streams(
    start_router: Callable[..., RouterHandle], bert_library: ModelLibrary
) -> None:
    router = start_router()
    router.pool.store.set("alpha", {"ctx_size": 1024, "parallel": 1})  # room for a long answer
    client = _client(router)
    cards = _cards(router)
    bert, alpha = cards["tiny-bert"], cards["alpha"]
    assert (bert["type"], bert["architecture"]) == ("embeddings", "bert")
    assert (alpha["type"], alpha["architecture"]) == ("llm", "llama")
    r = httpx.post(f"{router.base_url}/models/load", json={"model": "tiny-bert"}, timeout=300)
    assert r.status_code == 200

    first_chunk = threading.Event()
    answered = threading.Event()
    chunks = {"before": 0, "after": 0}
    finish: list[str | None] = []

    def stream() -> None:
        try:
            for chunk in client.chat.completions.create(
                model="alpha",
                messages=[{"role": "user", "content": "Tell me a long story."}],
                max_tokens=400,
                temperature=0,
                stream=True,
                extra_body={"ignore_eos": True},
            ):  # type: ignore[call-overload]
                chunks["after" if answered.is_set() else "before"] += 1
                first_chunk.set()
                if chunk.choices and chunk.choices[0].finish_reason:
                    finish.append(chunk.choices[0].finish_reason)
        finally:
            first_chunk.set()

    thread = threading.Thread(target=stream)
    thread.start()
    first_chunk.wait(timeout=300)
    vectors = client.embeddings.create(model="tiny-bert", input=TEXTS)
    answered.set()
    thread.join(timeout=300)

    assert vectors.model == "tiny-bert"
    matrix = np.array([d.embedding for d in vectors.data])
    assert matrix.shape == (len(TEXTS), HIDDEN)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-4)
    assert finish == ["length"] and chunks["after"] > 0  # the chat went on streaming
    assert router.pool.entry("alpha").loads == 1 and router.pool.entry("tiny-bert").loads == 1
    # the chat model embeds as before: mean-pooled over its hidden states, unit length
    chat_vector = client.embeddings.create(model="alpha", input="hello world").data[0].embedding
    assert len(chat_vector) == SMOLLM2_DIM
    assert abs(float(np.linalg.norm(chat_vector)) - 1.0) < 1e-4


def test_the_bert_model_refuses_generation_with_a_clear_400(
    start_router: Callable[..., RouterHandle], bert_library: ModelLibrary
) -> None:
    router = start_router()
    client = _client(router)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model="tiny-bert", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    assert info.value.body["message"] == REFUSAL  # type: ignore[index]
    for path, body in (
        ("/infill", {"model": "tiny-bert", "input_prefix": "a", "input_suffix": "b"}),
        ("/v1/completions", {"model": "tiny-bert.gguf", "prompt": "hello"}),
    ):
        r = httpx.post(f"{router.base_url}{path}", json=body, timeout=300)
        assert r.status_code == 400 and r.json()["error"]["message"] == REFUSAL, path
    assert _cards(router)["tiny-bert"]["status"]["value"] == "loaded"  # nothing crashed
    assert router.pool.entry("tiny-bert").loads == 1
