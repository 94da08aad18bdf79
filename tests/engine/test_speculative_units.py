"""Speculative decoding's parts that need no model: n-gram lookup, draft verification, where
drafts go in a step plan, and the settings."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from backend.engine.sequence import Sequence
from backend.engine.speculative.ngram_draft import LongestMatch, NgramIndex
from backend.engine.speculative.speculator import Speculator
from backend.engine.speculative.verify import verify_draft
from backend.engine.step_planner import plan_step
from backend.settings.engine_settings import EngineSettings
from tests.engine.scheduling_fakes import make_seq, prompt


def test_ngram_drafts_what_followed_the_latest_earlier_occurrence() -> None:
    tokens = [1, 2, 3, 10, 11, 12, 9, 1, 2, 3, 20, 21, 22, 23, 8, 1, 2, 3]
    index = NgramIndex(3)
    assert index.draft(tokens, 4) == [20, 21, 22, 23]  # the latest of two occurrences
    assert index.draft(tokens, 2) == [20, 21]
    assert index.draft(tokens, 4, min_hits=2) == [20, 21, 22, 23]
    assert index.draft(tokens, 4, min_hits=3) == []  # [1, 2, 3] occurred twice before
    assert NgramIndex(3).draft([5, 6, 7, 8, 9, 1, 2, 3], 4) == []  # never seen before


def test_the_longest_matching_ngram_drafts_and_shorter_ones_resume_after_an_edit() -> None:
    """A file given back with one name changed: past the change the last 4 tokens occurred
    nowhere before, but the last 2 did, so drafting resumes there."""
    code = [1, 2, 3, 4, 5, 6, 7, 8]
    lookup = LongestMatch(4, 2)
    answer = [1, 2, 3, 99, 5, 6]  # 4 renamed to 99
    assert lookup.draft(code + answer, 3) == ([7, 8, 1], 2)
    assert LongestMatch(4, 4).draft(code + answer, 3) == ([], 0)  # llama.cpp's fixed n
    assert lookup.draft([*code, 1, 2, 3, 4], 3) == ([5, 6, 7], 4)  # the longest first


def test_ngram_index_grows_with_the_sequence() -> None:
    index = NgramIndex(2)
    tokens = [4, 5, 6, 7]
    assert index.draft(tokens, 3) == []
    tokens += [4, 5]  # the output starts to repeat: draft the rest
    assert index.draft(tokens, 3) == [6, 7, 4]
    tokens += [6, 7, 4, 5]  # self-overlapping repetition: the latest occurrence is nearer
    assert index.draft(tokens, 8) == [6, 7, 4, 5]


def test_an_ngram_lookup_costs_microseconds_on_a_long_context() -> None:
    """The scheduler looks up every generating sequence every step: indexing a 4000-token
    prompt once, then each step's new token, must stay far below a decode (milliseconds).
    Not a timed assertion: it reports the cost and checks the work done per step."""
    tokens = [(i * 7919) % 5000 for i in range(4000)]
    index = NgramIndex(12)
    index.draft(tokens, 16)
    t0 = time.perf_counter()
    for step in range(1000):
        tokens.append(step % 5000)
        index.draft(tokens, 16)
    per_step_us = 1e6 * (time.perf_counter() - t0) / 1000
    print(f"n-gram lookup: {per_step_us:.1f} us per step")
    assert index._next_start == len(tokens) - 12  # every n-gram indexed exactly once


def _taker(sampled: list[int], stop_after: int | None = None) -> tuple[list[int], object]:
    taken: list[int] = []

    def take(row: int) -> tuple[int, bool]:
        assert row == len(taken), "rows are taken in order, each once"
        taken.append(sampled[row])
        return sampled[row], stop_after is None or len(taken) < stop_after

    return taken, take


@pytest.mark.parametrize(
    ("draft", "sampled", "rows", "accepted"),
    [
        ([], [5], 1, 0),  # no draft: one token, as without speculation
        ([5, 6, 7], [5, 6, 7, 8], 4, 3),  # all accepted, and the last row's token
        ([5, 6, 7], [5, 9, 7, 8], 2, 1),  # the first mismatch is the output there
        ([5, 6, 7], [4, 6, 7, 8], 1, 0),
    ],
)
def test_verify_samples_each_row_until_the_first_mismatch(
    draft: list[int], sampled: list[int], rows: int, accepted: int
) -> None:
    taken, take = _taker(sampled)
    assert verify_draft(draft, take) == (rows, accepted)  # type: ignore[arg-type]
    assert taken == sampled[:rows]  # one sampler call per output token


def test_verify_stops_when_the_sequence_ends_inside_the_draft() -> None:
    taken, take = _taker([5, 6, 7, 8], stop_after=2)  # a stop string at the second token
    assert verify_draft([5, 6, 7], take) == (2, 2)  # type: ignore[arg-type]
    assert taken == [5, 6]


def _generating(seq_id: int, draft: list[int]) -> Sequence:
    seq = make_seq(prompt(1000 * (seq_id + 1), 40), max_tokens=100)
    seq.seq_id = seq_id
    seq.tokens.append(7)
    seq.completion_tokens = 1
    seq.n_past = len(seq.tokens) - 1
    seq.draft = draft
    return seq


@pytest.mark.parametrize("per_slot", [True, False])
def test_draft_rows_follow_the_token_and_never_crowd_out_others(per_slot: bool) -> None:
    a, b = _generating(0, [1, 2, 3, 4]), _generating(1, [5, 6, 7, 8, 9, 10])
    prefilling = make_seq(prompt(9000, 20))
    prefilling.seq_id = 2
    plan = plan_step([a, b, prefilling], n_batch=512, per_slot=per_slot)
    rows = dict(item for call in plan.calls for item in call)
    assert rows == {a: 5, b: 7, prefilling: 20}
    # a small budget: every token and the prompt first, then drafts in what is left
    plan = plan_step([a, b, prefilling], n_batch=25, per_slot=per_slot)
    rows = dict(item for call in plan.calls for item in call)
    assert rows == {a: 4, b: 1, prefilling: 20}
    assert plan.n_tokens == 25


def test_draft_rows_share_the_call_of_decode_rows_per_slot() -> None:
    a, b = _generating(0, [1, 2]), _generating(1, [])
    long_prompt = make_seq(prompt(9000, 300))
    long_prompt.seq_id = 2
    plan = plan_step([b, a, long_prompt], n_batch=512, per_slot=True)
    assert plan.calls == [[(a, 3), (b, 1)], [(long_prompt, 300)]]


def test_draft_length_is_capped_by_size_m_the_request_and_the_room_left() -> None:
    settings = EngineSettings(spec_type="ngram-simple", spec_ngram_simple_size_n=2)
    spec = Speculator(settings, n_ctx_seq=4096)
    seq = _generating(0, [])
    seq.tokens[:] = list(range(100, 200)) * 3  # the answer copies its prompt
    seq.n_past = len(seq.tokens) - 1
    spec.propose([seq])
    assert seq.draft == list(range(100, 100 + settings.spec_ngram_simple_size_m))
    seq.request.sampling.draft_n_max = 5  # the request's speculative.n_max
    spec.propose([seq])
    assert seq.draft == [100, 101, 102, 103, 104]
    seq.request.sampling.draft_n_min = 6  # a shorter draft is not worth verifying
    spec.propose([seq])
    assert seq.draft == []
    seq.request.sampling.draft_n_max = seq.request.sampling.draft_n_min = None
    seq.request.max_tokens = seq.completion_tokens + 4  # 3 drafted + the last row's token
    spec.propose([seq])
    assert seq.draft == [100, 101, 102]
    seq.request.sampling.draft_n_max = 0
    spec.propose([seq])
    assert seq.draft == []


def test_spec_type_takes_llama_server_names() -> None:
    assert EngineSettings().spec_types == ("ngram-simple",)  # the default
    assert EngineSettings(spec_type="none").spec_types == ()
    both = EngineSettings(spec_type="ngram-simple, draft-simple")
    assert both.spec_types == ("ngram-simple", "draft-simple")
    # -md adds the draft model to the default n-grams: the model drafts where they find nothing
    assert EngineSettings(model_draft="d.gguf").spec_types == ("ngram-simple", "draft-simple")
    assert EngineSettings(spec_type="none", model_draft="d.gguf").spec_types == ("draft-simple",)
    with pytest.raises(ValidationError, match="unknown speculative type ngram-cache"):
        EngineSettings(spec_type="ngram-cache")
