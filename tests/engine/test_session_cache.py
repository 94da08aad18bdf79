"""Sessions that outlive their slot (``--cache-ram``, ``--cache-disk``), on the real model.

One slot (``parallel=1``), so that every other session's request takes the slot and a
session's next turn finds its KV only in the RAM or disk tier. The scheduler is driven step
by step from the test (no thread), so every run is deterministic; greedy sampling.

Why the references run the same session uninterrupted, on an engine with both tiers off:
there the next turn reuses the KV the slot kept, computed in the same batches as the one
the store saved and restored, so the outputs must agree token for token (the state is
llama.cpp's own bytes). A cold prefill of the whole next turn is a different batch shape,
whose logits may differ in the last bits (see tests/engine/test_speculative.py); it is
compared only where the prompt is short enough to be batch-invariant.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import llama_cpp
import pytest

from backend.engine.engine import Engine
from backend.engine.request_types import (
    EngineEvent,
    ErrorEvent,
    FinishEvent,
    SamplingParams,
    TokenEvent,
)
from backend.engine.session_disk_store import FOLDER, SUFFIX
from backend.settings.engine_settings import EngineSettings

GREEDY = SamplingParams(temperature=0.0)
SYSTEM = "You are a careful coding assistant. " + " ".join(
    f"Tool {i}: run_{name}(path) reads {name} data and returns it as text."
    for i, name in enumerate(["alpha", "beta", "gamma", "delta", "omega", "sigma"])
)


def context(name: str, lines: int = 10) -> str:
    return f"Session {name} works on the file {name}.py. " + " ".join(
        f"Line {i} of {name}.py assigns value_{i} = {i * 7} in module {name}." for i in range(lines)
    )


@dataclass
class Outcome:
    tokens: list[int] = field(default_factory=list)
    finish: FinishEvent | None = None

    def __call__(self, event: EngineEvent) -> None:
        if isinstance(event, TokenEvent):
            self.tokens += event.token_ids
        elif isinstance(event, FinishEvent):
            self.finish = event
        elif isinstance(event, ErrorEvent):
            raise AssertionError(event.message)

    @property
    def cached(self) -> int:
        assert self.finish is not None
        return self.finish.cached_tokens


def make_engine(**settings: object) -> Engine:
    base: dict[str, object] = {
        "ctx_size": 2048,
        "parallel": 1,
        "threads": 2,
        "seed": 1,
        "spec_type": "none",
        "cache_ram": 0,
        "cache_disk": 0,
    }
    return Engine(EngineSettings(**{**base, **settings}))  # type: ignore[arg-type]


@pytest.fixture
def engines() -> Iterator[list[Engine]]:
    """Engines a test opens; closed at the end whatever happens."""
    opened: list[Engine] = []
    yield opened
    for eng in opened:
        eng.close()


def open_engine(engines: list[Engine], **settings: object) -> Engine:
    eng = make_engine(**settings)
    engines.append(eng)
    return eng


def ask(eng: Engine, messages: list[dict[str, str]], max_tokens: int = 12) -> Outcome:
    """One greedy request, the scheduler stepped until it finishes."""
    outcome = Outcome()
    tokens = eng.render_chat(messages)
    eng.submit(tokens, max_tokens=max_tokens, sampling=GREEDY, sink=outcome)
    sched = eng.scheduler
    for _ in range(500):
        sched.step_once()
        sched.deliver_events()
        assert_kv_agrees_with_llama(eng)
        if outcome.finish is not None:
            return outcome
    raise AssertionError("the request did not finish")


def assert_kv_agrees_with_llama(eng: Engine) -> None:
    """The scheduler's cell count matches what llama.cpp holds, restores included."""
    kv, memory = eng.scheduler.kv, eng.runtime.memory
    for seq_id in range(eng.runtime.n_seq_max):
        n = kv.length(seq_id)
        assert llama_cpp.llama_memory_seq_pos_max(memory, seq_id) == n - 1, seq_id
        assert llama_cpp.llama_memory_seq_pos_min(memory, seq_id) == (0 if n else -1), seq_id


def turn1(name: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{context(name)}\nWhat does {name}.py do?"},
    ]


def turn2(name: str, answer: str) -> list[dict[str, str]]:
    return [
        *turn1(name),
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "Rename value_3 and show the line."},
    ]


def text(eng: Engine, out: Outcome) -> str:
    return eng.runtime.detokenize(out.tokens)


def test_a_session_evicted_from_its_slot_continues_as_if_never_interrupted(
    engines: list[Engine],
) -> None:
    ref = open_engine(engines)  # both tiers off: the session runs uninterrupted
    ref_a1 = ask(ref, turn1("alpha"))
    ref_a2 = ask(ref, turn2("alpha", text(ref, ref_a1)))

    eng = open_engine(engines, cache_ram=256)
    a1 = ask(eng, turn1("alpha"))
    assert a1.tokens == ref_a1.tokens
    b1 = ask(eng, turn1("beta"))  # takes the only slot: alpha's KV goes to RAM
    assert b1.cached > 0  # the shared system prompt, from the slot
    ram = eng.stats().session_cache.ram
    assert ram.entries == 1 and 0 < ram.bytes <= ram.budget_bytes

    a2_prompt = eng.render_chat(turn2("alpha", text(eng, a1)))
    a2 = ask(eng, turn2("alpha", text(eng, a1)))
    # all of turn 1 (prompt and answer) was restored, not just the shared system prompt
    assert a2.cached >= len(eng.render_chat(turn1("alpha"))) + len(a1.tokens) - 8
    assert a2.cached > b1.cached + 50
    assert a2.cached == ref_a2.cached  # the same prefix the uninterrupted slot reused
    assert a2.tokens == ref_a2.tokens  # token for token
    stats = eng.stats()
    assert stats.session_cache.ram.hits == 1
    assert stats.session_cache.ram.tokens_saved == a2.cached
    assert stats.session_cache.ram.misses == 2  # alpha's and beta's first turns
    assert stats.prefix_cache.tokens_saved == b1.cached + a2.cached
    # only the new part of turn 2 was decoded
    decoded = stats.tokens.prompt_decoded_total
    n_a1 = len(eng.render_chat(turn1("alpha")))
    n_b1 = len(eng.render_chat(turn1("beta")))
    assert decoded == n_a1 + (n_b1 - b1.cached) + (len(a2_prompt) - a2.cached)


def test_an_edited_turn_restores_the_saved_session_up_to_the_edit(engines: list[Engine]) -> None:
    """A partial match: the session's first turn is asked again with another question, so
    the saved entry (prompt and answer) is restored and cut back to where they part."""
    edited = turn1("alpha")
    edited[-1] = {"role": "user", "content": f"{context('alpha')}\nList the values."}
    ref = open_engine(engines)
    ask(ref, turn1("alpha"))
    ref_edit = ask(ref, edited)  # uninterrupted: the slot's KV, cut back by the slot cache

    eng = open_engine(engines, cache_ram=256)
    ask(eng, turn1("alpha"))
    b1 = ask(eng, turn1("beta"))
    out = ask(eng, edited)
    n_turn1 = len(eng.render_chat(turn1("alpha")))
    assert b1.cached + 50 < out.cached < n_turn1 - 3  # up to the edit, not the whole entry
    assert out.cached == ref_edit.cached
    assert out.tokens == ref_edit.tokens
    assert eng.stats().session_cache.ram.hits == 1


def short1(name: str) -> list[dict[str, str]]:
    """A session without the long system prompt: it stays under 256 cells, where a row's
    logits are the same whatever else its call decodes (see tests/engine/test_speculative.py),
    so that drafts verified in one call match the tokens decoded one by one."""
    return [{"role": "user", "content": f"{context(name, 3)}\nWhat does {name}.py do?"}]


def short2(name: str, answer: str) -> list[dict[str, str]]:
    return [*short1(name), {"role": "assistant", "content": answer}, turn2(name, "")[-1]]


def test_a_draft_model_catches_up_after_a_restore(engines: list[Engine]) -> None:
    """Speculative decoding with a draft model: the draft context keeps its own KV and,
    finding its sequence holds another session after the restore, decodes what it lacks.
    The output stays the served model's own (drafts are verified)."""
    ref = open_engine(engines)
    ref_a1 = ask(ref, short1("alpha"))
    ref_a2 = ask(ref, short2("alpha", text(ref, ref_a1)))

    eng = open_engine(
        engines,
        cache_ram=256,
        spec_type="draft-simple",
        model_draft="default",
        draft_max=6,
        draft_p_min=0.0,
        spec_draft_policy="full",
    )
    a1 = ask(eng, short1("alpha"))
    assert a1.tokens == ref_a1.tokens
    ask(eng, short1("beta"))
    a2 = ask(eng, short2("alpha", text(eng, a1)))
    assert a2.cached > len(eng.render_chat(short1("alpha")))  # restored, answer included
    assert len(eng.render_chat(short2("alpha", text(eng, a1)))) + 12 < 256
    assert a2.cached == ref_a2.cached and a2.tokens == ref_a2.tokens
    assert a2.finish is not None and a2.finish.draft_n_accepted > 0
    assert eng.stats().session_cache.ram.hits == 1


def test_with_one_kv_cache_an_evicted_prefix_entry_is_restored(engines: list[Engine]) -> None:
    """``--kv-unified``: finished sequences are prefix-cache entries (here one); the one
    pushed out is saved, and restored into a free sequence id. The restored cells land
    wherever the cache has room, so attention sums them in another order than the
    uninterrupted run: only the reuse and the cell count are checked here."""
    eng = open_engine(engines, kv_unified=True, prefix_cache_entries=1, cache_ram=256)
    a1 = ask(eng, turn1("alpha"))
    b1 = ask(eng, turn1("beta"))  # alpha's entry is pushed out of the cache: to RAM
    assert eng.stats().session_cache.ram.entries == 1
    a2 = ask(eng, turn2("alpha", text(eng, a1)))
    assert a2.cached >= len(eng.render_chat(turn1("alpha"))) + len(a1.tokens) - 8
    assert a2.cached > b1.cached + 50
    assert eng.stats().session_cache.ram.hits == 1
    assert len(a2.tokens) == 12


def test_without_the_ram_tier_the_next_turn_is_prefilled_again(engines: list[Engine]) -> None:
    eng = open_engine(engines)
    a1 = ask(eng, turn1("alpha"))
    b1 = ask(eng, turn1("beta"))
    a2 = ask(eng, turn2("alpha", text(eng, a1)))
    assert a2.cached == b1.cached  # only the system prompt the slot still shares
    assert eng.stats().session_cache.ram.budget_bytes == 0


def test_the_ram_tier_keeps_the_most_recent_sessions_within_its_budget(
    engines: list[Engine],
) -> None:
    probe = make_engine()  # not run: its tokenizer and KV size give an entry's size
    n_tokens = len(probe.render_chat(turn1("s0"))) + 11  # the prompt and 11 of 12 answers
    entry_bytes = n_tokens * probe.runtime.kv_bytes_per_cell
    probe.close()
    budget_mib = (2 * entry_bytes + entry_bytes // 2) // (1 << 20)  # room for two entries
    assert budget_mib >= 1

    eng = open_engine(engines, cache_ram=budget_mib)
    first: dict[str, Outcome] = {}
    for name in ["s0", "s1", "s2", "s3"]:
        first[name] = ask(eng, turn1(name))
        ram = eng.stats().session_cache.ram
        assert ram.bytes <= ram.budget_bytes == budget_mib << 20
    ram = eng.stats().session_cache.ram
    assert ram.entries == 2  # s1 and s2; s0, the least recently used, is gone; s3 in the slot

    s1 = ask(eng, turn2("s1", text(eng, first["s1"])))
    assert s1.cached > len(eng.render_chat(turn1("s1"))) - 8  # restored from RAM
    s0 = ask(eng, turn2("s0", text(eng, first["s0"])))
    assert s0.cached < len(eng.render_chat(turn1("s0"))) - 50  # evicted: system prompt only
    ram = eng.stats().session_cache.ram
    assert ram.hits == 1 and ram.bytes <= ram.budget_bytes


def _session_files(home: Path) -> list[Path]:
    return sorted((home / FOLDER).glob(f"*/*{SUFFIX}"))


def test_a_restart_reads_the_sessions_back_from_disk(
    engines: list[Engine], isolated_home: Path
) -> None:
    eng = open_engine(engines, cache_ram=256, cache_disk=256)
    cold = ask(eng, turn1("alpha"))
    warm = ask(eng, turn1("alpha"))  # the same prompt again: all but its last token cached
    assert warm.cached == len(eng.render_chat(turn1("alpha"))) - 1
    engines.remove(eng)
    eng.close()  # the slot's session, and the one the RAM tier holds, are written to disk
    # a decode of one token after a cached prefix may round differently from the whole
    # prompt's prefill (llama.cpp's kernels depend on the batch): then the two answers,
    # and the two sessions, differ
    sessions = 1 if cold.tokens == warm.tokens else 2
    assert len(_session_files(isolated_home)) == sessions

    again = open_engine(engines, cache_ram=256, cache_disk=256)
    assert again.stats().session_cache.disk.entries == sessions
    out = ask(again, turn1("alpha"))
    assert out.cached == warm.cached  # read from disk, not prefilled
    assert out.tokens == warm.tokens
    disk = again.stats().session_cache.disk
    assert disk.hits == 1 and disk.tokens_saved == out.cached
    assert again.stats().tokens.prompt_decoded_total == 1


def test_corrupt_and_truncated_disk_entries_are_skipped(
    engines: list[Engine], isolated_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    eng = open_engine(engines, cache_ram=256, cache_disk=256)
    cold = {name: ask(eng, turn1(name)) for name in ["alpha", "beta"]}
    engines.remove(eng)
    eng.close()  # alpha from RAM, beta from the slot
    files = _session_files(isolated_home)
    assert len(files) == 2
    corrupt, truncated = files
    data = bytearray(corrupt.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped bit in the KV rows
    corrupt.write_bytes(bytes(data))
    truncated.write_bytes(truncated.read_bytes()[:-1000])

    caplog.set_level(logging.WARNING, logger="backend.engine.session_disk_store")
    again = open_engine(engines, cache_ram=256, cache_disk=256)
    assert "truncated" in caplog.text  # found when the index is read
    assert again.stats().session_cache.disk.entries == 1
    outs = {name: ask(again, turn1(name)) for name in ["alpha", "beta"]}
    assert "checksum mismatch" in caplog.text  # found when its state is read
    # as on the first engine: alpha from scratch, beta from alpha's system prompt in the slot
    for name, out in outs.items():
        assert out.cached == cold[name].cached and out.tokens == cold[name].tokens, name
    assert _session_files(isolated_home) == []  # both deleted, never loaded
    assert again.stats().session_cache.disk.hits == 0
