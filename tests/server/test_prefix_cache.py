"""Requests sharing a long system prompt prefill it once, not once per request."""

from __future__ import annotations

import threading

from tests.server.conftest import LiveServer

SYSTEM = " ".join(
    f"Rule {i}: always answer politely and mention the colour {c}."
    for i, c in enumerate(["red", "green", "blue", "amber", "violet", "teal"] * 12)
)


def _ask(server: LiveServer, question: str) -> str:
    r = server.client().chat.completions.create(
        model="SmolLM2-135M-Instruct",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        max_tokens=8,
        temperature=0,
    )
    return r.choices[0].message.content or ""


def test_concurrent_requests_share_one_prefill(either_kv_server: LiveServer) -> None:
    live_server = either_kv_server
    before = live_server.stats()
    questions = [f"Question number {i}: what is {i} plus {i}?" for i in range(6)]
    barrier = threading.Barrier(len(questions))
    answers: list[str] = []

    def go(q: str) -> None:
        barrier.wait()
        answers.append(_ask(live_server, q))

    threads = [threading.Thread(target=go, args=(q,)) for q in questions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = live_server.stats()
    received = after["tokens"]["prompt_total"] - before["tokens"]["prompt_total"]
    decoded = after["tokens"]["prompt_decoded_total"] - before["tokens"]["prompt_decoded_total"]
    saved = after["prefix_cache"]["tokens_saved"] - before["prefix_cache"]["tokens_saved"]
    per_request = received / len(questions)
    assert per_request > 500, "the system prompt should be long"
    # the shared part is decoded about once: well under two full prompts in total
    assert decoded < 2 * per_request, (decoded, per_request)
    assert saved >= (len(questions) - 1) * 400
    assert after["prefix_cache"]["hits"] - before["prefix_cache"]["hits"] >= len(questions) - 1
    assert len(answers) == len(questions) and all(answers)


def test_follow_up_turn_reuses_the_cached_conversation(either_kv_server: LiveServer) -> None:
    live_server = either_kv_server
    first = _ask(live_server, "Name a fruit.")
    before = live_server.stats()
    r = live_server.client().chat.completions.create(
        model="SmolLM2-135M-Instruct",
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Name a fruit."},
            {"role": "assistant", "content": first},
            {"role": "user", "content": "And a vegetable?"},
        ],
        max_tokens=8,
        temperature=0,
    )
    after = live_server.stats()
    assert r.usage is not None
    cached = r.usage.prompt_tokens_details.cached_tokens  # type: ignore[union-attr]
    assert cached is not None and cached > 500
    decoded = after["tokens"]["prompt_decoded_total"] - before["tokens"]["prompt_decoded_total"]
    assert decoded < r.usage.prompt_tokens - 500
