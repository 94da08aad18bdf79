"""Will the model fit? A view of ``backend.fit.fit_estimate`` for the Server page.

The hub owns the arithmetic (weights per layer, exact KV cache, compute buffer,
verdict against free RAM/VRAM); this module only turns its result into what the
fit bar draws. Without the hub module the view falls back to the model's file
size against free RAM and says that it is a partial answer.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from app.app_settings import ServerKnobs
from app.model_choices import cached_header, model_facts
from backend.core.errors import QuantDeskError

log = logging.getLogger(__name__)

_MEMORY_TTL_S = 3.0
_memory_cache: dict[str, Any] = {"at": 0.0, "value": None}


@dataclass(frozen=True)
class FitView:
    verdict: str  # 'fits', 'partial', 'wont_fit' or 'unknown'
    summary: str
    ram_needed: int = 0
    ram_total: int = 0  # free RAM
    vram_needed: int = 0
    vram_total: int = 0  # free VRAM; 0 with no GPU
    kv_bytes: int = 0
    weights_bytes: int = 0
    compute_bytes: int = 0
    exact: bool = False  # True when it came from backend.fit.fit_estimate
    gpu_note: str | None = None


def _memory() -> Any:
    """The hub's free-memory probe, cached for a few seconds (NVML calls are not free)."""
    from backend.fit.memory_probe import probe_memory

    now = time.monotonic()
    if _memory_cache["value"] is None or now - float(_memory_cache["at"]) > _MEMORY_TTL_S:
        _memory_cache["value"] = probe_memory()
        _memory_cache["at"] = now
    return _memory_cache["value"]


def _hub_view(knobs: ServerKnobs, path: Any) -> FitView | None:
    try:
        from backend.fit.fit_estimate import FitSettings, estimate_fit
    except ImportError:
        return None
    try:
        memory = _memory()
        settings = FitSettings(
            n_ctx=knobs.ctx_size,
            n_parallel=knobs.parallel,
            cache_type_k=knobs.cache_type_k,
            cache_type_v=knobs.cache_type_v,
            n_gpu_layers=knobs.gpu_layers,
            n_batch=knobs.batch_size,
            n_ubatch=knobs.ubatch_size,
            flash_attn=knobs.flash_attn,
        )
        est = estimate_fit(cached_header(path), settings, memory)
    except (QuantDeskError, OSError, ValueError) as exc:
        return FitView("unknown", f"Could not estimate: {exc}")
    verdict = {"partial_offload": "partial"}.get(est.verdict, est.verdict)
    summary = "" if est.verdict == "fits" else est.message[:1].upper() + est.message[1:] + "."
    return FitView(
        verdict=verdict,
        summary=summary,
        ram_needed=est.cpu_bytes,
        ram_total=est.ram_free_bytes or memory.ram_free_bytes,
        vram_needed=est.gpu_bytes,
        vram_total=sum(g.free_bytes for g in memory.gpus),
        kv_bytes=est.kv_bytes,
        weights_bytes=est.weights_bytes,
        compute_bytes=est.compute_bytes,
        exact=True,
        gpu_note=est.gpu_note or memory.gpu_note,
    )


def _free_ram() -> int:
    try:
        from backend.system import system_snapshot

        return system_snapshot().ram_available_bytes
    except Exception as exc:  # sampling is best effort; the page must still open
        log.debug("system snapshot failed: %s", exc)
        return 0


def estimate(knobs: ServerKnobs) -> FitView:
    """The fit of ``knobs.model`` with these knobs on this machine."""
    facts = model_facts(knobs.model)
    if facts is None:
        return FitView("unknown", "Pick a model to see whether it fits.")
    view = _hub_view(knobs, facts.path)
    if view is not None:
        return view
    ram_free = _free_ram()
    verdict = "unknown" if not ram_free else ("fits" if facts.size_bytes < ram_free else "wont_fit")
    return FitView(
        verdict,
        "Model weights only: this build has no KV-cache estimate.",
        ram_needed=facts.size_bytes,
        ram_total=ram_free,
        weights_bytes=facts.size_bytes,
    )
