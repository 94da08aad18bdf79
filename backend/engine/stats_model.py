"""The ``/v1/stats`` body as one typed model: the engine builds it, the server serves it and
derives ``/metrics`` from it, the GUI dashboard reads it.

Only pydantic and the standard library here, so the GUI can import it without llama.cpp.
A numeric field that Prometheus exports names its metric in ``json_schema_extra``
(see :func:`metric_field`); the field's description is the metric's help text.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

MetricType = Literal["counter", "gauge"]
METRIC_KEY = "prometheus"
METRIC_TYPE_KEY = "prometheus_type"


def metric_field(description: str, metric: str, metric_type: MetricType = "gauge") -> Any:
    """A required field exported to Prometheus as ``metric`` (its full name)."""
    return Field(
        description=description,
        json_schema_extra={METRIC_KEY: metric, METRIC_TYPE_KEY: metric_type},
    )


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True)


class RequestStats(_Section):
    """Requests since the server started (the warm-up request is not counted)."""

    running: int = metric_field("Sequences generating now", "quantdesk_requests_running")
    queued: int = metric_field("Requests waiting for a free sequence", "quantdesk_requests_queued")
    completed: int = metric_field("Requests finished", "quantdesk_requests_completed", "counter")
    errors: int = metric_field(
        "Requests failed inside the engine", "quantdesk_requests_errors", "counter"
    )
    rejected_busy: int = metric_field(
        "Requests refused because the queue was full",
        "quantdesk_requests_rejected_busy",
        "counter",
    )
    cancelled: int = metric_field(
        "Requests cancelled by the client", "quantdesk_requests_cancelled", "counter"
    )


class TokenStats(_Section):
    """Token counts and throughput (rates over the last 5 s)."""

    prompt_total: int = metric_field("Prompt tokens received", "quantdesk_prompt_tokens", "counter")
    prompt_decoded_total: int = metric_field(
        "Prompt tokens decoded (received minus those reused from the prefix cache)",
        "quantdesk_prompt_tokens_decoded",
        "counter",
    )
    generated_total: int = metric_field("Tokens generated", "quantdesk_generated_tokens", "counter")
    prompt_tokens_per_s: float = metric_field(
        "Prompt throughput, tokens/s", "quantdesk_prompt_tokens_per_second"
    )
    gen_tokens_per_s: float = metric_field(
        "Generation throughput, tokens/s", "quantdesk_generation_tokens_per_second"
    )


class LatencyStats(_Section):
    """Latency percentiles over the last 2048 samples; null before the first sample."""

    ttft_ms_p50: float | None = metric_field(
        "Time to first token, median, ms", "quantdesk_ttft_ms_p50"
    )
    ttft_ms_p99: float | None = metric_field(
        "Time to first token, p99, ms", "quantdesk_ttft_ms_p99"
    )
    itl_ms_p50: float | None = metric_field(
        "Inter-token latency, median, ms", "quantdesk_itl_ms_p50"
    )
    itl_ms_p99: float | None = metric_field("Inter-token latency, p99, ms", "quantdesk_itl_ms_p99")
    ttft_ms_last: float | None = Field(description="Time to first token of the latest request, ms")


class KvStats(_Section):
    """The KV cache (one cell holds one token of one sequence)."""

    cells_used: int = metric_field("KV cells in use", "quantdesk_kv_cells_used")
    cells_total: int = metric_field("KV cells in the cache", "quantdesk_kv_cells_total")
    bytes_used: int = metric_field("KV cache in use, bytes", "quantdesk_kv_bytes_used")
    bytes_total: int = metric_field("KV cache size, bytes", "quantdesk_kv_bytes_total")
    used_pct: float = metric_field("KV cache in use, percent", "quantdesk_kv_used_percent")


class PrefixCacheStats(_Section):
    """Reuse of cached KV for prompts that share a prefix."""

    hits: int = metric_field(
        "Requests that reused cached KV", "quantdesk_prefix_cache_hits", "counter"
    )
    misses: int = metric_field(
        "Requests with no cached prefix", "quantdesk_prefix_cache_misses", "counter"
    )
    tokens_saved: int = metric_field(
        "Prompt tokens not recomputed", "quantdesk_prefix_cache_tokens_saved", "counter"
    )
    entries: int = metric_field(
        "Finished sequences kept for reuse", "quantdesk_prefix_cache_entries"
    )


class StepStats(_Section):
    """Scheduler steps (one ``llama_decode`` each) since the server started."""

    steps: int = metric_field("Decode steps", "quantdesk_steps", "counter")
    step_ms_avg: float = metric_field("Mean decode step time, ms", "quantdesk_step_ms_avg")
    python_ms_avg: float = metric_field(
        "Mean Python time per step, ms", "quantdesk_step_python_ms_avg"
    )
    batch_tokens_avg: float = metric_field(
        "Mean tokens per decode batch", "quantdesk_step_batch_tokens_avg"
    )
    preemptions: int = metric_field(
        "Sequences preempted to free KV cells", "quantdesk_preemptions", "counter"
    )


class ModelStats(_Section):
    """The loaded model and the settings it runs with."""

    id: str = Field(description="Model id served in /v1/models")
    path: str = Field(description="GGUF file path")
    architecture: str = Field(description="general.architecture from the GGUF")
    n_ctx: int = Field(description="KV cache size, tokens (all sequences together)")
    n_ctx_seq: int = Field(description="Context one sequence may use, tokens")
    kv_unified: bool = Field(description="One KV buffer shared by all sequences")
    n_ctx_train: int = Field(description="Context the model was trained with, tokens")
    n_parallel: int = Field(description="Sequences generated at once (slots)")
    n_layer: int = Field(description="Transformer layers")
    n_params: int = Field(description="Parameters")
    n_gpu_layers: int = Field(description="Layers offloaded to the GPU")
    gpu_offload_supported: bool = Field(description="llama.cpp was built with a GPU backend")
    size_bytes: int = Field(description="GGUF file size, bytes")
    cache_type_k: str = Field(description="KV cache type of K (f16, q8_0, ...)")
    cache_type_v: str = Field(description="KV cache type of V (f16, q8_0, ...)")
    flash_attn: str = Field(description="Flash attention: auto, on or off")
    n_batch: int = Field(description="Most tokens in one decode batch, tokens")
    threads: int = Field(description="CPU threads for generation")
    load_seconds: float = Field(description="Time to load the model, s")


class GpuStats(_Section):
    """One NVIDIA GPU, as NVML reports it."""

    # in /metrics each GPU is a sample labelled gpu="<index>"
    metric_label: ClassVar[tuple[str, str]] = ("gpu", "index")

    index: int = Field(description="NVML device index")
    name: str = Field(description="Device name")
    vram_used_bytes: int = metric_field("VRAM in use, bytes", "quantdesk_gpu_vram_used_bytes")
    vram_total_bytes: int = metric_field("VRAM size, bytes", "quantdesk_gpu_vram_total_bytes")


class SystemStats(_Section):
    """The server process and the machine it runs on."""

    rss_bytes: int = metric_field("Server resident memory, bytes", "quantdesk_process_rss_bytes")
    cpu_pct: float = metric_field(
        "Server CPU use, percent of one core", "quantdesk_process_cpu_percent"
    )
    ram_used_bytes: int = metric_field("Machine RAM in use, bytes", "quantdesk_ram_used_bytes")
    ram_total_bytes: int = metric_field("Machine RAM, bytes", "quantdesk_ram_total_bytes")
    ram_available_bytes: int = Field(description="Machine RAM available, bytes")
    gpus: list[GpuStats] = Field(description="One entry per NVIDIA GPU; empty without one")
    gpu_note: str | None = Field(description="Why ``gpus`` is empty or partial; null otherwise")


class StatsSnapshot(_Section):
    """``GET /v1/stats``: everything the dashboard and ``/metrics`` show, read at one instant."""

    requests: RequestStats
    tokens: TokenStats
    latency: LatencyStats
    kv: KvStats
    prefix_cache: PrefixCacheStats
    step: StepStats
    uptime_s: float = Field(description="Time since the engine was created, s")
    model: ModelStats
    system: SystemStats
    ready: bool = Field(description="The engine has loaded and warmed up")
