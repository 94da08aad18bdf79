"""Speculative decoding on the real model, the scheduler driven step by step.

Each output is compared with the same request run with ``draft_n_max=0`` (no speculation)
on the same engine. Why the outputs must be equal: every output token is sampled by the
sequence's own sampler from the model's logits for the accepted prefix, one sampler call per
token (see :mod:`backend.engine.speculative.verify`).

Why they could still differ, and how these tests avoid it: llama.cpp's CPU kernels give a
row the same logits whether it is decoded alone or among other rows only while its KV
stream has under 256 cells and the call has under 64 rows for that stream (measured: max
|diff| 0.0). From 256 cells on, a one-row decode takes flash attention's split-KV kernel,
and from 64 rows its tiled kernel; both sum in another order (measured: logits differ by
up to ~1.2), so a near-tie between the two best tokens can flip, with or without
speculation. So here every sequence stays under 256 cells, drafts are short enough that a
stream never gets 64 rows, and the reference runs the same requests together, after the
same warm-up run, so that their prompts were computed in the same batches.

With one KV cache for all sequences (``--kv-unified``) the order of a sequence's cells
matters too: flash attention sums over cells in cache order, and the cells a finished
sequence or a rejected draft frees are reused by the others' next tokens, earlier in the
cache than their previous ones. A run whose sequences finish at other steps (which
speculation causes) sums in another order, and a near-tie can flip. This is not
speculation's doing: without it, the greedy story below changes at its 23rd token (two
best tokens 0.19 nats apart) when a neighbour request stops after 5 tokens instead of 80.
There the test accepts a difference only where the model's two best tokens are within
:data:`NEAR_TIE` nats of each other, and checks that.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import llama_cpp
import pytest
from gguf import GGUFReader, GGUFValueType, GGUFWriter

from backend.engine.engine import Engine
from backend.engine.errors import ModelLoadError
from backend.engine.request_types import (
    EngineEvent,
    ErrorEvent,
    FinishEvent,
    SamplingParams,
    TokenEvent,
    TokenLogprob,
)
from backend.settings.default_model import default_model_path
from backend.settings.engine_settings import EngineSettings

CODE = """def area(width, height):
    return width * height

def perimeter(width, height):
    return 2 * (width + height)

def is_square(width, height):
    return width == height
"""
REPEAT = f"Repeat this code exactly:\n\n```python\n{CODE}```"
STORY = "Write a two sentence story about a fox."
GREEDY = SamplingParams(temperature=0.0)
OFF = 0  # draft_n_max that turns speculation off for one request
NEAR_TIE = 0.5  # nats between the two best tokens: a tie that summation order may flip


@dataclass
class Job:
    prompt: str
    max_tokens: int = 80
    sampling: SamplingParams = field(default_factory=lambda: GREEDY)
    stop: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish: FinishEvent | None = None
    logprobs: list[TokenLogprob] = field(default_factory=list)

    def __call__(self, event: EngineEvent) -> None:
        if isinstance(event, TokenEvent):
            self.tokens += event.token_ids
            self.text += event.text
            self.logprobs += event.logprobs
        elif isinstance(event, FinishEvent):
            self.finish = event
        elif isinstance(event, ErrorEvent):
            raise AssertionError(event.message)


def run(eng: Engine, jobs: list[Job], *, speculate: bool = True) -> list[Outcome]:
    """Submit every job at once (``speculate=False``: each with ``draft_n_max=0``) and step
    the scheduler until all have finished."""
    outcomes = []
    for job in jobs:
        outcome = Outcome()
        tokens = eng.render_chat([{"role": "user", "content": job.prompt}])
        sampling = job.sampling if speculate else replace(job.sampling, draft_n_max=OFF)
        eng.submit(
            tokens, max_tokens=job.max_tokens, sampling=sampling, sink=outcome, stop=job.stop
        )
        outcomes.append(outcome)
    sched = eng.scheduler
    for _ in range(2000):
        if all(o.finish for o in outcomes):
            break
        sched.step_once()
        sched.deliver_events()
        if eng.runtime.kv_unified:  # one stream for all: see the module docstring
            assert sched.kv.used < 256, "the test left the batch-invariant range"
    assert all(o.finish for o in outcomes), "the requests did not finish"
    return outcomes


def reference(eng: Engine, jobs: list[Job]) -> list[Outcome]:
    """The jobs together without speculation, after a first run that leaves the prefix
    cache as the run under test will find it."""
    before = eng.stats().speculative.drafted
    run(eng, jobs, speculate=False)
    outs = run(eng, jobs, speculate=False)
    assert eng.stats().speculative.drafted == before, "draft_n_max=0 must not draft"
    return outs


def assert_same_or_near_tie(eng: Engine, job: Job, ref: Outcome, out: Outcome) -> None:
    """``out`` is ``ref``, or it leaves it where the model's two best tokens were within
    ``NEAR_TIE`` of each other (scored again, alone, without speculation)."""
    if out.tokens == ref.tokens:
        return
    assert eng.runtime.kv_unified, "a KV stream per slot is exact: see the module docstring"
    i = next(i for i, (a, b) in enumerate(zip(ref.tokens, out.tokens, strict=False)) if a != b)
    prompt = eng.render_chat([{"role": "user", "content": job.prompt}]) + ref.tokens[:i]
    scored = Outcome()
    sampling = SamplingParams(temperature=0.0, logprobs=5, draft_n_max=OFF)
    eng.submit(prompt, max_tokens=1, sampling=sampling, sink=scored)
    while scored.finish is None:
        eng.scheduler.step_once()
        eng.scheduler.deliver_events()
    top = {token: logprob for token, _, logprob in scored.logprobs[0].top}
    assert ref.tokens[i] in top and out.tokens[i] in top, (i, top)
    assert abs(top[ref.tokens[i]] - top[out.tokens[i]]) < NEAR_TIE, (i, top)


def assert_kv_matches_llama(eng: Engine) -> None:
    """The scheduler's cell accounting agrees with llama.cpp for every sequence id (the
    cells of rejected draft tokens were removed from both)."""
    sched, mem = eng.scheduler, eng.runtime.memory
    for seq_id in range(eng.runtime.n_seq_max):
        held = sched.kv.length(seq_id)
        assert llama_cpp.llama_memory_seq_pos_max(mem, seq_id) + 1 == held, seq_id
        assert held < 256, "the test left the batch-invariant range (see the module docstring)"


def engine(**settings: object) -> Iterator[Engine]:
    # one thread: on a busy machine two spinning ggml threads wait for each other
    # every draft verified whole (llama.cpp's way): these tests check verification, and the
    # cost policy would decline drafts on a busy machine (tests/engine/test_draft_policy.py)
    base: dict[str, object] = {
        "ctx_size": 2048,
        "parallel": 4,
        "threads": 1,
        "spec_draft_policy": "full",
    }
    eng = Engine(EngineSettings(**{**base, **settings}))  # type: ignore[arg-type]
    yield eng
    eng.close()


@pytest.fixture(scope="module", params=["per-slot", "unified"])
def ngram_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    unified = request.param == "unified"
    yield from engine(
        kv_unified=unified,
        prefix_cache_entries=0,  # unified: nothing cached beside the running sequences
        spec_type="ngram-simple",
        spec_ngram_simple_size_n=4,
        spec_ngram_simple_size_m=12,  # 4 sequences x 13 rows < 64 rows in one stream
    )


def test_greedy_ngram_output_is_the_same_token_for_token(ngram_engine: Engine) -> None:
    (ref,) = reference(ngram_engine, [Job(REPEAT)])
    before = ngram_engine.stats()
    (out,) = run(ngram_engine, [Job(REPEAT)])
    after = ngram_engine.stats()
    assert out.tokens == ref.tokens and out.text == ref.text
    assert out.finish is not None and out.finish.draft_n_accepted >= 10  # the answer repeats
    accepted = after.speculative.accepted - before.speculative.accepted
    assert accepted == out.finish.draft_n_accepted
    assert after.speculative.drafted - before.speculative.drafted == out.finish.draft_n
    # fewer decode steps than tokens: accepted drafts saved decodes
    assert after.step.steps - before.step.steps < len(out.tokens) - 10
    assert_kv_matches_llama(ngram_engine)


def test_seeded_sampling_draws_the_same_tokens(ngram_engine: Engine) -> None:
    """A seeded sampler draws once per output token, from the same logits, whether or not
    the token was drafted: the sampled answer is the same."""
    job = Job(REPEAT, sampling=SamplingParams(temperature=0.7, seed=1234))
    (ref,) = reference(ngram_engine, [job])
    (out,) = run(ngram_engine, [job])
    assert out.tokens == ref.tokens
    assert out.finish is not None and out.finish.draft_n_accepted > 0


def test_concurrent_sequences_with_stops_and_limits_inside_drafts(ngram_engine: Engine) -> None:
    jobs = [
        Job(REPEAT, stop=["perimeter"]),  # a stop string in the middle of a copied run
        Job(REPEAT, max_tokens=23),  # max_tokens ends a drafted run
        Job(STORY, max_tokens=40, sampling=replace(GREEDY, draft_n_max=OFF)),  # no drafts
    ]
    refs = reference(ngram_engine, jobs)
    outs = run(ngram_engine, jobs)
    for job, ref, out in zip(jobs, refs, outs, strict=True):
        assert_same_or_near_tie(ngram_engine, job, ref, out)
    for ref, out in zip(refs[:2], outs[:2], strict=True):  # the drafted ones: exact here
        assert out.tokens == ref.tokens and out.text == ref.text
        assert out.finish is not None and ref.finish is not None
        assert out.finish.finish_reason == ref.finish.finish_reason
        assert out.finish.completion_tokens == ref.finish.completion_tokens
    stopped, limited, plain = (o.finish for o in outs)
    assert stopped and stopped.finish_reason == "stop" and "perimeter" not in outs[0].text
    assert outs[0].text.rstrip().endswith("def")
    assert stopped.draft_n_accepted > 0
    assert limited and limited.finish_reason == "length" and limited.completion_tokens == 23
    assert limited.draft_n_accepted > 0
    assert plain and plain.draft_n == 0
    assert_kv_matches_llama(ngram_engine)


@pytest.fixture(scope="module")
def draft_engine() -> Iterator[Engine]:
    """The served model drafts for itself: its greedy token is the served model's, except
    at a near-tie where the draft context computed the prompt in other batches."""
    yield from engine(spec_type="none", model_draft="default", draft_max=6, draft_p_min=0.0)


def test_draft_model_drafts_are_verified_exactly(draft_engine: Engine) -> None:
    jobs = [Job(REPEAT), Job(STORY, max_tokens=40)]
    refs = reference(draft_engine, jobs)
    before = draft_engine.stats().speculative
    outs = run(draft_engine, jobs)
    after = draft_engine.stats().speculative
    for ref, out in zip(refs, outs, strict=True):
        assert out.tokens == ref.tokens
    drafted = after.drafted - before.drafted
    assert drafted > 40 and after.accepted - before.accepted >= 0.8 * drafted
    assert after.type == "draft-simple"
    assert_kv_matches_llama(draft_engine)


def test_draft_p_min_stops_drafting_at_an_unsure_token(draft_engine: Engine) -> None:
    """With p_min near 1 the draft model stops at the first token it is not sure of, so
    it drafts less than with p_min 0 (story text is rarely certain)."""
    sure = SamplingParams(temperature=0.0, draft_p_min=0.999)
    (loose,) = run(draft_engine, [Job(STORY, max_tokens=40)])
    (strict,) = run(draft_engine, [Job(STORY, max_tokens=40, sampling=sure)])
    assert loose.tokens == strict.tokens
    assert loose.finish is not None and strict.finish is not None
    assert strict.finish.draft_n < loose.finish.draft_n


def _vocab_variant(out: Path, change: dict[str, object]) -> Path:
    """A vocabulary-only GGUF: SmolLM2's tokenizer with some keys changed, no weights."""
    reader = GGUFReader(str(default_model_path()))
    writer = GGUFWriter(str(out), arch="llama")
    for key, f in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = f.contents()
        if key in change:
            edit = change[key]
            value = edit(value) if callable(edit) else edit
        sub_type = f.types[1] if f.types[0] == GGUFValueType.ARRAY else None
        writer.add_key_value(key, value, f.types[0], sub_type=sub_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    return out


def _renamed(tokens: list[str]) -> list[str]:
    return [*tokens[:1000], "<not-smollm>", *tokens[1001:]]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tokenizer.ggml.tokens": _renamed}, "token 1000 differs (target '()', draft '<not"),
        (
            {
                key: lambda v: v[:-300]
                for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type")
            },
            "their vocabulary sizes differ by more than 128 (target 49152, draft 48852)",
        ),
    ],
    ids=["token-text", "size"],
)
def test_a_draft_model_with_another_vocabulary_is_refused(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    bad = _vocab_variant(tmp_path / "other-vocab.gguf", change)
    with pytest.raises(ModelLoadError) as refused:
        Engine(EngineSettings(ctx_size=512, parallel=1, model_draft=str(bad)))
    text = str(refused.value)
    assert "other-vocab.gguf cannot draft for" in text and message in text
    assert "needs a draft model with the same tokenizer" in text
