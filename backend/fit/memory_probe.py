"""Free memory for the fit verdict: RAM from psutil, VRAM per NVIDIA GPU from
:func:`backend.system.gpu_info.gpu_snapshot`.

Without an NVIDIA GPU or driver the GPU list is empty and ``gpu_note`` says why;
nothing here ever raises for a missing GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psutil

from backend.system.gpu_info import gpu_snapshot
from backend.system.system_stats import GpuStats


@dataclass(frozen=True)
class AvailableMemory:
    """Free RAM and free VRAM per GPU at one moment."""

    ram_free_bytes: int
    ram_total_bytes: int
    gpus: list[GpuStats] = field(default_factory=list)
    gpu_note: str | None = None

    @property
    def vram_free_bytes(self) -> int:
        return sum(g.vram_free_bytes for g in self.gpus)


def probe_memory() -> AvailableMemory:
    """Free RAM and VRAM now."""
    vm = psutil.virtual_memory()
    gpus, note = gpu_snapshot()
    return AvailableMemory(int(vm.available), int(vm.total), gpus, note)
