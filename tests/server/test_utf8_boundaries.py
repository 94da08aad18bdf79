"""A reply cut inside a multi-byte character ends before it, never in U+FFFD (issue 15.2).

The grammar makes the model write tree emoji, each of them three tokens here (bytes
F0 9F | 8C | B2), so ``max_tokens`` 1..5 ends inside a character two times in three.
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.server.conftest import LiveServer

TREES = "🌲🌲🌲 ok"
GRAMMAR = f'root ::= "{TREES}"'


def _whole_chars(raw: bytes) -> str:
    return raw.decode("utf-8", errors="ignore")


def _body(max_tokens: int, **extra: object) -> dict[str, object]:
    return {
        "messages": [{"role": "user", "content": "trees"}],
        "grammar": GRAMMAR,
        "max_tokens": max_tokens,
        "temperature": 0,
        **extra,
    }


@pytest.mark.parametrize("max_tokens", range(1, 6))
def test_cut_replies_hold_back_the_partial_character(
    live_server: LiveServer, max_tokens: int
) -> None:
    r = httpx.post(
        f"{live_server.base_url}/v1/chat/completions",
        json=_body(max_tokens, logprobs=True),
        timeout=60,
    )
    choice = r.json()["choices"][0]
    content = choice["message"]["content"]
    assert "\ufffd" not in content
    raw = b"".join(bytes(e["bytes"]) for e in choice["logprobs"]["content"])
    assert TREES.encode().startswith(raw)  # logprob bytes are the tokens' real bytes
    assert content == _whole_chars(raw)
    streamed = []
    with httpx.stream(
        "POST",
        f"{live_server.base_url}/v1/chat/completions",
        json=_body(max_tokens, stream=True),
        timeout=60,
    ) as s:
        for line in s.iter_lines():
            if line.startswith("data: {"):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                streamed.append(delta.get("content") or "")
    assert "".join(streamed) == content


def test_completions_hold_back_too(live_server: LiveServer) -> None:
    for max_tokens in (1, 2, 4, 5):
        r = httpx.post(
            f"{live_server.base_url}/v1/completions",
            json={"prompt": "Trees:", "grammar": GRAMMAR, "max_tokens": max_tokens},
            timeout=60,
        )
        text = r.json()["choices"][0]["text"]
        assert "\ufffd" not in text
        assert TREES.startswith(text)
