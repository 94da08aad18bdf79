"""The memory of ``--rpc`` workers' devices, as the fit estimate counts it: each device is
one more offload target, named as llama.cpp's RPC backend names it (``RPC0``, ``RPC1``...,
in endpoint order), ahead of the local GPUs, which is the order the server hands the
devices to llama.cpp. A worker that cannot be asked is left out and said in the note."""

from __future__ import annotations

from backend.llama.rpc_errors import RpcEndpointError
from backend.llama.rpc_probe import probe_worker
from backend.system.system_stats import GpuStats


def remote_devices(rpc: str | None, timeout_s: float = 3.0) -> tuple[list[GpuStats], list[str]]:
    """(the workers' devices, a note for each worker that did not answer)."""
    devices: list[GpuStats] = []
    notes: list[str] = []
    for endpoint in [e.strip() for e in (rpc or "").split(",") if e.strip()]:
        try:
            probe = probe_worker(endpoint, timeout_s=timeout_s)
        except RpcEndpointError as exc:
            notes.append(f"{exc}; its memory is not counted")
            continue
        for device in probe.devices:
            devices.append(
                GpuStats(
                    index=len(devices),
                    name=f"RPC{len(devices)} ({endpoint})",
                    vram_used_bytes=device.total_bytes - device.free_bytes,
                    vram_total_bytes=device.total_bytes,
                )
            )
    return devices, notes
