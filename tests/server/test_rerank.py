"""``quantdesk serve -m tiny-reranker.gguf`` (an XLM-RoBERTa cross-encoder with one label,
built and converted by the tests) answers POST /v1/rerank and /rerank: its scores are
transformers' logits for the same (query, document) pairs, results come best first,
``top_n``, ``return_documents`` and TEI's ``texts`` work, and bad requests get clear
OpenAI-shaped 400s. A model that is not a reranker (the chat model) gets a 400 that says so."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import LiveServer, served_child
from tests.tiny_bert import (  # noqa: F401  (the session fixtures tiny_reranker_*)
    reference_rerank,
    tiny_reranker_folder,
    tiny_reranker_gguf,
)

pytestmark = pytest.mark.model

MODEL = "tiny-reranker"
QUERY = "where does the river meet the sea"
DOCUMENTS = [
    "a cat sat on the mat in the sun",
    "the river runs to the sea past the old lighthouse",
    "the bank by the river keeps our money safe",
    "music and a song in the park on a summer evening",
    "water flows down the river to the sea",
]
# F32 weights, but llama.cpp rounds through f16 on the way (flash attention, on by default,
# casts an encoder's K and V to f16; the CPU's GELU reads an f16 table), and the tiny model's
# large random weights (std 0.5) magnify that: its scores (-1..1) are off by up to 0.012,
# depending on which pairs share a decode. Its scores lie 0.3 apart.
TOLERANCE = 2e-2


@pytest.fixture(scope="module")
def rerank_server(
    tiny_reranker_gguf: Path,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """``quantdesk serve -m tiny-reranker.gguf`` as a child process; its base URL."""
    with served_child(tiny_reranker_gguf, tmp_path_factory.mktemp("rerank-serve")) as base:
        yield base


def _rerank(base: str, body: dict[str, Any], path: str = "/v1/rerank") -> httpx.Response:
    return httpx.post(f"{base}{path}", json=body, timeout=60)


def _error(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 400, r.text
    error: dict[str, Any] = r.json()["error"]
    assert error["type"] == "invalid_request_error" and isinstance(error["message"], str)
    return error


def test_scores_are_transformers_logits_best_first(
    rerank_server: str,
    tiny_reranker_folder: Path,  # noqa: F811
) -> None:
    expected = reference_rerank(tiny_reranker_folder, QUERY, DOCUMENTS)
    r = _rerank(rerank_server, {"model": MODEL, "query": QUERY, "documents": DOCUMENTS})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["model"] == MODEL and answer["object"] == "list"
    results = answer["results"]
    assert sorted(res["index"] for res in results) == list(range(len(DOCUMENTS)))
    scores = [res["relevance_score"] for res in results]
    assert scores == sorted(scores, reverse=True)
    for res in results:
        assert "document" not in res  # only with return_documents
        assert abs(res["relevance_score"] - expected[res["index"]][1]) < TOLERANCE, res
    # the scores are spread enough that the order is transformers' order
    logits = sorted((logit for _, logit in expected), reverse=True)
    assert min(a - b for a, b in itertools.pairwise(logits)) > 2 * TOLERANCE
    assert [res["index"] for res in results] == sorted(
        range(len(DOCUMENTS)), key=lambda i: -expected[i][1]
    )
    # each pair is <s> query </s></s> document </s>, as transformers encodes it
    n_tokens = sum(len(ids) for ids, _ in expected)
    assert answer["usage"] == {"prompt_tokens": n_tokens, "total_tokens": n_tokens}
    # the same answer under llama-server's other paths, and with the documents alone
    for path in ("/rerank", "/v1/reranking", "/reranking"):
        assert (
            _rerank(rerank_server, {"query": QUERY, "documents": DOCUMENTS}, path).json() == answer
        )
    alone = _rerank(rerank_server, {"query": QUERY, "documents": [DOCUMENTS[1]]}).json()
    assert abs(alone["results"][0]["relevance_score"] - expected[1][1]) < TOLERANCE


def test_top_n_return_documents_and_tei_texts(rerank_server: str) -> None:
    full = _rerank(rerank_server, {"query": QUERY, "documents": DOCUMENTS}).json()["results"]
    body: dict[str, Any] = {"query": QUERY, "documents": DOCUMENTS}
    top = _rerank(rerank_server, {**body, "top_n": 2, "return_documents": True}).json()
    assert [res["index"] for res in top["results"]] == [res["index"] for res in full[:2]]
    for res in top["results"]:
        assert res["document"] == {"text": DOCUMENTS[res["index"]]}
    assert top["usage"] == _rerank(rerank_server, body).json()["usage"]  # all were scored
    assert len(_rerank(rerank_server, {**body, "top_n": 99}).json()["results"]) == 5
    # Hugging Face TEI's shape, as llama-server answers it: texts in, a bare list out
    tei = _rerank(rerank_server, {"query": QUERY, "texts": DOCUMENTS, "top_n": 3}).json()
    assert [(t["index"], t["score"]) for t in tei] == [
        (res["index"], res["relevance_score"]) for res in full[:3]
    ]
    with_text = _rerank(rerank_server, {"query": QUERY, "texts": DOCUMENTS, "return_text": True})
    assert all(t["text"] == DOCUMENTS[t["index"]] for t in with_text.json())


def test_bad_requests_get_clear_400s(rerank_server: str) -> None:
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"query": QUERY, "documents": []}, "documents", "must not be empty"),
        ({"query": QUERY}, "documents", "required"),
        ({"documents": DOCUMENTS}, "query", "query"),
        ({"query": QUERY, "documents": [1, 2, 3]}, "documents.0", "string"),
        ({"query": QUERY, "documents": 123}, "documents", "list"),
        ({"query": QUERY, "documents": None}, "documents", "required"),
        ({"query": QUERY, "documents": DOCUMENTS, "top_n": 0}, "top_n", "greater than"),
    ]
    for body, param, words in cases:
        error = _error(_rerank(rerank_server, body))
        assert error["param"] == param and words in error["message"], (body, error)
    # the context holds the model's 128 positions: a longer pair is refused, not cut
    long = " ".join(["the river runs to the sea"] * 30)
    error = _error(_rerank(rerank_server, {"query": QUERY, "documents": ["hello", long]}))
    assert error["code"] == "context_length_exceeded" and error["param"] == "documents"
    assert error["message"].startswith("documents[1]: the query and the document make ")
    # a reranker does not embed, and says where it serves
    r = httpx.post(f"{rerank_server}/v1/embeddings", json={"input": "hello"}, timeout=60)
    assert "/v1/rerank" in _error(r)["message"]
    # still healthy and ranking afterwards
    assert httpx.get(f"{rerank_server}/health").status_code == 200
    ok = _rerank(rerank_server, {"query": QUERY, "documents": DOCUMENTS[:2]})
    assert ok.status_code == 200 and len(ok.json()["results"]) == 2


def test_a_chat_model_is_not_a_reranker(live_server: LiveServer) -> None:
    model = live_server.client().models.list().data[0].id
    r = _rerank(live_server.base_url, {"model": model, "query": QUERY, "documents": DOCUMENTS})
    error = _error(r)
    assert error["message"].startswith(
        f"model '{model}' is not a reranker: it is a text generation model (llama)"
    )
    assert (error["param"], error["code"]) == ("model", "model_not_reranker")
    # refused before its documents are looked at, and every time
    assert _error(_rerank(live_server.base_url, {"query": QUERY, "documents": []}))["code"] == (
        "model_not_reranker"
    )
