"""/health goes 503 -> 200; /metrics parses and carries every metric of the stats model;
/v1/stats serves the model with the dashboard's fields."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from backend.engine.stats_model import StatsSnapshot
from backend.server.metrics_collector import SPECS
from tests.server.conftest import LiveServer, start_server, wait_healthy

HTTP = httpx.Client(timeout=120.0)


def test_health_is_503_until_loaded_then_200() -> None:
    server = start_server(ctx_size=2048, parallel=2)
    try:
        seen = wait_healthy(server.base_url)
        assert seen[0] == 503, seen
        assert seen[-1] == 200
        body = HTTP.get(f"{server.base_url}/health").json()
        assert body["status"] == "ok"
    finally:
        server.handle.stop()


def test_metrics_parse_with_prometheus_parser(live_server: LiveServer) -> None:
    live_server.client().completions.create(
        model="SmolLM2-135M-Instruct", prompt="Hi", max_tokens=4
    )
    text = HTTP.get(f"{live_server.base_url}/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "quantdesk_kv_cells_total",
        "quantdesk_kv_bytes_used",
        "quantdesk_requests_running",
        "quantdesk_generated_tokens",
        "quantdesk_prefix_cache_hits",
        "quantdesk_process_rss_bytes",
    ):
        assert name in families, sorted(families)
    # every metric the model declares, once traffic has filled the latency percentiles
    assert {spec.name for spec in SPECS} <= set(families), sorted(families)
    total = families["quantdesk_kv_cells_total"].samples[0].value
    assert total == 16384
    assert families["quantdesk_generated_tokens"].samples[0].value >= 4


def test_stats_fields(live_server: LiveServer) -> None:
    s = live_server.stats()
    snapshot = StatsSnapshot.model_validate(s)  # the served body is the model, key for key
    assert snapshot.model_dump(mode="json") == s
    assert snapshot.ready and snapshot.model.id == "SmolLM2-135M-Instruct"
    assert s["model"]["n_ctx"] == 16384 and s["model"]["n_parallel"] == 8
    assert s["model"]["n_ctx_seq"] == 2048 and not s["model"]["kv_unified"]
    assert isinstance(s["model"]["gpu_offload_supported"], bool)
    assert s["kv"]["cells_total"] == 16384
    # SmolLM2-135M: 30 layers x (3 KV heads x 64) x 2 (K and V) x 2 bytes (f16)
    assert s["kv"]["bytes_total"] == 16384 * 30 * 192 * 2 * 2
    sys_ = s["system"]
    assert sys_["rss_bytes"] > 50e6
    assert sys_["gpus"] or sys_["gpu_note"]
    for key in ("ttft_ms_p50", "itl_ms_p99"):
        assert key in s["latency"]
