"""A complete ``/v1/stats`` body for tests that need one without a server."""

from __future__ import annotations

import json

from backend.engine.stats_model import StatsSnapshot


def sample_stats(i: int = 1, *, with_gpu: bool = True) -> StatsSnapshot:
    """A snapshot in the served shape whose values vary with ``i``; one GPU or none."""
    gpu = {
        "index": 0,
        "name": "Test GPU",
        "vram_used_bytes": 2**30 * i // 10,
        "vram_total_bytes": 8 * 2**30,
    }
    body = {
        "requests": {
            "running": i % 3,
            "queued": i % 2,
            "completed": i,
            "errors": 0,
            "rejected_busy": 0,
            "cancelled": 0,
        },
        "tokens": {
            "prompt_total": 30 * i,
            "prompt_decoded_total": 20 * i,
            "generated_total": 10 * i,
            "gen_tokens_per_s": 50.0 + i,
            "prompt_tokens_per_s": 200.0,
            "prompt_seconds_total": 0.1 * i,
            "generation_seconds_total": 0.2 * i,
            "longest_sequence": 40,
        },
        "latency": {
            "ttft_ms_p50": 80.0,
            "ttft_ms_p99": 150.0,
            "itl_ms_p50": 20.0,
            "itl_ms_p99": 40.0,
            "ttft_ms_last": None,
        },
        "kv": {
            "cells_used": 10 * i,
            "cells_total": 1024,
            "bytes_used": 23040 * 10 * i,
            "bytes_total": 23040 * 1024,
            "used_pct": 100 * 10 * i / 1024,
        },
        "prefix_cache": {"hits": i // 4, "misses": i // 5, "tokens_saved": 7 * i, "entries": 1},
        "step": {
            "steps": 10 * i,
            "step_ms_avg": 12.0,
            "python_ms_avg": 0.5,
            "batch_tokens_avg": 3.0,
            "preemptions": 0,
            "decode_calls": 10 * i,
            "sequences_per_decode": 1.5,
        },
        "uptime_s": 60.0 + i,
        "model": {
            "id": "SmolLM2-135M-Instruct",
            "path": "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
            "architecture": "llama",
            "n_ctx": 1024,
            "n_ctx_seq": 1024,
            "kv_unified": True,
            "n_ctx_train": 8192,
            "n_parallel": 2,
            "n_layer": 30,
            "n_params": 134515008,
            "n_gpu_layers": 0,
            "gpu_offload_supported": False,
            "size_bytes": 98000000,
            "cache_type_k": "f16",
            "cache_type_v": "f16",
            "flash_attn": "auto",
            "n_batch": 512,
            "threads": 2,
            "load_seconds": 0.4,
        },
        "system": {
            "rss_bytes": 250_000_000,
            "cpu_pct": 90.0,
            "ram_used_bytes": 3_000_000_000,
            "ram_total_bytes": 25_000_000_000,
            "ram_available_bytes": 22_000_000_000,
            "gpus": [gpu] if with_gpu else [],
            "gpu_note": None if with_gpu else "no GPU: the NVIDIA driver reports no devices",
        },
        "ready": True,
    }
    return StatsSnapshot.model_validate_json(json.dumps(body))
