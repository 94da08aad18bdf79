"""The memory of ``--rpc`` workers' devices, as the fit estimate counts it: each device is
one more offload target, named as llama.cpp's RPC backend names it (``RPC0``, ``RPC1``...,
in endpoint order), ahead of the local GPUs, which is the order the server hands the
devices to llama.cpp. A worker that cannot be asked is left out and said in the note."""

from __future__ import annotations

from collections.abc import Iterable

from backend.llama.rpc_errors import RpcEndpointError
from backend.llama.rpc_probe import WorkerProbe, probe_worker
from backend.settings.engine_settings import rpc_endpoints
from backend.system.system_stats import GpuStats


def worker_devices(probes: Iterable[WorkerProbe]) -> list[GpuStats]:
    """The devices of workers that answered, in order, each named ``RPC{k} (endpoint)``."""
    devices: list[GpuStats] = []
    for probe in probes:
        for device in probe.devices:
            devices.append(
                GpuStats(
                    index=len(devices),
                    name=f"RPC{len(devices)} ({probe.endpoint})",
                    vram_used_bytes=device.total_bytes - device.free_bytes,
                    vram_total_bytes=device.total_bytes,
                )
            )
    return devices


def probe_workers(rpc: str | None, timeout_s: float = 3.0) -> tuple[list[WorkerProbe], list[str]]:
    """(what each worker of ``rpc`` answered, a note for each worker that did not)."""
    probes: list[WorkerProbe] = []
    notes: list[str] = []
    for endpoint in rpc_endpoints(rpc):
        try:
            probes.append(probe_worker(endpoint, timeout_s=timeout_s))
        except RpcEndpointError as exc:
            notes.append(f"{exc}; its memory is not counted")
    return probes, notes


def remote_devices(rpc: str | None, timeout_s: float = 3.0) -> tuple[list[GpuStats], list[str]]:
    """(the workers' devices, a note for each worker that did not answer)."""
    probes, notes = probe_workers(rpc, timeout_s)
    return worker_devices(probes), notes
