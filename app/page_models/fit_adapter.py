"""Will the model fit? A view of ``backend.fit.fit_estimate`` for the Server page's fit
bar and the Models page's badges.

The fit package owns the arithmetic (weights per layer, exact KV cache, compute
buffer, verdict against free RAM/VRAM) and reads the Server page's knobs as they
are; this module only turns its result into what the GUI draws. For a Hub file the
GGUF header is read with HTTP Range requests, never the weights.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from app.page_models.model_choices import cached_header, model_facts
from app.storage.app_settings import ServerKnobs
from backend.core.errors import QuantDeskError
from backend.fit.fit_estimate import Verdict, estimate_fit
from backend.fit.memory_probe import AvailableMemory, probe_memory
from backend.hub.hub_search import remote_gguf_header

# The estimate's verdict, or 'unknown' where there is none (no model, unreadable header).
ShownVerdict = Literal[Verdict, "unknown"]

_SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
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
    gpu_note: str | None = None

    @property
    def exact(self) -> bool:
        """Whether backend.fit.fit_estimate judged it (every other view is 'unknown')."""
        return self.verdict != "unknown"


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
        draft = model_facts(knobs.model_draft) if knobs.model_draft else None
        est = estimate_fit(
            cached_header(facts.path),
            knobs,
            memory,
            draft=cached_header(draft.path) if draft is not None else None,
        )
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
        gpu_note=est.gpu_note or memory.gpu_note,
    )


@dataclass(frozen=True)
class FitVerdict:
    """A Hub file's verdict and the reason shown with it."""

    verdict: ShownVerdict
    message: str


def remote_fits(
    repo_id: str,
    filenames: list[str],
    knobs: ServerKnobs,
    revision: str | None = None,
    limit: int = 24,
) -> dict[str, FitVerdict]:
    """Fit verdicts for GGUF files of a Hub repo (blocking: run it in a worker)."""
    memory = probe_memory()
    out: dict[str, FitVerdict] = {}
    for name in filenames[:limit]:
        split = _SPLIT_PART.search(name)
        if split and int(split.group(1)) != 1:
            continue  # judged with its first part
        try:
            header = remote_gguf_header(repo_id, name, revision=revision)
            est = estimate_fit(header, knobs, memory)
            message = est.message
            if split:
                message += " (first part of a split model only)"
            out[name] = FitVerdict(est.verdict, message)
        except (QuantDeskError, OSError, ValueError) as exc:
            out[name] = FitVerdict("unknown", f"could not read the header: {exc}")
    return out
