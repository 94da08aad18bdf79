"""The draft policy: how much of a draft is verified, from the decode cost by rows and the
acceptance so far (pure functions), and the engine following it on the real model."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from backend.engine.engine import Engine
from backend.engine.request_types import EngineEvent, ErrorEvent, FinishEvent, SamplingParams
from backend.engine.speculative.draft_policy import (
    Acceptance,
    Candidate,
    DecodeCost,
    choose_lengths,
    consistent,
    expected_tokens,
)
from backend.settings.engine_settings import EngineSettings

pytestmark = pytest.mark.model


def linear(fixed: float, per_row: float) -> DecodeCost:
    return DecodeCost({r: fixed + per_row * r for r in (1, 2, 4, 8, 16, 32, 64)})


def test_cost_interpolates_between_measured_rows_and_extrapolates_past_them() -> None:
    cost = DecodeCost({1: 0.010, 4: 0.016, 8: 0.020})
    assert cost.seconds(1) == pytest.approx(0.010)
    assert cost.seconds(2) == pytest.approx(0.012)
    assert cost.seconds(6) == pytest.approx(0.018)
    assert cost.seconds(12) == pytest.approx(0.024)  # the last segment's slope, 1 ms per row
    cost.observe(4, 0.026)
    assert cost.seconds(4) == pytest.approx(0.017)  # a tenth of the way to the new figure
    cost.observe(3, 0.020)  # a row count not measured before becomes a point
    assert cost.seconds(3) == pytest.approx(0.020)


def test_a_stream_per_slot_pays_one_pass_per_distinct_length() -> None:
    cost = linear(0.010, 0.001)
    # unified: one pass over every row
    assert cost.of_call([1, 1, 5], per_slot=False) == pytest.approx(0.010 + 0.007)
    # per slot: 3 rows (one from each), then the 4 left in the third slot
    assert cost.of_call([1, 1, 5], per_slot=True) == pytest.approx(0.013 + 0.014)
    # equal drafts: one pass
    assert cost.of_call([5, 5], per_slot=True) == pytest.approx(0.020)


def test_expected_tokens_is_the_chance_of_each_prefix() -> None:
    assert expected_tokens(0.5, 3) == pytest.approx(0.5 + 0.25 + 0.125)
    assert expected_tokens(1.0, 4) == 4
    assert expected_tokens(0.9, 0) == 0


def test_cheap_rows_verify_the_whole_draft_and_dear_rows_none() -> None:
    offer = [Candidate(available=16, p=0.9)]
    memory_bound = linear(0.010, 0.0001)  # a row costs 1% of a decode
    compute_bound = linear(0.0, 0.010)  # every row costs a whole decode
    assert choose_lengths(offer, 0, memory_bound, per_slot=True) == [16]
    assert choose_lengths(offer, 0, compute_bound, per_slot=True) == [0]
    # a row at 60% of a decode pays only for a short draft of a likely continuation
    (k,) = choose_lengths(offer, 0, linear(0.004, 0.006), per_slot=True)
    assert 1 <= k < 16
    assert choose_lengths([Candidate(16, p=0.3)], 0, linear(0.004, 0.006), per_slot=True) == [0]


def test_a_busy_batch_makes_drafting_dearer() -> None:
    """Rows cost the same, but at 16 streams a draft row adds a smaller share of tokens
    than at one: what pays alone stops paying in a full batch."""
    cost = linear(0.010, 0.002)
    assert choose_lengths([Candidate(8, p=0.7)], 0, cost, per_slot=False)[0] > 0
    assert choose_lengths([Candidate(8, p=0.7)], 15, cost, per_slot=False) == [0]


def test_per_slot_drafts_are_equalised_or_dropped() -> None:
    """A pass over the weights costs much more than a row: drafts of 12 and 3 tokens become
    one length, never two (which would be three passes)."""
    cost = linear(0.010, 0.0002)
    lengths = choose_lengths([Candidate(12, p=0.95), Candidate(3, p=0.95)], 2, cost, per_slot=True)
    drafting = {n for n in lengths if n}
    assert len(drafting) == 1, lengths


def test_n_min_is_respected() -> None:
    cost = linear(0.010, 0.0001)
    assert choose_lengths([Candidate(2, p=0.9, n_min=3)], 0, cost, per_slot=True) == [0]


def test_acceptance_starts_at_the_prior_and_follows_the_evidence() -> None:
    acc = Acceptance()
    assert acc.rate(0.8) == pytest.approx(0.8)
    for _ in range(10):
        acc.record(drafted=4, accepted=0, decay=0.9)
    assert acc.rate(0.8) < 0.35  # 3.2 / (4 + 6.5)
    for _ in range(60):
        acc.fade(0.9)  # declined drafts: the evidence ages back towards the prior
    assert acc.rate(0.8) > 0.75


CODE = """def area(width: float, height: float) -> float:
    return width * height


def perimeter(width: float, height: float) -> float:
    return 2 * (width + height)
"""
REPEAT = f"Repeat this code exactly:\n\n```python\n{CODE}```"


def ngram_settings(**changes: object) -> EngineSettings:
    settings = EngineSettings(
        ctx_size=2048, parallel=2, threads=1, spec_type="ngram-simple", spec_ngram_simple_size_n=4
    )
    return settings.model_copy(update=changes)


@pytest.fixture(scope="module")
def ngram_engine() -> Iterator[Engine]:
    eng = Engine(ngram_settings())
    eng.start()
    yield eng
    eng.close()


def generate(eng: Engine, prompt: str) -> tuple[list[int], FinishEvent]:
    tokens: list[int] = []
    done = threading.Event()
    finish: list[FinishEvent] = []

    def sink(event: EngineEvent) -> None:
        tokens.extend(getattr(event, "tokens", []))
        if isinstance(event, FinishEvent):
            finish.append(event)
            done.set()
        elif isinstance(event, ErrorEvent):
            done.set()

    prompt_tokens = eng.render_chat([{"role": "user", "content": prompt}])
    eng.submit(prompt_tokens, max_tokens=80, sampling=SamplingParams(temperature=0.0), sink=sink)
    assert done.wait(120) and finish
    return tokens, finish[0]


def test_the_engine_measures_the_cost_of_rows_when_a_draft_first_needs_it(
    ngram_engine: Engine,
) -> None:
    """Nothing is timed at start (a server that never drafts never pays for it); the first
    draft is measured on its own sequence's cells, which leaves that sequence's answer as
    it would be without speculation."""
    unstarted = Engine(ngram_settings())
    try:
        assert unstarted.speculator is not None and unstarted.speculator.cost is None
        assert unstarted.speculator.calibrate_later is not None
    finally:
        unstarted.close()
    plain = Engine(ngram_settings(spec_type="none"))
    plain.start()
    try:
        expected, _ = generate(plain, REPEAT)
    finally:
        plain.close()
    answer, _ = generate(ngram_engine, REPEAT)
    spec = ngram_engine.speculator
    assert spec is not None and spec.cost is not None and spec.calibrate_later is None
    one, sixteen = spec.cost.seconds(1), spec.cost.seconds(16)
    assert 0 < one < sixteen  # more rows never measured as cheaper than one
    assert answer == expected


def test_the_engine_verifies_only_what_the_policy_keeps(ngram_engine: Engine) -> None:
    """The same greedy answer whether rows are nearly free (whole drafts verified) or as
    dear as a decode each (no draft verified)."""
    spec = ngram_engine.speculator
    assert spec is not None
    measured = spec.cost
    observe = spec.observe_decode
    spec.observe_decode = lambda rows, seconds: None  # type: ignore[method-assign]
    try:
        spec.cost = linear(0.010, 0.00001)
        cheap, cheap_finish = generate(ngram_engine, REPEAT)
        spec.cost = linear(0.0, 0.010)
        dear, dear_finish = generate(ngram_engine, REPEAT)
    finally:
        spec.cost, spec.observe_decode = measured, observe  # type: ignore[method-assign]
    assert cheap == dear
    assert cheap_finish.draft_n_accepted >= 10  # the answer repeats the prompt's list
    assert dear_finish.draft_n == 0


def test_measurements_from_a_busy_machine_are_made_consistent() -> None:
    """A decode preempted by another process is no measure of the cost of rows."""
    points = {1: 0.010, 2: 2.0, 4: 0.009, 8: 0.030}
    consistent(points)
    assert points == {1: 0.010, 2: 0.020, 4: 0.020, 8: 0.030}
    cost = DecodeCost(points)
    cost.observe(8, 3.0)  # one outlier moves the figure a tenth of the way to twice it
    assert cost.seconds(8) == pytest.approx(0.030 + 0.1 * 0.030)


def test_a_draft_model_drafts_only_when_its_own_decodes_are_cheap_enough() -> None:
    """Drafting k tokens with a draft model costs k of its decodes besides the rows: a
    draft model nearly as dear as the served one is not worth running at all."""
    target = linear(0.010, 0.0005)
    offer = [Candidate(available=16, p=0.8)]
    tiny = linear(0.0005, 0.00005)  # a twentieth of the served model
    twin = linear(0.008, 0.0004)  # like the served model (Q2_K drafting for Q8_0)
    assert choose_lengths(offer, 0, target, per_slot=True, draft_cost=tiny)[0] >= 3
    assert choose_lengths(offer, 0, target, per_slot=True, draft_cost=twin) == [0]


def test_figures_from_a_busy_start_come_down_as_decodes_show_the_cost() -> None:
    """Calibrated while another process ran: a draft of 2 to 8 rows looks 40 to 160 times a
    decode, so no draft would ever be tried. One measured decode of one row bounds them all
    (r rows never cost more than r decodes of one), and faster measurements count at once."""
    cost = DecodeCost({1: 0.200, 2: 0.400, 4: 0.800, 8: 1.600})
    cost.observe(1, 0.010)
    assert cost.seconds(1) == pytest.approx(0.105)  # halfway down at once
    assert cost.seconds(8) == pytest.approx(8 * 0.105)
    for _ in range(10):
        cost.observe(1, 0.010)
    assert cost.seconds(1) == pytest.approx(0.010, rel=0.01)
    assert cost.seconds(4) <= 4 * cost.seconds(1)
    cost.observe(4, 0.015)  # the rows the policy then tries show what rows really cost
    assert cost.seconds(4) < 0.03 and cost.seconds(8) <= 2 * cost.seconds(4)
