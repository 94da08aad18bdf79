"""Continuous batching over llama.cpp's low-level API, on one thread.

Every step admits waiting requests (:mod:`backend.engine.admission`), plans the tokens
to decode (:mod:`backend.engine.step_planner`), builds one ``llama_batch`` per planned
call and runs ``llama_decode``, then samples a token for every sequence whose prompt or
last token it completed. Finished or cancelled sequences leave their slot at once
(their KV for the tokens already decoded stays as a prefix-cache entry, which any new
request may evict) and waiting requests are admitted in the very next step.

With speculative decoding (:mod:`backend.engine.speculative`), a generating sequence may
decode its last token together with a draft of the tokens likely to follow, with logits
on every row; its sampler then takes the rows in order while they agree with the draft
(:func:`~backend.engine.speculative.verify.verify_draft`), and the KV cells of the
rejected rest are dropped.

Events for clients are gathered during a step and handed over in one burst right
before the next ``llama_decode`` (:mod:`backend.engine.outbox`). Requests and
cancellations arrive from other threads through :mod:`backend.engine.request_inbox`;
:mod:`backend.engine.scheduler_loop` drives the turns; :mod:`backend.engine.batch_fill`
writes a planned call's rows; :mod:`backend.engine.context_shift` shifts a full context.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import llama_cpp

from backend.engine.admission import AdmissionPolicy, PerSlotAdmission, UnifiedAdmission
from backend.engine.batch_fill import fill_batch
from backend.engine.context_shift import shift_context
from backend.engine.errors import GrammarDeadEndError
from backend.engine.kv_cache import KvCache
from backend.engine.logprobs import LogprobReader
from backend.engine.media.embd_batch import EmbdBatch
from backend.engine.media.media_span import MediaSpan, position_at, span_at, whole_media_prefix
from backend.engine.model_runtime import ModelRuntime
from backend.engine.request_types import (
    EngineEvent,
    ErrorEvent,
    FinishReason,
    TokenEvent,
    TokenLogprob,
)
from backend.engine.sampler_chain import GRAMMAR_DONE
from backend.engine.scheduler_loop import SchedulerLoop
from backend.engine.sequence import Sequence
from backend.engine.session_setup import session_store_for
from backend.engine.speculative.speculator import Speculator
from backend.engine.speculative.verify import verify_draft
from backend.engine.step_planner import StepPlan, plan_step

log = logging.getLogger(__name__)


@dataclass
class CallTimes:
    """What decode calls did: seconds decoding and sampling, prompt tokens decoded, tokens
    sampled, batch rows."""

    decode_s: float = 0.0
    sample_s: float = 0.0
    prompt_tokens: int = 0
    sampled: int = 0
    rows: int = 0

    def add(self, other: CallTimes) -> None:
        self.decode_s += other.decode_s
        self.sample_s += other.sample_s
        self.prompt_tokens += other.prompt_tokens
        self.sampled += other.sampled
        self.rows += other.rows


class Scheduler(SchedulerLoop):
    def __init__(
        self,
        runtime: ModelRuntime,
        *,
        parallel: int,
        cache_entries: int,
        max_queue: int,
        speculator: Speculator | None = None,
    ) -> None:
        super().__init__(parallel=parallel, max_queue=max_queue)
        self.rt = runtime
        self.speculator = speculator
        if speculator is not None:
            self.stats.spec_type = speculator.type_name
        self.kv = KvCache(runtime.ctx, runtime.memory, runtime.n_ctx)
        self._per_slot = not runtime.kv_unified
        # --context-shift: with a KV stream per sequence only, where the memory can shift
        self.shifts_context = (
            runtime.settings.context_shift and self._per_slot and runtime.can_shift
        )
        if runtime.settings.context_shift and not self.shifts_context:
            log.warning("this model's memory cannot shift: --context-shift is off")
        self.admission: AdmissionPolicy
        if self._per_slot:
            self.admission = PerSlotAdmission(
                self.kv, n_seq_max=runtime.n_seq_max, parallel=parallel
            )
        else:
            self.admission = UnifiedAdmission(
                self.kv, n_seq_max=runtime.n_seq_max, parallel=parallel, cache_entries=cache_entries
            )
        # sessions that outlive their slot: --cache-ram, --cache-disk
        self.sessions = session_store_for(runtime, self.kv)
        self.admission.sessions = self.sessions
        self._publish_gauges()
        self.logprobs = LogprobReader(runtime)
        self._n_batch = runtime.n_batch
        self._batch = llama_cpp.llama_batch_init(self._n_batch, 0, 1)
        self._embd: EmbdBatch | None = None  # images' embeddings, made at the first
        # here, not on the thread: a caller driving step_once decodes with them too
        llama_cpp.llama_set_n_threads(
            runtime.ctx,
            runtime.settings.threads,
            runtime.settings.threads_batch or runtime.settings.threads,
        )

    def close(self) -> None:
        self.stop()
        self._close_sessions()
        llama_cpp.llama_batch_free(self._batch)
        if self._embd is not None:
            self._embd.close()

    def _close_sessions(self) -> None:
        """Hand the cached sequences and the RAM tier to the disk tier, and wait for its
        writes: a restart then finds them. Only once the loop has stopped, which owns the
        context until then."""
        sessions = self.sessions
        if sessions is None:
            return
        if self._thread.is_alive():
            log.warning("the scheduler did not stop: cached sessions are not saved")
            return
        if sessions.disk is not None:
            self.admission.save_all_cached()
        sessions.close()
        self.sessions = self.admission.sessions = None

    def reset_session_counters(self) -> None:
        """Forget the session tiers' hits and misses (the warm-up is not user traffic)."""
        if self.sessions is not None:
            self.sessions.reset_counters()

    # ---- admission -----------------------------------------------------------------
    def _admit(self) -> None:
        for seq in self.admission.admit_waiting(self._waiting, self._running):
            self._inbox.dequeued()
            if seq.t_admitted is None:
                seq.t_admitted = time.perf_counter()
            if seq.preempted == 0:
                if seq.cached_tokens > 0:
                    self.stats.prefix_hits += 1
                    self.stats.prefix_tokens_saved += seq.cached_tokens
                else:
                    self.stats.prefix_misses += 1

    def _preempt_youngest(self) -> bool:
        victim = self.admission.preempt_youngest(self._running)
        if victim is None:
            return False
        self.stats.preemptions += 1
        self._inbox.requeued()
        self._waiting.appendleft(victim)
        log.info(
            "KV cache full: preempted request %d (recomputed later)", victim.request.request_id
        )
        return True

    # ---- one decode step ------------------------------------------------------------
    def _plan(self) -> StepPlan:
        return plan_step(self._running, n_batch=self._n_batch, per_slot=self._per_slot)

    def _step(self) -> StepPlan:
        """Draft, plan within the free cells, decode the plan's calls, count."""
        t0 = time.perf_counter()
        self._shift_contexts()
        draft_s = self._propose_drafts()
        plan = self._plan_that_fits(drafted=draft_s is not None)
        done = CallTimes()
        for group in plan.calls:
            if any(seq not in self._running for seq, _ in group):
                continue  # a failed call before this one dropped or preempted it
            times = self._decode_and_sample(group)
            if times is None:
                break
            done.add(times)
        if done.rows:
            step_s = time.perf_counter() - t0
            python_s = step_s - done.decode_s - done.sample_s - (draft_s or 0.0)
            self.stats.record_step(step_s, python_s, done.prompt_tokens, done.sampled, done.rows)
            if draft_s is not None:
                self.stats.record_draft_time(draft_s)
        return plan

    def _shift_contexts(self) -> None:
        """Context shift for the sequences whose last token filled their context."""
        for seq in [s for s in self._running if s.shift_due]:
            seq.shift_due = False
            if not seq.generating:  # preempted since, and prefilling again: not now
                continue
            if not shift_context(seq, self.kv, self.rt.n_ctx_seq, add_bos=self.rt.add_bos):
                seq.truncated = True
                self._finish(seq, "length")

    def _plan_that_fits(self, *, drafted: bool) -> StepPlan:
        """This step's plan, within the KV cells free: drafts dropped first, then cached
        prefixes evicted, then the youngest sequence preempted, until it fits."""
        plan = self._plan()
        if plan.n_tokens > self.kv.free and drafted:
            for seq in self._running:  # a guess never costs another sequence its cells
                seq.draft = []
            plan = self._plan()
        while plan.n_tokens > self.kv.free:
            if not (self.admission.evict_cached() or self._preempt_youngest()):
                break
            plan = self._plan()
        return plan

    def _propose_drafts(self) -> float | None:
        """Let the speculator set each generating sequence's draft; the seconds it took,
        or None without speculative decoding."""
        spec = self.speculator
        if spec is None:
            return None
        if spec.uses_draft_model:
            self._deliver()  # the draft model decodes first: send what the last step made
        t = time.perf_counter()
        spec.propose(self._running, free_cells=self.kv.free)
        return time.perf_counter() - t

    def _decode_and_sample(self, plan: list[tuple[Sequence, int]]) -> CallTimes | None:
        """One ``llama_decode`` over ``plan``, then the tokens of every sequence whose
        prompt or last token (and draft) it completed; None when the call failed."""
        if len(plan) == 1 and plan[0][0].media:
            span = span_at(plan[0][0].media, plan[0][0].n_past)
            if span is not None:
                return self._decode_media(plan[0][0], span)
        batch = self._batch
        filled = fill_batch(batch, plan)
        self._deliver()  # the event loop sends them while llama_decode runs
        t_dec = time.perf_counter()
        rc = llama_cpp.llama_decode(self.rt.ctx, batch)
        decode_s = time.perf_counter() - t_dec
        if rc != 0:
            self._decode_failed(rc, plan)
            return None
        self.stats.record_decode_call(len(plan))
        if (
            self.speculator is not None
            and len(filled.logits_at) == len(plan)
            and not filled.prompt_tokens
        ):
            # generating sequences only: a measure of what draft rows cost
            self.speculator.observe_decode([n for _, n in plan], decode_s)
        t_samp = time.perf_counter()
        for seq, row, rows in filled.scored:
            self.logprobs.score_prompt(seq, row, rows)
        kv = self.kv
        for seq, n in plan:
            kv.add_cells(seq.seq_id, n)
            seq.n_past += n
        sampled = 0
        for seq, index, draft in filled.logits_at:
            if seq.request.max_tokens == 0:  # scoring only: the prompt is all there is
                self._finish(seq, "length")
                continue
            sampled += self._take_tokens(seq, index, draft)
        sample_s = time.perf_counter() - t_samp
        return CallTimes(decode_s, sample_s, filled.prompt_tokens, sampled, filled.rows)

    def _decode_media(self, seq: Sequence, span: MediaSpan) -> CallTimes | None:
        """One image of ``seq``'s prompt, from its embeddings (no logits: a prompt never
        ends with an image)."""
        if self._embd is None:
            self._embd = EmbdBatch(self._n_batch, span.embd.shape[1])
        self._deliver()
        t_dec = time.perf_counter()
        rc = self._embd.decode(self.rt.ctx, span, seq.seq_id, position_at(seq.media, seq.n_past))
        decode_s = time.perf_counter() - t_dec
        if rc != 0:
            self._decode_failed(rc, [(seq, span.n_tokens)])
            return None
        self.kv.add_cells(seq.seq_id, span.n_tokens)
        seq.n_past += span.n_tokens
        return CallTimes(decode_s, 0.0, span.n_tokens, 0, span.n_tokens)

    def _take_tokens(self, seq: Sequence, row: int, draft: list[int]) -> int:
        """Sample ``seq``'s token at batch row ``row`` and, while they agree with ``draft``,
        at the rows after it; drop the KV cells of the draft tokens not kept. Returns the
        tokens sampled."""
        base = seq.n_past - len(draft)  # cells that hold the sequence's own tokens
        seq.draft = []
        seq.draft_n += len(draft)

        def take(i: int) -> tuple[int, bool]:
            seq.n_past = base + i  # row i's token is part of the sequence (a retire keeps it)
            token = self._sample(seq, row + i)
            if token is None:
                return -1, False
            if i < len(draft) and token == draft[i]:
                seq.draft_n_accepted += 1  # before a finish reports it
            self._on_token(seq, token)
            return token, seq.seq_id >= 0

        rows, accepted = verify_draft(draft, take)
        if draft:
            self.stats.record_draft(len(draft), accepted)
            if self.speculator is not None:
                self.speculator.record(seq, len(draft), accepted)
            if seq.seq_id >= 0 and rows <= len(draft):  # running, part of the draft rejected
                self.kv.keep(seq.seq_id, seq.n_past)
        return rows

    def _sample(self, seq: Sequence, index: int) -> int | None:
        """``seq``'s next token from batch row ``index`` (with its logprobs recorded), or
        None when the sequence ended there (complete grammar, or a grammar dead end)."""
        want = seq.request.sampling.logprobs
        logits = self.logprobs.logits(index) if want is not None else None
        try:
            token = seq.sampler.sample(self.rt.ctx, index)
        except GrammarDeadEndError as exc:
            self._drop(seq, str(exc), invalid_request=True)
            return None
        if token == GRAMMAR_DONE:  # the grammar is complete, whatever ignore_eos says
            self._finish(seq, "stop")
            return None
        if logits is not None and want is not None:
            self.logprobs.record(seq, logits, token, want)
        return token

    def _take_logprobs(self, seq: Sequence) -> list[TokenLogprob]:
        taken, seq.pending_logprobs = seq.pending_logprobs, []
        return taken

    def _decode_failed(self, rc: int, plan: list[tuple[Sequence, int]]) -> None:
        for seq, _ in plan:  # drop anything half-written by the failed call
            seq.n_past = whole_media_prefix(seq.media, seq.n_past)  # a whole image again
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
        self.admission.release(seq.seq_id)
        seq.seq_id = -1

    def _on_token(self, seq: Sequence, token: int) -> None:
        now = time.perf_counter()
        if seq.t_first is None:
            seq.t_first = now
            self.stats.record_ttft(1000.0 * (now - seq.request.arrival))
            self.stats.record_prompt_time(now - (seq.t_admitted or seq.request.arrival))
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
        elif seq.completion_tokens >= req.max_tokens:
            if len(seq.tokens) >= self.rt.n_ctx_seq:  # the context ran out too
                seq.truncated = True
            self._finish(seq, "length")
        elif len(seq.tokens) >= self.rt.n_ctx_seq:  # the context is full
            # not with images (their positions are not one per cell), nor a prompt being
            # scored (its rows are read by index)
            if self.shifts_context and not seq.media and req.prompt_logprobs is None:
                seq.shift_due = True  # before the next step, as llama-server does
            else:
                seq.truncated = True
                self._finish(seq, "length")

    def _finish(self, seq: Sequence, reason: FinishReason) -> None:
        if reason != "cancelled":
            tail = seq.detector.flush()
            if tail or seq.pending_logprobs:
                self._emit(seq, TokenEvent(tail, [], self._take_logprobs(seq)))
        self._emit(seq, seq.finish_event(reason))
        if seq.t_first is not None and seq.t_last is not None:
            self.stats.record_generation_time(seq.t_last - seq.t_first)
        self.stats.record_length(len(seq.tokens))
        seq.sampler.close()
        if reason == "cancelled":
            self.stats.cancelled += 1
        else:
            self.stats.completed += 1
        if seq in self._running:
            self._running.remove(seq)
            self.admission.retire(seq)

    def _emit(self, seq: Sequence, event: EngineEvent) -> None:
        self._outbox.put(seq.request.sink, event)

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
            stats.prefix_entries = len(self.admission.cache)
            if self.sessions is not None:
                stats.session_ram, stats.session_disk = self.sessions.snapshot()
