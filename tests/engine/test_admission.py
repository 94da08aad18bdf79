"""Admission for both KV layouts, on the engine's cell accounting without a model.

Each test drives a policy as the scheduler does (admit, plan, decode, retire) and checks
where each request went, what it reused, and the KV changes that llama.cpp would see.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import pytest

from backend.engine.admission import (
    MIN_SHARED_PREFIX,
    Admission,
    PerSlotAdmission,
    UnifiedAdmission,
)
from backend.engine.kv_cache import KvAccounting
from backend.engine.sequence import Sequence
from backend.engine.step_planner import plan_step
from tests.engine.scheduling_fakes import KvOp, RecordingKv, decode, make_seq, prompt

SYSTEM = list(range(10_000, 10_700))  # a 700-token shared system prompt


def prefill(kv: KvAccounting, running: list[Sequence], *, per_slot: bool = False) -> None:
    """Decode until every running sequence has its prompt in and a first token out."""
    while any(seq.remaining > 1 for seq in running):
        decode(kv, plan_step(running, n_batch=512, per_slot=per_slot))


def finish(
    policy: UnifiedAdmission | PerSlotAdmission, running: list[Sequence], seq: Sequence
) -> None:
    running.remove(seq)
    policy.retire(seq)


def unified(n_cells: int = 8192, *, parallel: int = 4, cache_entries: int = 4) -> UnifiedAdmission:
    kv = RecordingKv(n_cells)
    return UnifiedAdmission(
        kv, n_seq_max=parallel + cache_entries, parallel=parallel, cache_entries=cache_entries
    )


def ops(policy: UnifiedAdmission | PerSlotAdmission) -> list[KvOp]:
    """The KV changes since the last call."""
    assert isinstance(policy.kv, RecordingKv)
    return policy.kv.take_ops()


# ---- unified KV --------------------------------------------------------------------------
def test_the_longest_prefix_is_copied_from_a_cache_entry_or_a_running_sequence() -> None:
    policy, running = unified(), []
    base = list(range(1000, 1100))
    a = make_seq(prompt(5000, 100, shared=base[:60]))
    assert policy.admit(a, running) is Admission.ADMITTED
    prefill(policy.kv, running)
    finish(policy, running, a)  # its 100 prompt cells stay as a cache entry
    (a_id,) = policy.cache
    ops(policy)

    b = make_seq(prompt(6000, 120, shared=base[:90]))
    assert policy.admit(b, running) is Admission.ADMITTED
    assert ops(policy) == [("copy_prefix", a_id, b.seq_id, 60)]  # the cache entry's 60
    prefill(policy.kv, running)
    assert policy.kv.used == 100 + 60  # b shares 60 cells with the entry

    c = make_seq(prompt(7000, 120, shared=base[:90]))
    assert policy.admit(c, running) is Admission.ADMITTED
    assert ops(policy) == [("copy_prefix", b.seq_id, c.seq_id, 90)]  # running b has 90
    assert c.n_past == c.cached_tokens == 90
    assert policy.kv.used == 160  # shared, not copied
    assert running == [b, c]
    assert c.admit_order > b.admit_order


def test_an_identical_prompt_reuses_all_but_the_token_that_yields_logits() -> None:
    policy, running = unified(), []
    tokens = prompt(2000, 300)
    first = make_seq(tokens)
    policy.admit(first, running)
    prefill(policy.kv, running)
    finish(policy, running, first)
    again = make_seq(tokens)
    policy.admit(again, running)
    assert again.n_past == again.cached_tokens == len(tokens) - 1
    scored = make_seq(tokens, prompt_logprobs=0)  # every prompt token is scored: no reuse
    ops(policy)
    policy.admit(scored, running)
    assert scored.n_past == 0
    assert ops(policy) == []


def test_requests_wait_for_a_shared_prefix_being_prefilled_then_copy_it() -> None:
    policy, running = unified(), []
    leader = make_seq(prompt(100, 780, shared=SYSTEM))
    policy.admit(leader, running)
    decode(policy.kv, plan_step(running, n_batch=512, per_slot=False))
    assert leader.n_past == 512

    sharers = deque(make_seq(prompt(200 + 100 * k, 780, shared=SYSTEM)) for k in range(2))
    assert policy.admit_waiting(sharers, running) == []  # both wait instead of recomputing
    assert len(sharers) == 2
    assert leader.branch_at == len(SYSTEM)  # the leader pauses where the prompts branch

    plan = plan_step(running, n_batch=512, per_slot=False)
    assert plan.calls == [[(leader, len(SYSTEM) - 512)]]
    decode(policy.kv, plan)
    ops(policy)
    b, c = sharers
    assert policy.admit_waiting(sharers, running) == [b, c]
    assert ops(policy) == [
        ("copy_prefix", leader.seq_id, b.seq_id, len(SYSTEM)),
        ("copy_prefix", leader.seq_id, c.seq_id, len(SYSTEM)),
    ]
    assert b.cached_tokens == c.cached_tokens == len(SYSTEM)
    plan = plan_step(running, n_batch=512, per_slot=False)
    assert plan.calls == [[(leader, 80), (b, 80), (c, 80)]]  # only their own suffixes


def test_a_short_shared_prefix_is_not_worth_waiting_for() -> None:
    policy, running = unified(), []
    common = list(range(3000, 3000 + MIN_SHARED_PREFIX - 2))
    leader = make_seq(prompt(100, 400, shared=common))
    policy.admit(leader, running)
    other = make_seq(prompt(900, 400, shared=common))
    assert policy.admit(other, running) is Admission.ADMITTED
    assert other.n_past == 0  # nothing decoded yet to copy, and not worth the wait
    assert leader.branch_at == 0


def test_a_deferred_request_keeps_its_slot_against_later_ones() -> None:
    policy, running = unified(parallel=2), []
    leader = make_seq(prompt(100, 780, shared=SYSTEM))
    policy.admit(leader, running)
    sharer = make_seq(prompt(200, 780, shared=SYSTEM))
    later = make_seq(prompt(900, 50))
    waiting = deque([sharer, later])
    assert policy.admit_waiting(waiting, running) == []
    assert list(waiting) == [sharer, later]  # the later one did not take the last slot
    assert running == [leader]


def test_a_request_waits_in_order_when_the_kv_is_full_then_evicts_the_cache() -> None:
    policy, running = unified(1024), []
    assert policy.watermark == 32
    a = make_seq(prompt(100, 900))
    policy.admit(a, running)
    b, c = make_seq(prompt(2000, 200)), make_seq(prompt(3000, 10))
    waiting = deque([b, c])
    assert policy.admit_waiting(waiting, running) == []  # 900 cells pending, 200 more don't fit
    assert list(waiting) == [b, c]  # c, small enough, does not overtake b
    prefill(policy.kv, running)
    finish(policy, running, a)
    a_id = next(iter(policy.cache))
    ops(policy)
    assert policy.admit_waiting(waiting, running) == [b, c]
    assert ops(policy)[0] == ("rm", a_id, -1)  # the cache entry made room
    assert not policy.cache


def test_eviction_spares_the_entry_the_request_copies_from() -> None:
    policy, running = unified(1024), []
    shared = list(range(4000, 4300))
    x, y = make_seq(prompt(5000, 400, shared=shared)), make_seq(prompt(6000, 400))
    for seq in (x, y):
        policy.admit(seq, running)
        prefill(policy.kv, running)
        finish(policy, running, seq)
    x_id, y_id = policy.cache
    ops(policy)
    d = make_seq(prompt(7000, 500, shared=shared))
    assert policy.admit(d, running) is Admission.ADMITTED
    assert ops(policy) == [("rm", y_id, -1), ("copy_prefix", x_id, d.seq_id, 300)]
    assert list(policy.cache) == [x_id]


def test_finished_sequences_beyond_the_cache_size_are_freed_oldest_first() -> None:
    policy, running = unified(cache_entries=2), []
    done = []
    for k in range(3):
        seq = make_seq(prompt(1000 * (k + 1), 50))
        policy.admit(seq, running)
        prefill(policy.kv, running)
        done.append(seq.seq_id)
        finish(policy, running, seq)
    assert list(policy.cache) == done[1:]
    assert done[0] in policy.free_ids
    assert policy.kv.used == 100
    assert ("rm", done[0], -1) in ops(policy)


def test_with_no_free_sequence_id_a_request_adopts_the_cache_entry_it_extends() -> None:
    kv = RecordingKv(4096)
    policy = UnifiedAdmission(kv, n_seq_max=1, parallel=1, cache_entries=1)
    first = make_seq(prompt(100, 200))
    running: list[Sequence] = []
    policy.admit(first, running)
    prefill(kv, running)
    finish(policy, running, first)
    (entry_id,) = policy.cache
    turn = first.tokens[:200] + prompt(900, 40)
    kv.take_ops()
    nxt = make_seq(turn)
    assert policy.admit(nxt, running) is Admission.ADMITTED
    assert nxt.seq_id == entry_id and nxt.n_past == 200
    assert kv.take_ops() == [("keep", entry_id, 200)]
    assert not policy.cache


def test_preemption_takes_the_youngest_and_frees_its_kv() -> None:
    policy, running = unified(), []
    seqs = [make_seq(prompt(1000 * (k + 1), 100)) for k in range(3)]
    for seq in seqs:
        policy.admit(seq, running)
    prefill(policy.kv, running)
    youngest = seqs[2]
    seq_id = youngest.seq_id
    ops(policy)
    assert policy.preempt_youngest(running) is youngest
    assert running == seqs[:2]
    assert ops(policy) == [("rm", seq_id, -1)]
    assert (youngest.seq_id, youngest.n_past, youngest.preempted) == (-1, 0, 1)
    assert policy.kv.length(seq_id) == 0 and seq_id in policy.free_ids
    assert policy.preempt_youngest(running[:1]) is None  # one alone is never preempted
    assert policy.admit(youngest, running) is Admission.ADMITTED  # recomputed later
    assert youngest.admit_order > seqs[1].admit_order


# ---- KV per slot -------------------------------------------------------------------------
def per_slot(slots: int = 4) -> PerSlotAdmission:
    return PerSlotAdmission(RecordingKv(slots * 1024), n_seq_max=slots, parallel=slots)


def run_and_finish(policy: PerSlotAdmission, tokens: list[int]) -> None:
    running: list[Sequence] = []
    seq = make_seq(tokens)
    assert policy.admit(seq, running) is Admission.ADMITTED
    prefill(policy.kv, running, per_slot=True)
    finish(policy, running, seq)


def slot_holding(policy: PerSlotAdmission, tokens: list[int]) -> int:
    (slot,) = [s for s, e in policy.cache.items() if list(e.tokens) == tokens]
    return slot


def test_a_new_request_takes_the_lowest_idle_slot_moving_its_cached_prefix_away() -> None:
    policy, running = per_slot(), []
    a = make_seq(prompt(100, 200))
    b = make_seq(prompt(2000, 200))
    policy.admit(a, running)
    policy.admit(b, running)
    assert (a.seq_id, b.seq_id) == (0, 1)
    prefill(policy.kv, running, per_slot=True)
    finish(policy, running, a)  # slot 0 now caches a's 200 tokens
    ops(policy)
    c = make_seq(prompt(3000, 100))
    assert policy.admit(c, running) is Admission.ADMITTED
    assert c.seq_id == 0  # the lowest idle slot, so the running slots stay contiguous
    assert ops(policy) == [("copy_stream", 0, 3), ("keep", 0, 0)]  # a's prefix moves to 3
    assert list(policy.cache) == [3] and policy.kv.length(3) == 200
    assert policy.free_ids == [2]


def test_a_prefix_held_by_another_slot_is_copied_whole_then_trimmed() -> None:
    policy, running = per_slot(), []
    system = list(range(500, 700))
    a = make_seq(prompt(100, 250, shared=system))
    policy.admit(a, running)
    prefill(policy.kv, running, per_slot=True)
    ops(policy)
    b = make_seq(prompt(3000, 260, shared=system))
    assert policy.admit(b, running) is Admission.ADMITTED
    assert (b.seq_id, b.n_past) == (1, 200)
    assert ops(policy) == [("copy_stream", 0, 1), ("keep", 1, 200)]
    assert policy.kv.length(1) == 200 and policy.kv.length(0) == 250


def test_each_request_takes_slot_0_and_the_prefixes_before_it_move_to_spare_slots() -> None:
    policy = per_slot()
    prompts = [prompt(1000 * (k + 1), 100 + 10 * k) for k in range(4)]
    for tokens in prompts:
        run_and_finish(policy, tokens)
    assert not policy.free_ids
    assert [slot_holding(policy, tokens) for tokens in prompts] == [3, 2, 1, 0]


def test_a_conversations_next_turn_runs_in_its_own_slot_when_none_is_empty() -> None:
    policy = per_slot()
    prompts = [prompt(1000 * (k + 1), 100 + 10 * k) for k in range(4)]
    for tokens in prompts:
        run_and_finish(policy, tokens)
    slot = slot_holding(policy, prompts[1])
    assert slot != 0  # not the lowest idle slot
    ops(policy)
    nxt = make_seq(prompts[1] + prompt(9000, 30))
    assert policy.admit(nxt, []) is Admission.ADMITTED
    assert nxt.seq_id == slot and nxt.n_past == len(prompts[1])
    assert ops(policy) == [("keep", slot, len(prompts[1]))]  # no other prefix pushed out
    assert slot not in policy.cache and len(policy.cache) == 3


def test_with_every_slot_cached_a_longer_prefix_moves_over_the_least_recently_used() -> None:
    policy = per_slot()
    prompts = [prompt(1000 * (k + 1), size) for k, size in enumerate([100, 120, 140, 300])]
    for tokens in prompts:
        run_and_finish(policy, tokens)
    lru = next(iter(policy.cache))
    assert slot_holding(policy, prompts[0]) == lru and slot_holding(policy, prompts[3]) == 0
    ops(policy)
    new = make_seq(prompt(9000, 50))
    assert policy.admit(new, []) is Admission.ADMITTED
    assert new.seq_id == 0
    assert ops(policy) == [("copy_stream", 0, lru), ("keep", 0, 0)]  # 300 tokens over 100
    assert slot_holding(policy, prompts[3]) == lru and policy.kv.length(lru) == 300
    assert 0 not in policy.cache and len(policy.cache) == 3


def test_with_every_slot_cached_a_shorter_prefix_is_dropped_not_moved() -> None:
    policy = per_slot()
    prompts = [prompt(1000 * (k + 1), size) for k, size in enumerate([300, 120, 140, 100])]
    for tokens in prompts:
        run_and_finish(policy, tokens)
    ops(policy)
    new = make_seq(prompt(9000, 50))
    assert policy.admit(new, []) is Admission.ADMITTED
    assert new.seq_id == 0
    assert ops(policy) == [("keep", 0, 0)]  # 100 tokens are not worth the 300 of the LRU
    assert slot_holding(policy, prompts[0]) == next(iter(policy.cache))


def test_no_slot_left_means_wait() -> None:
    policy, running = per_slot(2), []
    for k in range(2):
        policy.admit(make_seq(prompt(1000 * (k + 1), 40)), running)
    assert policy.admit(make_seq(prompt(5000, 40)), running) is Admission.WAIT
    assert len(running) == 2


@pytest.mark.parametrize("make", [unified, per_slot], ids=["unified", "per-slot"])
def test_no_request_is_admitted_past_the_parallel_limit(
    make: Callable[[], UnifiedAdmission | PerSlotAdmission],
) -> None:
    policy = make()
    running: list[Sequence] = []
    waiting = deque(make_seq(prompt(1000 * (k + 1), 40)) for k in range(6))
    admitted = policy.admit_waiting(waiting, running)
    assert admitted == running and len(running) == 4
    assert len(waiting) == 2
    assert len({s.seq_id for s in running}) == 4
