"""Engine statistics: exact counters, rolling rates and latency percentiles.

Written only by the scheduler thread; read by request threads through
:meth:`EngineStats.snapshot`, which reads under a lock into a
:class:`~backend.engine.stats_model.StatsSnapshot`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import asdict, fields

import numpy as np

from backend.engine.session_cache import TierSnapshot
from backend.engine.stats_model import (
    DiskSessionStats,
    KvStats,
    LatencyStats,
    ModelStats,
    PrefixCacheStats,
    RamSessionStats,
    RequestStats,
    SessionCacheStats,
    SpeculativeStats,
    StatsSnapshot,
    StepStats,
    TokenStats,
)
from backend.system.system_stats import SystemStats

RATE_WINDOW_S = 5.0
LATENCY_SAMPLES = 2048


def _percentile(values: deque[float], q: float) -> float | None:
    if not values:
        return None
    return float(np.percentile(np.fromiter(values, dtype=np.float64), q))


def _tier(snap: TierSnapshot | None) -> dict[str, int]:
    """A tier's stats fields; zeros when the tier is off."""
    if snap is None:
        return {f.name: 0 for f in fields(TierSnapshot)}
    return asdict(snap)


class EngineStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = time.time()
        self.completed = 0
        self.errors = 0
        self.cancelled = 0
        self.rejected_busy = 0
        self.running = 0
        self.queued = 0
        self.prompt_total = 0
        self.prompt_decoded_total = 0
        self.generated_total = 0
        self.prefix_hits = 0
        self.prefix_misses = 0
        self.prefix_tokens_saved = 0
        self.prefix_entries = 0
        self.session_ram: TierSnapshot | None = None
        self.session_disk: TierSnapshot | None = None
        self.kv_cells_used = 0
        self.kv_cells_total = 0
        self.kv_bytes_per_cell = 0
        self.steps = 0
        self.step_s_total = 0.0
        self.python_s_total = 0.0
        self.batch_tokens_total = 0
        self.preemptions = 0
        self.decode_calls = 0
        self.decode_sequences = 0
        self.prompt_s_total = 0.0
        self.generation_s_total = 0.0
        self.longest_sequence = 0
        self.spec_type = ""
        self.spec_drafted = 0
        self.spec_accepted = 0
        self.spec_drafts = 0
        self.spec_draft_steps = 0
        self.spec_draft_s_total = 0.0
        self.ttft_ms: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self.itl_ms: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self.ttft_ms_last: float | None = None
        # (time, prompt tokens decoded, tokens generated) per step, for rates
        self._window: deque[tuple[float, int, int]] = deque()

    def reset_traffic(self) -> None:
        """Forget request counters and latencies (the warm-up is not user traffic)."""
        with self._lock:
            self.completed = 0
            self.prompt_total = self.prompt_decoded_total = self.generated_total = 0
            self.prefix_hits = self.prefix_misses = self.prefix_tokens_saved = 0
            self.spec_drafted = self.spec_accepted = self.spec_drafts = 0
            self.spec_draft_steps = 0
            self.spec_draft_s_total = 0.0
            self.prompt_s_total = self.generation_s_total = 0.0
            self.longest_sequence = 0
            self.decode_calls = self.decode_sequences = 0
            self.ttft_ms.clear()
            self.itl_ms.clear()
            self.ttft_ms_last = None

    def lock(self) -> threading.Lock:
        return self._lock

    def record_step(
        self, step_s: float, python_s: float, prompt_tokens: int, gen_tokens: int, batch_tokens: int
    ) -> None:
        now = time.perf_counter()
        with self._lock:
            self.steps += 1
            self.step_s_total += step_s
            self.python_s_total += python_s
            self.batch_tokens_total += batch_tokens
            self.prompt_decoded_total += prompt_tokens
            self.generated_total += gen_tokens
            self._window.append((now, prompt_tokens, gen_tokens))
            while self._window and now - self._window[0][0] > RATE_WINDOW_S:
                self._window.popleft()

    def record_decode_call(self, n_sequences: int) -> None:
        """One ``llama_decode`` of tokens for ``n_sequences`` sequences."""
        with self._lock:
            self.decode_calls += 1
            self.decode_sequences += n_sequences

    def record_prompt_time(self, seconds: float) -> None:
        """A request's prompt time: its admission to its first token."""
        with self._lock:
            self.prompt_s_total += seconds

    def record_generation_time(self, seconds: float) -> None:
        """A finished request's generation time: its first token to its last."""
        with self._lock:
            self.generation_s_total += seconds

    def record_length(self, n_tokens: int) -> None:
        with self._lock:
            self.longest_sequence = max(self.longest_sequence, n_tokens)

    def record_draft(self, drafted: int, accepted: int) -> None:
        """One sequence's draft was verified: ``accepted`` of its ``drafted`` tokens kept."""
        with self._lock:
            self.spec_drafts += 1
            self.spec_drafted += drafted
            self.spec_accepted += accepted

    def record_draft_time(self, seconds: float) -> None:
        with self._lock:
            self.spec_draft_steps += 1
            self.spec_draft_s_total += seconds

    def record_ttft(self, ms: float) -> None:
        with self._lock:
            self.ttft_ms.append(ms)
            self.ttft_ms_last = ms

    def record_itl(self, ms: float) -> None:
        self.itl_ms.append(ms)  # deque.append is atomic; read under lock in snapshot

    def _rates(self, now: float) -> tuple[float, float]:
        window = [w for w in self._window if now - w[0] <= RATE_WINDOW_S]
        if not window:
            return 0.0, 0.0
        span = max(now - window[0][0], 1e-3) if len(window) > 1 else RATE_WINDOW_S
        span = max(span, 1.0)
        return sum(w[1] for w in window) / span, sum(w[2] for w in window) / span

    def snapshot(self, model: ModelStats, system: SystemStats, ready: bool) -> StatsSnapshot:
        """The counters read at one instant, with what the engine knows beside them."""
        now = time.perf_counter()
        with self._lock:
            prompt_rate, gen_rate = self._rates(now)
            steps = max(self.steps, 1)
            return StatsSnapshot(
                requests=RequestStats(
                    running=self.running,
                    queued=self.queued,
                    completed=self.completed,
                    errors=self.errors,
                    rejected_busy=self.rejected_busy,
                    cancelled=self.cancelled,
                ),
                tokens=TokenStats(
                    prompt_total=self.prompt_total,
                    prompt_decoded_total=self.prompt_decoded_total,
                    generated_total=self.generated_total,
                    prompt_tokens_per_s=prompt_rate,
                    gen_tokens_per_s=gen_rate,
                    prompt_seconds_total=self.prompt_s_total,
                    generation_seconds_total=self.generation_s_total,
                    longest_sequence=self.longest_sequence,
                ),
                latency=LatencyStats(
                    ttft_ms_p50=_percentile(self.ttft_ms, 50),
                    ttft_ms_p99=_percentile(self.ttft_ms, 99),
                    itl_ms_p50=_percentile(self.itl_ms, 50),
                    itl_ms_p99=_percentile(self.itl_ms, 99),
                    ttft_ms_last=self.ttft_ms_last,
                ),
                kv=KvStats(
                    cells_used=self.kv_cells_used,
                    cells_total=self.kv_cells_total,
                    bytes_used=self.kv_cells_used * self.kv_bytes_per_cell,
                    bytes_total=self.kv_cells_total * self.kv_bytes_per_cell,
                    used_pct=100.0 * self.kv_cells_used / max(self.kv_cells_total, 1),
                ),
                prefix_cache=PrefixCacheStats(
                    hits=self.prefix_hits,
                    misses=self.prefix_misses,
                    tokens_saved=self.prefix_tokens_saved,
                    entries=self.prefix_entries,
                ),
                session_cache=SessionCacheStats(
                    ram=RamSessionStats(**_tier(self.session_ram)),
                    disk=DiskSessionStats(**_tier(self.session_disk)),
                ),
                step=StepStats(
                    steps=self.steps,
                    step_ms_avg=1000.0 * self.step_s_total / steps,
                    python_ms_avg=1000.0 * self.python_s_total / steps,
                    batch_tokens_avg=self.batch_tokens_total / steps,
                    preemptions=self.preemptions,
                    decode_calls=self.decode_calls,
                    sequences_per_decode=self.decode_sequences / max(self.decode_calls, 1),
                ),
                speculative=SpeculativeStats(
                    type=self.spec_type,
                    drafted=self.spec_drafted,
                    accepted=self.spec_accepted,
                    drafts=self.spec_drafts,
                    acceptance_rate=self.spec_accepted / max(self.spec_drafted, 1),
                    draft_ms_avg=1000.0 * self.spec_draft_s_total / max(self.spec_draft_steps, 1),
                ),
                uptime_s=time.time() - self.started,
                model=model,
                system=system,
                ready=ready,
            )
