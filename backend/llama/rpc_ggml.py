"""ctypes over the parts of ggml's backend registry (``ggml-backend.h``) and RPC backend
(``ggml-rpc.h``) that llama-cpp-python does not bind.

The library is the ``libggml`` that llama-cpp-python loads, so the registry is the one its
``libllama`` uses. The RPC backend's entry points are taken from the RPC backend's registry
entry (``ggml_backend_reg_get_proc_address``), as llama.cpp's ``rpc-server`` and
``common/arg.cpp`` take them, not as exported symbols.
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
from llama_cpp._ctypes_extensions import load_shared_library

from backend.llama.rpc_errors import RpcUnavailableError

# enum ggml_backend_dev_type
DEVICE_TYPES = ("CPU", "GPU", "IGPU", "ACCEL", "META")
GPU_TYPES = frozenset({"GPU", "IGPU"})

# ggml_backend_reg_t / ggml_backend_dev_t: opaque pointers
Handle = int

_lib: list[ctypes.CDLL] = []


def llama_lib_dir() -> Path:
    """Where llama-cpp-python takes its shared libraries from."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    return Path(override) if override else Path(llama_cpp.__file__).parent / "lib"


def ggml() -> ctypes.CDLL:
    """llama-cpp-python's ``libggml`` (loaded once), with the signatures used here."""
    if _lib:
        return _lib[0]
    # the folder llama-cpp-python loaded libllama from (LLAMA_CPP_LIB_PATH overrides it, as
    # the GPU kit's own CUDA build does), so that ggml is the one llama.cpp uses
    lib = load_shared_library("ggml", llama_lib_dir())
    vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
    signatures: dict[str, tuple[list[type], type | None]] = {
        "ggml_backend_reg_by_name": ([cp], vp),
        "ggml_backend_reg_name": ([vp], cp),
        "ggml_backend_reg_get_proc_address": ([vp, cp], vp),
        "ggml_backend_reg_dev_count": ([vp], sz),
        "ggml_backend_reg_dev_get": ([vp, sz], vp),
        "ggml_backend_dev_count": ([], sz),
        "ggml_backend_dev_get": ([sz], vp),
        "ggml_backend_dev_by_name": ([cp], vp),
        "ggml_backend_dev_name": ([vp], cp),
        "ggml_backend_dev_description": ([vp], cp),
        "ggml_backend_dev_memory": ([vp, ctypes.POINTER(sz), ctypes.POINTER(sz)], None),
        "ggml_backend_dev_type": ([vp], ctypes.c_int),
        "ggml_backend_dev_backend_reg": ([vp], vp),
    }
    for name, (argtypes, restype) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = restype
    _lib.append(lib)
    return lib


@dataclass(frozen=True)
class DeviceInfo:
    """One ggml device as ``rpc-server`` and ``llama-server --list-devices`` print it."""

    name: str
    description: str
    kind: str
    backend: str
    free_bytes: int
    total_bytes: int

    @property
    def is_rpc(self) -> bool:
        return self.backend == "RPC"


def rpc_supported() -> bool:
    """Whether this llama.cpp build has the RPC backend (``llama_supports_rpc``)."""
    return bool(llama_cpp.llama_supports_rpc())


def rpc_proc(name: str) -> int:
    """The address of the RPC backend's function ``name``, from its registry entry."""
    lib = ggml()
    reg = lib.ggml_backend_reg_by_name(b"RPC")
    if not reg:
        raise RpcUnavailableError(
            "this llama.cpp build has no RPC backend: rebuild llama-cpp-python with "
            "CMAKE_ARGS=-DGGML_RPC=on (make install does)"
        )
    address = lib.ggml_backend_reg_get_proc_address(reg, name.encode())
    if not address:
        raise RpcUnavailableError(f"the RPC backend has no {name}")
    return int(address)


def device_info(device: Handle) -> DeviceInfo:
    lib = ggml()
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    lib.ggml_backend_dev_memory(device, ctypes.byref(free), ctypes.byref(total))
    kind = int(lib.ggml_backend_dev_type(device))
    reg = lib.ggml_backend_dev_backend_reg(device)
    return DeviceInfo(
        name=(lib.ggml_backend_dev_name(device) or b"").decode(errors="replace"),
        description=(lib.ggml_backend_dev_description(device) or b"").decode(errors="replace"),
        kind=DEVICE_TYPES[kind] if 0 <= kind < len(DEVICE_TYPES) else str(kind),
        backend=(lib.ggml_backend_reg_name(reg) or b"").decode() if reg else "",
        free_bytes=free.value,
        total_bytes=total.value,
    )


def local_devices() -> list[Handle]:
    """The devices of this process's backend registry (CPU, CUDA, ...), in registry order."""
    llama_cpp.llama_supports_rpc()  # loads the backends when none is registered yet
    lib = ggml()
    return [int(lib.ggml_backend_dev_get(i)) for i in range(lib.ggml_backend_dev_count())]


def device_by_name(name: str) -> Handle | None:
    device = ggml().ggml_backend_dev_by_name(name.encode())
    return int(device) if device else None


@functools.cache
def local_gpu_present() -> bool:
    """Whether a local GPU (or integrated GPU) device is registered; RPC devices are not
    local, and llama.cpp's ``llama_supports_gpu_offload`` counts the RPC backend too."""
    return any(device_info(device).kind in GPU_TYPES for device in local_devices())
