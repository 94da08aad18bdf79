"""The kit's sizes for each mode: the H200 run and the CPU dry run (stdlib only)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    budget_s: float  # the whole kit, build included
    build_jobs: int
    cuda: bool
    synth_size: str
    n_layer: int
    quant_threads: int
    fit_ctx: int
    fit_parallel: int
    serve_threads: int
    peer_levels: str
    peer_parallel: int
    peer_ctx: int
    peer_prompt_tokens: int
    peer_max_tokens: int
    peer_passes: int
    kld_chunks: int
    kld_ctx: int
    vision: str  # benchmarks.tiny_vlm's vision tower for the vision step
    # least time each step needs; with less left it is skipped, with a recorded reason
    min_s: dict[str, float]


GPU = Plan(
    budget_s=540,
    build_jobs=16,
    cuda=True,
    synth_size="gpu",
    n_layer=22,
    quant_threads=16,
    fit_ctx=8192,
    fit_parallel=4,
    serve_threads=8,
    peer_levels="1,8,32,64",
    peer_parallel=64,
    peer_ctx=64 * 1024,
    peer_prompt_tokens=128,
    peer_max_tokens=128,
    peer_passes=3,
    kld_chunks=8,
    kld_ctx=512,
    vision="gemma3",
    min_s={
        "deps": 10,
        "synth": 60,
        "imports": 10,
        "quantize": 40,
        "fit": 50,
        "peer": 90,
        "oversize": 25,
        "kld": 30,
        "router": 30,
        "spec": 20,
        "vision": 120,
    },
)

DRY_RUN = Plan(
    budget_s=3600,
    build_jobs=2,
    cuda=False,
    synth_size="tiny",
    n_layer=12,
    quant_threads=2,
    fit_ctx=2048,
    fit_parallel=2,
    serve_threads=1,  # two servers spinning two threads each on a shared 2-core machine crawl
    peer_levels="1,4",
    peer_parallel=4,
    peer_ctx=4 * 512,
    peer_prompt_tokens=32,
    peer_max_tokens=16,
    peer_passes=2,
    kld_chunks=2,
    kld_ctx=256,
    vision="tiny",
    min_s={
        "deps": 10,
        "synth": 60,
        "imports": 10,
        "quantize": 30,
        "fit": 60,
        "peer": 90,
        "oversize": 30,
        "kld": 30,
        "router": 40,
        "spec": 60,
        "vision": 90,
    },
)
