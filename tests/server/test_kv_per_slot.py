"""A KV stream per slot (the default layout): idle slots are the prefix cache."""

from __future__ import annotations

import threading
import time

import openai
import pytest

from tests.server.conftest import SLOT_CELLS, SLOTS, LiveServer
from tests.server.test_prefix_cache import SYSTEM

MODEL = "SmolLM2-135M-Instruct"


def _chat(
    server: LiveServer, messages: list[dict[str, str]], max_tokens: int = 8
) -> tuple[str, int]:
    r = server.client().chat.completions.create(
        model=MODEL,
        messages=messages,  # type: ignore[arg-type]
        max_tokens=max_tokens,
        temperature=0,
    )
    assert r.usage is not None
    cached = r.usage.prompt_tokens_details.cached_tokens  # type: ignore[union-attr]
    return r.choices[0].message.content or "", int(cached or 0)


def _follow_ups_cached(server: LiveServer, systems: list[str]) -> list[int]:
    """One conversation per system prompt, then a follow-up turn of each in the same
    order: the cached prompt tokens of every follow-up."""
    history: list[list[dict[str, str]]] = []
    for system in systems:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "Hi."}]
        answer, _ = _chat(server, messages)
        history.append([*messages, {"role": "assistant", "content": answer}])
    follow_up = {"role": "user", "content": "And then?"}
    return [_chat(server, [*messages, follow_up])[1] for messages in history]


def test_the_engine_reports_per_slot_streams(slot_server: LiveServer) -> None:
    model = slot_server.stats()["model"]
    assert model["kv_unified"] is False
    assert model["n_ctx_seq"] == SLOT_CELLS and model["n_ctx"] == SLOTS * SLOT_CELLS


def test_two_conversations_keep_their_cache_in_alternation(slot_server: LiveServer) -> None:
    """The second conversation takes the lowest slot; the first one's prompt is moved to a
    spare slot instead of being lost, so both follow-up turns are served from cache."""
    systems = [SYSTEM, SYSTEM.replace("politely", "briefly").replace("colour", "number")]
    assert min(_follow_ups_cached(slot_server, systems)) > 500


def test_greedy_text_under_concurrency_matches_alone(slot_server: LiveServer) -> None:
    prompts = [f"Write one sentence about the number {n}." for n in (3, 7, 11, 19)]

    def ask(p: str) -> str:
        return _chat(slot_server, [{"role": "user", "content": p}], max_tokens=24)[0]

    alone = [ask(p) for p in prompts]
    together: dict[int, str] = {}
    threads = [
        threading.Thread(target=lambda i=i: together.__setitem__(i, ask(prompts[i])))
        for i in range(len(prompts))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, text in enumerate(alone):
        assert together[i].split()[:4] == text.split()[:4], (together[i], text)


def test_a_request_longer_than_a_slot_is_refused_with_the_numbers(
    slot_server: LiveServer,
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        slot_server.client().completions.create(model=MODEL, prompt="word " * 2100, max_tokens=4)
    assert str(SLOT_CELLS) in str(err.value)


def test_a_disconnected_stream_frees_its_slot(slot_server: LiveServer) -> None:
    stream = slot_server.client().completions.create(
        model=MODEL, prompt="Count slowly:", max_tokens=400, stream=True
    )
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    deadline = time.monotonic() + 10
    while slot_server.stats()["requests"]["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert slot_server.stats()["requests"]["running"] == 0
    # the slot is usable again: a full answer still comes back
    text, _ = _chat(slot_server, [{"role": "user", "content": "Say hello."}])
    assert text


def test_with_every_slot_cached_each_follow_up_is_served_from_its_own_slot(
    slot_server: LiveServer,
) -> None:
    """As many conversations as slots: no slot is empty, so a follow-up is served in the
    slot that holds its conversation instead of pushing another conversation out."""
    systems = [f"Conversation number {k}. {SYSTEM}" for k in range(SLOTS)]
    assert min(_follow_ups_cached(slot_server, systems)) > 500
