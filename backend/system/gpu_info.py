"""VRAM per NVIDIA GPU through NVML: the one GPU probe, for the dashboard and the fit verdict.

Without an NVIDIA GPU or driver the list is empty and a note says why; nothing here
ever raises for a missing GPU.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from backend.system.system_stats import GpuStats

log = logging.getLogger(__name__)

_lock = threading.Lock()
_nvml_state: dict[str, Any] = {"tried": False, "ok": False, "note": None}


def _init_nvml() -> bool:
    """Initialise NVML once per process; later calls give the first answer."""
    with _lock:
        if _nvml_state["tried"]:
            return bool(_nvml_state["ok"])
        _nvml_state["tried"] = True
        try:
            import pynvml
        except ImportError:
            _nvml_state["note"] = "no GPU: nvidia-ml-py is not installed"
            return False
        try:
            pynvml.nvmlInit()
            _nvml_state["ok"] = True
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded: a CPU-only machine
            _nvml_state["note"] = f"no GPU: NVIDIA driver not available ({exc})"
            log.debug("NVML unavailable: %s", exc)
        return bool(_nvml_state["ok"])


def gpu_snapshot() -> tuple[list[GpuStats], str | None]:
    """Current VRAM use per GPU, and a note explaining an empty list."""
    if not _init_nvml():
        return [], str(_nvml_state["note"])
    import pynvml

    gpus: list[GpuStats] = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)  # v1: total = free + used
            name = pynvml.nvmlDeviceGetName(handle)
            if isinstance(name, bytes):
                name = name.decode(errors="replace")
            gpus.append(
                GpuStats(
                    index=index,
                    name=str(name),
                    vram_used_bytes=int(mem.used),
                    vram_total_bytes=int(mem.total),
                )
            )
    except Exception as exc:
        log.debug("NVML query failed", exc_info=True)
        return gpus, f"NVML query failed ({exc})"
    if not gpus:
        return [], "no GPU: the NVIDIA driver reports no devices"
    return gpus, None
