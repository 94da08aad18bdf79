"""Sessions that outlive their slot: the KV of a cached prefix, copied to host RAM (and on to
disk) before its cells are given to another request, and put back when a prompt shares it.

Coding agents run more sessions than the server has slots, each with a long shared system
prompt and a context of its own that grows a little each turn. The slots (or, with
``--kv-unified``, the prefix-cache entries) keep the last few sessions; every other one
would be prefilled again from its first token at its next turn. So the admission policy
calls :meth:`SessionStore.save` just before a cached sequence's cells are overwritten or
freed, and :meth:`SessionStore.best` when it places a new request: when a saved session
shares a longer prefix with the prompt than anything in the KV cache does (by at least
``MIN_RESTORE_GAIN`` tokens), it is loaded into the request's sequence id
(``llama_state_seq_set_data``), cut to the common prefix, and only the rest is decoded.
A partial match counts: an agent that edits an earlier turn reuses everything before it.

The RAM tier (:class:`RamTier`) is least-recently-used by bytes under ``--cache-ram``. An
entry that a newer one extends (the same session, a turn later) is dropped, so a session
is one entry. What the RAM tier evicts goes to the disk tier
(:mod:`backend.engine.session_disk_store`), if any, which a restart reads back.

Saving runs on the scheduler thread (it reads the context), only when cells are about to be
lost and no entry holds them already: a copy of the sequence's cells, about 23 KB per token
for SmolLM2-135M with an f16 cache. Entries never mix models or KV settings: the cache
belongs to one engine (one model, context and layout); the disk tier keys its files by
model file, llama.cpp build and KV settings.

Caveats:

- Sliding-window attention (Gemma 2/3, ...): llama.cpp saves only the window's cells of the
  SWA layers, so an entry cut shorter than its end would lack the window before the cut.
  For such models an entry is restored only when the prompt holds all of it but its last
  token (``swa`` below); the in-slot prefix cache is unaffected (the SWA cache is full-size).
- Recurrent and hybrid models (Mamba, ...) cannot be cut back to a prefix: the store is off.
- Speculative decoding's draft model keeps its own KV and follows each sequence by common
  prefix (:mod:`backend.engine.speculative.draft_model`): after a restore it finds its
  sequence differs and decodes the tokens it lacks with the draft model. That costs one
  draft prefill of the session, which is the accepted price; the served model's output is
  unaffected.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from backend.engine.sequence import common_prefix
from backend.settings.cache_budgets import MIB

log = logging.getLogger(__name__)

# A restore copies the whole entry: worth it when it saves at least this many tokens of
# prefill over what the KV cache already holds.
MIN_RESTORE_GAIN = 32


class StateIo(Protocol):
    """What the store needs of the KV cache (:class:`~backend.engine.kv_cache.KvCache`)."""

    def length(self, seq_id: int) -> int: ...

    def save_seq(self, seq_id: int) -> np.ndarray | None: ...

    def restore_seq(self, seq_id: int, state: np.ndarray, n_cells: int) -> bool: ...


@dataclass(eq=False)
class SessionEntry:
    """A saved sequence: its tokens and llama.cpp's state bytes for exactly those cells."""

    tokens: np.ndarray  # int32
    state: np.ndarray  # uint8
    on_disk: bool = False  # a disk entry holds the same tokens: no need to write it again

    @property
    def nbytes(self) -> int:
        return int(self.tokens.nbytes + self.state.nbytes)


@dataclass
class TierCounters:
    """What one tier did since the engine started."""

    hits: int = 0  # requests restored from this tier
    misses: int = 0  # requests this tier was asked for and did not serve
    tokens_saved: int = 0  # prompt tokens restored from this tier instead of decoded


@dataclass(frozen=True)
class TierSnapshot:
    entries: int
    bytes: int
    budget_bytes: int
    hits: int
    misses: int
    tokens_saved: int


def _extends(longer: np.ndarray, shorter: np.ndarray) -> bool:
    """``longer`` starts with all of ``shorter``."""
    return len(longer) >= len(shorter) and common_prefix(longer, shorter) == len(shorter)


class RamTier:
    """Saved sessions in host RAM, least recently used first, under a byte budget."""

    def __init__(
        self, budget_bytes: int, on_evict: Callable[[SessionEntry], None] | None = None
    ) -> None:
        self.budget_bytes = budget_bytes
        self.bytes = 0
        self.counters = TierCounters()
        self._entries: OrderedDict[int, SessionEntry] = OrderedDict()
        self._next_id = 0
        self._on_evict = on_evict

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[SessionEntry]:
        """Least recently used first."""
        return list(self._entries.values())

    def holds(self, tokens: np.ndarray) -> bool:
        """An entry holds all of ``tokens`` (so saving them would add nothing); it becomes
        the most recently used."""
        for key, entry in self._entries.items():
            if _extends(entry.tokens, tokens):
                self._entries.move_to_end(key)
                return True
        return False

    def best(self, target: np.ndarray, limit: int) -> tuple[SessionEntry | None, int]:
        """The entry sharing the longest prefix with ``target`` (at most ``limit`` tokens)."""
        best, best_n = None, 0
        for entry in self._entries.values():
            n = min(common_prefix(target, entry.tokens), limit)
            if n > best_n:
                best, best_n = entry, n
        return best, best_n

    def touch(self, entry: SessionEntry) -> None:
        for key, held in self._entries.items():
            if held is entry:
                self._entries.move_to_end(key)
                return

    def put(self, entry: SessionEntry) -> None:
        """Keep ``entry`` as the most recently used; entries it extends are dropped (they
        are the same session, earlier), and the least recently used go past the budget."""
        for key in [k for k, e in self._entries.items() if _extends(entry.tokens, e.tokens)]:
            self.bytes -= self._entries.pop(key).nbytes
        if entry.nbytes > self.budget_bytes:
            self._evicted(entry)  # larger than the whole tier: straight to disk, if any
            return
        self._entries[self._next_id] = entry
        self._next_id += 1
        self.bytes += entry.nbytes
        while self.bytes > self.budget_bytes:
            _, old = self._entries.popitem(last=False)
            self.bytes -= old.nbytes
            self._evicted(old)

    def take_all(self) -> list[SessionEntry]:
        """Empty the tier; its entries, least recently used first."""
        entries = list(self._entries.values())
        self._entries.clear()
        self.bytes = 0
        return entries

    def _evicted(self, entry: SessionEntry) -> None:
        if self._on_evict is not None and not entry.on_disk:
            self._on_evict(entry)

    def snapshot(self) -> TierSnapshot:
        c = self.counters
        return TierSnapshot(
            len(self._entries), self.bytes, self.budget_bytes, c.hits, c.misses, c.tokens_saved
        )


class DiskTier(Protocol):
    """The disk tier as the store uses it
    (:class:`~backend.engine.session_disk_store.DiskStore`)."""

    counters: TierCounters

    def best(self, target: np.ndarray, limit: int) -> tuple[object | None, int]: ...

    def load(self, record: object) -> SessionEntry | None: ...

    def holds(self, tokens: np.ndarray) -> bool: ...

    def write(self, entry: SessionEntry) -> None: ...

    def close(self, timeout: float) -> None: ...

    def snapshot(self) -> TierSnapshot: ...


@dataclass
class Match:
    """A saved session that shares ``n`` tokens with a prompt, and the tier it came from."""

    tier: str  # "ram" or "disk"
    n: int
    entry: SessionEntry


@dataclass
class SaveTimings:
    """Where the store's time on the scheduler thread went (for the report and tests)."""

    saves: int = 0
    save_s: float = 0.0
    save_bytes: int = 0
    restores: int = 0
    restore_s: float = 0.0
    restore_bytes: int = 0
    disk_loads: int = 0
    disk_load_s: float = 0.0


class SessionStore:
    """The RAM tier and, optionally, the disk tier behind it, for one engine."""

    def __init__(
        self,
        kv: StateIo,
        *,
        ram_budget_bytes: int,
        disk: DiskTier | None = None,
        swa: bool = False,
    ) -> None:
        self.kv = kv
        self.disk = disk
        self.swa = swa
        self.ram = RamTier(ram_budget_bytes, on_evict=disk.write if disk is not None else None)
        self.timings = SaveTimings()
        self._last_read: tuple[object, SessionEntry] | None = None

    # ---- saving -----------------------------------------------------------------
    def save(self, seq_id: int, tokens: np.ndarray) -> None:
        """``seq_id``'s cells (which hold ``tokens``) are about to be lost: keep a copy,
        unless an entry already holds them."""
        n = min(len(tokens), self.kv.length(seq_id))
        if n < MIN_RESTORE_GAIN:
            return  # never worth a restore
        tokens = np.array(tokens[:n], dtype=np.int32)  # a copy: the caller's array moves on
        if self.ram.holds(tokens):
            return
        t = time.perf_counter()
        state = self.kv.save_seq(seq_id)
        if state is None:
            log.warning("could not save the KV of sequence %d (%d tokens)", seq_id, n)
            return
        entry = SessionEntry(tokens, state)
        self.timings.saves += 1
        self.timings.save_s += time.perf_counter() - t
        self.timings.save_bytes += entry.nbytes
        if self.ram.budget_bytes > 0:
            self.ram.put(entry)
        elif self.disk is not None and not self.disk.holds(tokens):
            self.disk.write(entry)

    # ---- restoring --------------------------------------------------------------
    def best(self, target: np.ndarray, limit: int, have: int) -> Match | None:
        """The saved session worth restoring for a prompt ``target`` whose best prefix in
        the KV cache is ``have`` tokens (``limit``: most tokens reusable), or None. A disk
        entry is read here, before the request takes a sequence id, so that one that
        cannot be read leaves the request its prefix in the KV cache; it then moves to RAM."""
        entry, n = self.ram.best(target, limit)
        if entry is not None and self._usable(entry.tokens, n, have):
            self.ram.touch(entry)  # a save before the restore must not evict it
            return Match("ram", n, entry)
        if self.disk is None:
            return None
        record, n_disk = self.disk.best(target, limit)
        tokens = getattr(record, "tokens", None)
        if record is None or not isinstance(tokens, np.ndarray) or n_disk <= n:
            return None
        if not self._usable(tokens, n_disk, have):
            return None
        if self._last_read is not None and self._last_read[0] is record:
            return Match("disk", n_disk, self._last_read[1])  # read for a request that waited
        t = time.perf_counter()
        loaded = self.disk.load(record)
        self.timings.disk_loads += 1
        self.timings.disk_load_s += time.perf_counter() - t
        if loaded is None:
            return None
        self._last_read = (record, loaded)
        if self.ram.budget_bytes > 0:
            self.ram.put(loaded)  # promoted: the next turn finds it in RAM
        return Match("disk", n_disk, loaded)

    def _usable(self, tokens: np.ndarray, n: int, have: int) -> bool:
        if n - have < MIN_RESTORE_GAIN:
            return False
        # SWA layers saved only their window: never cut an entry back (see the docstring)
        return not self.swa or n >= len(tokens) - 1

    def restore(self, seq_id: int, match: Match) -> int:
        """Load ``match`` into ``seq_id`` (its cells are then the whole entry, to be cut to
        the common prefix by the caller); the tokens it gives, or 0 when llama.cpp could not
        load it (``seq_id`` is then empty)."""
        entry = match.entry
        self._last_read = None  # used now: RAM holds it, if it has room
        t = time.perf_counter()
        ok = self.kv.restore_seq(seq_id, entry.state, len(entry.tokens))
        self.timings.restores += 1
        self.timings.restore_s += time.perf_counter() - t
        self.timings.restore_bytes += entry.nbytes
        if not ok:
            log.warning(
                "could not load a saved session of %d tokens into sequence %d: prefilling",
                len(entry.tokens),
                seq_id,
            )
            return 0
        self.ram.touch(entry)
        return match.n

    def record(self, match: Match | None, restored: int) -> None:
        """Count one admitted request: which tier served it, if any."""
        if match is not None and restored > 0:
            tier = self.ram.counters if match.tier == "ram" else self._disk_counters()
            tier.hits += 1
            tier.tokens_saved += restored
            if match.tier == "disk":
                self.ram.counters.misses += 1
            return
        self.ram.counters.misses += 1
        if self.disk is not None:
            self.disk.counters.misses += 1

    def _disk_counters(self) -> TierCounters:
        assert self.disk is not None
        return self.disk.counters

    def reset_counters(self) -> None:
        self.ram.counters = TierCounters()
        if self.disk is not None:
            self.disk.counters = TierCounters()

    # ---- shutdown ---------------------------------------------------------------
    def close(self, timeout: float = 60.0) -> None:
        """Write what RAM holds to disk (if a disk tier), then wait for the writer."""
        t = self.timings
        if t.saves or t.restores:
            log.info(
                "session cache: %d saves (%.0f MiB, %.0f ms), %d restores (%.0f ms), "
                "%d reads from disk (%.0f ms)",
                t.saves,
                t.save_bytes / MIB,
                1000 * t.save_s,
                t.restores,
                1000 * t.restore_s,
                t.disk_loads,
                1000 * t.disk_load_s,
            )
        if self.disk is None:
            self.ram.take_all()
            return
        for entry in reversed(self.ram.take_all()):  # the most recent first
            if not entry.on_disk and not self.disk.holds(entry.tokens):
                self.disk.write(entry)  # the writer checks again: a queued twin is skipped
        self.disk.close(timeout)

    def snapshot(self) -> tuple[TierSnapshot, TierSnapshot | None]:
        return self.ram.snapshot(), self.disk.snapshot() if self.disk is not None else None
