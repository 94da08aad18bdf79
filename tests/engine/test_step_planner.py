"""The step planner alone: which tokens one step decodes, in which ``llama_decode`` calls."""

from __future__ import annotations

from backend.engine.sequence import Sequence
from backend.engine.step_planner import FA_TILE, StepPlan, plan_step
from tests.engine.scheduling_fakes import make_seq, prompt


def seq_at(seq_id: int, n_prompt: int, *, n_past: int = 0, generated: int = 0) -> Sequence:
    """A running sequence in ``seq_id`` with ``n_past`` tokens decoded; ``generated`` > 0
    makes it a generating one with its last sampled token still to decode."""
    seq = make_seq(prompt(1000 * (seq_id + 1), n_prompt))
    seq.seq_id = seq_id
    if generated:
        seq.tokens += [7] * generated
        seq.completion_tokens = generated
        n_past = len(seq.tokens) - 1
    seq.n_past = n_past
    return seq


def rows(plan: StepPlan) -> list[tuple[Sequence, int]]:
    return [item for call in plan.calls for item in call]


def test_nothing_to_decode_is_an_empty_plan() -> None:
    assert plan_step([], n_batch=512, per_slot=False).calls == []
    assert plan_step([], n_batch=512, per_slot=True).n_tokens == 0


def test_decode_rows_come_first_then_prompt_chunks() -> None:
    prefilling = seq_at(0, 300)
    generating = seq_at(1, 40, generated=3)
    plan = plan_step([prefilling, generating], n_batch=512, per_slot=False)
    assert plan.calls == [[(generating, 1), (prefilling, 300)]]
    assert plan.n_tokens == 301


def test_prompts_are_chunked_up_to_n_batch_and_go_on_in_the_next_step() -> None:
    a, b = seq_at(0, 400), seq_at(1, 400)
    gens = [seq_at(2 + k, 20, generated=1) for k in range(2)]
    plan = plan_step([a, b, *gens], n_batch=512, per_slot=False)
    assert rows(plan) == [(gens[0], 1), (gens[1], 1), (a, 400), (b, 110)]
    assert plan.n_tokens == 512
    b.n_past = 110
    a.n_past = 400  # a is now a one-token prefill: the token that yields its logits
    a.tokens.append(7)
    a.completion_tokens = 1
    later = plan_step([a, b], n_batch=512, per_slot=False)
    assert rows(later) == [(a, 1), (b, 290)]


def test_a_prefill_others_wait_on_pauses_where_their_prompts_branch() -> None:
    leader = seq_at(0, 780, n_past=512)
    leader.branch_at = 700
    other = seq_at(1, 100)
    plan = plan_step([leader, other], n_batch=512, per_slot=False)
    assert rows(plan) == [(leader, 188), (other, 100)]
    leader.n_past = 700  # past the branch point, the rest goes as usual
    assert rows(plan_step([leader], n_batch=512, per_slot=False)) == [(leader, 80)]


def test_per_slot_long_chunks_get_a_call_of_their_own() -> None:
    gen = seq_at(2, 40, generated=1)
    long = seq_at(0, 2 * FA_TILE)
    short = seq_at(3, FA_TILE // 4)
    unified = plan_step([gen, long, short], n_batch=512, per_slot=False)
    assert unified.calls == [[(gen, 1), (long, 2 * FA_TILE), (short, FA_TILE // 4)]]
    split = plan_step([gen, long, short], n_batch=512, per_slot=True)
    # the decode row and the short chunk in one call, ordered by slot; the long chunk apart
    assert split.calls == [[(gen, 1), (short, FA_TILE // 4)], [(long, 2 * FA_TILE)]]


def test_per_slot_the_shared_call_lists_its_slots_in_order() -> None:
    seqs = [seq_at(k, 20, generated=1) for k in (3, 0, 2, 1)]
    plan = plan_step(seqs, n_batch=512, per_slot=True)
    assert [[s.seq_id for s, _ in call] for call in plan.calls] == [[0, 1, 2, 3]]


def test_per_slot_each_long_chunk_is_its_own_call_shortest_first() -> None:
    # four later turns: each prompt's first token comes after its own call, not the step's
    seqs = [seq_at(k, FA_TILE + n) for k, n in ((0, 30), (1, 10), (2, 20), (3, 0))]
    plan = plan_step(seqs, n_batch=512, per_slot=True)
    assert [[(s.seq_id, n) for s, n in call] for call in plan.calls] == [
        [(3, FA_TILE)],
        [(1, FA_TILE + 10)],
        [(2, FA_TILE + 20)],
        [(0, FA_TILE + 30)],
    ]
    assert plan_step(seqs, n_batch=512, per_slot=False).n_tokens == plan.n_tokens


def test_per_slot_leftover_budget_does_not_start_a_short_chunk() -> None:
    fills = seq_at(0, 512 - FA_TILE // 2)
    waits = seq_at(1, 3 * FA_TILE)
    plan = plan_step([fills, waits], n_batch=512, per_slot=True)
    assert rows(plan) == [(fills, 512 - FA_TILE // 2)]  # waits goes whole next step
    unified = plan_step([fills, waits], n_batch=512, per_slot=False)
    assert rows(unified) == [(fills, 512 - FA_TILE // 2), (waits, FA_TILE // 2)]


def test_per_slot_the_first_prompt_always_goes_even_short() -> None:
    gens = [seq_at(k, 20, generated=1) for k in range(1, 4)]
    first = seq_at(0, 1000)
    plan = plan_step([*gens, first], n_batch=FA_TILE // 2 + 3, per_slot=True)
    assert rows(plan) == [(first, FA_TILE // 2), *[(g, 1) for g in gens]]
    assert plan.calls == [[(first, FA_TILE // 2), *[(g, 1) for g in gens]]]


def test_a_chunk_that_fits_whole_is_not_held_back_per_slot() -> None:
    big = seq_at(0, 400)
    tail = seq_at(1, 20)  # shorter than FA_TILE, but it is all that is left
    plan = plan_step([big, tail], n_batch=512, per_slot=True)
    assert plan.calls == [[(tail, 20)], [(big, 400)]]
