"""What a saved session's KV state depends on, as a key that the disk tier files it under.

llama.cpp's sequence state holds raw K/V rows: it is valid only for the same weights, KV
types, V layout (flash attention stores V untransposed), stream count and llama.cpp
build. Two engines whose keys differ never read each other's entries.

The model is identified without hashing the whole file, which would cost seconds to minutes
per start for a multi-GB GGUF: the fingerprint is the SHA-256 of its size, its modification
time and its first and last MiB. A GGUF rewritten in place with the same size and mtime
would fool it; copying or re-downloading a model changes the mtime, which only costs the
cache (a miss, never a wrong load).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import llama_cpp

from backend.engine.model_runtime import ModelRuntime

FINGERPRINT_CHUNK = 1 << 20
KEY_FORMAT = 1


@lru_cache(maxsize=16)
def _fingerprint(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256(f"{size}:{mtime_ns}".encode())
    with open(path, "rb") as f:
        digest.update(f.read(FINGERPRINT_CHUNK))
        if size > FINGERPRINT_CHUNK:
            f.seek(max(FINGERPRINT_CHUNK, size - FINGERPRINT_CHUNK))
            digest.update(f.read(FINGERPRINT_CHUNK))
    return digest.hexdigest()


def model_fingerprint(path: Path) -> str:
    """SHA-256 of the file's size, mtime and first and last MiB (cached per process)."""
    st = os.stat(path)
    return _fingerprint(str(path), st.st_size, st.st_mtime_ns)


def llama_build() -> str:
    """llama-cpp-python's version and a digest of llama.cpp's compiled features."""
    info = llama_cpp.llama_print_system_info() or b""
    return f"{llama_cpp.__version__}+{hashlib.sha256(info).hexdigest()[:16]}"


def session_key(runtime: ModelRuntime) -> dict[str, Any]:
    """The key of the sessions ``runtime``'s context saves."""
    s = runtime.settings
    return {
        "format": KEY_FORMAT,
        "model": model_fingerprint(runtime.info.path),
        "llama_cpp": llama_build(),
        "n_ctx_seq": runtime.n_ctx_seq,
        "n_seq_max": runtime.n_seq_max,
        "kv_unified": runtime.kv_unified,
        "cache_type_k": s.cache_type_k,
        "cache_type_v": s.cache_type_v,
        "flash_attn": s.flash_attn,
    }


def key_digest(key: dict[str, Any]) -> str:
    """A short stable name for ``key`` (its folder on disk)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
