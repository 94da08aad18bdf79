"""Serve this machine's devices to other machines' llama.cpp: ``ggml_backend_rpc_start_server``,
called the way llama.cpp's ``tools/rpc/rpc-server.cpp`` calls it."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from pathlib import Path

from backend.llama.rpc_errors import RpcError
from backend.llama.rpc_ggml import (
    DeviceInfo,
    Handle,
    device_by_name,
    device_info,
    local_devices,
    rpc_proc,
)

# void ggml_backend_rpc_start_server(const char * endpoint, const char * cache_dir,
#     size_t n_threads, size_t n_devices, ggml_backend_dev_t * devices)
_START_SERVER = ctypes.CFUNCTYPE(
    None,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_size_t,
    ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_void_p),
)


def worker_devices(names: Sequence[str] = ()) -> list[Handle]:
    """The devices a worker offers: those named (``CUDA0``, ``CPU``; rpc-server's
    ``--device``), else every GPU, else the CPU, as rpc-server chooses them."""
    if names:
        chosen = []
        for name in names:
            device = device_by_name(name)
            if device is None:
                available = ", ".join(device_info(d).name for d in local_devices())
                raise RpcError(f"unknown device {name!r}; this machine has: {available}")
            chosen.append(device)
        return chosen
    devices = local_devices()
    accelerators = [d for d in devices if device_info(d).kind not in ("CPU", "ACCEL")]
    if accelerators:
        return accelerators
    return [d for d in devices if device_info(d).kind == "CPU"][:1]


def describe(devices: Sequence[Handle]) -> list[DeviceInfo]:
    return [device_info(device) for device in devices]


def run_rpc_server(
    endpoint: str, devices: Sequence[Handle], threads: int, cache_dir: Path | None
) -> None:
    """Serve ``devices`` on ``endpoint`` (``host:port``). Blocks for as long as the server
    runs (llama.cpp has no way to stop it: end the process); returns only if it could not
    start (llama.cpp prints why to stderr)."""
    if not devices:
        raise RpcError("no devices to serve")
    start_server = _START_SERVER(rpc_proc("ggml_backend_rpc_start_server"))
    array = (ctypes.c_void_p * len(devices))(*devices)
    cache = None
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        cache = os.fsencode(cache_dir)
    start_server(endpoint.encode(), cache, threads, len(devices), array)
