"""/tokenize, /detokenize (llama-server's shape) and GET /v1/models/{id} on the real server."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.server.conftest import LiveServer

TEXT = "<|im_start|>user\nHello wörld, naïve café 🤖 — done.<|im_end|>"
TIMEOUT = 120


def _post(server: LiveServer, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{server.base_url}{path}", json=body, timeout=TIMEOUT)


def test_tokenize_detokenize_round_trip(live_server: LiveServer) -> None:
    r = _post(live_server, "/tokenize", {"content": TEXT})
    assert r.status_code == 200
    tokens = r.json()["tokens"]
    assert all(isinstance(t, int) for t in tokens)
    assert len(tokens) > 10
    back = _post(live_server, "/detokenize", {"tokens": tokens})
    assert back.status_code == 200
    assert back.json() == {"content": TEXT}


def test_special_tokens_are_parsed_only_when_asked(live_server: LiveServer) -> None:
    parsed = _post(live_server, "/tokenize", {"content": "<|im_start|>"}).json()["tokens"]
    literal = _post(
        live_server, "/tokenize", {"content": "<|im_start|>", "parse_special": False}
    ).json()["tokens"]
    assert len(parsed) == 1  # one control token
    assert len(literal) > 1  # the text spelt out in ordinary tokens
    assert parsed[0] not in literal


def test_with_pieces_concatenate_to_the_text(live_server: LiveServer) -> None:
    r = _post(live_server, "/tokenize", {"content": TEXT, "with_pieces": True})
    pieces = r.json()["tokens"]
    ids = _post(live_server, "/tokenize", {"content": TEXT}).json()["tokens"]
    assert [p["id"] for p in pieces] == ids
    raw = b""
    n_bytes_pieces = 0
    for p in pieces:
        if isinstance(p["piece"], list):  # part of a multi-byte character
            n_bytes_pieces += 1
            raw += bytes(p["piece"])
        else:
            raw += p["piece"].encode()
    assert raw.decode() == TEXT
    assert n_bytes_pieces > 0, "the emoji is split over tokens that are not valid UTF-8 alone"


def test_detokenize_rejects_unknown_token_ids(live_server: LiveServer) -> None:
    for bad in ([10**9], [-1], [1, 2, 49152]):
        r = _post(live_server, "/detokenize", {"tokens": bad})
        assert r.status_code == 400, bad
        err = r.json()["error"]
        assert err["param"] == "tokens"
        assert "0..49151" in err["message"]


def test_tokenize_validation_errors_are_openai_shaped(live_server: LiveServer) -> None:
    r = _post(live_server, "/tokenize", {"text": "no content field"})
    assert r.status_code == 400
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert r.json()["error"]["param"] == "content"


def test_retrieve_model_through_the_sdk(live_server: LiveServer) -> None:
    client = live_server.client(timeout=TIMEOUT)
    listed = client.models.list().data[0]
    model = client.models.retrieve(listed.id)
    assert model.id == listed.id == "SmolLM2-135M-Instruct"
    assert model.object == "model"
    # the file name is accepted as an alias, as in chat requests
    by_file = httpx.get(
        f"{live_server.base_url}/v1/models/SmolLM2-135M-Instruct.Q4_1.gguf", timeout=TIMEOUT
    )
    assert by_file.status_code == 200
    assert by_file.json()["id"] == listed.id


def test_retrieve_unknown_model_is_an_openai_404(live_server: LiveServer) -> None:
    client = live_server.client(timeout=TIMEOUT)
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("gpt-4o")
    body = info.value.body
    assert isinstance(body, dict)
    assert body["code"] == "model_not_found"
    assert "gpt-4o" in body["message"]
    assert body["type"] == "not_found_error"
    nested = httpx.get(f"{live_server.base_url}/v1/models/org/some-model", timeout=TIMEOUT)
    assert nested.status_code == 404
    assert nested.json()["error"]["code"] == "model_not_found"


def test_lone_surrogates_are_a_400_not_a_crash(live_server: LiveServer) -> None:
    """JSON may carry a lone UTF-16 surrogate, which is not encodable text."""
    r = httpx.post(
        f"{live_server.base_url}/tokenize",
        content=b'{"content": "ab\\ud800cd"}',
        headers={"content-type": "application/json"},
        timeout=TIMEOUT,
    )
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "content"
    assert "surrogate at position 2" in err["message"]
