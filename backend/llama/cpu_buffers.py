"""Which CPU path llama.cpp takes for weights: its "extra buffer types".

With ``llama_model_params.use_extra_bufts`` (the default; llama-server's ``-nr`` turns it off)
llama.cpp repacks CPU weights into the CPU device's extra buffer types when a matmul kernel
for them exists: ``AMX`` (Intel Sapphire Rapids and later), ``CPU_REPACK`` (AVX2/AVX-512/NEON
layouts for Q4_0, IQ4_NL, Q4_K...) or ``CPU_KLEIDIAI`` (Arm). We name the path a load takes:
``AMX``, ``repack`` or ``plain`` (extra buffers off, or none in this build).
"""

from __future__ import annotations

import ctypes
import functools
from typing import Literal

from backend.llama.rpc_ggml import ggml

CpuPath = Literal["AMX", "repack", "plain"]

# ggml_backend_buffer_type_t * (*)(ggml_backend_dev_t): a NULL-terminated array
_GetExtraBufts = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


@functools.cache
def extra_buffer_names() -> tuple[str, ...]:
    """The names of the CPU device's extra buffer types in this build, on this CPU
    (``("AMX", "CPU_REPACK")`` on a Xeon with AMX, ``("CPU_REPACK",)`` on most x86)."""
    import llama_cpp

    llama_cpp.llama_supports_rpc()  # loads the backends when none is registered yet
    lib = ggml()
    reg = lib.ggml_backend_reg_by_name(b"CPU")
    device = lib.ggml_backend_dev_by_name(b"CPU")
    if not reg or not device:
        return ()
    address = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts")
    if not address:
        return ()
    name_of = lib.ggml_backend_buft_name
    name_of.argtypes = [ctypes.c_void_p]
    name_of.restype = ctypes.c_char_p
    array = _GetExtraBufts(address)(device)
    names: list[str] = []
    i = 0
    while array and array[i]:
        names.append((name_of(array[i]) or b"?").decode(errors="replace"))
        i += 1
    return tuple(names)


def path_name(use_extra_bufts: bool, names: tuple[str, ...]) -> CpuPath:
    """The CPU path a load with ``use_extra_bufts`` takes, given the extra buffer types."""
    if not use_extra_bufts or not names:
        return "plain"
    return "AMX" if "AMX" in names else "repack"
