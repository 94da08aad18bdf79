"""Will the model fit? A view of ``backend.fit.fit_estimate`` for the Server page.

The fit package owns the arithmetic (weights per layer, exact KV cache, compute
buffer, verdict against free RAM/VRAM) and reads the Server page's knobs as they
are; this module only turns its result into what the fit bar draws.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from app.page_models.model_choices import cached_header, model_facts
from app.storage.app_settings import ServerKnobs
from backend.core.errors import QuantDeskError
from backend.fit.fit_estimate import Verdict, estimate_fit
from backend.fit.memory_probe import AvailableMemory, probe_memory

# The estimate's verdict, or 'unknown' where there is none (no model, unreadable header).
ShownVerdict = Literal[Verdict, "unknown"]

_MEMORY_TTL_S = 3.0
_memory_cache: dict[str, Any] = {"at": 0.0, "value": None}


@dataclass(frozen=True)
class FitView:
    verdict: ShownVerdict
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


def _memory() -> AvailableMemory:
    """The free-memory probe, cached for a few seconds (NVML calls are not free)."""
    now = time.monotonic()
    if _memory_cache["value"] is None or now - float(_memory_cache["at"]) > _MEMORY_TTL_S:
        _memory_cache["value"] = probe_memory()
        _memory_cache["at"] = now
    memory: AvailableMemory = _memory_cache["value"]
    return memory


def estimate(knobs: ServerKnobs) -> FitView:
    """The fit of ``knobs.model`` with these knobs on this machine."""
    facts = model_facts(knobs.model)
    if facts is None:
        return FitView("unknown", "Pick a model to see whether it fits.")
    try:
        memory = _memory()
        est = estimate_fit(cached_header(facts.path), knobs, memory)
    except (QuantDeskError, OSError, ValueError) as exc:
        return FitView("unknown", f"Could not estimate: {exc}")
    summary = "" if est.verdict == "fits" else est.message[:1].upper() + est.message[1:] + "."
    return FitView(
        verdict=est.verdict,
        summary=summary,
        ram_needed=est.cpu_bytes,
        ram_total=est.ram_free_bytes or memory.ram_free_bytes,
        vram_needed=est.gpu_bytes,
        vram_total=memory.vram_free_bytes,
        kv_bytes=est.kv_bytes,
        weights_bytes=est.weights_bytes,
        compute_bytes=est.compute_bytes,
        exact=True,
        gpu_note=est.gpu_note or memory.gpu_note,
    )
