"""llama-server's ``llamacpp:*`` Prometheus families, beside ours, from the same snapshot.

Grafana dashboards built for llama-server read these names. Each is computed from the
:class:`~backend.engine.stats_model.StatsSnapshot` that ``quantdesk_*`` comes from, with
llama-server's help text; where the meaning differs slightly, the help says so:

- ``prompt_tokens_seconds`` / ``predicted_tokens_seconds``: llama-server averages over
  the time since the previous scrape, ours over the last 5 s;
- ``n_decode_total`` is not given: our counter is of scheduler steps, and one step may
  make more than one ``llama_decode`` call.
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
            "tokens_predicted_total",
            "Number of generation tokens processed.",
            snap.tokens.generated_total,
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
