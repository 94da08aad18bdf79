"""How the scheduler cuts work into llama_decode calls, driven step by step on the real model.

The scheduler thread is not started: the test runs the loop's turns itself with
:meth:`Scheduler.step_once`, so it can look at every plan. Each plan is really decoded, so
the KV and positions stay consistent and a wrong plan fails in llama.cpp too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from backend.bench.prompts import request_prompt, shared_prefix
from backend.engine.engine import Engine
from backend.engine.request_types import EngineEvent, FinishEvent, SamplingParams, TokenEvent
from backend.engine.scheduler import Scheduler
from backend.engine.sequence import Sequence
from backend.engine.step_planner import FA_TILE, StepPlan
from backend.settings.engine_settings import EngineSettings

SLOTS = 4


@pytest.fixture(params=[True, False], ids=["per-slot", "unified"])
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    settings = EngineSettings(
        ctx_size=SLOTS * 1536,
        parallel=SLOTS,
        batch_size=512,
        ubatch_size=512,
        kv_unified=not request.param,
    )
    eng = Engine(settings)  # not started: the test drives the scheduler
    yield eng
    eng.scheduler.close()
    eng.runtime.close()


class Inbox:
    def __init__(self) -> None:
        self.events: list[EngineEvent] = []

    def __call__(self, event: EngineEvent) -> None:
        self.events.append(event)

    @property
    def first_token(self) -> bool:
        return any(isinstance(e, TokenEvent) for e in self.events)


def submit(eng: Engine, text: str, max_tokens: int = 4) -> Inbox:
    inbox = Inbox()
    tokens = eng.tokenize(text)
    eng.submit(
        tokens,
        max_tokens=max_tokens,
        sampling=SamplingParams(temperature=0.0, ignore_eos=True),
        sink=inbox,
    )
    return inbox


def tick(sched: Scheduler) -> list[list[tuple[Sequence, int]]]:
    """One turn of the scheduler loop, its events delivered; returns the calls it ran."""
    plan: StepPlan = sched.step_once()
    sched.deliver_events()
    return plan.calls


def running(sched: Scheduler) -> list[Sequence]:
    return sorted(sched.running, key=lambda s: s.request.request_id)


def test_a_prefill_others_wait_on_stops_where_their_prompts_branch(engine: Engine) -> None:
    sched = engine.scheduler
    system = shared_prefix(700, "branch")
    inboxes = [submit(engine, f"{system}\n\n{request_prompt(80, 'a')}")]
    first = tick(sched)
    (leader,) = running(sched)
    assert [(s, n) for g in first for s, n in g] == [(leader, 512)]

    inboxes += [submit(engine, f"{system}\n\n{request_prompt(80, k)}") for k in "bc"]
    plan = tick(sched)  # b and c wait for the leader's prefix instead of recomputing it
    assert running(sched) == [leader]
    branch = leader.branch_at
    assert 600 < branch < leader.n_prompt
    assert [(s, n) for g in plan for s, n in g] == [(leader, branch - 512)]
    assert leader.n_past == branch

    plan = tick(sched)  # all three now have only their own suffix left, in this step
    leader_, b, c = running(sched)
    assert leader_ is leader
    assert b.cached_tokens == c.cached_tokens == branch
    suffixes = sorted(s.n_prompt - branch for s in (leader, b, c))
    if sched._per_slot:  # a call each, shortest first: first tokens go out one by one
        assert [[n for _, n in call] for call in plan] == [[n] for n in suffixes]
    else:  # one call
        assert len(plan) == 1
        assert sorted(n for _, n in plan[0]) == suffixes
    assert all(inbox.first_token for inbox in inboxes)
    while sched.running:
        tick(sched)
    finishes = [e for inbox in inboxes for e in inbox.events if isinstance(e, FinishEvent)]
    assert [f.completion_tokens for f in finishes] == [4, 4, 4]
    assert sched.stats.prefix_tokens_saved == 2 * branch


def test_per_slot_steps_keep_long_prompt_chunks_apart_from_decode_rows(engine: Engine) -> None:
    sched = engine.scheduler
    submit(engine, request_prompt(40, "gen"), max_tokens=8)
    tick(sched)  # prompt in, first token out: it generates from now on
    (gen,) = running(sched)
    assert gen.generating

    submit(engine, request_prompt(2 * FA_TILE, "long"))
    submit(engine, request_prompt(FA_TILE // 4, "short"))
    plan = tick(sched)
    _, long_seq, short_seq = running(sched)
    if not engine.runtime.kv_unified:
        # llama.cpp's CPU flash attention is fast from FA_TILE rows per KV stream: the long
        # prompt gets a call of its own, the decode row and the short prompt the other
        assert [[s for s, _ in g] for g in plan] == [
            sorted([gen, short_seq], key=lambda s: s.seq_id),
            [long_seq],
        ]
        assert dict(plan[1])[long_seq] == long_seq.n_prompt
    else:
        assert len(plan) == 1
        assert {s for s, _ in plan[0]} == {gen, long_seq, short_seq}
    assert long_seq.n_past == long_seq.n_prompt
    assert short_seq.n_past == short_seq.n_prompt
    assert gen.completion_tokens == 2


@pytest.mark.parametrize("engine", [True], indirect=True, ids=["per-slot"])
def test_per_slot_leftover_budget_does_not_start_a_short_chunk(engine: Engine) -> None:
    sched = engine.scheduler
    submit(engine, request_prompt(512 - FA_TILE // 2, "fills"))
    submit(engine, request_prompt(3 * FA_TILE, "waits"))
    plan = tick(sched)
    fills, waits = running(sched)
    planned = {s: n for g in plan for s, n in g}
    assert planned[fills] == fills.n_prompt
    assert waits not in planned  # FA_TILE / 2 left: it goes whole in the next step
    plan = tick(sched)
    assert {s: n for g in plan for s, n in g}[waits] == waits.n_prompt


def test_requests_still_being_prepared_join_the_first_prefill_step(engine: Engine) -> None:
    sched = engine.scheduler
    sched.arrival_window = 30.0  # only the arrivals settling may end the wait
    late = engine.arrivals.begin()  # the server is still templating a second request
    submit(engine, request_prompt(100, "early"))

    def prepare_late() -> None:
        time.sleep(0.05)
        submit(engine, request_prompt(100, "late"))
        late.done()

    helper = threading.Thread(target=prepare_late)
    helper.start()
    t0 = time.perf_counter()
    plan = tick(sched)
    helper.join()
    assert time.perf_counter() - t0 < 20.0  # it waited for the arrival, not the window
    assert engine.arrivals.pending == 0
    early, late_seq = running(sched)
    assert {s for g in plan for s, _ in g} == {early, late_seq}
    assert early.n_past == early.n_prompt and late_seq.n_past == late_seq.n_prompt


def test_with_nothing_on_its_way_the_scheduler_does_not_wait(engine: Engine) -> None:
    sched = engine.scheduler
    sched.arrival_window = 30.0
    arrival = engine.arrivals.begin()
    arrival.done()
    arrival.done()  # closing twice counts once
    assert engine.arrivals.pending == 0
    submit(engine, request_prompt(100, "alone"))
    t0 = time.perf_counter()
    tick(sched)
    assert time.perf_counter() - t0 < 20.0
    assert len(running(sched)) == 1


def test_streams_that_are_generating_are_never_held_for_arrivals(engine: Engine) -> None:
    """A request still being read or templated (a slow upload, a stalled client) must not
    delay the tokens of streams already running: the window is for a first prefill."""
    sched = engine.scheduler
    sched.arrival_window = 30.0
    submit(engine, request_prompt(40, "running"), max_tokens=8)
    tick(sched)
    (gen,) = running(sched)
    assert gen.generating
    stalled = engine.arrivals.begin()
    submit(engine, request_prompt(40, "next"))
    t0 = time.perf_counter()
    plan = tick(sched)
    assert time.perf_counter() - t0 < 20.0  # not the 30 s window
    assert engine.arrivals.pending == 1
    assert gen in {s for g in plan for s, _ in g}
    assert len(running(sched)) == 2  # the new request joined at once
    stalled.done()


def test_a_cancelled_sequence_leaves_its_decoded_prefix_for_the_next_request(
    engine: Engine,
) -> None:
    """Stopping an answer is common; the conversation is then asked again (or edited) and
    its prompt should not be computed a second time."""
    sched = engine.scheduler
    prompt = f"{shared_prefix(300, 'stop')}\n\n{request_prompt(40, 'q')}"
    first = submit(engine, prompt, max_tokens=64)
    tick(sched)
    tick(sched)
    (seq,) = running(sched)
    decoded = seq.n_past
    assert decoded > seq.n_prompt  # its prompt is in the KV, and a few answer tokens
    engine.cancel(seq.request.request_id)
    tick(sched)
    assert not sched.running
    assert any(isinstance(e, FinishEvent) and e.finish_reason == "cancelled" for e in first.events)
    again = submit(engine, prompt, max_tokens=2)
    tick(sched)
    (retry,) = running(sched)
    assert retry.cached_tokens == retry.n_prompt - 1  # all but the token that yields logits
    while sched.running:
        tick(sched)
    assert [e.completion_tokens for e in again.events if isinstance(e, FinishEvent)] == [2]


def test_a_deferred_request_keeps_its_slot_against_later_ones(engine: Engine) -> None:
    """Requests waiting for a running prefill's shared prefix count against the free
    slots, so unrelated requests behind them cannot take the slot they will need."""
    sched = engine.scheduler
    system = shared_prefix(900, "defer")
    submit(engine, f"{system}\n\n{request_prompt(40, 'lead')}")
    for k in range(SLOTS - 2):
        submit(engine, request_prompt(30, f"other{k}"))
    tick(sched)  # the leader and SLOTS - 2 others run: one slot is left
    assert len(sched.running) == SLOTS - 1
    sharer = submit(engine, f"{system}\n\n{request_prompt(40, 'shares')}")
    submit(engine, request_prompt(30, "later"))
    tick(sched)  # the sharer waits for the prefix; the later request must not take its slot
    assert len(sched.running) == SLOTS - 1
    tick(sched)
    assert len(sched.running) == SLOTS
    assert sharer.first_token or any(s.cached_tokens > 800 for s in sched.running)
    while sched.running:
        tick(sched)


def test_a_started_scheduler_refuses_a_second_driver(engine: Engine) -> None:
    sched = engine.scheduler
    sched.start()
    with pytest.raises(RuntimeError, match="scheduler thread runs"):
        sched.step_once()
    with pytest.raises(RuntimeError, match="scheduler thread runs"):
        sched.deliver_events()
    sched.stop()
    assert sched.step_once().calls == []  # the thread gone, a caller may drive again
