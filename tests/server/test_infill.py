"""/infill (llama-server-compatible fill-in-the-middle) on a real model with FIM tokens.

SmolLM2 has no FIM tokens, so the test gives five of its unused control tokens the
FIM roles in a copy of its GGUF (``tokenizer.ggml.fim_*_token_id``, exactly how a
code model's GGUF declares them). SmolLM2 was not trained for FIM, so these tests
check the mechanics (prompt layout, truncation, generation, streaming), not the quality.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from backend.settings.default_model import default_model_path
from tests.hub.gguf_writer import copy_with_metadata
from tests.server.conftest import LiveServer, start_server, wait_healthy

TIMEOUT = 120
REP, SEP, PRE, SUF, MID = 3, 5, 8, 9, 10  # <repo_name> <file_sep> <issue_start> ...
CTX = 1024

PREFIX = "def add(a, b):\n    "
SUFFIX = "\n\n\nprint(add(1, 2))\n"
EXTRA = [{"filename": "util.py", "text": "def sub(a, b):\n    return a - b\n"}]


@pytest.fixture(scope="module")
def fim_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("fim")
    path = copy_with_metadata(
        default_model_path(),
        folder / "smollm2-fim.gguf",
        {
            "tokenizer.ggml.fim_pre_token_id": PRE,
            "tokenizer.ggml.fim_suf_token_id": SUF,
            "tokenizer.ggml.fim_mid_token_id": MID,
            "tokenizer.ggml.fim_rep_token_id": REP,
            "tokenizer.ggml.fim_sep_token_id": SEP,
        },
    )
    server = start_server(model=str(path), parallel=2, ctx_size=2 * CTX)  # CTX per slot
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()


def _tok(server: LiveServer, text: str) -> list[int]:
    r = httpx.post(
        f"{server.base_url}/tokenize",
        json={"content": text, "parse_special": False},
        timeout=TIMEOUT,
    )
    tokens: list[int] = r.json()["tokens"]
    return tokens


def _infill(server: LiveServer, **body: object) -> httpx.Response:
    return httpx.post(f"{server.base_url}/infill", json=body, timeout=TIMEOUT)


def test_infill_prompt_layout_and_greedy_output(fim_server: LiveServer) -> None:
    r = _infill(
        fim_server,
        input_prefix=PREFIX,
        input_suffix=SUFFIX,
        input_extra=EXTRA,
        prompt="return",
        n_predict=12,
        temperature=0,
    )
    assert r.status_code == 200, r.text
    out = r.json()
    # the llama-server repo-level FIM layout, built by hand from /tokenize
    expected = [
        *[REP, *_tok(fim_server, "myproject\n")],
        *[SEP, *_tok(fim_server, "util.py\n"), *_tok(fim_server, EXTRA[0]["text"])],
        *[SEP, *_tok(fim_server, "filename\n")],
        *[PRE, *_tok(fim_server, PREFIX), *_tok(fim_server, "return")],
        *[SUF, *_tok(fim_server, SUFFIX), MID],
    ]
    assert out["tokens_evaluated"] == len(expected)
    assert out["truncated"] is False
    assert out["stop"] is True
    assert 0 < out["tokens_predicted"] <= 12
    # the same tokens sent as a plain completion give the same greedy text
    plain = httpx.post(
        f"{fim_server.base_url}/v1/completions",
        json={"prompt": expected, "max_tokens": 12, "temperature": 0},
        timeout=TIMEOUT,
    ).json()
    assert plain["usage"]["prompt_tokens"] == len(expected)
    assert plain["choices"][0]["text"] == out["content"]


def test_n_predict_and_max_tokens_bound_the_output(fim_server: LiveServer) -> None:
    for field in ("n_predict", "max_tokens"):
        out = _infill(
            fim_server, input_prefix="x = [", input_suffix="]\n", ignore_eos=True, **{field: 5}
        ).json()
        assert out["tokens_predicted"] == 5, field
        assert out["finish_reason"] == "length"


def test_streaming_matches_non_streaming(fim_server: LiveServer) -> None:
    body = {"input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 10, "temperature": 0}
    full = _infill(fim_server, **body).json()
    chunks = []
    with httpx.stream(
        "POST", f"{fim_server.base_url}/infill", json={**body, "stream": True}, timeout=TIMEOUT
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                chunks.append(json.loads(line.removeprefix("data: ")))
    assert chunks[-1]["stop"] is True
    assert all(c["stop"] is False for c in chunks[:-1])
    assert "".join(c["content"] for c in chunks) == full["content"]
    assert chunks[-1]["tokens_predicted"] == full["tokens_predicted"]
    assert sum(len(c["tokens"]) for c in chunks[:-1]) == full["tokens_predicted"]


def test_long_prefix_is_cut_at_the_cursor_side(fim_server: LiveServer) -> None:
    window = min(2048, CTX // 2)
    line = "value = compute(value) + 1\n"
    prefix = line * 100  # far more than 3/4 of the window
    out = _infill(fim_server, input_prefix=prefix, input_suffix="", n_predict=2).json()
    assert out["truncated"] is True
    # repo/file header + [PRE] + the last 3/4 window of the prefix + [SUF] + [MID]
    header = 2 + len(_tok(fim_server, "myproject\n")) + len(_tok(fim_server, "filename\n"))
    assert out["tokens_evaluated"] == header + 3 * (window // 4) + 3


def test_model_without_fim_tokens_is_a_clear_400(live_server: LiveServer) -> None:
    r = _infill(live_server, input_prefix="def f(", input_suffix=")\n", n_predict=4)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "fim_unsupported"
    assert "fill-in-the-middle" in err["message"]
    assert set(err) == {"message", "type", "param", "code"}


@pytest.mark.parametrize(
    "body",
    [
        {"input_prefix": "a", "input_extra": "not a list"},
        {"input_prefix": "a", "input_extra": [{"filename": 3}]},
        {"input_prefix": 5},
        {"input_prefix": "a", "n_predict": 0},
        {"input_prefix": "a", "n": 2},
        {"input_prefix": "a", "temperature": -1},
    ],
)
def test_bad_infill_requests_are_openai_shaped(fim_server: LiveServer, body: dict) -> None:
    r = _infill(fim_server, **body)
    assert r.status_code == 400, r.text
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}


def test_lone_surrogate_is_a_400(fim_server: LiveServer) -> None:
    r = httpx.post(
        f"{fim_server.base_url}/infill",
        content=b'{"input_prefix": "x", "input_extra": [{"text": "\\ud83d"}], "n_predict": 2}',
        headers={"content-type": "application/json"},
        timeout=TIMEOUT,
    )
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "input_extra[0].text"


def test_ollama_generate_suffix_is_the_same_fill_in_the_middle(fim_server: LiveServer) -> None:
    """Ollama's ``suffix`` (Continue's and Zed's autocomplete through the ollama provider):
    the prompt and suffix around the FIM tokens, as OpenAI completions' ``suffix`` builds it,
    and ``insert`` among the capabilities."""
    import ollama

    c = ollama.Client(host=fim_server.base_url)
    model = "smollm2-fim"
    assert "insert" in (c.show(model).capabilities or [])
    options = {"temperature": 0, "num_predict": 8}
    filled = c.generate(model=model, prompt="def add(a, b):\n    ", suffix="\n", options=options)
    openai = fim_server.client().completions.create(
        model=model, prompt="def add(a, b):\n    ", suffix="\n", max_tokens=8, temperature=0
    )
    assert filled.response == openai.choices[0].text
    assert filled.prompt_eval_count == openai.usage.prompt_tokens  # type: ignore[union-attr]
