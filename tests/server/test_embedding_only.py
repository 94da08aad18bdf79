"""``quantdesk serve -m tiny-bert.gguf``: an embedding-only GGUF (BERT, no KV cache)
served alone. Embeddings match what transformers computes for the same weights; every
generation route answers a clear OpenAI-shaped 400 and the server keeps serving."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from openai import OpenAI

from tests.server.conftest import served_child
from tests.tiny_bert import (  # noqa: F401  (the session fixtures tiny_bert_*)
    HIDDEN,
    reference_embedding,
    tiny_bert_folder,
    tiny_bert_gguf,
)

pytestmark = pytest.mark.model

MODEL = "tiny-bert"
TEXTS = ["the cat sat on the mat", "hello world", "a dog ran in the park"]
MESSAGES = [{"role": "user", "content": "hello"}]
REFUSAL = "model 'tiny-bert' is an embedding model: it serves /v1/embeddings only"


@pytest.fixture(scope="module")
def bert_server(
    tiny_bert_gguf: Path,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """``quantdesk serve -m tiny-bert.gguf`` as a child process; its base URL."""
    with served_child(tiny_bert_gguf, tmp_path_factory.mktemp("bert-serve")) as base:
        yield base


def _client(base: str) -> OpenAI:
    return OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=60)


def test_embeddings_match_transformers(bert_server: str, tiny_bert_folder: Path) -> None:  # noqa: F811
    answer = _client(bert_server).embeddings.create(model=MODEL, input=TEXTS)
    assert answer.model == MODEL and [d.index for d in answer.data] == [0, 1, 2]
    vectors = np.array([d.embedding for d in answer.data])
    assert vectors.shape == (len(TEXTS), HIDDEN)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    n_tokens = 0
    for text, vector in zip(TEXTS, vectors, strict=True):
        ids, expected = reference_embedding(tiny_bert_folder, text)
        r = httpx.post(f"{bert_server}/tokenize", json={"content": text, "add_special": True})
        assert r.json()["tokens"] == ids  # llama.cpp's WordPiece splits as transformers does
        n_tokens += len(ids)
        assert float(vector @ expected) > 0.999, text
    assert answer.usage.prompt_tokens == n_tokens
    # one input alone gives the vector it got in the batch
    alone = _client(bert_server).embeddings.create(model=MODEL, input=TEXTS[1])
    assert np.allclose(alone.data[0].embedding, vectors[1], atol=1e-5)


def test_generation_routes_answer_a_clear_400(bert_server: str) -> None:
    client = _client(bert_server)
    messages: Any = MESSAGES
    calls = {
        "chat": lambda: client.chat.completions.create(model=MODEL, messages=messages),
        "chat stream": lambda: client.chat.completions.create(
            model=MODEL, messages=messages, stream=True
        ),
        "completions": lambda: client.completions.create(model=MODEL, prompt="hello"),
        "completions stream": lambda: client.completions.create(
            model=MODEL, prompt="hello", stream=True
        ),
    }
    for name, call in calls.items():
        with pytest.raises(openai.BadRequestError) as info:
            call()
        assert info.value.body["message"] == REFUSAL, name  # type: ignore[index]
        assert info.value.body["param"] == "model", name  # type: ignore[index]
    for path, body in (
        ("/infill", {"input_prefix": "def f(", "input_suffix": ")"}),
        ("/completions", {"prompt": "hello"}),
        ("/v1/chat/completions", {"messages": MESSAGES}),  # no model: the one served
    ):
        r = httpx.post(f"{bert_server}{path}", json=body, timeout=60)
        assert r.status_code == 400, path
        error = r.json()["error"]
        assert error["message"] == REFUSAL and error["type"] == "invalid_request_error", path
    # still healthy and embedding afterwards
    assert httpx.get(f"{bert_server}/health").status_code == 200
    assert len(_client(bert_server).embeddings.create(model=MODEL, input="hello").data) == 1


def test_models_and_stats_describe_it(bert_server: str) -> None:
    models = httpx.get(f"{bert_server}/v1/models", timeout=30).json()["data"]
    assert [m["id"] for m in models] == [MODEL]
    stats = httpx.get(f"{bert_server}/v1/stats", timeout=30).json()
    assert stats["model"]["architecture"] == "bert"
    assert stats["requests"]["errors"] == 0 and stats["requests"]["running"] == 0
