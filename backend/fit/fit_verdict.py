"""The verdict on a model's memory needs: it fits, it fits with fewer layers on the GPU, or
it does not fit, with the largest context or the smaller KV cache type that would."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from backend.core.units import human_bytes
from backend.fit.device_budget import DeviceBudget
from backend.fit.fit_settings import FitSettings
from backend.fit.kv_cache_size import KV_PAD, pad_to
from backend.fit.memory_needs import Companions, MemoryNeeds, memory_needs
from backend.fit.model_shape import ModelShape
from backend.settings.engine_settings import CacheType

Verdict = Literal["fits", "partial_offload", "wont_fit"]


@dataclass(frozen=True)
class Judgement:
    """The verdict, in words, and what to change when the model does not fit as asked."""

    verdict: Verdict
    message: str
    suggested_gpu_layers: int | None = None
    suggested_n_ctx: int | None = None
    suggested_cache_type: CacheType | None = None


@dataclass(frozen=True)
class FitTrial:
    """A model, its settings and companions, against a device budget: what-ifs on settings."""

    shape: ModelShape
    settings: FitSettings
    has_gpu: bool
    companions: Companions
    budget: DeviceBudget

    def fits(self, **update: Any) -> bool:
        """Whether the model fits with ``update`` applied to the settings."""
        trial = self.settings.model_copy(update=update)
        return self.budget.holds(memory_needs(self.shape, trial, self.has_gpu, self.companions))


def judge(trial: FitTrial, needs: MemoryNeeds) -> Judgement:
    """The verdict on ``needs`` (the needs of ``trial`` as set), with a way out if any."""
    if trial.budget.holds(needs):
        return Judgement("fits", _fits_message(trial, needs))
    if trial.has_gpu:
        for ngl in range(trial.shape.n_layer, -1, -1):
            if trial.fits(gpu_layers=ngl):
                message = (
                    f"fits with {ngl} of {trial.shape.n_layer + 1} layers on the GPU "
                    f"(-ngl {ngl}); the rest runs on the CPU"
                    if ngl
                    else "fits only on the CPU (-ngl 0): the GPU has too little free memory"
                )
                return Judgement("partial_offload", message, suggested_gpu_layers=ngl)
    suggested_ctx = _largest_fitting_ctx(trial)
    suggested_cache = _smaller_fitting_cache(trial)
    hints = []
    if suggested_ctx:
        hints.append(f"a context of at most {suggested_ctx} (-c {suggested_ctx})")
    if suggested_cache:
        hints.append(
            f"a {suggested_cache} KV cache (-ctk {suggested_cache} -ctv {suggested_cache})"
        )
    message = (
        ("does not fit; it would with " + " or ".join(hints))
        if hints
        else ("does not fit even with the smallest context: choose a smaller quant")
    )
    return Judgement(
        "wont_fit", message, suggested_n_ctx=suggested_ctx, suggested_cache_type=suggested_cache
    )


def _fits_message(trial: FitTrial, needs: MemoryNeeds) -> str:
    gpus = trial.budget.memory.gpus
    remote = sum(1 for g in gpus if g.name.startswith("RPC"))
    local = len(gpus) - remote
    target = "the GPU" if not remote else "the RPC workers"
    if remote and local:
        target = "the GPUs and RPC workers"
    where = (
        f"on {target}"
        if trial.has_gpu and all(needs.gpu_layers)
        else ("in RAM" if not trial.has_gpu else f"split between {target} and RAM")
    )
    message = f"fits {where}: needs {human_bytes(needs.gpu + needs.cpu)}"
    if needs.draft_bytes:
        message += f", of which the draft model {human_bytes(needs.draft_bytes)}"
    return message


def _largest_fitting_ctx(trial: FitTrial) -> int | None:
    """The largest context (a multiple of 256, at most the one asked for) that fits."""
    lo, hi = 1, pad_to(trial.settings.ctx_size, KV_PAD) // KV_PAD
    if not trial.fits(ctx_size=KV_PAD):
        return None
    while lo < hi:  # largest multiple of 256 that fits
        mid = (lo + hi + 1) // 2
        if trial.fits(ctx_size=mid * KV_PAD):
            lo = mid
        else:
            hi = mid - 1
    return lo * KV_PAD


def _smaller_fitting_cache(trial: FitTrial) -> CacheType | None:
    """The larger of q8_0 and q4_0 KV caches (with flash attention) that fits, if either."""
    flash_attn = trial.settings.flash_attn
    cache: CacheType
    for cache in ("q8_0", "q4_0"):
        if trial.fits(
            cache_type_k=cache,
            cache_type_v=cache,
            flash_attn="on" if flash_attn == "off" else flash_attn,
        ):
            return cache
    return None
