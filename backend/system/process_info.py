"""Process and machine memory/CPU through psutil."""

from __future__ import annotations

import psutil

from backend.system.gpu_info import gpu_snapshot
from backend.system.system_stats import SystemStats

_process = psutil.Process()
_process.cpu_percent(None)  # prime: the first call always returns 0.0


def system_snapshot() -> SystemStats:
    """RSS and CPU% of this process, machine RAM, and VRAM per GPU."""
    vm = psutil.virtual_memory()
    gpus, note = gpu_snapshot()
    return SystemStats(
        rss_bytes=int(_process.memory_info().rss),
        cpu_pct=float(_process.cpu_percent(None)),
        ram_used_bytes=int(vm.total - vm.available),
        ram_total_bytes=int(vm.total),
        ram_available_bytes=int(vm.available),
        gpus=gpus,
        gpu_note=note,
    )
