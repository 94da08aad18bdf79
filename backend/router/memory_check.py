"""Will one more model fit? The fit estimate of its file and settings against the budget
and the free memory of each device, less what the resident models already hold."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from backend.core.units import human_bytes
from backend.fit.fit_estimate import estimate_fit
from backend.fit.memory_probe import AvailableMemory, with_remote
from backend.gguf_file.gguf_header import read_gguf_header
from backend.gguf_file.projector_file import projector_path
from backend.settings import EngineSettings
from backend.settings.default_model import resolve_model_path

# A child server is a Python process with FastAPI, uvicorn and llama.cpp loaded before its
# model takes anything: the imports alone measured 75 MiB RSS; a child serving SmolLM2-135M
# (-c 512 -np 1, fit estimate 201 MiB) measured 113-218 MiB in all (tests/router/test_idle_ttl.py).
CHILD_OVERHEAD_BYTES = 128 << 20


@dataclass(frozen=True)
class MemoryNeed:
    """What a model is estimated to take: host RAM and GPU memory."""

    cpu_bytes: int
    gpu_bytes: int

    @property
    def total(self) -> int:
        return self.cpu_bytes + self.gpu_bytes


def estimate_need(settings: EngineSettings, memory: AvailableMemory) -> MemoryNeed:
    """The fit estimate (weights + KV + compute, per device) of ``settings.model``, and of
    its draft model with ``-md``, plus the child process's own overhead. With ``--rpc``
    the workers' devices are asked too and take their share: only this machine's part is
    the need (the workers' memory is not the router's to budget)."""
    header = read_gguf_header(settings.model)
    draft = None
    if settings.model_draft:
        draft = read_gguf_header(resolve_model_path(settings.model_draft))
    memory = with_remote(memory, settings.rpc)
    projector = projector_path(Path(settings.model), settings.mmproj, settings.no_mmproj)
    estimate = estimate_fit(
        header,
        settings,
        memory,
        draft=draft,
        projector=read_gguf_header(projector) if projector else None,
    )
    remote_bytes = sum(g.needed_bytes for g in estimate.gpus if g.name.startswith("RPC"))
    return MemoryNeed(
        estimate.cpu_bytes + CHILD_OVERHEAD_BYTES, max(0, estimate.gpu_bytes - remote_bytes)
    )


def shortfall(
    need: MemoryNeed,
    resident: int,
    budget: int,
    memory: AvailableMemory,
    reserve: int,
) -> str | None:
    """Why ``need`` does not fit now (None when it does): over the budget with the
    ``resident`` estimates, or more than a device has free beyond ``reserve``."""
    if resident + need.total > budget:
        return (
            f"it needs {human_bytes(need.total)} but only {human_bytes(max(0, budget - resident))} "
            f"of the {human_bytes(budget)} memory budget is free"
        )
    ram_free = memory.ram_free_bytes - reserve
    if need.cpu_bytes > ram_free:
        return (
            f"it needs {human_bytes(need.cpu_bytes)} of RAM but {human_bytes(max(0, ram_free))} "
            f"is free (beyond the {human_bytes(reserve)} reserve)"
        )
    vram_free = sum(max(0, g.vram_free_bytes - reserve) for g in memory.gpus)
    if need.gpu_bytes > vram_free:
        return (
            f"it needs {human_bytes(need.gpu_bytes)} of GPU memory but {human_bytes(vram_free)} "
            f"is free (beyond the {human_bytes(reserve)} reserve)"
        )
    return None


def default_budget(memory: AvailableMemory, reserve: int) -> int:
    """What is free now, on every device, less the reserve on each."""
    gpus = sum(max(0, g.vram_free_bytes - reserve) for g in memory.gpus)
    return max(0, memory.ram_free_bytes - reserve) + gpus
