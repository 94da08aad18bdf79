"""Free memory for the fit verdict: RAM from psutil, VRAM per NVIDIA GPU from nvidia-ml-py.

Without an NVIDIA GPU or driver the GPU list is empty and ``gpu_note`` says why;
nothing here ever raises for a missing GPU.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuMemory:
    index: int
    name: str
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class AvailableMemory:
    """Free RAM and free VRAM per GPU at one moment."""

    ram_free_bytes: int
    ram_total_bytes: int
    gpus: list[GpuMemory] = field(default_factory=list)
    gpu_note: str | None = None

    @property
    def vram_free_bytes(self) -> int:
        return sum(g.free_bytes for g in self.gpus)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "vram_free_bytes": self.vram_free_bytes}


def _nvidia_gpus() -> tuple[list[GpuMemory], str | None]:
    try:
        import pynvml
    except ImportError:
        return [], "no GPU: nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return [], f"no GPU: NVIDIA driver not available ({exc})"
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            info = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            if isinstance(name, bytes):
                name = name.decode(errors="replace")
            gpus.append(GpuMemory(index, str(name), int(info.free), int(info.total)))
        return gpus, None if gpus else "no GPU: the NVIDIA driver reports no devices"
    except Exception as exc:
        log.debug("NVML query failed", exc_info=True)
        return [], f"no GPU: NVML query failed ({exc})"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            log.debug("nvmlShutdown failed", exc_info=True)


def probe_memory() -> AvailableMemory:
    """Free RAM and VRAM now."""
    vm = psutil.virtual_memory()
    gpus, note = _nvidia_gpus()
    return AvailableMemory(int(vm.available), int(vm.total), gpus, note)
