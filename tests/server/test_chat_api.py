"""Chat and completions through the official OpenAI SDK against the real server."""

from __future__ import annotations

from tests.server.conftest import LiveServer

MESSAGES = [{"role": "user", "content": "Count from one to ten in words."}]


def test_models_lists_the_served_model(live_server: LiveServer) -> None:
    models = live_server.client().models.list()
    assert [m.id for m in models.data] == ["SmolLM2-135M-Instruct"]


def test_chat_completion_non_streaming(live_server: LiveServer) -> None:
    client = live_server.client()
    r = client.chat.completions.create(
        model="SmolLM2-135M-Instruct", messages=MESSAGES, max_tokens=24, temperature=0
    )
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert len(choice.message.content or "") > 10
    assert choice.finish_reason in ("stop", "length")
    assert r.usage is not None
    assert r.usage.prompt_tokens > 10
    assert 0 < r.usage.completion_tokens <= 24
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_streaming_with_usage_matches_non_streaming(live_server: LiveServer) -> None:
    client = live_server.client()
    full = client.chat.completions.create(
        model="SmolLM2-135M-Instruct", messages=MESSAGES, max_tokens=24, temperature=0
    )
    stream = client.chat.completions.create(
        model="SmolLM2-135M-Instruct",
        messages=MESSAGES,
        max_tokens=24,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    parts: list[str] = []
    reasons: list[str] = []
    usage = None
    n_chunks = 0
    for chunk in stream:
        n_chunks += 1
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                parts.append(choice.delta.content)
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
    streamed = "".join(parts)
    assert n_chunks > 3, "tokens must arrive as a stream, not one blob"
    assert len(reasons) == 1
    assert usage is not None and full.usage is not None
    assert usage.prompt_tokens == full.usage.prompt_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    if reasons == ["length"]:
        assert usage.completion_tokens == 24
    # Both are greedy, but the new tokens' KV cells land in different places of the shared
    # cache, which changes float rounding in attention: a near-tie may flip late. They
    # agree on their opening words.
    full_text = full.choices[0].message.content or ""
    assert streamed.split()[:3] == full_text.split()[:3], (streamed, full_text)


def test_max_tokens_is_exact_with_ignore_eos(live_server: LiveServer) -> None:
    r = live_server.client().completions.create(
        model="SmolLM2-135M-Instruct",
        prompt="Once upon a time",
        max_tokens=17,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    assert r.usage is not None and r.usage.completion_tokens == 17
    assert r.choices[0].finish_reason == "length"


def test_completion_knows_a_fact(live_server: LiveServer) -> None:
    r = live_server.client().completions.create(
        model="SmolLM2-135M-Instruct",
        prompt="The capital of France is",
        max_tokens=6,
        temperature=0,
    )
    assert "Paris" in r.choices[0].text


def test_completion_streaming(live_server: LiveServer) -> None:
    client = live_server.client()
    text = "".join(
        c.choices[0].text
        for c in client.completions.create(
            model="SmolLM2-135M-Instruct",
            prompt="The numbers are 1, 2, 3,",
            max_tokens=12,
            temperature=0,
            stream=True,
        )
        if c.choices
    )
    plain = client.completions.create(
        model="SmolLM2-135M-Instruct",
        prompt="The numbers are 1, 2, 3,",
        max_tokens=12,
        temperature=0,
    )
    assert text == plain.choices[0].text
    assert "4" in text


def test_stop_string_is_never_emitted(live_server: LiveServer) -> None:
    client = live_server.client()
    prompt = "Count: 1, 2, 3, 4, 5, 6, 7, 8,"
    free = (
        client.completions.create(
            model="SmolLM2-135M-Instruct", prompt=prompt, max_tokens=20, temperature=0
        )
        .choices[0]
        .text
    )
    assert "11" in free, free
    # a stop string spanning tokens (", 1" then "1")
    cut = client.completions.create(
        model="SmolLM2-135M-Instruct", prompt=prompt, max_tokens=20, temperature=0, stop=["11"]
    )
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == free[: free.index("11")]
    streamed = "".join(
        c.choices[0].text
        for c in client.completions.create(
            model="SmolLM2-135M-Instruct",
            prompt=prompt,
            max_tokens=20,
            temperature=0,
            stop=["11"],
            stream=True,
        )
        if c.choices
    )
    assert streamed == cut.choices[0].text


def test_seeded_sampling_is_reproducible(live_server: LiveServer) -> None:
    client = live_server.client()

    def run(seed: int) -> str:
        return (
            client.completions.create(
                model="SmolLM2-135M-Instruct",
                prompt="My favourite animal is",
                max_tokens=16,
                temperature=1.0,
                seed=seed,
            )
            .choices[0]
            .text
        )

    # Like llama-server's cache_prompt, a prompt served from cached KV is decoded in a
    # different batch shape than a fresh one, so logits may differ in the last bits; with the
    # same cache state the same seed gives the same text.
    run(7)
    assert run(7) == run(7)
    assert len({run(s) for s in (1, 2, 3, 4)}) > 1
