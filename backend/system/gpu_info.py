"""VRAM per NVIDIA GPU through NVML; without a GPU, say so plainly instead of failing."""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass
from typing import Any

log = logging.getLogger(__name__)

_lock = threading.Lock()
_nvml_state: dict[str, Any] = {"tried": False, "ok": False, "note": None}


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    vram_used_bytes: int
    vram_total_bytes: int

    @property
    def vram_free_bytes(self) -> int:
        return self.vram_total_bytes - self.vram_used_bytes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _init_nvml() -> bool:
    with _lock:
        if _nvml_state["tried"]:
            return bool(_nvml_state["ok"])
        _nvml_state["tried"] = True
        try:
            import pynvml

            pynvml.nvmlInit()
            _nvml_state["ok"] = True
        except Exception as exc:  # NVML missing or no driver: a normal CPU-only machine
            _nvml_state["note"] = f"no NVIDIA GPU detected ({type(exc).__name__})"
            log.debug("NVML unavailable: %s", exc)
        return bool(_nvml_state["ok"])


def gpu_snapshot() -> tuple[list[GpuInfo], str | None]:
    """Current VRAM use per GPU, and a note explaining an empty list."""
    if not _init_nvml():
        return [], str(_nvml_state["note"])
    import pynvml

    gpus: list[GpuInfo] = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            if isinstance(name, bytes):
                name = name.decode(errors="replace")
            gpus.append(GpuInfo(index, str(name), int(mem.used), int(mem.total)))
    except Exception as exc:
        return gpus, f"NVML error: {exc}"
    if not gpus:
        return [], "no NVIDIA GPU detected"
    return gpus, None
