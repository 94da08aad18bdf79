"""What real clients send (issue 15.5): lm-eval-harness scoring, llama-server's n_predict,
max_tokens past the context, assistant prefill and a custom chat template."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import LiveServer, start_server, wait_healthy

TIMEOUT = 120


def _post(server: LiveServer, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.base_url}{path}", json=body, timeout=TIMEOUT)


def _tokens(server: LiveServer, text: str) -> list[int]:
    r = _post(server, "/tokenize", {"content": text, "add_special": False})
    return list(r.json()["tokens"])


def test_lm_eval_loglikelihood_request_shape(live_server: LiveServer) -> None:
    """lm-eval's local-completions model: token-id prompts in a batch, echo, logprobs=1,
    max_tokens=1; it reads token_logprobs[ctxlen:-1] and checks each against the top."""
    context = _tokens(live_server, "The capital of France is")
    good = _tokens(live_server, " Paris")
    bad = _tokens(live_server, " banana")
    payload = {
        "model": "anything",
        "prompt": [context + good, context + bad],
        "temperature": 0,
        "max_tokens": 1,
        "logprobs": 1,
        "seed": 1234,
        "echo": True,
    }
    r = _post(live_server, "/v1/completions", payload)
    assert r.status_code == 200, r.text
    choices = sorted(r.json()["choices"], key=lambda c: c["index"])
    assert [c["index"] for c in choices] == [0, 1]
    scores = []
    for choice, continuation in zip(choices, (good, bad), strict=True):
        lp = choice["logprobs"]
        assert len(lp["token_logprobs"]) == len(context) + len(continuation) + 1
        assert lp["token_logprobs"][0] is None
        tail = lp["token_logprobs"][len(context) : -1]
        tops = lp["top_logprobs"][len(context) : -1]
        assert len(tail) == len(continuation)
        assert all(t <= max(top.values()) + 1e-6 for t, top in zip(tail, tops, strict=True))
        scores.append(sum(tail))
    assert scores[0] > scores[1]  # Paris is likelier than banana
    assert all(math.isfinite(s) for s in scores)


def test_echo_with_max_tokens_zero_scores_the_prompt_only(live_server: LiveServer) -> None:
    r = _post(
        live_server,
        "/v1/completions",
        {"prompt": "Once upon a time", "max_tokens": 0, "echo": True, "logprobs": 0},
    )
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["text"] == "Once upon a time"
    usage = r.json()["usage"]
    assert usage["completion_tokens"] == 0
    assert len(choice["logprobs"]["token_logprobs"]) == usage["prompt_tokens"]


def test_n_predict_is_an_alias_of_max_tokens(live_server: LiveServer) -> None:
    body = {
        "messages": [{"role": "user", "content": "Tell a long story."}],
        "n_predict": 3,
        "ignore_eos": True,
    }
    r = _post(live_server, "/v1/chat/completions", body)
    assert r.status_code == 200
    assert r.json()["usage"]["completion_tokens"] == 3


def test_assistant_prefill_is_continued(live_server: LiveServer) -> None:
    chat = [
        {"role": "user", "content": "Name a tree."},
        {"role": "assistant", "content": "Whill"},
    ]
    base = {"messages": chat, "max_tokens": 4, "temperature": 0}
    prefill = _post(live_server, "/v1/chat/completions", base).json()
    new_turn = _post(live_server, "/v1/chat/completions", {**base, "add_generation_prompt": True})
    end_of_turn = _tokens(live_server, "<|im_end|>\n<|im_start|>assistant\n")
    assert new_turn.json()["usage"]["prompt_tokens"] - prefill["usage"]["prompt_tokens"] == len(
        end_of_turn
    )
    explicit = _post(live_server, "/v1/chat/completions", {**base, "continue_final_message": True})
    assert explicit.json()["usage"]["prompt_tokens"] == prefill["usage"]["prompt_tokens"]
    both = {**base, "continue_final_message": True, "add_generation_prompt": True}
    r = _post(live_server, "/v1/chat/completions", both)
    assert r.status_code == 400 and "cannot both be true" in r.json()["error"]["message"]
    user_last = {"messages": chat[:1], "continue_final_message": True}
    assert _post(live_server, "/v1/chat/completions", user_last).status_code == 400


@pytest.fixture(scope="module")
def small_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LiveServer]]:
    template = tmp_path_factory.mktemp("tpl") / "plain.jinja"
    template.write_text(
        "{% for m in messages %}{{ m['role'] | upper }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
    )
    servers = {
        "lenient": start_server(ctx_size=256, parallel=1),
        "strict": start_server(ctx_size=256, parallel=1),
        "template": start_server(ctx_size=256, parallel=1, chat_template_file=str(template)),
    }
    servers["strict"].handle.app.state.server_settings.strict_max_tokens = True
    for s in servers.values():
        wait_healthy(s.base_url)
    yield servers
    for s in servers.values():
        s.handle.stop()


def test_max_tokens_past_the_context_stops_when_it_is_full(
    small_servers: dict[str, LiveServer],
) -> None:
    body = {
        "messages": [{"role": "user", "content": "Write forever."}],
        "max_tokens": 32000,  # what Claude Code sends
        "ignore_eos": True,
    }
    lenient = small_servers["lenient"]
    lenient.handle.app.state.server_settings.max_tokens_limit = 100_000
    r = _post(lenient, "/v1/chat/completions", body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] == "length"
    usage = r.json()["usage"]
    assert usage["prompt_tokens"] + usage["completion_tokens"] == 256
    strict = _post(small_servers["strict"], "/v1/chat/completions", body)
    assert strict.status_code == 400
    assert strict.json()["error"]["code"] == "context_length_exceeded"


def test_chat_template_file_replaces_the_gguf_template(
    small_servers: dict[str, LiveServer], tmp_path: Path
) -> None:
    server = small_servers["template"]
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
    r = _post(server, "/v1/chat/completions", body)
    assert r.status_code == 200
    expected = _tokens(server, "USER: Hi\nASSISTANT:")
    bos = 1 if r.json()["usage"]["prompt_tokens"] == len(expected) + 1 else 0
    assert r.json()["usage"]["prompt_tokens"] == len(expected) + bos
