"""Engine settings: every knob of the llama.cpp context, with bounds and descriptions.

:class:`ServingKnobs` is the one definition of the knobs that load and size a served
model; ``quantdesk serve`` (:class:`EngineSettings`), the GUI's saved knobs and the fit
estimate are all built from it.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from backend.settings.media_settings import MediaKnobs

CacheType = Literal["f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"]
FlashAttn = Literal["auto", "on", "off"]
SplitMode = Literal["none", "layer", "row"]
Pooling = Literal["none", "mean", "cls", "last", "rank"]  # llama-server's --pooling names
# llama-server's --spec-type names that QuantDesk implements
SPEC_TYPES = ("none", "ngram-simple", "draft-simple")


def _default_threads() -> int:
    return max(1, min(8, os.cpu_count() or 1))


class ServingKnobs(BaseModel):
    """The model and the knobs that decide how it is loaded, how much memory it takes and
    how many sequences run at once."""

    model: str = Field(
        default="default",
        description="GGUF file to serve, or 'default' for the embedded SmolLM2-135M-Instruct",
        json_schema_extra={"flags": ["-m", "--model"]},
    )
    ctx_size: int = Field(
        default=16384,
        ge=256,
        le=1_048_576,
        description=(
            "Total KV-cache cells; with a stream per slot each of the -np sequences gets "
            "ctx-size/parallel of them"
        ),
        json_schema_extra={"flags": ["-c", "--ctx-size"]},
    )
    batch_size: int = Field(
        default=512,
        ge=32,
        le=65_536,
        description="Logical batch: most tokens submitted to one llama_decode",
        json_schema_extra={"flags": ["-b", "--batch-size"]},
    )
    ubatch_size: int = Field(
        default=512,
        ge=16,
        le=65_536,
        description="Physical micro-batch size processed at once",
        json_schema_extra={"flags": ["-ub", "--ubatch-size"]},
    )
    parallel: int = Field(
        default=4,
        ge=1,
        le=128,
        description="Sequences generated concurrently (continuous batching)",
        json_schema_extra={"flags": ["-np", "--parallel"]},
    )
    gpu_layers: int = Field(
        default=-1,
        ge=-1,
        le=100_000,
        description="Layers offloaded to the GPU (-1 = all); ignored by CPU-only builds",
        json_schema_extra={"flags": ["-ngl", "--gpu-layers"]},
    )
    cache_type_k: CacheType = Field(
        default="f16",
        description="KV-cache type for K",
        json_schema_extra={"flags": ["-ctk", "--cache-type-k"]},
    )
    cache_type_v: CacheType = Field(
        default="f16",
        description="KV-cache type for V (quantised V needs flash attention)",
        json_schema_extra={"flags": ["-ctv", "--cache-type-v"]},
    )
    flash_attn: FlashAttn = Field(
        default="auto",
        description="Flash attention: auto, on or off",
        json_schema_extra={"flags": ["-fa", "--flash-attn"]},
    )
    no_repack: bool = Field(
        default=False,
        description=(
            "Turn off llama.cpp's weight repacking into extra CPU buffer types (AMX, "
            "CPU_REPACK), as llama-server's -nr; QUANTDESK_NO_REPACK=1 does the same for "
            "every command. Without it the CPU probe turns repacking off by itself on a "
            "machine where the repacked kernels fault"
        ),
        json_schema_extra={"flags": ["-nr", "--no-repack"], "off_flags": ["--repack"]},
    )
    threads: int = Field(
        default_factory=_default_threads,
        ge=1,
        le=512,
        description="CPU threads for generation",
        json_schema_extra={"flags": ["-t", "--threads"]},
    )
    kv_unified: bool = Field(
        default=False,
        description=(
            "One KV cache shared by all parallel sequences, so that one request may use the "
            "whole context (default: a KV stream of ctx-size/parallel cells per slot, as "
            "llama-server runs with -np; each row then attends only to its own slot, which "
            "is faster, and idle slots keep their prompts for reuse)"
        ),
        json_schema_extra={
            "flags": ["-kvu", "--kv-unified"],
            "off_flags": ["-no-kvu", "--no-kv-unified", "--kv-per-slot"],
        },
    )
    prefix_cache_entries: int = Field(
        default=8,
        ge=0,
        le=64,
        description=(
            "Finished sequences whose KV is kept for prefix reuse with --kv-unified "
            "(0 disables); with a KV stream per slot the idle slots are the cache"
        ),
        json_schema_extra={"flags": ["--prefix-cache"]},
    )

    cache_ram: int | None = Field(
        default=None,
        ge=0,
        le=16_777_216,
        description=(
            "MiB of host RAM for the KV of sessions whose slot served another request, "
            "restored when a prompt shares their prefix, as llama-server's --cache-ram "
            "(0 = off; default: the smaller of 8192 MiB and a tenth of the available RAM)"
        ),
        json_schema_extra={"flags": ["--cache-ram"]},
    )
    cache_disk: int | None = Field(
        default=None,
        ge=0,
        le=16_777_216,
        description=(
            "MiB of disk under QUANTDESK_HOME for the coldest cached sessions, so that they "
            "survive a restart (0 = off; default: the smaller of 4096 MiB and a tenth of the "
            "free disk)"
        ),
        json_schema_extra={"flags": ["--cache-disk"]},
    )

    rpc: str | None = Field(
        default=None,
        description=(
            "Comma-separated RPC workers (host:port) whose devices hold layers of the model, "
            "as llama-server's --rpc; start each with 'quantdesk worker' (the RPC protocol "
            "has no authentication: LAN or VPN only)"
        ),
        json_schema_extra={"flags": ["--rpc"]},
    )
    tensor_split: str | None = Field(
        default=None,
        description=(
            "Fraction of the model to offload to each device, comma-separated proportions in "
            "device order (the --rpc workers' devices first, then local GPUs), e.g. 3,1 "
            "(default: in proportion to each device's free memory)"
        ),
        json_schema_extra={"flags": ["-ts", "--tensor-split"]},
    )
    split_mode: SplitMode = Field(
        default="layer",
        description=(
            "How to split the model across devices: none (one device), layer (layers and KV "
            "across devices, pipelined) or row (weights split by rows)"
        ),
        json_schema_extra={"flags": ["-sm", "--split-mode"]},
    )

    @field_validator("rpc")
    @classmethod
    def _rpc_endpoints(cls, value: str | None) -> str | None:
        if value is None:
            return None
        endpoints = rpc_endpoints(value)
        for endpoint in endpoints:
            host, sep, port = endpoint.partition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"RPC worker {endpoint!r} is not host:port")
        return ",".join(endpoints) or None

    @field_validator("tensor_split")
    @classmethod
    def _tensor_split_proportions(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = _split_parts(value)
        try:
            numbers = [float(part) for part in parts]
        except ValueError:
            raise ValueError(f"expected proportions such as 3,1, got {value!r}") from None
        if any(n < 0 or n != n for n in numbers) or not any(numbers):
            raise ValueError(f"proportions must be >= 0 and not all 0, got {value!r}")
        return ",".join(parts)

    @model_validator(mode="before")
    @classmethod
    def _layout_saved_before_kv_unified(cls, data: Any) -> Any:
        """Knobs saved before the per-slot default kept ``kv_per_slot``: keep the layout
        they chose (the old default was unified) rather than change it under them."""
        if isinstance(data, dict) and "kv_per_slot" in data:
            data = dict(data)
            per_slot = bool(data.pop("kv_per_slot"))
            data.setdefault("kv_unified", not per_slot)
        return data

    @property
    def n_seq_max(self) -> int:
        """llama.cpp sequences: the parallel slots, plus the prefix-cache entries of a
        unified cache (with a KV stream per slot the idle slots are the cache)."""
        return self.parallel + (self.prefix_cache_entries if self.kv_unified else 0)


class SpeculativeKnobs(BaseModel):
    """Speculative decoding, with llama-server's flags: drafts from n-gram lookup in the prompt
    and output so far (``ngram-simple``) and/or from a small draft model (``draft-simple``),
    verified by the served model so that the output is what it would have been without them."""

    spec_type: str = Field(
        default="ngram-simple",
        description=(
            "Comma-separated speculative decoding types: none, ngram-simple (the default: "
            "draft from the prompt and output so far, verified only as far as it pays), "
            "draft-simple (draft with --model-draft; implied by -md); with both, a sequence "
            "drafts with the model only when the n-grams find nothing"
        ),
        json_schema_extra={"flags": ["--spec-type"]},
    )
    spec_ngram_simple_size_n: int = Field(
        default=12,
        ge=1,
        le=1024,
        description="ngram-simple: length of the lookup n-gram (the last tokens to find earlier)",
        json_schema_extra={"flags": ["--spec-ngram-simple-size-n"]},
    )
    # QuantDesk's own: llama.cpp looks up size-n tokens only. Measured on the edit benchmark
    # (6 paired passes, one stream): min 6 gave 1.30x no speculation, 12 (no fallback) 1.02x,
    # 4 1.13x (short matches guess wrong more often)
    spec_ngram_simple_size_n_min: int = Field(
        default=6,
        ge=1,
        le=1024,
        description="ngram-simple: when the last size-n tokens occurred nowhere before, look up "
        "shorter n-grams down to this length (the longest match drafts)",
        json_schema_extra={"flags": ["--spec-ngram-simple-size-n-min"]},
    )
    spec_draft_policy: Literal["cost", "full"] = Field(
        default="cost",
        description="How much of each draft is verified: cost (as much as pays for its rows, "
        "from the measured decode cost and the acceptance so far) or full (all of it, as "
        "llama.cpp does)",
        json_schema_extra={"flags": ["--spec-draft-policy"]},
    )
    # llama.cpp's 48: the draft policy (backend/engine/speculative/draft_policy.py) verifies
    # only as much of a draft as its measured row cost and acceptance say pays
    spec_ngram_simple_size_m: int = Field(
        default=48,
        ge=1,
        le=1024,
        description="ngram-simple: most tokens drafted after a match",
        json_schema_extra={"flags": ["--spec-ngram-simple-size-m"]},
    )
    spec_ngram_simple_min_hits: int = Field(
        default=1,
        ge=1,
        le=1_000_000,
        description="ngram-simple: earlier occurrences the n-gram needs before it drafts",
        json_schema_extra={"flags": ["--spec-ngram-simple-min-hits"]},
    )
    model_draft: str | None = Field(
        default=None,
        description="Draft model GGUF for speculative decoding (its vocabulary must match)",
        json_schema_extra={"flags": ["-md", "--model-draft", "--spec-draft-model"]},
    )
    draft_max: int = Field(
        default=16,
        ge=0,
        le=1024,
        description="Most tokens the draft model drafts per step (0 disables it)",
        json_schema_extra={"flags": ["--draft", "--draft-n", "--draft-max", "--spec-draft-n-max"]},
    )
    draft_min: int = Field(
        default=0,
        ge=0,
        le=1024,
        description="Fewest draft tokens worth verifying; a shorter draft is not used",
        json_schema_extra={"flags": ["--draft-min", "--draft-n-min", "--spec-draft-n-min"]},
    )
    draft_p_min: float = Field(
        default=0.75,
        ge=0.0,
        le=1.0,
        description="The draft model stops drafting at a token it gives less than this probability",
        json_schema_extra={"flags": ["--draft-p-min", "--spec-draft-p-min"]},
    )
    gpu_layers_draft: int = Field(
        default=-1,
        ge=-1,
        le=100_000,
        description="Draft model layers offloaded to the GPU (-1 = all); ignored without a GPU",
        json_schema_extra={
            "flags": ["-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft", "--spec-draft-ngl"]
        },
    )

    @field_validator("spec_type")
    @classmethod
    def _known_spec_types(cls, value: str) -> str:
        names = [name.strip() for name in value.split(",") if name.strip()]
        unknown = [name for name in names if name not in SPEC_TYPES]
        if unknown or not names:
            raise ValueError(
                f"unknown speculative type {', '.join(unknown) or repr(value)}; "
                f"choose from {', '.join(SPEC_TYPES)}"
            )
        return ",".join(names)

    @property
    def spec_types(self) -> tuple[str, ...]:
        """The speculative types in use, in order; a draft model alone implies draft-simple."""
        names = tuple(name for name in self.spec_type.split(",") if name != "none")
        if self.model_draft and "draft-simple" not in names:
            names += ("draft-simple",)
        return names


class EngineSettings(BaseSettings, SpeculativeKnobs, ServingKnobs, MediaKnobs):
    """How the model is loaded and how the scheduler runs it."""

    model_config = SettingsConfigDict(env_prefix="QUANTDESK_", extra="ignore")

    model_alias: str | None = Field(
        default=None,
        description="Model id shown by /v1/models (default: the file name without .gguf)",
        json_schema_extra={"flags": ["-a", "--alias"]},
    )
    chat_template_file: str | None = Field(
        default=None,
        description="Jinja chat template to use instead of the GGUF's (for a template that "
        "is broken or lacks tool support)",
        json_schema_extra={"flags": ["--chat-template-file"]},
    )
    threads_batch: int | None = Field(
        default=None,
        ge=1,
        le=512,
        description="CPU threads for prompt processing (default: --threads)",
        json_schema_extra={"flags": ["-tb", "--threads-batch"]},
    )
    max_queue: int = Field(
        default=64,
        ge=1,
        le=10_000,
        description="Requests that may wait for a free sequence before 'busy' is answered",
        json_schema_extra={"flags": ["--max-queue"]},
    )
    seed: int = Field(
        default=-1,
        ge=-1,
        description="Default sampling seed (-1 = random)",
        json_schema_extra={"flags": ["-s", "--seed"]},
    )
    pooling: Pooling | None = Field(
        default=None,
        description=(
            "Pooling type for embeddings: none (a vector per token, served on /embeddings; "
            "/v1/embeddings refuses it), mean, cls, last, or rank (the model then reranks "
            "only); default: the type the GGUF declares, mean when it declares none"
        ),
        json_schema_extra={"flags": ["--pooling"]},
    )

    context_shift: bool = Field(
        default=False,
        description="When a generation fills its slot, drop half of what follows the "
        "request's n_keep tokens and go on, as llama-server's --context-shift (a KV stream "
        "per slot and text prompts only; off: it stops there)",
        json_schema_extra={"flags": ["--context-shift"], "off_flags": ["--no-context-shift"]},
    )

    @model_validator(mode="after")
    def _shift_needs_own_streams(self) -> EngineSettings:
        if self.context_shift and self.kv_unified:
            raise ValueError(
                "--context-shift needs a KV stream per slot (a shift would move cells the "
                "sequences of one unified cache share): drop --kv-unified"
            )
        return self


def _split_parts(value: str) -> list[str]:
    return [part.strip() for part in value.replace("/", ",").split(",") if part.strip()]


def rpc_endpoints(rpc: str | None) -> list[str]:
    """``--rpc``'s ``host:port[,host:port...]`` as a list (empty for None or '')."""
    return [part.strip() for part in (rpc or "").split(",") if part.strip()]


def tensor_split_values(tensor_split: str | None) -> list[float]:
    """``--tensor-split``'s ``3,1`` as numbers (llama-server also takes ``/`` between them)."""
    return [float(part) for part in _split_parts(tensor_split or "")]
