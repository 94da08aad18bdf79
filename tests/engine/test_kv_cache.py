"""The KV cell count, alone and as :class:`KvCache` keeps it beside llama.cpp's memory."""

from __future__ import annotations

from collections.abc import Iterator

import llama_cpp
import pytest

from backend.bench.prompts import request_prompt, shared_prefix
from backend.engine.engine import Engine
from backend.engine.kv_cache import KvAccounting
from backend.engine.request_types import EngineEvent, SamplingParams
from backend.settings.engine_settings import EngineSettings


def test_kv_accounting_shares_copied_prefixes() -> None:
    kv = KvAccounting(1000)
    kv.add_cells(0, 100)
    kv.copy_prefix(0, 1, 60)  # splits seq 0's segment
    kv.add_cells(1, 10)
    assert kv.used == 110
    kv.copy_prefix(1, 2, 30)
    assert kv.used == 110
    kv.rm(0)  # cells 60..99 of seq 0 are freed, 0..59 still shared
    assert kv.used == 70
    kv.keep(1, 20)
    assert kv.used == 30  # 0..29 held by seq 2, seq 1 keeps 0..19
    kv.rm(2)
    assert kv.used == 20 and kv.length(1) == 20
    kv.rm(1)
    assert kv.used == 0


def test_a_copied_stream_is_its_own_and_replaces_what_the_slot_held() -> None:
    kv = KvAccounting(4 * 512)
    kv.add_cells(0, 300)
    kv.add_cells(1, 50)
    kv.copy_stream(0, 1)
    assert kv.length(1) == 300 and kv.used == 600
    kv.keep(1, 120)
    assert kv.used == 420 and kv.length(0) == 300
    kv.rm(0)
    assert kv.used == 120


@pytest.fixture(params=[False, True], ids=["unified", "per-slot"])
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    settings = EngineSettings(
        ctx_size=4 * 1024, parallel=4, kv_unified=not request.param, prefix_cache_entries=2
    )
    eng = Engine(settings)  # not started: the test drives the scheduler
    yield eng
    eng.close()


def assert_agrees_with_llama(eng: Engine) -> None:
    """Every sequence id holds in llama.cpp exactly the positions the count says."""
    kv, memory = eng.scheduler.kv, eng.runtime.memory
    for seq_id in range(eng.runtime.n_seq_max):
        n = kv.length(seq_id)
        assert llama_cpp.llama_memory_seq_pos_max(memory, seq_id) == n - 1, seq_id
        assert llama_cpp.llama_memory_seq_pos_min(memory, seq_id) == (0 if n else -1), seq_id


def test_the_count_follows_llama_cpp_through_copies_trims_and_evictions(engine: Engine) -> None:
    """Shared prefixes copied from running and cached sequences, finished sequences
    trimmed into cache entries, entries evicted and (per slot) moved between slots."""
    sched = engine.scheduler
    system = shared_prefix(300, "kv")
    events: list[EngineEvent] = []

    def submit(text: str, max_tokens: int = 3) -> None:
        engine.submit(
            engine.tokenize(text),
            max_tokens=max_tokens,
            sampling=SamplingParams(temperature=0.0, ignore_eos=True),
            sink=events.append,
        )

    def run_until_idle() -> None:
        while True:
            sched.step_once()
            sched.deliver_events()
            assert_agrees_with_llama(engine)
            if not sched.running:
                return

    submit(f"{system}\n\n{request_prompt(40, 'first')}", max_tokens=6)
    sched.step_once()
    submit(f"{system}\n\n{request_prompt(40, 'second')}")  # copies from the running one
    run_until_idle()
    for k in range(4):  # new prefixes push the older ones out of the cache
        submit(f"{shared_prefix(200, f'other{k}')}\n\n{request_prompt(30, str(k))}")
        submit(f"{system}\n\n{request_prompt(40, f'again{k}')}")
        run_until_idle()
    assert sched.stats.prefix_hits >= 5
    assert sched.kv.used > 0
    for seq_id in range(engine.runtime.n_seq_max):  # KvCache's own calls, directly
        if sched.kv.length(seq_id) > 10:
            sched.kv.keep(seq_id, 10)
            assert_agrees_with_llama(engine)
            sched.kv.rm(seq_id)
            assert_agrees_with_llama(engine)
