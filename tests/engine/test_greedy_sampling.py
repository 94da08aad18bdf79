"""The greedy fast path (numpy argmax over the logits row) picks what llama.cpp's chain picks."""

from __future__ import annotations

from collections.abc import Iterator

import llama_cpp
import pytest

from backend.engine.model_runtime import ModelRuntime
from backend.engine.request_types import SamplingParams
from backend.engine.sampler_chain import SamplerChain
from backend.settings.default_model import default_model_path
from backend.settings.engine_settings import EngineSettings

PROMPT = "The capital of France is Paris. The capital of Italy is"


@pytest.fixture(scope="module")
def decoded() -> Iterator[tuple[ModelRuntime, int]]:
    rt = ModelRuntime(default_model_path(), EngineSettings(ctx_size=256, parallel=1), 1)
    tokens = rt.tokenize(PROMPT, add_special=True, parse_special=False)
    batch = llama_cpp.llama_batch_init(len(tokens), 0, 1)
    for i, t in enumerate(tokens):
        batch.token[i] = t
        batch.pos[i] = i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = 1
    batch.n_tokens = len(tokens)
    assert llama_cpp.llama_decode(rt.ctx, batch) == 0
    yield rt, len(tokens)
    llama_cpp.llama_batch_free(batch)
    rt.close()


def _chain(rt: ModelRuntime, params: SamplingParams, *, fast: bool) -> SamplerChain:
    chain = SamplerChain(params, rt.vocab, rt.n_vocab, rt.eog_tokens)
    if not fast:
        chain._argmax_skip = None  # force llama.cpp's sampler
    return chain


@pytest.mark.parametrize("ignore_eos", [False, True])
def test_fast_greedy_matches_the_llama_cpp_chain(
    decoded: tuple[ModelRuntime, int], ignore_eos: bool
) -> None:
    rt, n = decoded
    params = SamplingParams(temperature=0.0, ignore_eos=ignore_eos)
    fast, slow = _chain(rt, params, fast=True), _chain(rt, params, fast=False)
    assert fast._argmax_skip is not None
    picks = [fast.sample(rt.ctx, i) for i in range(n)]
    assert picks == [slow.sample(rt.ctx, i) for i in range(n)]
    assert len(set(picks)) > 3  # the rows really differ
    fast.close()
    slow.close()


def test_a_banned_winner_falls_back_to_the_chain(decoded: tuple[ModelRuntime, int]) -> None:
    rt, n = decoded
    plain = _chain(rt, SamplingParams(temperature=0.0), fast=True)
    winner = plain.sample(rt.ctx, n - 1)
    banned = _chain(rt, SamplingParams(temperature=0.0, logit_bias={winner: -100.0}), fast=True)
    runner_up = banned.sample(rt.ctx, n - 1)
    assert runner_up != winner
    reference = _chain(rt, SamplingParams(temperature=0.0, logit_bias={winner: -100.0}), fast=False)
    assert runner_up == reference.sample(rt.ctx, n - 1)
    for chain in (plain, banned, reference):
        chain.close()


def test_positive_bias_or_penalties_use_the_chain(decoded: tuple[ModelRuntime, int]) -> None:
    rt, _ = decoded
    boosted = _chain(rt, SamplingParams(temperature=0.0, logit_bias={42: 5.0}), fast=True)
    penalised = _chain(rt, SamplingParams(temperature=0.0, repeat_penalty=1.3), fast=True)
    assert boosted._argmax_skip is None and penalised._argmax_skip is None
    boosted.close()
    penalised.close()
