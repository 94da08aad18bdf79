"""Continuous batching over llama.cpp's low-level API, on one thread.

Every step builds one ``llama_batch``: one token for each generating sequence,
then prompt chunks of admitted sequences up to ``n_batch`` (chunked prefill),
and calls ``llama_decode`` once. Finished or cancelled sequences leave their slot
at once (their KV for the tokens already decoded stays as a prefix-cache entry, which
any new request may evict) and waiting requests are admitted in the very next step.

Prefix sharing: a new prompt that shares a prefix with KV already held (a
running sequence or a finished one kept in the prefix cache) gets those cells
through ``llama_memory_seq_cp`` instead of recomputing them. When several
requests with the same long system prompt arrive together, the first one
prefills it and the others wait until it is computed, then copy it: N requests,
one prefill. That prefill pauses where the prompts branch, so the next step holds
every request's own suffix.

With ``--kv-per-slot`` every sequence id is a slot with its own KV stream (llama.cpp's
non-unified cache, as llama-server runs with an explicit ``-np``): a row attends only to
its own slot. Idle slots keep their last prompt as the prefix cache. A new request takes
the lowest idle slot, so the running slots stay contiguous and llama.cpp keeps each step
in one micro-batch. If that slot still caches something, the prefix is first moved to a
spare slot. A shared prefix held by another slot is copied whole-stream, then trimmed.
When no slot is empty, a request that extends a cached slot's prefix (a conversation's
next turn) runs in that slot, wherever it is, rather than push another prefix out.
What each step decodes, in one or two calls, is :mod:`backend.engine.step_planner`'s.

Events for clients are gathered during a step and handed over in one burst right
before the next ``llama_decode``, which releases the GIL for the whole forward
pass: the server's event loop then formats and sends them while the model runs,
instead of contending for the GIL with the scheduler's own Python work.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict, deque

import llama_cpp
import numpy as np

from backend.engine.arrivals import Arrivals
from backend.engine.engine_stats import EngineStats
from backend.engine.errors import EngineStoppedError, GrammarDeadEndError, QueueFullError
from backend.engine.kv_cache import KvCache
from backend.engine.model_runtime import ModelRuntime, logits_row
from backend.engine.request_types import (
    EngineEvent,
    ErrorEvent,
    EventSink,
    FinishEvent,
    TokenEvent,
    TokenLogprob,
    piece_text,
)
from backend.engine.sampler_chain import GRAMMAR_DONE
from backend.engine.sequence import CacheEntry, Sequence, common_prefix
from backend.engine.step_planner import StepPlan, plan_step

log = logging.getLogger(__name__)

# Wait for a running prefill rather than recompute, when it would save this many tokens.
MIN_SHARED_PREFIX = 32
# Before admitting new prompts, wait at most this long for requests still being prepared.
ARRIVAL_WINDOW_S = 0.02


class Scheduler:
    def __init__(
        self, runtime: ModelRuntime, *, parallel: int, cache_entries: int, max_queue: int
    ) -> None:
        self.rt = runtime
        self.parallel = parallel
        self.cache_entries = cache_entries
        self.max_queue = max_queue
        self.stats = EngineStats()
        self.arrivals = Arrivals()
        self.arrival_window = ARRIVAL_WINDOW_S
        self._inbox: queue.SimpleQueue[tuple[str, object]] = queue.SimpleQueue()
        self._queued_lock = threading.Lock()
        self._queued = 0
        self._waiting: deque[Sequence] = deque()
        self._running: list[Sequence] = []
        self._outbox: list[tuple[EventSink, EngineEvent]] = []
        self._cache: OrderedDict[int, CacheEntry] = OrderedDict()
        self._free_ids = list(range(runtime.n_seq_max - 1, -1, -1))
        self.kv = KvCache(runtime.memory, runtime.n_ctx)
        self._per_slot = not runtime.kv_unified
        self._admit_counter = 0
        self._n_batch = runtime.n_batch
        self._batch = llama_cpp.llama_batch_init(self._n_batch, 0, 1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="quantdesk-scheduler", daemon=True)
        self.failure: str | None = None
        self.watermark = max(8, min(256, runtime.n_ctx // 32))
        self.preemptions = 0

    # ---- called from any thread ------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def submit(self, seq: Sequence) -> None:
        if self._stop.is_set() or self.failure:
            raise EngineStoppedError(self.failure or "the engine is shutting down")
        with self._queued_lock:
            if self._queued >= self.max_queue + self.parallel:
                self.stats.rejected_busy += 1
                raise QueueFullError(
                    f"server busy: {self.parallel} sequences running and "
                    f"{self.max_queue} waiting; retry shortly"
                )
            self._queued += 1
        self._inbox.put(("submit", seq))

    def cancel(self, request_id: int) -> None:
        self._inbox.put(("cancel", request_id))

    def stop(self) -> None:
        self._stop.set()
        self._inbox.put(("stop", None))
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)

    def close(self) -> None:
        self.stop()
        llama_cpp.llama_batch_free(self._batch)

    # ---- scheduler thread --------------------------------------------------------
    def _run(self) -> None:
        llama_cpp.llama_set_n_threads(
            self.rt.ctx,
            self.rt.settings.threads,
            self.rt.settings.threads_batch or self.rt.settings.threads,
        )
        try:
            while not self._stop.is_set():
                self._collect(block=not self._running and not self._waiting)
                if self._stop.is_set():
                    break
                self._admit()
                if self._running:
                    self._step()
                if not self._running:
                    self._flush_events()  # no decode follows: deliver now
                self._publish_gauges()
        except Exception as exc:  # never leave clients hanging
            log.exception("scheduler crashed")
            self.failure = f"engine failure: {exc}"
            for seq in [*self._running, *self._waiting]:
                self._emit_error(seq, self.failure)
        finally:
            for seq in [*self._running, *self._waiting]:
                if not self.failure:
                    self._emit_error(seq, "the server is shutting down")
            self._running.clear()
            self._waiting.clear()
            self._flush_events()

    def _collect(self, *, block: bool) -> None:
        """Take new requests and cancellations. When new requests came in while others
        are still being prepared by the server, wait (at most ``arrival_window``) for
        those too, so that they share the first prefill step rather than wait a whole one."""
        if self._drain_inbox(block=block) and self.arrivals.pending and self._idle_slots():
            self.arrivals.wait_settled(self.arrival_window)
            self._drain_inbox(block=False)

    def _idle_slots(self) -> bool:
        """Nothing is generating, so a short wait delays no stream, and a slot is free for
        the arrivals to join."""
        return len(self._running) < self.parallel and not any(
            seq.generating for seq in self._running
        )

    def _drain_inbox(self, *, block: bool) -> int:
        """Take everything queued for the scheduler; returns how many new requests."""
        try:
            item = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
        except queue.Empty:
            return 0
        submitted = 0
        while True:
            kind, payload = item
            if kind == "submit":
                assert isinstance(payload, Sequence)
                self._waiting.append(payload)
                self.stats.prompt_total += payload.n_prompt
                submitted += 1
            elif kind == "cancel":
                assert isinstance(payload, int)
                self._cancel(payload)
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return submitted

    def _cancel(self, request_id: int) -> None:
        for seq in list(self._waiting):
            if seq.request.request_id == request_id:
                self._waiting.remove(seq)
                self._dequeued()
                self._finish(seq, "cancelled")
                return
        for seq in list(self._running):
            if seq.request.request_id == request_id:
                self._finish(seq, "cancelled")
                return

    def _dequeued(self) -> None:
        with self._queued_lock:
            self._queued -= 1

    # ---- admission -----------------------------------------------------------------
    def _pending_cells(self) -> int:
        return sum(s.remaining for s in self._running)

    def _admit(self) -> None:
        if not self._waiting or len(self._running) >= self.parallel:
            return
        deferred: list[Sequence] = []
        # deferred requests keep their place: later ones take only the slots left over
        while self._waiting and len(self._running) + len(deferred) < self.parallel:
            seq = self._waiting.popleft()
            outcome = self._try_admit(seq)
            if outcome == "admitted":
                continue
            if outcome == "defer":
                deferred.append(seq)
                continue
            self._waiting.appendleft(seq)  # no room: keep FIFO order
            break
        self._waiting.extendleft(reversed(deferred))

    def _best_source(self, seq: Sequence, target: np.ndarray) -> tuple[int, int, bool]:
        """(matched tokens, source seq id or -1, source is a cache entry)."""
        if seq.request.prompt_logprobs is not None:
            return 0, -1, False  # every prompt token is scored: none comes from the cache
        limit = len(seq.tokens) - 1  # at least one token must be decoded for logits
        best, best_src, best_cached = 0, -1, False
        for entry in self._cache.values():
            n = min(common_prefix(target, entry.tokens), limit)
            if n > best:
                best, best_src, best_cached = n, entry.seq_id, True
        for run in self._running:
            n = min(common_prefix(target, run.prompt_array), limit, run.n_past)
            if n > best:
                best, best_src, best_cached = n, run.seq_id, False
        return best, best_src, best_cached

    def _worth_waiting(self, seq: Sequence, target: np.ndarray, available: int) -> bool:
        """A running prefill will soon hold a longer shared prefix than is available now.
        If so, that prefill's ``branch_at`` is set to where the prompts part, so that it
        pauses there and the waiting request joins in the next step."""
        if seq.request.prompt_logprobs is not None:
            return False
        for run in self._running:
            if run.n_past >= run.n_prompt:
                continue
            limit = len(seq.tokens) - 1
            future = min(common_prefix(target, run.prompt_array), limit)
            gain = future - available
            # wait for a long shared prefix, or for an identical prompt (n > 1, retries)
            if future > run.n_past and (
                gain >= MIN_SHARED_PREFIX or (future == limit and gain > 0)
            ):
                if not run.n_past < run.branch_at <= future:
                    run.branch_at = future
                return True
        return False

    def _try_admit(self, seq: Sequence) -> str:
        target = np.asarray(seq.tokens, dtype=np.int32)
        matched, src, src_cached = self._best_source(seq, target)
        if self._worth_waiting(seq, target, matched):
            return "defer"
        if self._per_slot:
            return self._admit_to_slot(seq, matched, src)
        need = len(seq.tokens) - matched
        protect = {src} if src >= 0 else set()
        while self.kv.free - self._pending_cells() - need < self.watermark:
            if not self._evict_cache_entry(protect):
                if self._running:
                    return "wait"
                break  # alone: admission control already checked it fits in n_ctx
        if not self._free_ids and not (src_cached and src in self._cache):
            self._evict_cache_entry(protect)
        if self._free_ids:
            seq.seq_id = self._free_ids.pop()
            if matched > 0:
                self.kv.copy_prefix(src, seq.seq_id, matched)
        elif src_cached and src in self._cache:
            # adopt the cache entry itself: keep its first `matched` cells
            self._cache.pop(src)
            seq.seq_id = src
            self.kv.keep(src, matched)
        else:
            return "wait"
        self._admitted(seq, matched)
        if src_cached and src in self._cache:
            self._cache.move_to_end(src)
        return "admitted"

    def _admit_to_slot(self, seq: Sequence, matched: int, src: int) -> str:
        dst = min([*self._free_ids, *self._cache], default=-1)
        if dst < 0:
            return "wait"
        if (
            matched >= MIN_SHARED_PREFIX
            and src in self._cache
            and dst in self._cache
            and not self._free_ids
        ):
            # Moving dst's prefix away would overwrite a third cached slot: serve the
            # request from the slot that matches, where its prefix already is.
            dst = src
        cached = self._cache.get(dst)
        if cached is not None and not (dst == src and matched >= len(cached.tokens)):
            # the new prompt doesn't just extend what dst caches: keep that elsewhere
            self._move_cached_slot(dst, avoid=src, kept=matched if dst == src else 0)
        if matched > 0 and src != dst:
            self.kv.copy_stream(src, dst)
        self.kv.keep(dst, matched)
        if src in self._cache:
            self._cache.move_to_end(src)
        self._claim_slot(dst)
        seq.seq_id = dst
        self._admitted(seq, matched)
        return "admitted"

    def _move_cached_slot(self, slot: int, *, avoid: int, kept: int = 0) -> None:
        """Keep the prefix cached in ``slot`` by copying it to an empty slot before ``slot``
        is reused, where its first ``kept`` tokens stay. With no empty slot it goes over the
        least recently used cached one, if that holds fewer tokens than would be lost."""
        tokens = self._cache[slot].tokens
        spare = [s for s in sorted(self._free_ids, reverse=True) if s != avoid]
        if not spare:
            spare = [s for s in self._cache if s not in (slot, avoid)]
            if not spare or len(self._cache[spare[0]].tokens) >= len(tokens) - kept:
                return
        to = spare[0]
        self.kv.copy_stream(slot, to)
        self._claim_slot(to)
        self._cache[to] = CacheEntry(to, tokens)

    def _claim_slot(self, slot: int) -> None:
        """``slot`` has a new owner: it is no longer free or cached."""
        self._cache.pop(slot, None)
        if slot in self._free_ids:
            self._free_ids.remove(slot)

    def _admitted(self, seq: Sequence, matched: int) -> None:
        seq.n_past = matched
        if seq.preempted == 0:
            seq.cached_tokens = matched
            if matched > 0:
                self.stats.prefix_hits += 1
                self.stats.prefix_tokens_saved += matched
            else:
                self.stats.prefix_misses += 1
        self._admit_counter += 1
        seq.admit_order = self._admit_counter
        self._running.append(seq)
        self._dequeued()

    def _evict_cache_entry(self, protect: set[int]) -> bool:
        for seq_id in self._cache:
            if seq_id not in protect:
                self._cache.pop(seq_id)
                self._release_seq_id(seq_id)
                return True
        return False

    def _release_seq_id(self, seq_id: int) -> None:
        self.kv.rm(seq_id)
        self._free_ids.append(seq_id)

    def _preempt_youngest(self) -> bool:
        if len(self._running) <= 1:
            return False
        victim = max(self._running, key=lambda s: s.admit_order)
        self._running.remove(victim)
        self._release_seq_id(victim.seq_id)
        victim.seq_id = -1
        victim.n_past = 0
        victim.branch_at = 0
        victim.preempted += 1
        self.preemptions += 1
        with self._queued_lock:
            self._queued += 1
        self._waiting.appendleft(victim)
        log.info(
            "KV cache full: preempted request %d (recomputed later)", victim.request.request_id
        )
        return True

    # ---- one decode step ------------------------------------------------------------
    def _plan(self) -> StepPlan:
        return plan_step(self._running, n_batch=self._n_batch, per_slot=self._per_slot)

    def _step(self) -> None:
        t0 = time.perf_counter()
        plan = self._plan()
        while plan.n_tokens > self.kv.free:
            if not (self._evict_cache_entry(set()) or self._preempt_youngest()):
                break
            plan = self._plan()
        decode_s = sample_s = 0.0
        prompt_tokens = gen_tokens = n_tokens = 0
        for group in plan.calls:
            if any(seq not in self._running for seq, _ in group):
                continue  # a failed call before this one dropped or preempted it
            timings = self._decode_and_sample(group)
            if timings is None:
                break
            decode_s += timings[0]
            sample_s += timings[1]
            prompt_tokens += timings[2]
            gen_tokens += timings[3]
            n_tokens += timings[4]
        if n_tokens:
            step_s = time.perf_counter() - t0
            python_s = step_s - decode_s - sample_s
            self.stats.record_step(step_s, python_s, prompt_tokens, gen_tokens, n_tokens)

    def _decode_and_sample(
        self, plan: list[tuple[Sequence, int]]
    ) -> tuple[float, float, int, int, int] | None:
        """One ``llama_decode`` over ``plan``, then a token for every sequence whose
        prompt or last token it completed. (decode s, sample s, prompt tokens,
        generated tokens, batch tokens), or None when the call failed."""
        batch = self._batch
        i = 0
        logits_at: list[tuple[Sequence, int]] = []
        scored: list[tuple[Sequence, int, int]] = []  # (seq, first batch row, rows)
        prompt_tokens = 0
        for seq, n in plan:
            sid = seq.seq_id
            start = seq.n_past
            toks = seq.tokens
            last = start + n == len(toks)
            score = seq.request.prompt_logprobs is not None and start < seq.n_prompt - 1
            if score:
                scored.append((seq, i, min(n, seq.n_prompt - 1 - start)))
            for j in range(n):
                batch.token[i] = toks[start + j]
                batch.pos[i] = start + j
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = sid
                batch.logits[i] = 1 if score else 0
                i += 1
            if last:
                batch.logits[i - 1] = 1
                logits_at.append((seq, i - 1))
            if not seq.generating:
                prompt_tokens += n
        batch.n_tokens = i
        self._flush_events()  # the event loop sends them while llama_decode runs
        t_dec = time.perf_counter()
        rc = llama_cpp.llama_decode(self.rt.ctx, batch)
        decode_s = time.perf_counter() - t_dec
        if rc != 0:
            self._decode_failed(rc, plan)
            return None
        t_samp = time.perf_counter()
        for seq, row, rows in scored:
            self._score_prompt(seq, row, rows)
        kv = self.kv
        for seq, n in plan:
            kv.add_cells(seq.seq_id, n)
            seq.n_past += n
        for seq, index in logits_at:
            if seq.request.max_tokens == 0:  # scoring only: the prompt is all there is
                self._finish(seq, "length")
                continue
            want = seq.request.sampling.logprobs
            logits = self._logits(index) if want is not None else None
            try:
                token = seq.sampler.sample(self.rt.ctx, index)
            except GrammarDeadEndError as exc:
                self._drop(seq, str(exc), invalid_request=True)
                continue
            if token == GRAMMAR_DONE:  # the grammar is complete, whatever ignore_eos says
                self._finish(seq, "stop")
                continue
            if logits is not None and want is not None:
                self._record_logprob(seq, logits, token, want)
            self._on_token(seq, token)
        return decode_s, time.perf_counter() - t_samp, prompt_tokens, len(logits_at), i

    def _logits(self, index: int) -> np.ndarray:
        return logits_row(self.rt.ctx, index, self.rt.n_vocab).astype(np.float64)

    def _record_logprob(self, seq: Sequence, logits: np.ndarray, token: int, top_k: int) -> None:
        entry = self._logprob_entry(logits, token, top_k)
        seq.cum_logprob += entry.logprob
        seq.pending_logprobs.append(entry)

    def _score_prompt(self, seq: Sequence, row: int, rows: int) -> None:
        """Log-probabilities of the prompt tokens that batch rows ``row..row+rows`` predict
        (row k at prompt position p predicts token p + 1)."""
        top_k = seq.request.prompt_logprobs or 0
        for k in range(rows):
            token = seq.tokens[seq.n_past + k + 1]
            seq.prompt_logprobs.append(self._logprob_entry(self._logits(row + k), token, top_k))

    def _logprob_entry(self, logits: np.ndarray, token: int, top_k: int) -> TokenLogprob:
        """``token``'s log-probability under ``logits`` and the ``top_k`` most likely."""
        shifted = logits - logits.max()
        logprobs = shifted - np.log(np.exp(shifted).sum())
        top: list[tuple[int, str, float]] = []
        if top_k > 0:
            idx = np.argpartition(-logprobs, top_k)[:top_k]
            idx = idx[np.argsort(-logprobs[idx])]
            top = [(int(i), self._piece_text(int(i)), float(logprobs[i])) for i in idx]
        return TokenLogprob(token, self._piece_text(token), float(logprobs[token]), top)

    def _piece_text(self, token: int) -> str:
        return piece_text(self.rt.token_piece(token))

    def _take_logprobs(self, seq: Sequence) -> list[TokenLogprob]:
        taken, seq.pending_logprobs = seq.pending_logprobs, []
        return taken

    def _decode_failed(self, rc: int, plan: list[tuple[Sequence, int]]) -> None:
        for seq, _ in plan:  # drop anything half-written by the failed call
            self.kv.keep(seq.seq_id, seq.n_past)
        if rc == 1 and self._preempt_youngest():
            return
        message = f"llama_decode failed (code {rc})"
        if rc == 1:
            message = "the KV cache has no room for this sequence"
        log.error("%s", message)
        for seq, _ in plan:
            if seq in self._running:
                self._drop(seq, message)

    def _drop(self, seq: Sequence, message: str, *, invalid_request: bool = False) -> None:
        """End one running sequence with an error; the others go on."""
        self._emit_error(seq, message, invalid_request=invalid_request)
        self._running.remove(seq)
        self._release_seq_id(seq.seq_id)
        seq.seq_id = -1

    def _on_token(self, seq: Sequence, token: int) -> None:
        now = time.perf_counter()
        if seq.t_first is None:
            seq.t_first = now
            self.stats.record_ttft(1000.0 * (now - seq.request.arrival))
        elif seq.t_last is not None:
            self.stats.record_itl(1000.0 * (now - seq.t_last))
        seq.t_last = now
        req = seq.request
        if token in self.rt.eog_tokens and not req.sampling.ignore_eos:
            seq.pending_logprobs = seq.pending_logprobs[:-1]  # the end token is not output
            self._finish(seq, "stop")
            return
        seq.tokens.append(token)
        seq.completion_tokens += 1
        text = seq.detector.feed(self.rt.token_piece(token))
        if text:
            self._emit(seq, TokenEvent(text, [token], self._take_logprobs(seq)))
        if seq.detector.stopped:
            self._finish(seq, "stop")
        elif seq.completion_tokens >= req.max_tokens or len(seq.tokens) >= self.rt.n_ctx_seq:
            self._finish(seq, "length")

    def _finish(self, seq: Sequence, reason: str) -> None:
        req = seq.request
        if reason != "cancelled":
            tail = seq.detector.flush()
            if tail or seq.pending_logprobs:
                self._emit(seq, TokenEvent(tail, [], self._take_logprobs(seq)))
        ttft = 1000.0 * (seq.t_first - req.arrival) if seq.t_first else None
        gen_rate = None
        if seq.t_first and seq.t_last and seq.completion_tokens > 1 and seq.t_last > seq.t_first:
            gen_rate = (seq.completion_tokens - 1) / (seq.t_last - seq.t_first)
        scored = seq.prompt_logprobs if req.prompt_logprobs is not None else None
        self._emit(
            seq,
            FinishEvent(
                reason,
                seq.n_prompt,
                seq.completion_tokens,
                seq.cached_tokens,
                ttft,
                gen_rate,
                prompt_logprobs=scored,
            ),
        )
        seq.sampler.close()
        if reason == "cancelled":
            self.stats.cancelled += 1
        else:
            self.stats.completed += 1
        if seq in self._running:
            self._running.remove(seq)
            self._retire(seq)

    def _retire(self, seq: Sequence) -> None:
        """Keep the KV of the tokens the sequence decoded as a prefix-cache entry (with
        per-slot KV the idle slot itself is the cache, with no count limit), finished or
        cancelled alike: a stopped answer's conversation is asked again. Free it when
        there is nothing to keep or no cache."""
        if seq.n_past > 0 and (self._per_slot or self.cache_entries > 0):
            self.kv.keep(seq.seq_id, seq.n_past)
            entry = CacheEntry(seq.seq_id, np.asarray(seq.tokens[: seq.n_past], dtype=np.int32))
            self._cache[seq.seq_id] = entry
            while not self._per_slot and len(self._cache) > self.cache_entries:
                self._evict_cache_entry({seq.seq_id})
        else:
            self._release_seq_id(seq.seq_id)
        seq.seq_id = -1

    def _emit(self, seq: Sequence, event: EngineEvent) -> None:
        self._outbox.append((seq.request.sink, event))

    def _flush_events(self) -> None:
        outbox, self._outbox = self._outbox, []
        for sink, event in outbox:
            try:
                sink(event)
            except Exception:  # a broken client must not take the engine down
                log.exception("event sink failed")

    def _emit_error(self, seq: Sequence, message: str, *, invalid_request: bool = False) -> None:
        self.stats.errors += 1
        self._emit(seq, ErrorEvent(message, invalid_request))
        seq.sampler.close()

    def _publish_gauges(self) -> None:
        stats = self.stats
        with stats.lock():
            stats.running = len(self._running)
            stats.queued = len(self._waiting)
            stats.kv_cells_used = self.kv.used
            stats.kv_cells_total = self.kv.n_cells
            stats.kv_bytes_per_cell = self.rt.kv_bytes_per_cell
            stats.prefix_entries = len(self._cache)
