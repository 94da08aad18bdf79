"""Embeddings in every request shape llama-server takes, on /v1/embeddings, /embeddings and
/embedding: ``content`` for ``input``; a string, token ids, ids mixed with strings, prompt
objects, OpenAI content parts, and lists of these; ``encoding_format`` base64;
``embd_normalize``; and a model served with ``--pooling none`` (a vector per token on
/embeddings, refused on /v1/embeddings). The request bodies are those of llama-server's own
tests (tools/server/tests/unit/test_embedding.py) and of the OpenAI SDK.

Two of our servers on the tiny BERT (its GGUF declares mean pooling; one runs with
``--pooling none``). Where the peer llama-server is built (benchmarks/build_llama_server.sh),
each shape is also sent to it, on the same GGUF with the same pooling: the same status, the
same response keys and lengths, the same usage, and vectors equal within 1e-4 once both are
scaled to unit length.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from backend.engine.embedder import normalized
from backend.server.embedding_inputs import EmbeddingRequest, split_prompts
from benchmarks.peer_servers import (
    DEFAULT_LLAMA_SERVER,
    Knobs,
    ServerSpec,
    llama_server_argv,
    started,
)
from tests.server.conftest import LiveServer, start_server, wait_healthy
from tests.tiny_bert import HIDDEN, tiny_bert_folder, tiny_bert_gguf  # noqa: F401

TIMEOUT = 60
MODEL = "tiny-bert"
ROUTES = ("/v1/embeddings", "/embeddings", "/embedding")
NATIVE_ROUTES = ROUTES[1:]
TOLERANCE = 1e-4
ERROR_KEYS = {"message", "type", "param", "code"}
CONTENT_TEXT = {"content": [{"type": "text", "text": "string"}]}

# llama-server's test_embedding_mixed_input shapes: (input, one embedding per list item)
MIXED_INPUTS: list[tuple[Any, bool]] = [
    ("", False),  # no crash on empty input: the model's [CLS] [SEP]
    ("string", False),
    ([12, 34, 56], False),
    ([12, 34, "string", 56, 78], False),
    (["string1", "string2"], True),
    (["string1", [12, 34, 56]], True),
    ([[12, 34, 56], [12, 34, 56]], True),
    ([[12, 34, 56], [12, "string", 34, 56]], True),
    ({"prompt_string": "string"}, False),
    (CONTENT_TEXT, False),
    (["string1", {"prompt_string": "string2"}, CONTENT_TEXT], True),
]
# llama-server's test_embedding_invalid_input shapes, and a few more it refuses
INVALID_INPUTS: list[Any] = [
    [],
    {"content": "string"},
    {"content": [{"type": "unknown"}]},
    {"content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
    {"content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]},
    {"content": [{"type": "input_video", "input_video": {"url": "data:video/mp4;base64,AAAA"}}]},
    [[]],
    [1, 99_999_999],
    [12, [1, 2]],  # a top-level id makes one prompt: no nested list in it
    {"prompt_string": "string", "multimodal_data": ["AAAA"]},
]
# bodies sent as they are, beyond {"input": shape}
BODIES: list[dict[str, Any]] = [
    {"content": "hello world"},
    {"content": [12, 34, "hello", 56]},
    {"content": ["the cat sat", "the dog ran"]},
    {"input": ["hello world", "the cat"], "encoding_format": "base64"},
    {"input": "hello [SEP] world"},  # special-token text is parsed, as there
    *(
        {"input": ["the cat sat on the mat", [101, 7, 102]], "embd_normalize": n}
        for n in (-1, 0, 1, 5)
    ),
    {"input": "the cat", "model": "text-embedding-3-small", "user": "u1"},
]


def _bert_server(gguf: Path, **engine: object) -> LiveServer:
    server = start_server(model=str(gguf), parallel=1, ctx_size=512, **engine)
    wait_healthy(server.base_url)
    return server


@pytest.fixture(scope="module")
def bert_mean_server(tiny_bert_gguf: Path) -> Iterator[LiveServer]:  # noqa: F811
    """The tiny BERT, pooled as its GGUF says (mean)."""
    server = _bert_server(tiny_bert_gguf)
    yield server
    server.handle.stop()


@pytest.fixture(scope="module")
def bert_none_server(tiny_bert_gguf: Path) -> Iterator[LiveServer]:  # noqa: F811
    """The tiny BERT served with --pooling none."""
    server = _bert_server(tiny_bert_gguf, pooling="none")
    yield server
    server.handle.stop()


@pytest.fixture(scope="module")
def llama_server_peers(
    tiny_bert_gguf: Path,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, str]]:
    """llama-server --embeddings on the same GGUF, --pooling mean and --pooling none:
    pooling -> base URL. Skips where the peer is not built."""
    if not DEFAULT_LLAMA_SERVER.is_file():
        pytest.skip("llama-server not built (benchmarks/build_llama_server.sh)")
    folder = tmp_path_factory.mktemp("peer-embeddings")
    knobs = Knobs(tiny_bert_gguf, 1, 1, 512, 512, 512)
    with (
        started(_peer("mean"), knobs, folder / "mean.log", 120) as (mean_url, _mean),
        started(_peer("none"), knobs, folder / "none.log", 120) as (none_url, _none),
    ):
        yield {"mean": mean_url, "none": none_url}


def _peer(pooling: str) -> ServerSpec:
    argv = llama_server_argv(DEFAULT_LLAMA_SERVER)
    return ServerSpec("llama-server", argv, extra_flags=["--embeddings", "--pooling", pooling])


def _post(base: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base}{path}", json=body, timeout=TIMEOUT)


def _tokens(base: str, text: str, add_special: bool = True) -> list[int]:
    r = _post(base, "/tokenize", {"content": text, "add_special": add_special})
    r.raise_for_status()
    tokens: list[int] = r.json()["tokens"]
    return tokens


def _vectors(answer: Any) -> list[np.ndarray]:
    """Every vector of an answer, in order, as float32 arrays (base64 decoded): the rows of a
    native answer's items, or an OpenAI answer's items."""
    if isinstance(answer, dict):
        out = []
        for item in answer["data"]:
            vec = item["embedding"]
            if isinstance(vec, str):
                out.append(np.frombuffer(base64.b64decode(vec), dtype="<f4"))
            else:
                out.append(np.array(vec, dtype=np.float32))
        return out
    return [np.array(row, dtype=np.float32) for item in answer for row in item["embedding"]]


def _shape(answer: Any) -> Any:
    """An answer with each vector (or base64 string) replaced by its length, and the model
    name left out (ours answers the id it serves, llama-server echoes the request's)."""
    if isinstance(answer, list):
        if answer and all(isinstance(x, float) for x in answer):
            return f"<{len(answer)} floats>"
        return [_shape(x) for x in answer]
    if isinstance(answer, dict):
        return {k: _shape(v) for k, v in answer.items() if k != "model"}
    if isinstance(answer, str) and len(answer) > 32:
        return f"<{len(base64.b64decode(answer)) // 4} floats as base64>"
    return answer


def _unit(rows: list[np.ndarray]) -> np.ndarray:
    return normalized(np.vstack(rows).astype(np.float32))


def _assert_same(ours: httpx.Response, theirs: httpx.Response, what: str) -> None:
    """The same status (a 400 here where llama-server fails a shape it does not take with
    a 500); for a 200 the same keys, lengths, indices and usage, and vectors within
    TOLERANCE once both are scaled to unit length; for a 4xx our error shape."""
    expected = 400 if theirs.status_code == 500 else theirs.status_code
    assert ours.status_code == expected, (what, ours.text, theirs.text)
    if ours.status_code != 200:
        assert 400 <= ours.status_code < 500, (what, ours.text)
        assert set(ours.json()["error"]) == ERROR_KEYS, what
        return
    a, b = ours.json(), theirs.json()
    assert _shape(a) == _shape(b), what
    va, vb = _vectors(a), _vectors(b)
    assert len(va) == len(vb) > 0, what
    assert np.abs(_unit(va) - _unit(vb)).max() < TOLERANCE, what


# ---- without a model: how a body's prompts are read ------------------------------------


@pytest.mark.parametrize(("shape", "batch"), MIXED_INPUTS, ids=repr)
def test_a_top_level_token_id_makes_one_prompt(shape: Any, batch: bool) -> None:
    prompts, is_batch = split_prompts(EmbeddingRequest.model_validate({"input": shape}).prompts())
    assert is_batch == batch
    assert len(prompts) == (len(shape) if batch else 1)


def test_content_is_the_native_name_and_input_wins() -> None:
    assert EmbeddingRequest.model_validate({"content": "a"}).native
    both = EmbeddingRequest.model_validate({"content": "a", "input": "b"})
    assert not both.native and both.prompts() == "b"


def test_normalisations_are_llama_cpps() -> None:
    rows = np.array([[3.0, -4.0, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    assert np.allclose(normalized(rows, -1), rows)
    assert np.allclose(normalized(rows, 0)[0], [3 * 32760 / 4, -32760, 0])
    assert np.allclose(normalized(rows, 1)[0], [3 / 7, -4 / 7, 0])
    assert np.allclose(normalized(rows, 2)[0], [0.6, -0.8, 0])
    p5 = (3**5 + 4**5) ** (1 / 5)
    assert np.allclose(normalized(rows, 5)[0], [3 / p5, -4 / p5, 0])
    big = np.array([[1e30, 1.0]], dtype=np.float32)  # no overflow in a high p-norm
    assert np.allclose(normalized(big, 50), [[1.0, 1e-30]])
    assert not normalized(rows, 2)[1].any()  # a zero vector stays zero


# ---- our servers -------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "batch"), MIXED_INPUTS, ids=repr)
def test_every_input_shape_embeds_on_every_route(
    bert_mean_server: LiveServer, shape: Any, batch: bool
) -> None:
    n = len(shape) if batch else 1
    base = bert_mean_server.base_url
    oai = _post(base, "/v1/embeddings", {"input": shape})
    assert oai.status_code == 200, oai.text
    body = oai.json()
    assert [d["index"] for d in body["data"]] == list(range(n))
    vectors = _vectors(body)
    assert all(v.shape == (HIDDEN,) for v in vectors)
    assert np.allclose([np.linalg.norm(v) for v in vectors], 1.0, atol=1e-4)
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 0
    for path in NATIVE_ROUTES:
        for key in ("input", "content"):
            r = _post(base, path, {key: shape})
            assert r.status_code == 200, (path, key, r.text)
            items = r.json()
            assert [set(item) for item in items] == [{"index", "embedding"}] * n
            assert [len(item["embedding"]) for item in items] == [1] * n  # one pooled vector
            assert np.allclose(_vectors(items), vectors, atol=1e-6), (path, key)


def test_usage_counts_every_prompts_tokens_with_special_tokens(
    bert_mean_server: LiveServer,
) -> None:
    """llama-server's usage: the tokens each prompt was run with, summed; prompt_tokens
    equals total_tokens."""
    base = bert_mean_server.base_url
    text = "the cat sat on the mat"
    with_special = _tokens(base, text)
    plain = _tokens(base, "hello", add_special=False)
    cases: list[tuple[Any, int]] = [
        (text, len(with_special)),
        ([text, text], 2 * len(with_special)),
        ([text, [12, 34, 56]], len(with_special) + 3),  # ids are taken as they are
        ([12, 34, "hello", 56], 3 + len(plain)),  # a string after an id: no specials
        (["hello", 5], len(_tokens(base, "hello")) + 1),  # a first string gets them
        ({"prompt_string": text}, len(with_special)),
        ({"content": [{"type": "text", "text": "the cat "}, {"type": "text", "text": "sat"}]},
         len(_tokens(base, "the cat sat"))),
    ]  # fmt: skip
    for shape, expected in cases:
        usage = _post(base, "/v1/embeddings", {"input": shape}).json()["usage"]
        assert usage == {"prompt_tokens": expected, "total_tokens": expected}, shape


def test_a_mixed_prompt_is_its_parts_tokens(bert_mean_server: LiveServer) -> None:
    base = bert_mean_server.base_url
    hello = _tokens(base, "hello", add_special=False)
    mixed = _post(base, "/embeddings", {"content": [12, 34, "hello", 56]}).json()
    ids = _post(base, "/embeddings", {"content": [12, 34, *hello, 56]}).json()
    assert np.allclose(_vectors(mixed), _vectors(ids), atol=1e-6)
    # the content parts' texts are joined: the same vector as the whole string
    parts = {"content": [{"type": "text", "text": "hello "}, {"type": "text", "text": "world"}]}
    same = _post(base, "/v1/embeddings", {"input": ["hello world", parts]}).json()
    first, second = _vectors(same)
    assert np.array_equal(first, second)


def test_content_on_v1_embeddings_answers_llama_servers_bare_list(
    bert_mean_server: LiveServer,
) -> None:
    base = bert_mean_server.base_url
    native = _post(base, "/v1/embeddings", {"content": ["the cat", "the dog"]})
    assert native.status_code == 200
    items = native.json()
    assert isinstance(items, list) and [item["index"] for item in items] == [0, 1]
    oai = _post(base, "/v1/embeddings", {"input": ["the cat", "the dog"]}).json()
    assert np.allclose(_vectors(items), _vectors(oai), atol=1e-6)


def test_base64_items_say_so_and_decode_to_the_floats(bert_mean_server: LiveServer) -> None:
    base = bert_mean_server.base_url
    texts = ["Test base64 embedding output", "the sea"]
    floats = _post(base, "/v1/embeddings", {"input": texts}).json()
    packed = _post(base, "/v1/embeddings", {"input": texts, "encoding_format": "base64"}).json()
    for item in packed["data"]:
        assert item["encoding_format"] == "base64" and isinstance(item["embedding"], str)
    assert np.allclose(_vectors(packed), _vectors(floats), atol=1e-6)
    # the native routes check the format and answer floats, as llama-server's do
    native = _post(base, "/embeddings", {"input": texts, "encoding_format": "base64"}).json()
    assert np.allclose(_vectors(native), _vectors(floats), atol=1e-6)
    bad = _post(base, "/embeddings", {"input": texts, "encoding_format": "int8"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "encoding_format"


def test_embd_normalize_scales_pooled_vectors(bert_mean_server: LiveServer) -> None:
    base = bert_mean_server.base_url

    def vector(norm: int) -> np.ndarray:
        body = {"input": "the cat sat on the mat", "embd_normalize": norm}
        r = _post(base, "/v1/embeddings", body)
        assert r.status_code == 200, r.text
        return _vectors(r.json())[0]

    raw = vector(-1)
    assert abs(np.linalg.norm(raw) - 1) > 1e-3  # the mean as it is
    assert np.allclose(vector(2), raw / np.linalg.norm(raw), atol=1e-6)
    assert np.allclose(vector(1), raw / np.abs(raw).sum(), atol=1e-6)
    assert np.allclose(np.abs(vector(0)).max(), 32760, atol=1e-2)
    assert _post(base, "/v1/embeddings", {"input": "x", "embd_normalize": -2}).status_code == 400


def test_the_openai_sdk_reads_the_answer(bert_mean_server: LiveServer) -> None:
    client = bert_mean_server.client(timeout=TIMEOUT)
    texts = ["I believe the meaning of life is", "This is a test", "This is another test"]
    answer = client.embeddings.create(model="text-embedding-3-small", input=texts)
    assert answer.model == MODEL and len(answer.data) == 3
    assert all(len(d.embedding) == HIDDEN for d in answer.data)
    assert answer.usage.prompt_tokens == answer.usage.total_tokens


@pytest.mark.parametrize("shape", INVALID_INPUTS, ids=repr)
def test_invalid_inputs_are_4xx_in_our_error_shape(
    bert_mean_server: LiveServer, shape: Any
) -> None:
    for path in ROUTES:
        r = _post(bert_mean_server.base_url, path, {"input": shape})
        assert r.status_code == 400, (path, r.text)
        error = r.json()["error"]
        assert set(error) == ERROR_KEYS and error["type"] == "invalid_request_error", path
        assert error["param"].startswith("input"), (path, error)


def test_a_body_without_input_or_content_is_a_400(bert_mean_server: LiveServer) -> None:
    for path in ROUTES:
        for body in ({}, {"prompt": "x"}, {"input": None, "content": "x"}):
            r = _post(bert_mean_server.base_url, path, body)
            assert r.status_code == 400, (path, body, r.text)
            assert r.json()["error"]["param"] == "input", (path, body)


def test_pooling_none_gives_a_vector_per_token_unnormalised(
    bert_none_server: LiveServer, bert_mean_server: LiveServer
) -> None:
    """llama-server's test_embedding_pooling_none: 3 text tokens + 2 special = 5 rows."""
    base = bert_none_server.base_url
    for path in NATIVE_ROUTES:
        for key in ("input", "content"):
            r = _post(base, path, {key: "hello hello hello", "embd_normalize": 2})
            assert r.status_code == 200, (path, key, r.text)
            (item,) = r.json()
            assert set(item) == {"index", "embedding"} and len(item["embedding"]) == 5
            for row in item["embedding"]:
                assert len(row) == HIDDEN
                assert abs(sum(x * x for x in row) - 1) > 1e-3  # not normalised
    # each prompt its rows, as many as its tokens; their mean is the mean-pooled vector
    texts = ["the cat sat on the mat", "hello world", "a dog ran in the park"]
    items = _post(base, "/embeddings", {"content": texts}).json()
    pooled = _vectors(_post(bert_mean_server.base_url, "/v1/embeddings", {"input": texts}).json())
    for text, item, expected in zip(texts, items, pooled, strict=True):
        rows = np.array(item["embedding"], dtype=np.float32)
        assert rows.shape == (len(_tokens(base, text)), HIDDEN)
        mean = rows.mean(axis=0)
        assert np.allclose(mean / np.linalg.norm(mean), expected, atol=1e-4), text


def test_pooling_none_is_refused_on_v1_embeddings(bert_none_server: LiveServer) -> None:
    """llama-server's test_embedding_pooling_none_oai: a 400, for content too, and in the
    OpenAI SDK a BadRequestError."""
    for body in ({"input": "hello hello hello"}, {"content": "hello"}, {"input": []}):
        r = _post(bert_none_server.base_url, "/v1/embeddings", body)
        assert r.status_code == 400, body
        error = r.json()["error"]
        assert set(error) == ERROR_KEYS and error["code"] == "pooling_none"
        assert "Pooling type 'none' is not OAI compatible" in error["message"]
        assert "/embeddings" in error["message"]
    with pytest.raises(openai.BadRequestError):
        bert_none_server.client(timeout=TIMEOUT).embeddings.create(model=MODEL, input="hi")


# ---- against llama-server ----------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [{"input": shape} for shape, _ in MIXED_INPUTS]
    + [{"input": shape} for shape in INVALID_INPUTS]
    + BODIES
    + [{}],
    ids=repr,
)
def test_answers_match_llama_servers(
    bert_mean_server: LiveServer,
    bert_none_server: LiveServer,
    llama_server_peers: dict[str, str],
    body: dict[str, Any],
) -> None:
    ours = {"mean": bert_mean_server.base_url, "none": bert_none_server.base_url}
    for pooling, base in ours.items():
        for path in ROUTES:
            what = f"--pooling {pooling} {path} {body}"
            _assert_same(
                _post(base, path, body), _post(llama_server_peers[pooling], path, body), what
            )


def test_a_per_token_answer_past_its_bound_is_a_400(
    bert_none_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per-token vectors (pooling none) grow with every input token: past the bound on the
    numbers one answer holds, a 400 before anything is decoded, and the server goes on."""
    from backend.server.routes import embeddings

    monkeypatch.setattr(embeddings, "PER_TOKEN_FLOATS", 10 * HIDDEN)  # in-process server
    url = f"{bert_none_server.base_url}/embeddings"
    r = httpx.post(url, json={"content": ["a b c d e f g h i j k l"] * 2}, timeout=60)
    assert r.status_code == 400 and "more than one answer carries" in r.json()["error"]["message"]
    assert httpx.post(url, json={"content": "a"}, timeout=60).status_code == 200
