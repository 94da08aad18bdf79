"""Step: the carried ``llama_cpp`` package over the kit's own build, and every module the
quantdesk commands import, load with the environment the other steps use; reports whether
the libraries offload to a GPU and which ggml devices they see.

    python -m benchmarks.gpu.step_imports
"""

from __future__ import annotations

import ctypes
import importlib
import os
from typing import Any

from benchmarks.gpu.carry_wheels import SCAN_MODULES


def ggml_devices(lib_dir: str) -> list[str]:
    """Names of the ggml devices the built libraries register (CPU, CUDA0, RPC...)."""
    lib = ctypes.CDLL(os.path.join(lib_dir, "libggml.so"))
    lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_dev_get.restype = ctypes.c_void_p
    lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    lib.ggml_backend_dev_name.restype = ctypes.c_char_p
    lib.ggml_backend_dev_name.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_description.restype = ctypes.c_char_p
    lib.ggml_backend_dev_description.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_type.restype = ctypes.c_int
    lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    kinds = ("CPU", "GPU", "IGPU", "ACCEL", "META")
    out = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        name = lib.ggml_backend_dev_name(dev).decode(errors="replace")
        kind = lib.ggml_backend_dev_type(dev)
        kind_name = kinds[kind] if 0 <= kind < len(kinds) else str(kind)
        desc = lib.ggml_backend_dev_description(dev).decode(errors="replace")
        out.append(f"{kind_name} {name} ({desc})")
    return out


def main() -> dict[str, Any]:
    failed: dict[str, str] = {}
    for name in SCAN_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed[name] = f"{type(exc).__name__}: {exc}"
    import llama_cpp

    llama_cpp.llama_backend_init()
    devices = ggml_devices(os.environ.get("LLAMA_CPP_LIB_PATH", ""))
    origin = os.path.dirname(llama_cpp.__file__)
    return {
        "ok": not failed,
        "failed": failed,
        "llama_cpp_version": llama_cpp.__version__,
        "llama_cpp_from_carry": "pypkg" in origin,
        "lib_path": os.environ.get("LLAMA_CPP_LIB_PATH"),
        # llama.cpp says true for a build with RPC too; gpu_devices counts local GPUs
        "supports_gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
        "gpu_devices": sum(d.startswith(("GPU ", "IGPU ")) for d in devices),
        "supports_rpc": bool(llama_cpp.llama_supports_rpc()),
        "ggml_devices": devices,
    }


if __name__ == "__main__":
    from benchmarks.gpu.step_common import run_step

    raise SystemExit(run_step(main))
