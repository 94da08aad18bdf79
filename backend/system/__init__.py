"""System metrics: CPU/RAM through psutil, GPU/VRAM through nvidia-ml-py."""

from backend.system.gpu_info import GpuInfo, gpu_snapshot
from backend.system.process_info import SystemSnapshot, system_snapshot

__all__ = ["GpuInfo", "SystemSnapshot", "gpu_snapshot", "system_snapshot"]
