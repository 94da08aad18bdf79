"""The /v1/stats model without a server: its JSON shape, the /metrics derived from it, its
OpenAPI entry, and docs/STATS.md, whose field tables are generated from it.

``python -m tests.server.test_stats_model`` rewrites the tables in docs/STATS.md.
"""

from __future__ import annotations

import json
import sys
import typing
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel

from backend.engine.stats_model import SpeculativeStats, StatsSnapshot
from backend.server.app_factory import create_app
from backend.server.metrics_collector import SPECS, EngineCollector
from backend.settings import EngineSettings, ServerSettings
from backend.system.system_stats import METRIC_KEY, METRIC_TYPE_KEY
from tests.server.stats_sample import sample_stats

STATS_MD = Path(__file__).parents[2] / "docs" / "STATS.md"
BEGIN = "<!-- fields: generated from backend/engine/stats_model.py -->"
END = "<!-- end of generated fields -->"

# The keys clients read (the dashboard, tests, scripts): the model must serve exactly these.
SERVED_KEYS = {
    "requests": {"running", "queued", "completed", "errors", "rejected_busy", "cancelled"},
    "tokens": {
        "prompt_total",
        "prompt_decoded_total",
        "generated_total",
        "prompt_tokens_per_s",
        "gen_tokens_per_s",
        "prompt_seconds_total",
        "generation_seconds_total",
        "longest_sequence",
    },
    "latency": {"ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "itl_ms_p99", "ttft_ms_last"},
    "kv": {"cells_used", "cells_total", "bytes_used", "bytes_total", "used_pct"},
    "prefix_cache": {"hits", "misses", "tokens_saved", "entries"},
    "session_cache": {"ram", "disk"},
    "step": {
        "steps",
        "step_ms_avg",
        "python_ms_avg",
        "batch_tokens_avg",
        "preemptions",
        "decode_calls",
        "sequences_per_decode",
    },
    "speculative": {"type", "drafted", "accepted", "drafts", "acceptance_rate", "draft_ms_avg"},
    "media": {"images_encoded", "images_reused", "encode_ms_avg"},
    "model": {
        "id",
        "path",
        "architecture",
        "n_ctx",
        "n_ctx_seq",
        "kv_unified",
        "n_ctx_train",
        "n_parallel",
        "n_layer",
        "n_params",
        "n_gpu_layers",
        "gpu_offload_supported",
        "size_bytes",
        "cache_type_k",
        "cache_type_v",
        "flash_attn",
        "n_batch",
        "threads",
        "load_seconds",
        "cpu_path",
        "cpu_path_reason",
        "extra_buffers",
        "vision",
        "audio",
    },
    "system": {
        "rss_bytes",
        "cpu_pct",
        "ram_used_bytes",
        "ram_total_bytes",
        "ram_available_bytes",
        "gpus",
        "gpu_note",
    },
}
# The metric names /metrics had before it was derived from the model (dashboards use them).
METRICS_BEFORE = {
    "quantdesk_requests_running": "gauge",
    "quantdesk_requests_queued": "gauge",
    "quantdesk_requests_completed": "counter",
    "quantdesk_requests_errors": "counter",
    "quantdesk_requests_rejected_busy": "counter",
    "quantdesk_requests_cancelled": "counter",
    "quantdesk_prompt_tokens": "counter",
    "quantdesk_prompt_tokens_decoded": "counter",
    "quantdesk_generated_tokens": "counter",
    "quantdesk_prompt_tokens_per_second": "gauge",
    "quantdesk_generation_tokens_per_second": "gauge",
    "quantdesk_ttft_ms_p50": "gauge",
    "quantdesk_ttft_ms_p99": "gauge",
    "quantdesk_itl_ms_p50": "gauge",
    "quantdesk_itl_ms_p99": "gauge",
    "quantdesk_kv_cells_used": "gauge",
    "quantdesk_kv_cells_total": "gauge",
    "quantdesk_kv_bytes_used": "gauge",
    "quantdesk_kv_bytes_total": "gauge",
    "quantdesk_kv_used_percent": "gauge",
    "quantdesk_prefix_cache_hits": "counter",
    "quantdesk_prefix_cache_misses": "counter",
    "quantdesk_prefix_cache_tokens_saved": "counter",
    "quantdesk_prefix_cache_entries": "gauge",
    "quantdesk_steps": "counter",
    "quantdesk_step_ms_avg": "gauge",
    "quantdesk_step_python_ms_avg": "gauge",
    "quantdesk_process_rss_bytes": "gauge",
    "quantdesk_process_cpu_percent": "gauge",
    "quantdesk_ram_used_bytes": "gauge",
    "quantdesk_ram_total_bytes": "gauge",
    "quantdesk_gpu_vram_used_bytes": "gauge",
    "quantdesk_gpu_vram_total_bytes": "gauge",
}
METRICS_ADDED = {
    "quantdesk_step_batch_tokens_avg": "gauge",
    "quantdesk_preemptions": "counter",
    "quantdesk_spec_draft_tokens": "counter",
    "quantdesk_spec_accepted_tokens": "counter",
    "quantdesk_spec_drafts": "counter",
    "quantdesk_spec_acceptance_rate": "gauge",
    "quantdesk_spec_draft_ms_avg": "gauge",
    **{
        f"quantdesk_session_{tier}_{name}": kind
        for tier in ("ram", "disk")
        for name, kind in [
            ("entries", "gauge"),
            ("bytes", "gauge"),
            ("budget_bytes", "gauge"),
            ("hits", "counter"),
            ("misses", "counter"),
            ("tokens_saved", "counter"),
        ]
    },
    "quantdesk_media_images_encoded": "counter",
    "quantdesk_media_images_reused": "counter",
    "quantdesk_media_encode_ms_avg": "gauge",
    # llama-server's llamacpp:* families read these (issue 34)
    "quantdesk_prompt_seconds": "counter",
    "quantdesk_generation_seconds": "counter",
    "quantdesk_longest_sequence_tokens": "gauge",
    "quantdesk_decode_calls": "counter",
    "quantdesk_sequences_per_decode": "gauge",
}


def _scrape(snapshot: StatsSnapshot | None) -> dict[str, object]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(lambda: snapshot))
    text = generate_latest(registry).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_the_model_serves_the_keys_clients_read() -> None:
    body = json.loads(sample_stats(3).model_dump_json())
    assert set(body) == {*SERVED_KEYS, "uptime_s", "ready"}
    for section, keys in SERVED_KEYS.items():
        assert set(body[section]) == keys, section
    assert set(body["system"]["gpus"][0]) == {
        "index",
        "name",
        "vram_used_bytes",
        "vram_total_bytes",
    }
    assert StatsSnapshot.model_validate_json(json.dumps(body)) == sample_stats(3)


def test_metrics_are_the_model_fields_with_the_names_they_had() -> None:
    speculating = SpeculativeStats(
        type="ngram-simple",
        drafted=80,
        accepted=60,
        drafts=10,
        acceptance_rate=0.75,
        draft_ms_avg=0.02,
    )
    families = _scrape(sample_stats(8).model_copy(update={"speculative": speculating}))
    assert {spec.name: spec.metric_type for spec in SPECS} == {**METRICS_BEFORE, **METRICS_ADDED}
    assert {name: f.type for name, f in families.items()} == {**METRICS_BEFORE, **METRICS_ADDED}
    value = {name: f.samples[0].value for name, f in families.items() if f.samples}
    assert value["quantdesk_requests_completed"] == 8
    assert (
        value["quantdesk_kv_cells_used"] == 80
        and value["quantdesk_kv_used_percent"] == 100 * 80 / 1024
    )
    assert value["quantdesk_generation_tokens_per_second"] == 58.0
    assert value["quantdesk_process_rss_bytes"] == 250_000_000
    (gpu,) = families["quantdesk_gpu_vram_used_bytes"].samples
    assert gpu.labels == {"gpu": "0"} and gpu.value == 2**30 * 8 // 10
    assert families["quantdesk_requests_completed"].documentation == "Requests finished"


def test_a_missing_percentile_or_gpu_is_left_out_and_no_engine_means_no_metrics() -> None:
    snapshot = sample_stats(1, with_gpu=False)
    before_traffic = snapshot.model_copy(
        update={"latency": snapshot.latency.model_copy(update={"ttft_ms_p50": None})}
    )
    families = _scrape(before_traffic)
    assert "quantdesk_ttft_ms_p50" not in families and "quantdesk_ttft_ms_p99" in families
    assert families["quantdesk_gpu_vram_used_bytes"].samples == []
    assert _scrape(None) == {}


def test_openapi_documents_the_stats_model() -> None:
    app = create_app(
        EngineSettings.model_validate({}),
        ServerSettings.model_validate({"host": "127.0.0.1", "port": 0}),
    )
    schema = app.openapi()
    ok = schema["paths"]["/v1/stats"]["get"]["responses"]["200"]["content"]["application/json"]
    assert ok["schema"]["$ref"] == "#/components/schemas/StatsSnapshot"
    running = schema["components"]["schemas"]["RequestStats"]["properties"]["running"]
    assert running[METRIC_KEY] == "quantdesk_requests_running"
    assert running[METRIC_TYPE_KEY] == "gauge" and running["description"]


JSON_TYPES = {int: "integer", float: "number", bool: "boolean", str: "string", type(None): "null"}


def _type_name(annotation: object) -> str:
    """The JSON type of a field: ``number or null``, ``array``, ``object``."""
    if typing.get_origin(annotation) is list:
        return "array"
    if isinstance(annotation, type):
        return JSON_TYPES.get(annotation, "object")
    return " or ".join(_type_name(arg) for arg in typing.get_args(annotation))


def _table(title: str, model: type[BaseModel]) -> tuple[list[str], list[tuple[str, type]]]:
    """One section's table, and the sections nested in it (as (title, model))."""
    doc = (model.__doc__ or "").strip()
    lines = [f"### {title}", "", doc, "", "| key | JSON type | meaning, unit | Prometheus |"]
    lines.append("|---|---|---|---|")
    nested: list[tuple[str, type]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        item = getattr(annotation, "__args__", (None,))[0]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            nested.append((f"`{name}`", annotation))
            continue
        if isinstance(item, type) and issubclass(item, BaseModel):
            nested.append((f"`{title.strip('`')}.{name}[]`", item))
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        metric = f"`{extra[METRIC_KEY]}` ({extra[METRIC_TYPE_KEY]})" if METRIC_KEY in extra else ""
        lines.append(
            f"| `{name}` | {_type_name(annotation)} | {field.description or ''} | {metric} |"
        )
    return [*lines, ""], nested


def field_tables() -> str:
    """The markdown tables of every field of :class:`StatsSnapshot`, sections in order."""
    out: list[str] = []
    pending: list[tuple[str, type]] = [("Top level", StatsSnapshot)]
    while pending:
        title, model = pending.pop(0)
        lines, nested = _table(title, model)
        out += lines
        pending = nested + pending
    return "\n".join(out)


def _with_tables(text: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{field_tables()}\n{END}{tail}"


def test_docs_list_every_field_of_the_model() -> None:
    text = STATS_MD.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    assert text == _with_tables(text), (
        "docs/STATS.md is behind the model: run python -m tests.server.test_stats_model"
    )


if __name__ == "__main__":
    STATS_MD.write_text(_with_tables(STATS_MD.read_text(encoding="utf-8")), encoding="utf-8")
    sys.stdout.write(f"wrote {STATS_MD}\n")
