"""Process and machine memory/CPU through psutil."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psutil

from backend.system.gpu_info import GpuInfo, gpu_snapshot

_process = psutil.Process()
_process.cpu_percent(None)  # prime: the first call always returns 0.0


@dataclass(frozen=True)
class SystemSnapshot:
    rss_bytes: int
    cpu_pct: float
    ram_used_bytes: int
    ram_total_bytes: int
    ram_available_bytes: int
    gpus: list[GpuInfo] = field(default_factory=list)
    gpu_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rss_bytes": self.rss_bytes,
            "cpu_pct": self.cpu_pct,
            "ram_used_bytes": self.ram_used_bytes,
            "ram_total_bytes": self.ram_total_bytes,
            "ram_available_bytes": self.ram_available_bytes,
            "gpus": [g.to_dict() for g in self.gpus],
            "gpu_note": self.gpu_note,
        }


def system_snapshot() -> SystemSnapshot:
    """RSS and CPU% of this process, machine RAM, and VRAM per GPU."""
    vm = psutil.virtual_memory()
    gpus, note = gpu_snapshot()
    return SystemSnapshot(
        rss_bytes=int(_process.memory_info().rss),
        cpu_pct=float(_process.cpu_percent(None)),
        ram_used_bytes=int(vm.total - vm.available),
        ram_total_bytes=int(vm.total),
        ram_available_bytes=int(vm.available),
        gpus=gpus,
        gpu_note=note,
    )
