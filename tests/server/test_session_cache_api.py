"""Sessions that outlive their slot, through the OpenAI API: one slot, two sessions.

Session A's second turn comes after session B took the only slot. With the RAM tier it is
restored (``usage.prompt_tokens_details.cached_tokens`` covers A's whole first turn) and
answers token for token as on a server without the tier where A ran uninterrupted.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai.types.chat import ChatCompletion

from tests.server.conftest import LiveServer, start_server, wait_healthy

SYSTEM = "You are a terse assistant for a build system. " + " ".join(
    f"Rule {i}: target {name} depends on lib{name} and must be rebuilt after any change."
    for i, name in enumerate(["core", "net", "ui", "db", "auth", "cli"] * 3)
)
MODEL = "SmolLM2-135M-Instruct"


def _server(cache_ram: int) -> LiveServer:
    server = start_server(ctx_size=2048, parallel=1, cache_disk=0, cache_ram=cache_ram)
    wait_healthy(server.base_url)
    return server


@pytest.fixture
def servers() -> Iterator[dict[str, LiveServer]]:
    started = {"cached": _server(cache_ram=128), "plain": _server(cache_ram=0)}
    yield started
    for server in started.values():
        server.handle.stop()


def project(name: str) -> str:
    """The session's own context: enough tokens that restoring it beats the shared prompt."""
    files = " ".join(f"src/{name}/module_{i}.c" for i in range(12))
    return f"Project {name} has these files: {files}."


def first(name: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{project(name)}\nWhich targets rebuild after a change?"},
    ]


def second(name: str, answer: str) -> list[dict[str, str]]:
    return [
        *first(name),
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "And which one is built first?"},
    ]


def chat(server: LiveServer, messages: list[dict[str, str]]) -> ChatCompletion:
    return server.client().chat.completions.create(
        model=MODEL,
        messages=messages,  # type: ignore[arg-type]
        max_tokens=16,
        temperature=0,
        seed=1,
    )


def cached(r: ChatCompletion) -> int:
    assert r.usage is not None and r.usage.prompt_tokens_details is not None
    return r.usage.prompt_tokens_details.cached_tokens or 0


def test_a_session_restored_from_ram_reports_its_cached_tokens(
    servers: dict[str, LiveServer],
) -> None:
    plain = servers["plain"]
    ref_a1 = chat(plain, first("alpha"))
    ref_a2 = chat(plain, second("alpha", ref_a1.choices[0].message.content or ""))

    server = servers["cached"]
    a1 = chat(server, first("alpha"))
    answer = a1.choices[0].message.content or ""
    assert answer == ref_a1.choices[0].message.content
    b1 = chat(server, first("beta"))  # takes the slot: alpha's KV moves to RAM
    a2 = chat(server, second("alpha", answer))
    assert a1.usage is not None
    assert cached(a2) > a1.usage.prompt_tokens  # all of turn 1, not the system prompt only
    assert cached(a2) > cached(b1) + 50
    assert cached(a2) == cached(ref_a2)
    assert a2.choices[0].message.content == ref_a2.choices[0].message.content

    stats = server.stats()["session_cache"]
    assert stats["ram"]["hits"] == 1
    assert stats["ram"]["tokens_saved"] == cached(a2)
    assert 0 < stats["ram"]["bytes"] <= stats["ram"]["budget_bytes"] == 128 << 20
    assert stats["disk"]["budget_bytes"] == 0
    assert plain.stats()["session_cache"]["ram"]["budget_bytes"] == 0
