"""Use other machines' devices: register RPC workers with llama.cpp and build the device
list and tensor split of ``llama_model_params``, as llama.cpp's ``common`` does for
``llama-server --rpc``."""

from __future__ import annotations

import ctypes
import logging
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass

import llama_cpp

from backend.llama.rpc_errors import RpcEndpointError
from backend.llama.rpc_ggml import Handle, device_info, ggml, local_devices, rpc_proc
from backend.llama.rpc_placement import LayerSpan, layer_devices, layer_spans
from backend.llama.rpc_probe import WorkerProbe, probe_worker

log = logging.getLogger(__name__)

# ggml_backend_reg_t ggml_backend_rpc_add_server(const char * endpoint)
_ADD_SERVER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)
# void (*ggml_abort_callback_t)(const char * error_message)
_ABORT_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_char_p)
_abort_reporters: list[object] = []  # the installed callback, alive for the process's life

SPLIT_MODES = {
    "none": llama_cpp.LLAMA_SPLIT_MODE_NONE,
    "layer": llama_cpp.LLAMA_SPLIT_MODE_LAYER,
    "row": llama_cpp.LLAMA_SPLIT_MODE_ROW,
}


@dataclass
class ModelDevices:
    """The ``devices`` and ``tensor_split`` arrays of one model's ``llama_model_params``;
    keep this object alive while the model loads (llama.cpp reads the arrays then)."""

    workers: list[WorkerProbe]
    devices: list[Handle]
    device_array: ctypes.Array[ctypes.c_void_p]
    split_array: ctypes.Array[ctypes.c_float] | None
    tensor_split: list[float]

    def placement(self, n_layer: int, n_gpu_layers: int) -> list[LayerSpan]:
        """Where llama.cpp puts the layers: by ``--tensor-split``, else by free memory (the
        workers' as they answered the probe, the local GPUs' as they report it now)."""
        lib = ggml()
        names = [(lib.ggml_backend_dev_name(d) or b"").decode() for d in self.devices]
        shares = list(self.tensor_split) + [0.0] * (len(self.devices) - len(self.tensor_split))
        if not any(shares):
            remote = [float(d.free_bytes) for probe in self.workers for d in probe.devices]
            local = [float(device_info(d).free_bytes) for d in self.devices[len(remote) :]]
            shares = remote + local
        return layer_spans(layer_devices(n_layer, n_gpu_layers, shares, names))

    @property
    def names(self) -> list[str]:
        """The devices as ``RPC0 (host:port)``, ``CUDA0 (NVIDIA ...)``; asks no worker."""
        lib = ggml()
        return [
            f"{(lib.ggml_backend_dev_name(d) or b'').decode()} "
            f"({(lib.ggml_backend_dev_description(d) or b'').decode(errors='replace')})"
            for d in self.devices
        ]

    def apply(self, params: llama_cpp.llama_model_params) -> None:
        # llama-cpp-python declares devices as a plain pointer: the array's address
        params.devices = ctypes.cast(self.device_array, ctypes.c_void_p).value  # type: ignore[assignment]
        if self.split_array is not None:
            params.tensor_split = self.split_array


def add_rpc_servers(endpoints: Sequence[str], probe_timeout_s: float = 5.0) -> list[WorkerProbe]:
    """Probe each worker (so that an unreachable or busy one is an error here, not a
    ``GGML_ABORT`` of the whole process inside llama.cpp), then register it with the RPC
    backend's ``ggml_backend_rpc_add_server``. Returns what each worker answered."""
    probes = [probe_worker(endpoint, probe_timeout_s) for endpoint in endpoints]
    add_server = _ADD_SERVER(rpc_proc("ggml_backend_rpc_add_server"))
    for probe in probes:
        if not add_server(probe.endpoint.encode()):
            raise RpcEndpointError(f"llama.cpp could not add RPC worker {probe.endpoint}")
        log.info(
            "RPC worker %s: protocol %s, %d device(s), %d MiB free",
            probe.endpoint,
            ".".join(map(str, probe.version)),
            len(probe.devices),
            probe.free_bytes // (1 << 20),
        )
    return probes


def report_lost_workers(endpoints: Sequence[str]) -> None:
    """Make llama.cpp's abort say which worker was lost.

    llama.cpp's RPC client has no error path: a worker that goes away mid-decode ends in
    ``GGML_ABORT("Remote RPC server crashed ...")`` and ``abort()``. This sets ggml's abort
    callback (``ggml_set_abort_callback``; the process still aborts after it) to write one
    line to stderr naming the workers that no longer accept connections, and llama.cpp's
    message, instead of ggml's default of the message and a gdb backtrace (seconds long).
    Whoever supervises this process (the router) reads that last line."""

    def on_abort(message: bytes | None) -> None:
        # a worker killed a moment ago may still accept for a few ms while its process
        # is torn down: ask again for up to 2 s, until one refuses
        lost: list[str] = []
        deadline = time.monotonic() + 2.0
        while not lost and time.monotonic() < deadline:
            for endpoint in endpoints:
                host, _, port = endpoint.partition(":")
                try:
                    socket.create_connection((host, int(port)), timeout=1.0).close()
                except OSError as exc:
                    lost.append(f"{endpoint} ({exc.strerror or type(exc).__name__})")
            if not lost:
                time.sleep(0.1)
        text = (message or b"").decode(errors="replace").strip()
        who = f"lost RPC worker {', '.join(lost)}" if lost else "an RPC worker failed"
        os.write(2, f"quantdesk: {who}; llama.cpp aborts: {text}\n".encode())

    callback = _ABORT_CALLBACK(on_abort)
    set_abort = ggml().ggml_set_abort_callback
    set_abort.argtypes = [_ABORT_CALLBACK]
    set_abort.restype = ctypes.c_void_p
    set_abort(callback)
    _abort_reporters[:] = [callback]


def _worker_devices(endpoint: str) -> list[Handle]:
    """The devices of a worker already added (``add_server`` returns its registry entry
    again for an endpoint it knows, without a second connection)."""
    add_server = _ADD_SERVER(rpc_proc("ggml_backend_rpc_add_server"))
    reg = add_server(endpoint.encode())
    lib = ggml()
    return [
        int(lib.ggml_backend_reg_dev_get(reg, i))
        for i in range(lib.ggml_backend_reg_dev_count(reg))
    ]


def model_devices(
    endpoints: Sequence[str], tensor_split: Sequence[float] = (), probe_timeout_s: float = 5.0
) -> ModelDevices:
    """The devices one model loads on with ``--rpc``: the workers' devices first, then this
    machine's GPUs (integrated ones only without a discrete one), the order llama.cpp gives
    its registry's devices when it picks them itself (``llama_prepare_model_devices``);
    layers llama.cpp keeps off them stay on this machine's CPU. The workers are not added to
    the process's registry, so a model loaded without ``--rpc`` stays local."""
    workers = add_rpc_servers(endpoints, probe_timeout_s)
    report_lost_workers([probe.endpoint for probe in workers])
    devices = [device for probe in workers for device in _worker_devices(probe.endpoint)]
    local = [(device, device_info(device).kind) for device in local_devices()]
    gpus = [device for device, kind in local if kind == "GPU"]
    igpus = [device for device, kind in local if kind == "IGPU"][:1]
    devices += gpus or igpus
    if len(tensor_split) > len(devices):
        raise RpcEndpointError(
            f"--tensor-split has {len(tensor_split)} proportions for {len(devices)} devices"
        )
    device_array = (ctypes.c_void_p * (len(devices) + 1))(*devices, None)
    return ModelDevices(
        workers, devices, device_array, split_array(tensor_split), list(tensor_split)
    )


def split_array(tensor_split: Sequence[float]) -> ctypes.Array[ctypes.c_float] | None:
    """``llama_model_params.tensor_split``: llama_max_devices() proportions (None: llama.cpp
    splits by each device's free memory)."""
    if not tensor_split:
        return None
    n_max = int(llama_cpp.llama_max_devices())
    if len(tensor_split) > n_max:
        raise RpcEndpointError(f"--tensor-split has more than {n_max} proportions")
    return (ctypes.c_float * n_max)(*tensor_split)
