"""llama-server's ``llamacpp:*`` Prometheus families, beside ours, from the same snapshot.

Grafana dashboards built for llama-server read these names. Each is computed from the
:class:`~backend.engine.stats_model.StatsSnapshot` that ``quantdesk_*`` comes from, with
llama-server's help text; where the meaning differs slightly, the help says so:

- ``prompt_tokens_seconds`` / ``predicted_tokens_seconds``: llama-server averages over
  the time since the previous scrape, ours over the last 5 s;
- ``prompt_seconds_total`` runs from a request's admission to its first token
  (llama-server's from its slot starting the prompt: the same span);
- ``spec_decode_num_accepted_tokens_per_pos_total`` (accepted drafts by position) is not
  given: no per-position counts are kept. ``kv_cache_usage_ratio`` and ``kv_cache_tokens``
  are older llama-server names, still given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from backend.engine.stats_model import StatsSnapshot

PREFIX = "llamacpp:"


def llamacpp_families(snap: StatsSnapshot) -> list[Metric]:
    """The families of one snapshot, counters first, as llama-server lists them."""
    kv = snap.kv
    counters: list[tuple[str, str, float]] = [
        (
            "prompt_tokens_total",
            "Number of prompt tokens processed, excluding cached tokens.",
            snap.tokens.prompt_decoded_total,
        ),
        (
            "prompt_tokens_cached_total",
            "Number of prompt tokens reused from the cache.",
            snap.prefix_cache.tokens_saved,
        ),
        (
            "prompt_seconds_total",
            "Total time spent processing prompts (admission to first token).",
            snap.tokens.prompt_seconds_total,
        ),
        (
            "tokens_predicted_total",
            "Number of generation tokens processed.",
            snap.tokens.generated_total,
        ),
        (
            "tokens_predicted_seconds_total",
            "Total time spent generating tokens.",
            snap.tokens.generation_seconds_total,
        ),
        (
            "n_decode_total",
            "Total number of llama_decode() calls, excluding speculative decoding and "
            "multimodal decoding.",
            snap.step.decode_calls,
        ),
        (
            "n_tokens_max",
            "Largest observed sequence length (prompt + generation).",
            snap.tokens.longest_sequence,
        ),
        (
            "spec_decode_num_draft_tokens_total",
            "Speculative: Total draft tokens generated.",
            snap.speculative.drafted,
        ),
        (
            "spec_decode_num_accepted_tokens_total",
            "Speculative: Total draft tokens accepted by the target model.",
            snap.speculative.accepted,
        ),
        (
            "spec_decode_num_drafts_total",
            "Speculative: Total speculative decoding verification steps.",
            snap.speculative.drafts,
        ),
    ]
    gauges: list[tuple[str, str, float]] = [
        (
            "prompt_tokens_seconds",
            "Average prompt throughput in tokens/s (over the last 5 s).",
            snap.tokens.prompt_tokens_per_s,
        ),
        (
            "predicted_tokens_seconds",
            "Average generation throughput in tokens/s (over the last 5 s).",
            snap.tokens.gen_tokens_per_s,
        ),
        (
            "kv_cache_usage_ratio",
            "KV-cache usage. 1 means 100 percent usage.",
            kv.cells_used / kv.cells_total if kv.cells_total else 0.0,
        ),
        ("kv_cache_tokens", "KV-cache tokens.", kv.cells_used),
        ("requests_processing", "Number of requests processing.", snap.requests.running),
        ("requests_deferred", "Number of requests deferred.", snap.requests.queued),
        (
            "n_busy_slots_per_decode",
            "Average number of busy slots per llama_decode() call.",
            snap.step.sequences_per_decode,
        ),
    ]
    out: list[Metric] = []
    for name, help_text, value in counters:
        counter = CounterMetricFamily(PREFIX + name, help_text)
        counter.add_metric([], float(value))
        out.append(counter)
    for name, help_text, value in gauges:
        gauge = GaugeMetricFamily(PREFIX + name, help_text)
        gauge.add_metric([], float(value))
        out.append(gauge)
    return out


class LlamacppCollector(Collector):
    """Registered beside :class:`~backend.server.metrics_collector.EngineCollector`."""

    def __init__(self, snapshot: Callable[[], StatsSnapshot | None]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        if snap is not None:
            yield from llamacpp_families(snap)
