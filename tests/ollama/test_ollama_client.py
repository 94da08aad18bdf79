"""Ollama's API through the official ``ollama`` Python client: discovery, chat and generate
(streamed and not), format, options, embeddings, and the errors in Ollama's shape."""

from __future__ import annotations

import json

import httpx
import ollama
import pytest

from tests.ollama.conftest import GREEDY, MODEL, client
from tests.server.conftest import LiveServer

HELLO = [{"role": "user", "content": "Write one sentence about the sea."}]
# Ollama's documented examples (its API reference): the last chunk of a chat, a tags entry
DOC_FINAL = {
    "model": "gemma4",
    "created_at": "2025-10-17T23:14:07.414671Z",
    "message": {"role": "assistant", "content": ""},
    "done": True,
    "done_reason": "stop",
    "total_duration": 174560334,
    "load_duration": 101397084,
    "prompt_eval_count": 11,
    "prompt_eval_duration": 13074791,
    "eval_count": 18,
    "eval_duration": 52479709,
}
DOC_TAG = {
    "name": "gemma4:latest",
    "model": "gemma4:latest",
    "modified_at": "2025-10-03T23:34:03.409490317-07:00",
    "size": 9608350245,
    "digest": "c6eb396dbd5992bbe3f5cdb947e8bbc0ee413d7c17e2beaae69f5d569cf982eb",
    "details": {
        "parent_model": "",
        "format": "gguf",
        "family": "gemma4",
        "families": ["gemma4"],
        "parameter_size": "8.0B",
        "quantization_level": "Q4_K_M",
    },
}


def test_discovery_lists_shows_and_reports_the_model(ollama_server: LiveServer) -> None:
    c = client(ollama_server)
    (entry,) = c.list().models
    assert entry.model == f"{MODEL}:latest"
    assert entry.size and entry.digest and len(entry.digest) == 64
    assert entry.details is not None and entry.details.family == "llama"
    assert entry.details.quantization_level == "Q4_1"
    assert entry.details.parameter_size == "135M"
    shown = c.show(f"{MODEL}:latest")
    assert shown.capabilities == ["completion", "tools"]  # the template renders tools
    assert shown.modelinfo is not None and shown.modelinfo["general.architecture"] == "llama"
    assert "llama.context_length" in shown.modelinfo
    assert "tools" in (shown.template or "")
    assert shown.parameters and "num_ctx" in shown.parameters
    (running,) = c.ps().models
    assert running.model == f"{MODEL}:latest" and running.context_length == 2048
    base = ollama_server.base_url
    assert httpx.get(f"{base}/api/version", timeout=10).json()["version"]
    assert httpx.get(f"{base}/", timeout=10).text == "Ollama is running"
    card = ollama_server.client().models.list().data[0]
    assert card.capabilities == ["completion", "tools"]  # type: ignore[attr-defined]


def test_chat_streamed_and_whole_agree_with_openai_chat(ollama_server: LiveServer) -> None:
    c = client(ollama_server)
    options = {**GREEDY, "num_predict": 24}
    whole = c.chat(model=MODEL, messages=HELLO, options=options)
    parts = list(c.chat(model=MODEL, messages=HELLO, options=options, stream=True))
    assert whole.done and whole.done_reason in ("stop", "length")
    assert "".join(p.message.content or "" for p in parts) == whole.message.content
    assert [p.done for p in parts].count(True) == 1 and parts[-1].done
    last = parts[-1]
    assert last.eval_count == whole.eval_count and 0 < last.eval_count <= 24
    assert last.prompt_eval_count == whole.prompt_eval_count > 5
    assert last.total_duration and last.total_duration > last.eval_duration >= 0
    openai = ollama_server.client().chat.completions.create(
        model=MODEL,
        messages=HELLO,
        max_tokens=24,
        temperature=0,
        seed=1,  # type: ignore[arg-type]
    )
    assert openai.choices[0].message.content == whole.message.content


def test_options_reach_the_sampler(ollama_server: LiveServer) -> None:
    c = client(ollama_server)
    short = c.chat(model=MODEL, messages=HELLO, options={**GREEDY, "num_predict": 3})
    assert short.eval_count == 3 and short.done_reason == "length"
    stopped = c.generate(
        model=MODEL, prompt="Count: 1, 2, 3,", raw=True, options={**GREEDY, "stop": [","]}
    )
    assert "," not in stopped.response


def test_generate_templated_raw_and_the_load_request(ollama_server: LiveServer) -> None:
    c = client(ollama_server)
    templated = c.generate(model=MODEL, prompt="Hi", system="Be brief.", options=GREEDY)
    assert templated.response and templated.done
    raw = c.generate(
        model=MODEL, prompt="Once upon a time", raw=True, options={**GREEDY, "num_predict": 8}
    )
    assert raw.response and raw.prompt_eval_count is not None and raw.prompt_eval_count < 10
    loaded = c.generate(model=MODEL, prompt="")
    assert loaded.done and loaded.done_reason == "load"


def test_format_json_and_schema_are_enforced(ollama_server: LiveServer) -> None:
    c = client(ollama_server)
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12}},
        "required": ["city"],
    }
    answer = c.chat(
        model=MODEL,
        messages=[{"role": "user", "content": "Name a city as JSON."}],
        format=schema,
        options={**GREEDY, "num_predict": 40},
    )
    assert set(json.loads(answer.message.content or "")) == {"city"}
    loose = c.generate(model=MODEL, prompt="A JSON object:", format="json", options=GREEDY)
    assert isinstance(json.loads(loose.response or ""), dict)


def test_embeddings_new_and_old(ollama_server: LiveServer) -> None:
    c = client(ollama_server)
    vectors = c.embed(model=MODEL, input=["the sea", "a cat"]).embeddings
    assert len(vectors) == 2 and len(vectors[0]) == 576 and vectors[0] != vectors[1]
    assert abs(sum(x * x for x in vectors[0]) - 1.0) < 1e-3
    short = c.embed(model=MODEL, input="the sea", dimensions=64).embeddings[0]
    assert len(short) == 64 and abs(sum(x * x for x in short) - 1.0) < 1e-3
    old = c.embeddings(model=MODEL, prompt="the sea").embedding
    assert len(old) == 576


def test_ndjson_framing_is_what_ollama_sends(ollama_server: LiveServer) -> None:
    body = {"model": MODEL, "messages": HELLO, "options": {**GREEDY, "num_predict": 6}}
    with httpx.stream("POST", f"{ollama_server.base_url}/api/chat", json=body, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/x-ndjson")
        lines = list(r.iter_lines())
    assert all(lines), "no blank lines"
    chunks = [json.loads(line) for line in lines]
    assert all(set(c) >= {"model", "created_at", "message", "done"} for c in chunks)
    assert chunks[-1]["done"] is True and all(not c["done"] for c in chunks[:-1])
    final = chunks[-1]
    assert set(final) == set(DOC_FINAL)  # the fields of Ollama's documented example
    assert {k: type(v) for k, v in final.items()} == {k: type(v) for k, v in DOC_FINAL.items()}
    assert final["created_at"].endswith("Z")
    tags = httpx.get(f"{ollama_server.base_url}/api/tags", timeout=10).json()["models"][0]
    assert {k: type(v) for k, v in tags.items()} == {k: type(v) for k, v in DOC_TAG.items()}
    assert set(tags["details"]) == set(DOC_TAG["details"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        (
            "/api/chat",
            {"model": MODEL, "messages": HELLO, "think": True},
            400,
            "does not support thinking",
        ),
        ("/api/chat", {"model": MODEL, "messages": HELLO, "format": "yaml"}, 400, "invalid format"),
        (
            "/api/chat",
            {"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]},
            400,
            "role",
        ),
        ("/api/chat", {"model": MODEL, "messages": HELLO, "keep_alive": "300"}, 400, "duration"),
        (
            "/api/generate",
            {"model": MODEL, "prompt": "x", "suffix": "y"},
            400,
            "does not support insert",
        ),
        ("/api/show", {"model": "llama3.2"}, 404, "model 'llama3.2' not found"),
        ("/api/show", {}, 400, "model is required"),
        ("/api/pull", {"model": "llama3.2"}, 400, "library"),
        ("/api/chat", {"messages": HELLO}, 400, "model"),
    ],
)
def test_bad_requests_are_ollama_shaped_and_the_server_goes_on(
    ollama_server: LiveServer, path: str, body: dict[str, object], status: int, words: str
) -> None:
    r = httpx.post(f"{ollama_server.base_url}{path}", json=body, timeout=60)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert set(r.json()) == {"error"} and words in r.json()["error"]
    with pytest.raises(ollama.ResponseError) as info:
        client(ollama_server).show("no-such-model")
    assert info.value.status_code == 404
    assert client(ollama_server).chat(model=MODEL, messages=HELLO, options={"num_predict": 2}).done
