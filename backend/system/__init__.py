"""System metrics: CPU/RAM through psutil, GPU/VRAM through nvidia-ml-py."""

from backend.system.gpu_info import gpu_snapshot
from backend.system.process_info import system_snapshot
from backend.system.system_stats import GpuStats, SystemStats

__all__ = ["GpuStats", "SystemStats", "gpu_snapshot", "system_snapshot"]
