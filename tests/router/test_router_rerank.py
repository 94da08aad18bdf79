"""The tiny reranker beside the chat model in one router: ``model`` picks the reranker for
/v1/rerank (and /rerank) while the chat model still chats, and the chat model, named for a
rerank, answers the same clear 400 as when it is served alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from backend.hub.library import ModelLibrary
from backend.router.runner import RouterHandle
from tests.router.conftest import link_into
from tests.tiny_bert import (  # noqa: F401  (session fixtures)
    reference_rerank,
    tiny_reranker_folder,
    tiny_reranker_gguf,
)

pytestmark = pytest.mark.model

QUERY = "where does the river meet the sea"
DOCUMENTS = [
    "a cat sat on the mat in the sun",
    "water flows down the river to the sea",
    "the customer paid the price of the order at the bank",
]


@pytest.fixture
def reranker_library(library: ModelLibrary, tiny_reranker_gguf: Path) -> ModelLibrary:  # noqa: F811
    """The library with the tiny reranker as 'tiny-reranker'."""
    link_into(library.root, tiny_reranker_gguf, "tiny-reranker")
    return library


def test_model_picks_the_reranker_beside_the_chat_model(
    start_router: Callable[..., RouterHandle],
    reranker_library: ModelLibrary,
    tiny_reranker_folder: Path,  # noqa: F811
) -> None:
    router = start_router()
    expected = reference_rerank(tiny_reranker_folder, QUERY, DOCUMENTS)
    body = {"model": "tiny-reranker", "query": QUERY, "documents": DOCUMENTS, "top_n": 2}
    r = httpx.post(f"{router.base_url}/v1/rerank", json=body, timeout=300)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["model"] == "tiny-reranker"
    best = sorted(range(len(DOCUMENTS)), key=lambda i: -expected[i][1])[:2]
    assert [res["index"] for res in answer["results"]] == best
    for res in answer["results"]:  # within tests/server/test_rerank.py's TOLERANCE
        assert abs(res["relevance_score"] - expected[res["index"]][1]) < 2e-2
    # llama-server's path, the file name as the model
    body["model"] = "tiny-reranker.gguf"
    assert httpx.post(f"{router.base_url}/rerank", json=body, timeout=300).json() == answer

    # the chat model chats beside it, and is no reranker
    client = OpenAI(base_url=f"{router.base_url}/v1", api_key="unused", max_retries=0)
    chat = client.chat.completions.create(
        model="alpha", messages=[{"role": "user", "content": "Hi"}], max_tokens=4, temperature=0
    )
    assert chat.choices[0].message.content
    r = httpx.post(
        f"{router.base_url}/v1/rerank",
        json={"model": "alpha", "query": QUERY, "documents": DOCUMENTS},
        timeout=300,
    )
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["message"].startswith("model 'alpha' is not a reranker: it is a text generation")
    assert (error["param"], error["code"]) == ("model", "model_not_reranker")
    assert router.pool.entry("tiny-reranker").loads == 1 and router.pool.entry("alpha").loads == 1
