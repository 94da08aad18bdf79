"""Will the model fit? A view of ``backend.fit.fit_estimate`` for the Server page's fit
bar and the Models page's badges.

The fit package owns the arithmetic (weights per layer, exact KV cache, compute
buffer, verdict against free RAM/VRAM) and reads the Server page's knobs as they
are; this module only turns its result into what the GUI draws. For a Hub file the
GGUF header is read with HTTP Range requests, never the weights.

With RPC workers in the list, the estimate counts the devices of those the Workers tab
probed last (it never probes here: this runs on the GUI thread, and a busy worker says
nothing for seconds); a worker without a probe is said and not counted.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.page_models.model_choices import cached_header, model_facts
from app.page_models.rpc_workers import WorkerState, parse_workers
from app.storage.app_settings import ServerKnobs
from backend.core.errors import QuantDeskError
from backend.fit.fit_estimate import Verdict, estimate_fit
from backend.fit.memory_probe import AvailableMemory, probe_memory, with_probed
from backend.gguf_file.projector_file import mmproj_beside
from backend.hub.hub_search import remote_gguf_header
from backend.llama.rpc_probe import WorkerProbe

# The estimate's verdict, or 'unknown' where there is none (no model, unreadable header).
ShownVerdict = Literal[Verdict, "unknown"]

_SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
_MEMORY_TTL_S = 3.0
_memory_cache: dict[str, Any] = {"at": 0.0, "value": None}

# why a worker of the list is not counted, by its state in the Workers tab
_NOT_COUNTED: dict[WorkerState, str] = {
    "untested": "not tested yet (Test connection)",
    "testing": "still being tested",
    "ready": "ready",
    "unreachable": "unreachable",
    "busy": "busy (serving another client)",
    "error": "not an RPC worker",
}


@dataclass(frozen=True)
class DeviceShare:
    """One offload device's bar: what the estimate puts on it against its free memory."""

    name: str  # "RPC0 (host:port)", or a local GPU's name
    needed: int
    free: int


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
    session_cache_bytes: int = 0  # the most the session cache (--cache-ram) may fill
    gpu_note: str | None = None
    # with RPC workers counted: one share per offload device (workers first) and where the
    # layers go ("layers 0-7 on RPC0 (host:port)", ...); empty without workers
    devices: tuple[DeviceShare, ...] = ()
    placement: tuple[str, ...] = ()
    worker_note: str | None = None  # the workers in the list that are not counted, and why

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


def with_workers(
    memory: AvailableMemory,
    rpc: str | None,
    workers: Mapping[str, WorkerProbe | WorkerState] | None,
) -> tuple[AvailableMemory, str | None]:
    """``memory`` with the devices of the ``rpc`` workers that answered their last probe
    (``workers``: each endpoint's probe, or its state in the Workers tab when it has none),
    and a note naming the others, which are not counted."""
    probes: list[WorkerProbe] = []
    missing: list[str] = []
    for endpoint in parse_workers(rpc):
        found = (workers or {}).get(endpoint, "untested")
        if isinstance(found, WorkerProbe):
            probes.append(found)
        else:
            missing.append(f"{endpoint} is {_NOT_COUNTED[found]}")
    note = None
    if missing:
        its = "its memory is" if len(missing) == 1 else "their memory is"
        note = f"{'; '.join(missing)}: {its} not counted"
    return with_probed(memory, probes), note


def estimate(
    knobs: ServerKnobs, workers: Mapping[str, WorkerProbe | WorkerState] | None = None
) -> FitView:
    """The fit of ``knobs.model`` with these knobs on this machine, counting the devices
    of the ``knobs.rpc`` workers that ``workers`` (the Workers tab's last probes) holds."""
    facts = model_facts(knobs.model)
    if facts is None:
        return FitView("unknown", "Pick a model to see whether it fits.")
    try:
        memory, worker_note = with_workers(_memory(), knobs.rpc, workers)
        draft = model_facts(knobs.model_draft) if knobs.model_draft else None
        projector = mmproj_beside(Path(facts.path))  # the server loads the one beside it
        est = estimate_fit(
            cached_header(facts.path),
            knobs,
            memory,
            draft=cached_header(draft.path) if draft is not None else None,
            projector=cached_header(projector) if projector is not None else None,
        )
    except (QuantDeskError, OSError, ValueError) as exc:
        return FitView("unknown", f"Could not estimate: {exc}")
    summary = "" if est.verdict == "fits" else est.message[:1].upper() + est.message[1:] + "."
    remote = any(g.name.startswith("RPC") for g in memory.gpus)
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
        session_cache_bytes=est.session_cache_bytes,
        gpu_note=est.gpu_note or memory.gpu_note,
        devices=tuple(DeviceShare(g.name, g.needed_bytes, g.free_bytes) for g in est.gpus)
        if remote
        else (),
        placement=tuple(est.placement) if remote else (),
        worker_note=worker_note,
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
