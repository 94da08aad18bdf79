"""Free memory for the fit verdict: RAM from psutil, VRAM per NVIDIA GPU from
:func:`backend.system.gpu_info.gpu_snapshot`.

Without an NVIDIA GPU or driver the GPU list is empty and ``gpu_note`` says why;
nothing here ever raises for a missing GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import psutil

from backend.fit.remote_memory import probe_workers, worker_devices
from backend.llama.rpc_probe import WorkerProbe
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


def probe_memory(rpc: str | None = None) -> AvailableMemory:
    """Free RAM and VRAM now; with ``rpc`` (``host:port,...``), the workers' devices too,
    first, as the server orders them."""
    vm = psutil.virtual_memory()
    gpus, note = gpu_snapshot()
    return with_remote(AvailableMemory(int(vm.available), int(vm.total), gpus, note), rpc)


def with_remote(memory: AvailableMemory, rpc: str | None) -> AvailableMemory:
    """``memory`` with the ``rpc`` workers' devices ahead of the local GPUs (the order the
    server gives llama.cpp); the note says which workers did not answer."""
    if not rpc:
        return memory
    probes, notes = probe_workers(rpc)
    return with_probed(memory, probes, notes)


def with_probed(
    memory: AvailableMemory, probes: Sequence[WorkerProbe], notes: Sequence[str] = ()
) -> AvailableMemory:
    """``memory`` with the devices of workers already probed (``probes``, in ``--rpc``
    order) ahead of the local GPUs; ``notes`` say which workers are not counted."""
    if not probes and not notes:
        return memory
    remote = worker_devices(probes)
    local = [g.model_copy(update={"index": len(remote) + i}) for i, g in enumerate(memory.gpus)]
    gpus = remote + local
    note = "; ".join(n for n in (*notes, memory.gpu_note if not gpus else None) if n) or None
    return replace(memory, gpus=gpus, gpu_note=note)
