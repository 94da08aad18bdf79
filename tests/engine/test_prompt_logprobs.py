"""Prompt scoring (echo + logprobs, lm-eval's loglikelihood) on the real engine."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from backend.engine.engine import Engine
from backend.engine.request_types import (
    EngineEvent,
    ErrorEvent,
    FinishEvent,
    SamplingParams,
    TokenEvent,
)
from backend.settings.engine_settings import EngineSettings

CONTEXT = "The capital of France is Paris. The capital of Italy is"


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = Engine(EngineSettings(ctx_size=1024, parallel=2, threads=2, seed=1))
    e.start(warmup=False)
    yield e
    e.close()


def _run(engine: Engine, tokens: list[int], **kw: object) -> tuple[list[TokenEvent], FinishEvent]:
    done = threading.Event()
    events: list[EngineEvent] = []

    def sink(event: EngineEvent) -> None:
        events.append(event)
        if isinstance(event, FinishEvent | ErrorEvent):
            done.set()

    engine.submit(tokens, sink=sink, sampling=SamplingParams(temperature=0.0), **kw)  # type: ignore[arg-type]
    assert done.wait(60)
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    return [e for e in events if isinstance(e, TokenEvent)], finish


def test_prompt_scores_agree_with_generation_and_greedy_tokens_are_top(engine: Engine) -> None:
    context = engine.tokenize(CONTEXT, add_special=True, parse_special=False)
    # what the model generates greedily, with the logprob of each generated token
    gen_sampling = SamplingParams(temperature=0.0, logprobs=1)
    done = threading.Event()
    generated: list[TokenEvent] = []

    def sink(event: EngineEvent) -> None:
        if isinstance(event, TokenEvent):
            generated.append(event)
        if isinstance(event, FinishEvent | ErrorEvent):
            done.set()

    engine.submit(context, max_tokens=4, sampling=gen_sampling, sink=sink)
    assert done.wait(60)
    gen = [lp for e in generated for lp in e.logprobs]
    continuation = [lp.token_id for lp in gen]
    assert len(continuation) == 4

    # now score context + continuation without generating anything
    texts, finish = _run(engine, context + continuation, max_tokens=0, prompt_logprobs=1)
    assert finish.completion_tokens == 0 and not "".join(t.text for t in texts)
    scored = finish.prompt_logprobs
    assert scored is not None and len(scored) == len(context) + len(continuation) - 1
    tail = scored[len(context) - 1 :]
    assert [lp.token_id for lp in tail] == continuation
    for s, g in zip(tail, gen, strict=True):
        assert s.logprob == pytest.approx(g.logprob, abs=2e-3)
        assert s.top and s.top[0][0] == s.token_id  # greedy: each is the most likely token
    assert all(lp.logprob <= 0 for lp in scored)


def test_scoring_ignores_the_prefix_cache(engine: Engine) -> None:
    tokens = engine.tokenize(CONTEXT * 3, add_special=True, parse_special=False)
    _, first = _run(engine, tokens, max_tokens=0, prompt_logprobs=0)
    _, again = _run(engine, tokens, max_tokens=0, prompt_logprobs=0)
    assert again.cached_tokens == 0
    assert first.prompt_logprobs is not None and again.prompt_logprobs is not None
    assert len(again.prompt_logprobs) == len(tokens) - 1
    a = [lp.logprob for lp in first.prompt_logprobs]
    b = [lp.logprob for lp in again.prompt_logprobs]
    assert a == pytest.approx(b, abs=1e-3)
