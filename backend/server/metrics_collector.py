"""Prometheus view of the engine stats, read at scrape time (exact, no double bookkeeping)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "quantdesk"

# (section, key, metric suffix, help, kind)
_FIELDS: list[tuple[str, str, str, str, str]] = [
    ("requests", "running", "requests_running", "Sequences generating now", "gauge"),
    ("requests", "queued", "requests_queued", "Requests waiting for a sequence", "gauge"),
    ("requests", "completed", "requests_completed", "Requests finished", "counter"),
    ("requests", "errors", "requests_errors", "Requests failed inside the engine", "counter"),
    (
        "requests",
        "rejected_busy",
        "requests_rejected_busy",
        "Requests refused: queue full",
        "counter",
    ),
    ("requests", "cancelled", "requests_cancelled", "Requests cancelled by the client", "counter"),
    ("tokens", "prompt_total", "prompt_tokens", "Prompt tokens received", "counter"),
    ("tokens", "prompt_decoded_total", "prompt_tokens_decoded", "Prompt tokens decoded", "counter"),
    ("tokens", "generated_total", "generated_tokens", "Tokens generated", "counter"),
    ("tokens", "prompt_tokens_per_s", "prompt_tokens_per_second", "Prompt throughput", "gauge"),
    (
        "tokens",
        "gen_tokens_per_s",
        "generation_tokens_per_second",
        "Generation throughput",
        "gauge",
    ),
    ("latency", "ttft_ms_p50", "ttft_ms_p50", "Time to first token, median", "gauge"),
    ("latency", "ttft_ms_p99", "ttft_ms_p99", "Time to first token, p99", "gauge"),
    ("latency", "itl_ms_p50", "itl_ms_p50", "Inter-token latency, median", "gauge"),
    ("latency", "itl_ms_p99", "itl_ms_p99", "Inter-token latency, p99", "gauge"),
    ("kv", "cells_used", "kv_cells_used", "KV cells in use", "gauge"),
    ("kv", "cells_total", "kv_cells_total", "KV cells in the cache", "gauge"),
    ("kv", "bytes_used", "kv_bytes_used", "KV bytes in use", "gauge"),
    ("kv", "bytes_total", "kv_bytes_total", "KV cache size in bytes", "gauge"),
    ("kv", "used_pct", "kv_used_percent", "KV cache use in percent", "gauge"),
    ("prefix_cache", "hits", "prefix_cache_hits", "Requests that reused cached KV", "counter"),
    ("prefix_cache", "misses", "prefix_cache_misses", "Requests with no cached prefix", "counter"),
    (
        "prefix_cache",
        "tokens_saved",
        "prefix_cache_tokens_saved",
        "Prompt tokens not recomputed",
        "counter",
    ),
    (
        "prefix_cache",
        "entries",
        "prefix_cache_entries",
        "Finished sequences kept for reuse",
        "gauge",
    ),
    ("step", "steps", "steps", "Decode steps", "counter"),
    ("step", "step_ms_avg", "step_ms_avg", "Mean decode step time", "gauge"),
    ("step", "python_ms_avg", "step_python_ms_avg", "Mean Python time per step", "gauge"),
    ("system", "rss_bytes", "process_rss_bytes", "Server resident memory", "gauge"),
    ("system", "cpu_pct", "process_cpu_percent", "Server CPU use", "gauge"),
    ("system", "ram_used_bytes", "ram_used_bytes", "Machine RAM in use", "gauge"),
    ("system", "ram_total_bytes", "ram_total_bytes", "Machine RAM", "gauge"),
]


class EngineCollector(Collector):
    def __init__(self, snapshot: Callable[[], dict[str, Any] | None]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        if snap is None:
            return
        for section, key, suffix, doc, kind in _FIELDS:
            value = snap.get(section, {}).get(key)
            if value is None:
                continue
            name = f"{PREFIX}_{suffix}"
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, doc, value=float(value))
        vram_used = GaugeMetricFamily(
            f"{PREFIX}_gpu_vram_used_bytes", "VRAM in use", labels=["gpu"]
        )
        vram_total = GaugeMetricFamily(
            f"{PREFIX}_gpu_vram_total_bytes", "VRAM size", labels=["gpu"]
        )
        for gpu in snap.get("system", {}).get("gpus", []):
            vram_used.add_metric([str(gpu["index"])], float(gpu["vram_used_bytes"]))
            vram_total.add_metric([str(gpu["index"])], float(gpu["vram_total_bytes"]))
        yield vram_used
        yield vram_total
