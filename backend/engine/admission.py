"""Admission: which waiting request runs next, in which sequence id, from which cached prefix.

Prefix sharing: a new prompt that shares a prefix with KV already held (a running
sequence or a finished one kept in the prefix cache) gets those cells by a copy
(``llama_memory_seq_cp``) instead of recomputing them. When several requests with the
same long system prompt arrive together, the first one prefills it and the others wait
until it is computed, then copy it: N requests, one prefill. That prefill pauses where
the prompts branch (``branch_at``, which the step planner honours), so the next step
holds every request's own suffix.

There is one policy per KV layout. :class:`UnifiedAdmission`: one KV cache shared by
every sequence id; finished sequences stay as prefix-cache entries up to a count, and
any new request may evict them. :class:`PerSlotAdmission` (the default layout): every
sequence id is a slot with its own KV stream (llama.cpp's non-unified cache, as
llama-server runs with an explicit ``-np``); idle slots keep their last prompt as the
prefix cache. A new request takes the lowest idle slot, so the running slots stay
contiguous and llama.cpp keeps each step in one micro-batch. If that slot still caches
something, the prefix is first moved to a spare slot. A shared prefix held by another
slot is copied whole-stream, then trimmed. When no slot is empty, a request that
extends a cached slot's prefix (a conversation's next turn) runs in that slot, wherever
it is, rather than push another prefix out.

With a session store (:mod:`backend.engine.session_cache`, ``--cache-ram``), a cached
sequence whose cells are about to be overwritten or freed is first copied to host RAM
(:meth:`AdmissionPolicy._save_cached`), and a request whose prompt shares a longer prefix
with a saved session than with anything in the KV cache gets that session loaded into its
sequence id and cut to the common prefix.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections import OrderedDict, deque
from enum import Enum

import numpy as np

from backend.engine.kv_cache import KvAccounting
from backend.engine.media.media_span import whole_media_prefix
from backend.engine.sequence import CacheEntry, Sequence, common_prefix
from backend.engine.session_cache import Match, SessionEntry, SessionStore

# Wait for a running prefill rather than recompute, when it would save this many tokens.
MIN_SHARED_PREFIX = 32


class Admission(Enum):
    """What became of one waiting request."""

    ADMITTED = "admitted"  # it runs from the next step
    DEFER = "defer"  # it waits for a running prefill's shared prefix, keeping its slot
    WAIT = "wait"  # no room now: it and every request behind it wait (FIFO)


class AdmissionPolicy(ABC):
    """The sequence ids of one context, each free, running, or keeping a finished
    sequence's prefix (the prefix cache), and which waiting request gets which."""

    def __init__(self, kv: KvAccounting, *, n_seq_max: int, parallel: int) -> None:
        self.kv = kv
        self.parallel = parallel
        self.cache: OrderedDict[int, CacheEntry] = OrderedDict()
        self.free_ids = list(range(n_seq_max - 1, -1, -1))
        self._admit_counter = 0
        self.sessions: SessionStore | None = None  # set by the scheduler (--cache-ram)

    def admit_waiting(self, waiting: deque[Sequence], running: list[Sequence]) -> list[Sequence]:
        """Admit requests from the front of ``waiting`` into ``running`` while fewer than
        ``parallel`` run; returns those admitted. Deferred requests keep their place and
        their slot: later ones take only the slots left over."""
        admitted: list[Sequence] = []
        if not waiting or len(running) >= self.parallel:
            return admitted
        deferred: list[Sequence] = []
        while waiting and len(running) + len(deferred) < self.parallel:
            seq = waiting.popleft()
            outcome = self.admit(seq, running)
            if outcome is Admission.ADMITTED:
                admitted.append(seq)
            elif outcome is Admission.DEFER:
                deferred.append(seq)
            else:
                waiting.appendleft(seq)  # no room: keep FIFO order
                break
        waiting.extendleft(reversed(deferred))
        return admitted

    def admit(self, seq: Sequence, running: list[Sequence]) -> Admission:
        """Give ``seq`` a sequence id and its cached prefix, and append it to ``running``;
        or say why not."""
        target = np.asarray(seq.tokens, dtype=np.int32)
        matched, src, src_cached = self._best_source(seq, target, running)
        matched = whole_media_prefix(seq.media, matched)
        stored = self._stored_match(seq, target, matched)
        if stored is not None and seq.media:  # a saved session cut inside an image: less
            n = whole_media_prefix(seq.media, stored.n)
            stored = dataclasses.replace(stored, n=n) if n > matched else None
        available = stored.n if stored is not None else matched
        if self._worth_waiting(seq, target, available, running):
            return Admission.DEFER
        if stored is None:
            outcome = self._place(seq, matched, src, src_cached, running)
        else:  # a fresh sequence id, then the saved session loaded into it
            outcome = self._place(seq, 0, -1, False, running)
        if outcome is Admission.ADMITTED:
            self.kv.bind(seq.seq_id, seq.media)  # before a restore cuts it to its prefix
            if stored is not None:
                matched = self._restore(seq.seq_id, stored)
            counted = seq.preempted == 0 and seq.request.prompt_logprobs is None
            if self.sessions is not None and counted:
                self.sessions.record(stored, matched if stored is not None else 0)
            seq.n_past = matched
            if seq.preempted == 0:
                seq.cached_tokens = matched
            self._admit_counter += 1
            seq.admit_order = self._admit_counter
            running.append(seq)
        return outcome

    def _stored_match(self, seq: Sequence, target: np.ndarray, matched: int) -> Match | None:
        """A saved session that shares a longer prefix with ``seq``'s prompt than the
        ``matched`` tokens the KV cache holds, by enough to be worth a restore."""
        if self.sessions is None or seq.request.prompt_logprobs is not None:
            return None
        return self.sessions.best(target, len(seq.tokens) - 1, matched)

    def _restore(self, seq_id: int, match: Match) -> int:
        """Load ``match`` into the empty ``seq_id`` and cut it to the shared prefix; the
        tokens it gives (0 when there was no room for it or it could not be loaded)."""
        assert self.sessions is not None
        if not self._room_for(seq_id, len(match.entry.tokens)):
            return 0
        restored = self.sessions.restore(seq_id, match)
        if restored > 0:
            self.kv.keep(seq_id, restored)
        return restored

    def _room_for(self, seq_id: int, n_cells: int) -> bool:
        """Whether ``seq_id`` can take ``n_cells`` cells now (before they are cut back)."""
        return n_cells <= self.kv.free

    def _save_cached(self, seq_id: int) -> None:
        """The cache entry in ``seq_id`` is about to lose cells: save it first."""
        entry = self.cache.get(seq_id)
        if entry is not None and self.sessions is not None:
            self.sessions.save(seq_id, entry.tokens)

    @abstractmethod
    def _place(
        self, seq: Sequence, matched: int, src: int, src_cached: bool, running: list[Sequence]
    ) -> Admission:
        """Set ``seq.seq_id`` to a sequence id holding the first ``matched`` tokens of the
        prompt, taken from ``src`` (a cache entry when ``src_cached``), if there is room."""

    def _best_source(
        self, seq: Sequence, target: np.ndarray, running: list[Sequence]
    ) -> tuple[int, int, bool]:
        """(matched tokens, source seq id or -1, source is a cache entry)."""
        if seq.request.prompt_logprobs is not None:
            return 0, -1, False  # every prompt token is scored: none comes from the cache
        limit = len(seq.tokens) - 1  # at least one token must be decoded for logits
        best, best_src, best_cached = 0, -1, False
        for entry in self.cache.values():
            n = min(common_prefix(target, entry.tokens), limit)
            if n > best:
                best, best_src, best_cached = n, entry.seq_id, True
        for run in running:
            n = min(common_prefix(target, run.prompt_array), limit, run.n_past)
            if n > best:
                best, best_src, best_cached = n, run.seq_id, False
        return best, best_src, best_cached

    def _worth_waiting(
        self, seq: Sequence, target: np.ndarray, available: int, running: list[Sequence]
    ) -> bool:
        """A running prefill will soon hold a longer shared prefix than is available now.
        If so, that prefill's ``branch_at`` is set to where the prompts part, so that it
        pauses there and the waiting request joins in the next step."""
        if seq.request.prompt_logprobs is not None:
            return False
        for run in running:
            if run.n_past >= run.n_prompt:
                continue
            limit = len(seq.tokens) - 1
            future = whole_media_prefix(
                seq.media, min(common_prefix(target, run.prompt_array), limit)
            )
            gain = future - available
            # wait for a long shared prefix, or for an identical prompt (n > 1, retries)
            if future > run.n_past and (
                gain >= MIN_SHARED_PREFIX or (future == limit and gain > 0)
            ):
                if not run.n_past < run.branch_at <= future:
                    run.branch_at = future
                return True
        return False

    @abstractmethod
    def _keeps(self, seq: Sequence) -> bool:
        """Whether a finished ``seq``'s decoded KV stays as a prefix-cache entry."""

    def retire(self, seq: Sequence) -> None:
        """Keep the KV of the tokens a finished or cancelled sequence decoded as a
        prefix-cache entry (a stopped answer's conversation is asked again), or free its
        sequence id when there is nothing to keep or no cache."""
        seq.n_past = whole_media_prefix(seq.media, seq.n_past)  # not between two pieces
        if seq.shift_keep is not None:  # shifted cells are not a prefill of their tokens
            seq.n_past = min(seq.n_past, seq.shift_keep)
        if seq.n_past > 0 and self._keeps(seq):
            self.kv.keep(seq.seq_id, seq.n_past)
            entry = CacheEntry(seq.seq_id, np.asarray(seq.tokens[: seq.n_past], dtype=np.int32))
            self.cache[seq.seq_id] = entry
            self._trim_cache(seq.seq_id)
        else:
            if seq.n_past > 0 and self.sessions is not None:
                self.sessions.save(seq.seq_id, np.asarray(seq.tokens[: seq.n_past], np.int32))
            self.release(seq.seq_id)
        seq.seq_id = -1

    @abstractmethod
    def _trim_cache(self, newest: int) -> None:
        """Evict entries past the cache's size, never ``newest``."""

    def release(self, seq_id: int) -> None:
        """Free ``seq_id`` and its KV."""
        self.kv.rm(seq_id)
        self.free_ids.append(seq_id)

    def evict_cached(self, protect: frozenset[int] = frozenset()) -> bool:
        """Free the least recently used prefix-cache entry not in ``protect``."""
        for seq_id in self.cache:
            if seq_id not in protect:
                self._save_cached(seq_id)
                self.cache.pop(seq_id)
                self.release(seq_id)
                return True
        return False

    def save_all_cached(self) -> None:
        """Save every cache entry (the engine is closing and the disk tier keeps them)."""
        if self.sessions is None:
            return
        for seq_id in reversed(self.cache):  # the most recently used first
            self._save_cached(seq_id)

    def preempt_youngest(self, running: list[Sequence]) -> Sequence | None:
        """Take the last admitted of several running sequences out of ``running`` and free
        its KV; it is to be recomputed from its first token. None when one runs alone."""
        if len(running) <= 1:
            return None
        victim = max(running, key=lambda s: s.admit_order)
        running.remove(victim)
        self.release(victim.seq_id)
        victim.seq_id = -1
        victim.n_past = 0
        victim.branch_at = 0
        victim.shift_due = False
        victim.preempted += 1
        return victim


class UnifiedAdmission(AdmissionPolicy):
    """One KV cache for every sequence id; up to ``cache_entries`` finished sequences are
    kept for their prefixes, and a new request evicts them when it needs the room."""

    def __init__(
        self, kv: KvAccounting, *, n_seq_max: int, parallel: int, cache_entries: int
    ) -> None:
        super().__init__(kv, n_seq_max=n_seq_max, parallel=parallel)
        self.cache_entries = cache_entries
        # cells kept free beyond the prompts in flight, so that running sequences can grow
        self.watermark = max(8, min(256, kv.n_cells // 32))

    def _place(
        self, seq: Sequence, matched: int, src: int, src_cached: bool, running: list[Sequence]
    ) -> Admission:
        need = len(seq.tokens) - matched
        protect = frozenset({src} if src >= 0 else ())
        pending = sum(s.remaining for s in running)
        while self.kv.free - pending - need < self.watermark:
            if not self.evict_cached(protect):
                if running:
                    return Admission.WAIT
                break  # alone: admission control already checked it fits in n_ctx
        if not self.free_ids and not (src_cached and src in self.cache):
            self.evict_cached(protect)
        if self.free_ids:
            seq.seq_id = self.free_ids.pop()
            if matched > 0:
                self.kv.copy_prefix(src, seq.seq_id, matched)
        elif src_cached and src in self.cache:
            # adopt the cache entry itself: keep its first `matched` cells
            if matched < len(self.cache[src].tokens):
                self._save_cached(src)
            self.cache.pop(src)
            seq.seq_id = src
            self.kv.keep(src, matched)
        else:
            return Admission.WAIT
        if src_cached and src in self.cache:
            self.cache.move_to_end(src)
        return Admission.ADMITTED

    def _room_for(self, seq_id: int, n_cells: int) -> bool:
        while self.kv.free < n_cells:
            if not self.evict_cached():
                return False
        return True

    def _keeps(self, seq: Sequence) -> bool:
        return self.cache_entries > 0

    def _trim_cache(self, newest: int) -> None:
        while len(self.cache) > self.cache_entries:
            self.evict_cached(frozenset({newest}))


class PerSlotAdmission(AdmissionPolicy):
    """A KV stream per sequence id (slot); every idle slot keeps its prefix."""

    def _place(
        self, seq: Sequence, matched: int, src: int, src_cached: bool, running: list[Sequence]
    ) -> Admission:
        dst = min([*self.free_ids, *self.cache], default=-1)
        if dst < 0:
            return Admission.WAIT
        if (
            matched >= MIN_SHARED_PREFIX
            and src in self.cache
            and dst in self.cache
            and not self.free_ids
        ):
            # Moving dst's prefix away would overwrite a third cached slot: serve the
            # request from the slot that matches, where its prefix already is.
            dst = src
        cached = self.cache.get(dst)
        if cached is not None and not (dst == src and matched >= len(cached.tokens)):
            # the new prompt doesn't just extend what dst caches: keep that elsewhere
            self._move_cached_slot(dst, avoid=src, kept=matched if dst == src else 0)
        if matched > 0 and src != dst:
            self.kv.copy_stream(src, dst)
        self.kv.keep(dst, matched)
        if src in self.cache:
            self.cache.move_to_end(src)
        self._claim(dst)
        seq.seq_id = dst
        return Admission.ADMITTED

    def _move_cached_slot(self, slot: int, *, avoid: int, kept: int) -> None:
        """Keep the prefix cached in ``slot`` by copying it to an empty slot before ``slot``
        is reused, where its first ``kept`` tokens stay. With no empty slot it goes over the
        least recently used cached one, if that holds fewer tokens than would be lost."""
        tokens = self.cache[slot].tokens
        spare = [s for s in sorted(self.free_ids, reverse=True) if s != avoid]
        if not spare:
            spare = [s for s in self.cache if s not in (slot, avoid)]
            if not spare or len(self.cache[spare[0]].tokens) >= len(tokens) - kept:
                self._save_cached(slot)  # its tokens past `kept` are about to go
                return
            self._save_cached(spare[0])  # about to be overwritten
        to = spare[0]
        self.kv.copy_stream(slot, to)
        self._claim(to)
        self.cache[to] = CacheEntry(to, tokens)

    def _claim(self, slot: int) -> None:
        """``slot`` has a new owner: it is no longer free or cached."""
        self.cache.pop(slot, None)
        if slot in self.free_ids:
            self.free_ids.remove(slot)

    def _keeps(self, seq: Sequence) -> bool:
        return True

    def _trim_cache(self, newest: int) -> None:
        """The idle slots are the cache: no count limit."""

    # ---- slot actions (POST /slots/{id}, between steps, on an idle slot) ------------------
    def erase_slot(self, slot: int) -> int:
        """Empty ``slot``: its KV and its cache entry go, unsaved. The tokens it held."""
        entry = self.cache.pop(slot, None)
        if slot not in self.free_ids:
            self.release(slot)
        return len(entry.tokens) if entry is not None else 0

    def restore_slot(self, slot: int, entry: SessionEntry) -> bool:
        """``slot`` holds ``entry``'s tokens and KV as its cache entry, the most recently
        used; what it cached before is saved first, as when a request takes the slot. False
        when llama.cpp could not load the state: the slot is then empty."""
        self._save_cached(slot)
        self.erase_slot(slot)
        if not len(entry.tokens):
            return True
        self._claim(slot)
        self.kv.bind(slot, [])
        if not self.kv.restore_seq(slot, entry.state, len(entry.tokens)):
            self.free_ids.append(slot)
            return False
        self.cache[slot] = CacheEntry(slot, np.array(entry.tokens, dtype=np.int32))
        return True
