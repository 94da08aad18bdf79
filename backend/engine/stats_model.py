"""The ``/v1/stats`` body as one typed model: the engine builds it, the server serves it and
derives ``/metrics`` from it, the GUI dashboard reads it.

Only pydantic, the standard library and :mod:`backend.system.system_stats` (the machine's
part, and :func:`~backend.system.system_stats.metric_field`, which names a field's
Prometheus metric) here, so the GUI can import it without llama.cpp.
"""

from __future__ import annotations

from pydantic import Field

from backend.system.system_stats import StatsSection, SystemStats, metric_field


class RequestStats(StatsSection):
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


class TokenStats(StatsSection):
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
    prompt_seconds_total: float = metric_field(
        "Time from each request's admission to its first token, summed, s",
        "quantdesk_prompt_seconds",
        "counter",
    )
    generation_seconds_total: float = metric_field(
        "Time from each request's first token to its last, summed, s",
        "quantdesk_generation_seconds",
        "counter",
    )
    longest_sequence: int = metric_field(
        "Longest sequence seen (prompt and generated tokens)", "quantdesk_longest_sequence_tokens"
    )


class LatencyStats(StatsSection):
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


class KvStats(StatsSection):
    """The KV cache (one cell holds one token of one sequence)."""

    cells_used: int = metric_field("KV cells in use", "quantdesk_kv_cells_used")
    cells_total: int = metric_field("KV cells in the cache", "quantdesk_kv_cells_total")
    bytes_used: int = metric_field("KV cache in use, bytes", "quantdesk_kv_bytes_used")
    bytes_total: int = metric_field("KV cache size, bytes", "quantdesk_kv_bytes_total")
    used_pct: float = metric_field("KV cache in use, percent", "quantdesk_kv_used_percent")


class PrefixCacheStats(StatsSection):
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


class RamSessionStats(StatsSection):
    """Sessions whose slot served another request, kept in host RAM (``--cache-ram``)."""

    entries: int = metric_field("Sessions kept in RAM", "quantdesk_session_ram_entries")
    bytes: int = metric_field("RAM the kept sessions take, bytes", "quantdesk_session_ram_bytes")
    budget_bytes: int = metric_field(
        "RAM budget for kept sessions, bytes (0: off)", "quantdesk_session_ram_budget_bytes"
    )
    hits: int = metric_field(
        "Requests whose prefix was restored from RAM", "quantdesk_session_ram_hits", "counter"
    )
    misses: int = metric_field(
        "Requests the RAM tier did not serve (the KV cache held as much, or nothing matched)",
        "quantdesk_session_ram_misses",
        "counter",
    )
    tokens_saved: int = metric_field(
        "Prompt tokens restored from RAM instead of decoded",
        "quantdesk_session_ram_tokens_saved",
        "counter",
    )


class DiskSessionStats(StatsSection):
    """Sessions kept on disk under QUANTDESK_HOME (``--cache-disk``); they survive a restart."""

    entries: int = metric_field("Sessions kept on disk", "quantdesk_session_disk_entries")
    bytes: int = metric_field("Disk the kept sessions take, bytes", "quantdesk_session_disk_bytes")
    budget_bytes: int = metric_field(
        "Disk budget for kept sessions, bytes (0: off)", "quantdesk_session_disk_budget_bytes"
    )
    hits: int = metric_field(
        "Requests whose prefix was read from disk", "quantdesk_session_disk_hits", "counter"
    )
    misses: int = metric_field(
        "Requests the disk tier was asked for and did not serve",
        "quantdesk_session_disk_misses",
        "counter",
    )
    tokens_saved: int = metric_field(
        "Prompt tokens read from disk instead of decoded",
        "quantdesk_session_disk_tokens_saved",
        "counter",
    )


class SessionCacheStats(StatsSection):
    """Sessions kept past their slot; restored tokens also count in ``prefix_cache``."""

    ram: RamSessionStats = Field(
        default_factory=lambda: RamSessionStats(
            entries=0, bytes=0, budget_bytes=0, hits=0, misses=0, tokens_saved=0
        ),
        description="The RAM tier",
    )
    disk: DiskSessionStats = Field(
        default_factory=lambda: DiskSessionStats(
            entries=0, bytes=0, budget_bytes=0, hits=0, misses=0, tokens_saved=0
        ),
        description="The disk tier",
    )


class StepStats(StatsSection):
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
    decode_calls: int = metric_field(
        "llama_decode calls of prompts and generated tokens (not images)",
        "quantdesk_decode_calls",
        "counter",
    )
    sequences_per_decode: float = metric_field(
        "Mean sequences in one llama_decode call", "quantdesk_sequences_per_decode"
    )


class SpeculativeStats(StatsSection):
    """Speculative decoding (``--spec-type``, ``-md``): draft tokens verified, and kept."""

    type: str = Field(description="Speculative types in use, comma-separated; empty when off")
    drafted: int = metric_field("Draft tokens verified", "quantdesk_spec_draft_tokens", "counter")
    accepted: int = metric_field(
        "Draft tokens accepted (the model sampled the same token)",
        "quantdesk_spec_accepted_tokens",
        "counter",
    )
    drafts: int = metric_field(
        "Verifications of a draft (one per sequence and step)", "quantdesk_spec_drafts", "counter"
    )
    acceptance_rate: float = metric_field(
        "Accepted / drafted tokens (0 before the first draft)", "quantdesk_spec_acceptance_rate"
    )
    draft_ms_avg: float = metric_field(
        "Mean time spent drafting per step that drafted, ms", "quantdesk_spec_draft_ms_avg"
    )


class MediaStats(StatsSection):
    """Images in prompts (``--mmproj``): encoded by the projector, or reused by content."""

    images_encoded: int = metric_field(
        "Images run through the vision encoder", "quantdesk_media_images_encoded", "counter"
    )
    images_reused: int = metric_field(
        "Images whose embeddings were kept from an earlier request (same content)",
        "quantdesk_media_images_reused",
        "counter",
    )
    encode_ms_avg: float = metric_field(
        "Mean vision-encoder time per encoded image, ms", "quantdesk_media_encode_ms_avg"
    )


def _no_speculation() -> SpeculativeStats:
    return SpeculativeStats(
        type="", drafted=0, accepted=0, drafts=0, acceptance_rate=0.0, draft_ms_avg=0.0
    )


class ModelStats(StatsSection):
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
    cpu_path: str = Field(
        default="plain",
        description=(
            "How weights on the CPU run: AMX or repack (llama.cpp's extra buffer types) or "
            "plain (--no-repack, or turned off by the CPU probe)"
        ),
    )
    cpu_path_reason: str = Field(default="", description="Why that CPU path")
    extra_buffers: list[str] = Field(
        default_factory=list, description="The CPU's extra buffer types in this build"
    )
    vision: bool = Field(default=False, description="It reads images (a projector is loaded)")
    audio: bool = Field(
        default=False, description="It hears audio (its projector has an audio encoder)"
    )


class StatsSnapshot(StatsSection):
    """``GET /v1/stats``: everything the dashboard and ``/metrics`` show, read at one instant."""

    requests: RequestStats
    tokens: TokenStats
    latency: LatencyStats
    kv: KvStats
    prefix_cache: PrefixCacheStats
    session_cache: SessionCacheStats = Field(
        default_factory=SessionCacheStats, description="Sessions kept in RAM and on disk"
    )
    step: StepStats
    speculative: SpeculativeStats = Field(
        default_factory=_no_speculation, description="Speculative decoding counters"
    )
    media: MediaStats = Field(
        default_factory=lambda: MediaStats(images_encoded=0, images_reused=0, encode_ms_avg=0.0),
        description="Image input counters",
    )
    uptime_s: float = Field(description="Time since the engine was created, s")
    model: ModelStats
    system: SystemStats
    ready: bool = Field(description="The engine has loaded and warmed up")
