"""The KV cell count that :class:`KvCache` keeps beside llama.cpp's memory."""

from __future__ import annotations

from backend.engine.kv_cache import KvAccounting


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
