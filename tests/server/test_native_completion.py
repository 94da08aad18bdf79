"""llama-server's native POST /completion (and /completions with a native body) on the real
server and SmolLM2, with the request shapes of llama.cpp's own server tests
(tools/server/tests/unit/test_completion.py and test_security.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from openai import OpenAI

from tests.server.conftest import LiveServer

HTTP = httpx.Client(timeout=120.0)
PROMPT = "I believe the meaning of life is"


def post(server: LiveServer, body: dict[str, Any], path: str = "/completion") -> httpx.Response:
    return HTTP.post(f"{server.base_url}{path}", json=body)


def ok(server: LiveServer, body: dict[str, Any], path: str = "/completion") -> Any:
    r = post(server, body, path)
    assert r.status_code == 200, r.text
    return r.json()


def stream(server: LiveServer, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``data:`` objects of a native stream (it ends without ``[DONE]``)."""
    chunks = []
    with HTTP.stream("POST", f"{server.base_url}/completion", json={**body, "stream": True}) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                assert line != "data: [DONE]"
                chunks.append(json.loads(line[len("data: ") :]))
    return chunks


def tokenize(server: LiveServer, text: str, *, add_special: bool = True) -> list[int]:
    body = {"content": text, "add_special": add_special}
    tokens: list[int] = ok(server, body, "/tokenize")["tokens"]
    return tokens


def detokenize(server: LiveServer, tokens: list[int]) -> str:
    content: str = ok(server, {"tokens": tokens}, "/detokenize")["content"]
    return content


def test_completion_answers_in_llama_servers_shape(live_server: LiveServer) -> None:
    body = {"n_predict": 8, "prompt": PROMPT, "ignore_eos": True, "temperature": 0.0}
    res = ok(live_server, {**body, "return_tokens": True})
    n_prompt = len(tokenize(live_server, PROMPT))
    assert res["tokens_evaluated"] == n_prompt
    assert res["timings"]["prompt_n"] + res["timings"]["cache_n"] == n_prompt
    assert res["tokens_predicted"] == res["timings"]["predicted_n"] == 8
    assert res["stop"] is True and res["stop_type"] == "limit" and res["stopping_word"] == ""
    assert res["truncated"] is False
    assert res["has_new_line"] == ("\n" in res["content"])
    assert len(res["tokens"]) == 8 and all(isinstance(t, int) for t in res["tokens"])
    assert detokenize(live_server, res["tokens"]) == res["content"] != ""
    assert res["generation_settings"]["n_predict"] == 8
    assert res["generation_settings"]["temperature"] == 0.0
    assert res["model"] == "SmolLM2-135M-Instruct"
    assert "completion_probabilities" not in res
    timings = res["timings"]
    assert timings["prompt_ms"] > 0 and timings["predicted_ms"] > 0
    assert timings["predicted_per_second"] > 0
    # without return_tokens, no ids (as llama-server)
    assert ok(live_server, body)["tokens"] == []


def test_stream_matches_the_unstreamed_answer(live_server: LiveServer) -> None:
    body = {"n_predict": 8, "prompt": PROMPT, "temperature": 0.0, "ignore_eos": True}
    chunks = stream(live_server, {**body, "seed": 42})
    *parts, final = chunks
    assert all(c["stop"] is False for c in parts) and final["stop"] is True
    for chunk in parts:
        assert chunk["tokens"] and all(isinstance(t, int) for t in chunk["tokens"])
    assert sum(len(c["tokens"]) for c in parts) == 8
    assert final["content"] == "" and final["stop_type"] == "limit"
    assert final["timings"]["predicted_n"] == 8 and final["truncated"] is False
    assert final["generation_settings"]["n_predict"] == 8
    assert final["generation_settings"]["seed"] == 42
    assert "".join(c["content"] for c in chunks) == ok(live_server, body)["content"]


def test_n_probs(live_server: LiveServer) -> None:
    body = {"prompt": PROMPT, "n_probs": 10, "temperature": 0.0, "n_predict": 5}
    res = ok(live_server, {**body, "ignore_eos": True})
    probs = res["completion_probabilities"]
    assert len(probs) == 5
    for tok in probs:
        assert tok["id"] > 0 and isinstance(tok["token"], str) and tok["logprob"] <= 0.0
        assert isinstance(tok["bytes"], list) and bytes(tok["bytes"]).decode() == tok["token"]
        assert len(tok["top_logprobs"]) == 10
        for alt in tok["top_logprobs"]:
            assert alt["id"] > 0 and isinstance(alt["token"], str) and alt["logprob"] <= 0.0
            assert isinstance(alt["bytes"], list)
        ranked = [alt["logprob"] for alt in tok["top_logprobs"]]
        assert ranked == sorted(ranked, reverse=True)
        # greedy: the chosen token is the most likely one
        assert tok["top_logprobs"][0]["id"] == tok["id"]
        assert tok["top_logprobs"][0]["logprob"] == tok["logprob"]
    assert "".join(tok["token"] for tok in probs) == res["content"]


def test_n_probs_stream(live_server: LiveServer) -> None:
    body = {"prompt": PROMPT, "n_probs": 10, "temperature": 0.0, "n_predict": 5}
    chunks = stream(live_server, {**body, "ignore_eos": True})
    seen = 0
    for data in chunks:
        if data["stop"]:
            assert "completion_probabilities" not in data
            continue
        probs = data["completion_probabilities"]
        assert [p["id"] for p in probs] == data["tokens"]
        for tok in probs:
            assert tok["logprob"] <= 0.0 and len(tok["top_logprobs"]) == 10
        seen += len(probs)
    assert seen == 5


def test_stop_word_and_eos(live_server: LiveServer) -> None:
    base = {"prompt": PROMPT, "temperature": 0.0, "n_predict": 24, "ignore_eos": True}
    free = ok(live_server, base)["content"]
    words = [w for w in free.split() if len(w) >= 3 and free.index(w) > 0]
    assert words, free
    stop = words[0]
    res = ok(live_server, {**base, "stop": ["@@never@@", stop]})
    assert res["stop_type"] == "word" and res["stopping_word"] == stop
    assert res["content"] == free[: free.index(stop)]
    # a grammar that completes ends the generation as an end-of-generation token does
    grammar = 'root ::= "yes" | "no"'
    done = ok(live_server, {"prompt": "Is water wet?", "grammar": grammar, "n_predict": 16})
    assert done["content"] in ("yes", "no") and done["stop_type"] == "eos"
    assert done["stopping_word"] == ""


def test_json_schema_is_enforced(live_server: LiveServer) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    body = {"prompt": "What is 2 + 2? Answer in JSON.", "json_schema": schema, "n_predict": 64}
    res = ok(live_server, body)
    assert isinstance(json.loads(res["content"])["answer"], int)
    both = post(live_server, {**body, "grammar": 'root ::= "x"'})
    assert both.status_code == 400 and both.json()["error"]["param"] == "json_schema"


def test_token_prompts_batches_and_mixed(live_server: LiveServer) -> None:
    tokens = tokenize(live_server, PROMPT)
    greedy = {"temperature": 0.0, "n_predict": 8}
    single = ok(live_server, {**greedy, "prompt": tokens})
    text = ok(live_server, {**greedy, "prompt": PROMPT})
    assert isinstance(single["content"], str) and single["content"] == text["content"]
    batch = ok(live_server, {**greedy, "prompt": [tokens, tokens]})
    assert isinstance(batch, list) and len(batch) == 2
    assert [r["index"] for r in batch] == [0, 1]
    assert batch[0]["content"] == batch[1]["content"] == text["content"]
    mixed = ok(live_server, {**greedy, "prompt": [tokens, PROMPT]})
    assert [r["content"] for r in mixed] == [text["content"]] * 2
    strings = ok(live_server, {**greedy, "prompt": [PROMPT, "Hello"]})
    assert len(strings) == 2 and strings[0]["content"] == text["content"]
    one = ok(live_server, {**greedy, "prompt": [1, 2, 3, 4, 5, 6, PROMPT, 7, 8, 9, 10, PROMPT]})
    assert isinstance(one["content"], str)
    # a text part that doesn't come first gets no BOS (llama-server's tokenize_mixed)
    assert one["tokens_evaluated"] == 10 + 2 * len(tokenize(live_server, PROMPT, add_special=False))
    bad = post(live_server, {"prompt": [10**9]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "prompt"


def test_seeds(live_server: LiveServer) -> None:
    body = {"prompt": PROMPT, "temperature": 1.0, "n_predict": 8, "cache_prompt": False}
    same = {ok(live_server, {**body, "seed": 42})["content"] for _ in range(3)}
    assert len(same) == 1
    different = {ok(live_server, {**body, "seed": seed})["content"] for seed in range(4)}
    assert len(different) > 1


def test_logit_bias_in_llama_servers_forms(live_server: LiveServer) -> None:
    body = {"prompt": PROMPT, "temperature": 0.0, "n_predict": 1, "return_tokens": True}
    first = ok(live_server, body)["tokens"][0]
    for bias in ([[first, False]], [[first, -100]], {str(first): -100}):
        res = ok(live_server, {**body, "logit_bias": bias})
        assert res["tokens"][0] != first, bias
    word = ok(live_server, body)["content"]
    by_text = ok(live_server, {**body, "logit_bias": [[word, False]]})
    assert by_text["content"] != word


def test_n_predict_zero_and_response_fields(live_server: LiveServer) -> None:
    zero = ok(live_server, {"prompt": PROMPT, "n_predict": 0})
    assert zero["content"] == "" and zero["tokens_predicted"] == 0
    assert zero["stop_type"] == "limit"
    picked = ok(
        live_server,
        {
            "prompt": PROMPT,
            "n_predict": 4,
            "response_fields": ["content", "generation_settings/n_predict", "timings/predicted_n"],
        },
    )
    assert set(picked) == {"content", "generation_settings/n_predict", "timings/predicted_n"}
    assert picked["generation_settings/n_predict"] == 4


def test_errors_are_clear_400s(live_server: LiveServer) -> None:
    too_long = post(live_server, {"prompt": PROMPT * 400, "n_predict": 4})
    assert too_long.status_code == 400
    assert too_long.json()["error"]["code"] == "context_length_exceeded"
    post_sampling = post(live_server, {"prompt": PROMPT, "n_probs": 2, "post_sampling_probs": True})
    assert post_sampling.status_code == 400
    assert "post_sampling_probs" in post_sampling.json()["error"]["message"]
    broken = HTTP.post(f"{live_server.base_url}/completions", content=b"{not json")
    assert broken.status_code == 400 and "JSON" in broken.json()["error"]["message"]
    wrong = post(live_server, {"prompt": PROMPT, "n_predict": "many"}, "/completions")
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "n_predict"


def test_completions_path_tells_native_from_openai(live_server: LiveServer) -> None:
    """llama-server's clients post a bare prompt to /completions (test_security.py);
    OpenAI's clients name a model or send OpenAI-only fields."""
    native = ok(live_server, {"prompt": PROMPT, "n_predict": 4}, "/completions")
    assert "content" in native and native["tokens_predicted"] <= 4
    bare = ok(live_server, {"prompt": PROMPT, "stop": [" "]}, "/completions")
    assert "content" in bare and "choices" not in bare
    named = ok(live_server, {"prompt": PROMPT, "model": "gpt-3.5-turbo"}, "/completions")
    assert named["object"] == "text_completion"
    capped = ok(live_server, {"prompt": PROMPT, "max_tokens": 2}, "/completions")
    assert capped["object"] == "text_completion" and capped["usage"]["completion_tokens"] <= 2
    both = {"prompt": PROMPT, "model": "x", "n_probs": 1, "stop": [" "]}
    with_both = ok(live_server, both, "/completions")
    assert "completion_probabilities" in with_both
    # the OpenAI SDK with the server root as its base URL
    client = OpenAI(base_url=live_server.base_url, api_key="unused", max_retries=0)
    sdk = client.completions.create(model="davinci-002", prompt=PROMPT, max_tokens=4)
    assert sdk.object == "text_completion" and sdk.choices[0].text
    streamed = client.completions.create(model="m", prompt=PROMPT, max_tokens=4, stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices)
