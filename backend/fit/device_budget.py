"""What the devices can take: free RAM and each offload device's share of free VRAM, less
what is kept free for the rest of the process, and which layers each device would hold."""

from __future__ import annotations

from dataclasses import dataclass

from backend.fit.memory_needs import MemoryNeeds, MiB
from backend.fit.memory_probe import AvailableMemory
from backend.llama.rpc_placement import layer_devices, layer_spans
from backend.settings.engine_settings import tensor_split_values

# Kept free on each GPU for the CUDA context, cuBLAS workspace and fragmentation.
GPU_RESERVE_BYTES = 512 * MiB
# Kept free in RAM for the rest of the process (Python, server, tokenizer).
RAM_RESERVE_BYTES = 256 * MiB


@dataclass
class GpuShare:
    index: int
    name: str
    needed_bytes: int
    free_bytes: int


def device_fractions(memory: AvailableMemory, tensor_split: str | None) -> list[float]:
    """Each offload device's share of what is offloaded: ``--tensor-split`` when it names
    one proportion per device, else each device's free memory (llama.cpp's default)."""
    if tensor_split:
        parts = tensor_split_values(tensor_split)
        if len(parts) == len(memory.gpus) and sum(parts) > 0:
            return [x / sum(parts) for x in parts]
    total_free = sum(g.vram_free_bytes for g in memory.gpus)
    return [g.vram_free_bytes / total_free if total_free else 0.0 for g in memory.gpus]


@dataclass(frozen=True)
class DeviceBudget:
    """Free memory now, and each offload device's share (``fractions``) of what is offloaded."""

    memory: AvailableMemory
    fractions: list[float]

    def holds(self, needs: MemoryNeeds) -> bool:
        """RAM holds the CPU's part, and each device its share of the offloaded part."""
        memory = self.memory
        if needs.cpu > memory.ram_free_bytes - RAM_RESERVE_BYTES:
            return False
        if needs.gpu and not memory.gpus:
            return False
        return all(
            needs.gpu * fraction <= max(0, g.vram_free_bytes - GPU_RESERVE_BYTES)
            for g, fraction in zip(memory.gpus, self.fractions, strict=True)
        )

    def gpu_shares(self, gpu_bytes: int) -> list[GpuShare]:
        """What each offload device holds of ``gpu_bytes``, by its fraction."""
        return [
            GpuShare(g.index, g.name, int(gpu_bytes * fraction), g.vram_free_bytes)
            for g, fraction in zip(self.memory.gpus, self.fractions, strict=True)
        ]

    def placement(self, n_layer: int, n_gpu_layers: int) -> list[str]:
        """Where the layers go, as llama.cpp's loader assigns them, with the devices' names."""
        gpus = self.memory.gpus
        if not n_gpu_layers or not gpus:
            return []
        devices = layer_devices(n_layer, n_gpu_layers, self.fractions, [g.name for g in gpus])
        return [str(span) for span in layer_spans(devices)]
