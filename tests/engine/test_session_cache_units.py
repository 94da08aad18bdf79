"""The session tiers without a model: LRU by bytes, one entry per session, the disk format.

The model-backed behaviour (restores that continue token for token, restarts) is in
tests/engine/test_session_cache.py; here the bookkeeping runs in milliseconds.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from backend.engine.kv_cache import KvAccounting
from backend.engine.session_cache import RamTier, SessionEntry, SessionStore
from backend.engine.session_disk_store import SUFFIX, DiskStore

KEY = {"format": 1, "model": "test", "n_ctx_seq": 1024}


def entry(tokens: list[int], state_bytes: int = 1000) -> SessionEntry:
    state = np.arange(state_bytes, dtype=np.int64).astype(np.uint8)
    return SessionEntry(np.asarray(tokens, dtype=np.int32), state)


def seq(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


def test_ram_evicts_the_least_recently_used_by_bytes() -> None:
    evicted: list[SessionEntry] = []
    size = entry(seq(0, 50)).nbytes
    ram = RamTier(budget_bytes=2 * size + size // 2, on_evict=evicted.append)
    a, b, c = entry(seq(0, 50)), entry(seq(100, 50)), entry(seq(200, 50))
    ram.put(a)
    ram.put(b)
    assert ram.best(np.asarray(seq(0, 60), np.int32), 59) == (a, 50)
    ram.touch(a)  # b is now the least recently used
    ram.put(c)
    assert evicted == [b] and ram.entries() == [a, c]
    assert ram.bytes == a.nbytes + c.nbytes <= ram.budget_bytes


def test_a_later_turn_replaces_its_session_and_an_oversized_entry_skips_ram() -> None:
    evicted: list[SessionEntry] = []
    ram = RamTier(budget_bytes=5000, on_evict=evicted.append)
    turn1 = entry(seq(0, 40))
    ram.put(turn1)
    assert ram.holds(np.asarray(seq(0, 30), np.int32))  # a prefix of an entry adds nothing
    turn2 = entry(seq(0, 60))
    ram.put(turn2)
    assert ram.entries() == [turn2] and evicted == []  # the earlier turn is dropped
    huge = entry(seq(500, 10), state_bytes=10_000)
    ram.put(huge)
    assert evicted == [huge] and ram.entries() == [turn2]  # straight to the next tier


def test_the_store_saves_once_and_restores_with_exact_accounting() -> None:
    kv = KvAccounting(4096)
    kv.add_cells(0, 300)
    store = SessionStore(kv, ram_budget_bytes=1 << 20)
    tokens = np.asarray(seq(1000, 300), np.int32)
    store.save(0, tokens)
    store.save(0, tokens[:200])  # already held: no second copy
    assert len(store.ram) == 1 and store.timings.saves == 1
    kv.rm(0)
    prompt = np.asarray([*seq(1000, 250), *seq(9000, 20)], np.int32)
    match = store.best(prompt, len(prompt) - 1, have=100)
    assert match is not None and match.tier == "ram" and match.n == 250
    assert store.best(prompt, len(prompt) - 1, have=230) is None  # a gain under 32 tokens
    assert store.restore(2, match) == 250
    assert kv.length(2) == 300 and kv.used == 300  # the whole entry, cut by the caller
    store.record(match, 250)
    store.record(None, 0)
    ram, disk = store.snapshot()
    assert (ram.hits, ram.misses, ram.tokens_saved) == (1, 1, 250) and disk is None


def test_a_sliding_window_model_restores_whole_entries_only() -> None:
    kv = KvAccounting(4096)
    kv.add_cells(0, 300)
    store = SessionStore(kv, ram_budget_bytes=1 << 20, swa=True)
    store.save(0, np.asarray(seq(1000, 300), np.int32))
    partial = np.asarray([*seq(1000, 250), *seq(9000, 20)], np.int32)
    assert store.best(partial, len(partial) - 1, have=0) is None
    longer = np.asarray([*seq(1000, 300), *seq(9000, 20)], np.int32)
    match = store.best(longer, len(longer) - 1, have=0)
    assert match is not None and match.n == 300


def _files(root: Path) -> list[Path]:
    return sorted(root.glob(f"*/*{SUFFIX}"))


def test_disk_entries_survive_a_reopen_and_corrupt_ones_are_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    disk = DiskStore(tmp_path, KEY, budget_bytes=1 << 20)
    disk.write(entry(seq(0, 40)))
    disk.write(entry(seq(100, 40)))
    disk.write(entry(seq(0, 60)))  # the first session, a turn later: replaces it
    disk.close(10)
    assert len(_files(tmp_path)) == 2

    again = DiskStore(tmp_path, KEY, budget_bytes=1 << 20)
    record, n = again.best(np.asarray(seq(0, 80), np.int32), 79)
    assert n == 60
    loaded = again.load(record)
    assert loaded is not None and loaded.on_disk
    assert np.array_equal(loaded.tokens, seq(0, 60))
    assert np.array_equal(loaded.state, entry(seq(0, 60)).state)

    other = DiskStore(tmp_path, {**KEY, "n_ctx_seq": 2048}, budget_bytes=1 << 20)
    assert other.best(np.asarray(seq(0, 80), np.int32), 79) == (None, 0)  # another key

    path = record.path  # type: ignore[union-attr]
    data = bytearray(path.read_bytes())
    data[-10] ^= 0x01
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, logger="backend.engine.session_disk_store")
    assert again.load(record) is None
    assert "checksum mismatch" in caplog.text and not path.exists()
    for store in (again, other):
        store.close(10)


def test_a_truncated_entry_is_skipped_when_the_index_is_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    disk = DiskStore(tmp_path, KEY, budget_bytes=1 << 20)
    disk.write(entry(seq(0, 40)))
    disk.close(10)
    (path,) = _files(tmp_path)
    path.write_bytes(path.read_bytes()[:-1])
    caplog.set_level(logging.WARNING, logger="backend.engine.session_disk_store")
    again = DiskStore(tmp_path, KEY, budget_bytes=1 << 20)
    assert "truncated" in caplog.text and again.snapshot().entries == 0
    again.close(10)


def test_the_disk_budget_evicts_the_oldest_files(tmp_path: Path) -> None:
    one = entry(seq(0, 40)).nbytes + 400  # an entry with its header
    disk = DiskStore(tmp_path, KEY, budget_bytes=2 * one)
    for k in range(4):
        disk.write(entry(seq(1000 * k, 40)))
        assert disk.flush(10)
    disk.close(10)
    files = _files(tmp_path)
    assert sum(p.stat().st_size for p in files) <= 2 * one
    assert disk.best(np.asarray(seq(3000, 50), np.int32), 49)[1] == 40  # the newest stays
    assert disk.best(np.asarray(seq(0, 50), np.int32), 49) == (None, 0)  # the oldest went


def test_a_write_error_costs_the_entry_not_the_caller(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Any OSError (a full disk, a folder gone): one log line, the entry dropped."""
    disk = DiskStore(tmp_path / "cache", KEY, budget_bytes=1 << 20)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    disk.dir = blocker / "entries"  # every open() there fails with NotADirectoryError
    caplog.set_level(logging.WARNING, logger="backend.engine.session_disk_store")
    disk.write(entry(seq(0, 40)))
    assert disk.flush(10)
    assert "could not write" in caplog.text
    assert disk.snapshot().entries == 0
    disk.write(entry(seq(100, 40)))  # the writer lives on
    disk.close(10)
    assert caplog.text.count("could not write") == 2
