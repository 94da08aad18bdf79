"""/v1/embeddings on the real SmolLM2 through the official OpenAI SDK."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from tests.hub.gguf_writer import copy_with_metadata
from tests.server.conftest import LiveServer, start_server, wait_healthy

MODEL = "SmolLM2-135M-Instruct"
TIMEOUT = 120
DIM = 576  # SmolLM2-135M's embedding length


def _vectors(resp: openai.types.CreateEmbeddingResponse) -> np.ndarray:
    return np.array([d.embedding for d in sorted(resp.data, key=lambda d: d.index)])


def test_embeddings_have_the_model_dimension_and_unit_norm(live_server: LiveServer) -> None:
    client = live_server.client(timeout=TIMEOUT)
    resp = client.embeddings.create(
        model=MODEL, input="The quick brown fox jumps over the lazy dog.", encoding_format="float"
    )
    assert resp.object == "list"
    assert resp.model == MODEL
    assert len(resp.data) == 1
    vec = np.array(resp.data[0].embedding)
    assert vec.shape == (DIM,)
    assert np.isfinite(vec).all()
    assert abs(np.linalg.norm(vec) - 1.0) < 1e-4
    assert resp.usage.prompt_tokens == resp.usage.total_tokens > 5


def test_related_sentences_are_closer_than_unrelated(live_server: LiveServer) -> None:
    texts = [
        "The cat sat on the mat.",
        "A kitten was sitting on the rug.",
        "The stock market fell sharply today.",
        "Interest rates rose and shares dropped.",
    ]
    client = live_server.client(timeout=TIMEOUT)
    resp = client.embeddings.create(model=MODEL, input=texts, encoding_format="float")
    assert [d.index for d in resp.data] == [0, 1, 2, 3]
    v = _vectors(resp)
    sim = v @ v.T  # unit vectors: dot product = cosine similarity
    for a, b in ((0, 1), (2, 3)):
        for c in (2, 3) if a == 0 else (0, 1):
            assert sim[a, b] > sim[a, c], (a, b, c, np.round(sim, 3))
            assert sim[a, b] > sim[b, c], (a, b, c, np.round(sim, 3))
    # a batch gives the same vectors as one input at a time
    single = client.embeddings.create(model=MODEL, input=texts[2], encoding_format="float")
    assert np.allclose(_vectors(single)[0], v[2], atol=1e-5)


def test_base64_decodes_to_the_same_floats(live_server: LiveServer) -> None:
    texts = ["fill in the middle", "tokens per second"]
    client = live_server.client(timeout=TIMEOUT)
    floats = _vectors(client.embeddings.create(model=MODEL, input=texts, encoding_format="float"))
    # the SDK asks for base64 by default and decodes it itself
    sdk_default = _vectors(client.embeddings.create(model=MODEL, input=texts))
    assert np.allclose(sdk_default, floats, atol=1e-6)
    raw = httpx.post(
        f"{live_server.base_url}/v1/embeddings",
        json={"model": MODEL, "input": texts, "encoding_format": "base64"},
        timeout=TIMEOUT,
    )
    assert raw.status_code == 200
    for item, expected in zip(raw.json()["data"], floats, strict=True):
        assert isinstance(item["embedding"], str)
        decoded = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
        assert decoded.shape == (DIM,)
        assert np.allclose(decoded, expected, atol=1e-6)


def test_token_array_input_matches_text_input(live_server: LiveServer) -> None:
    text = "Local models serve OpenAI-compatible APIs."
    tokens = httpx.post(
        f"{live_server.base_url}/tokenize", json={"content": text}, timeout=TIMEOUT
    ).json()["tokens"]
    client = live_server.client(timeout=TIMEOUT)
    by_text = client.embeddings.create(model=MODEL, input=text, encoding_format="float")
    by_tokens = client.embeddings.create(model=MODEL, input=tokens, encoding_format="float")
    nested = client.embeddings.create(model=MODEL, input=[tokens, tokens], encoding_format="float")
    assert by_tokens.usage.prompt_tokens == len(tokens) == by_text.usage.prompt_tokens
    assert np.allclose(_vectors(by_text), _vectors(by_tokens), atol=1e-5)
    assert np.allclose(_vectors(nested), np.vstack([_vectors(by_tokens)] * 2), atol=1e-5)


def test_too_long_input_is_a_clear_400(live_server: LiveServer) -> None:
    client = live_server.client(timeout=TIMEOUT)
    with pytest.raises(openai.BadRequestError) as info:
        client.embeddings.create(model=MODEL, input=[17] * 2100, encoding_format="float")
    body = info.value.body
    assert isinstance(body, dict)
    assert body["code"] == "context_length_exceeded"
    assert "2100" in body["message"] and "2048" in body["message"]


@pytest.mark.parametrize(
    ("payload", "param"),
    [
        ({"input": ""}, "input"),
        ({"input": []}, "input"),
        ({"input": [[]]}, "input"),
        ({"input": [1, 99_999_999]}, "input"),
        ({"input": "x", "dimensions": 128}, "dimensions"),
        ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
        ('{"input": ["ok", "bad \\udc00"]}', "input[1]"),  # a lone surrogate (raw JSON)
    ],
)
def test_bad_requests_are_openai_shaped(
    live_server: LiveServer, payload: dict | str, param: str
) -> None:
    url = f"{live_server.base_url}/v1/embeddings"
    if isinstance(payload, str):
        headers = {"content-type": "application/json"}
        r = httpx.post(url, content=payload.encode(), headers=headers, timeout=TIMEOUT)
    else:
        r = httpx.post(url, json=payload, timeout=TIMEOUT)
    assert r.status_code in (400, 404)
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["param"] == param


def test_an_openai_embedding_model_name_reaches_the_served_model(live_server: LiveServer) -> None:
    r = httpx.post(
        f"{live_server.base_url}/v1/embeddings",
        json={"input": "x", "model": "text-embedding-3-small"},
        timeout=TIMEOUT,
    )
    assert r.status_code == 200
    assert r.json()["model"] == MODEL


def test_embeddings_do_not_disturb_generation(live_server: LiveServer) -> None:
    """The embedding context is separate: greedy output is the same with embeddings running."""
    client = live_server.client(timeout=TIMEOUT)

    def complete() -> str:
        r = client.completions.create(
            model=MODEL, prompt="The three primary colours are", max_tokens=24, temperature=0
        )
        return r.choices[0].text

    def embed(i: int) -> int:
        texts = [f"sentence number {i} about embeddings and context", "another one"] * 4
        return len(client.embeddings.create(model=MODEL, input=texts).data)

    alone = complete()
    with ThreadPoolExecutor(4) as pool:
        embedded = [pool.submit(embed, i) for i in range(6)]
        # one generation at a time while the embedding requests run on the other threads
        during = [complete(), complete()]
        assert [f.result() for f in embedded] == [8] * 6
    # Both contexts share llama.cpp's CPU thread pool, so a decode that overlaps an embedding
    # batch may split its work over fewer threads and round differently: a near-tie can flip
    # late. The KV and outputs are not corrupted: each run agrees with the solo one on its
    # first words, and a run after the embeddings is identical.
    for text in [*during, complete()]:
        assert text.split()[:6] == alone.split()[:6], (text, alone)


@pytest.fixture(scope="module")
def reranker_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """SmolLM2 re-declared as a reranker (rank pooling): it must refuse to embed."""
    folder = tmp_path_factory.mktemp("reranker")
    from backend.settings.default_model import default_model_path

    path: Path = copy_with_metadata(
        default_model_path(), folder / "smollm2-rank.gguf", {"llama.pooling_type": 4}
    )
    server = start_server(model=str(path), parallel=1, ctx_size=512)
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()


def test_model_that_cannot_embed_gets_a_clear_400(reranker_server: LiveServer) -> None:
    client = reranker_server.client(timeout=TIMEOUT)
    for _ in range(2):  # the failure is remembered, and stays a 400
        with pytest.raises(openai.BadRequestError) as info:
            client.embeddings.create(model="smollm2-rank", input="hello", encoding_format="float")
        body = info.value.body
        assert isinstance(body, dict)
        assert body["code"] == "model_cannot_embed"
        assert "reranker" in body["message"]
    # generation still works on that server
    r = client.completions.create(model="smollm2-rank", prompt="Hi", max_tokens=3, temperature=0)
    assert r.usage is not None and r.usage.completion_tokens > 0
