"""Real SmolLM2-135M quants for the comparison tests, made once per session.

The embedded Q4_1 model is requantised to F16 (the reference), then the F16 to Q8_0, Q4_K_M
and Q2_K with llama.cpp's own quantiser (``llama_model_quantize``).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from tests.model_cache import LLAMA_DISTS, cached_build, versions

QUANTS = {"Q8_0": 7, "Q4_K_M": 15, "Q2_K": 10}  # llama_ftype values
F16 = 1


def _quantize(src: Path, dst: Path, ftype: int) -> Path:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    assert rc == 0, f"llama_model_quantize({dst.name}) returned {rc}"
    return dst


@pytest.fixture(scope="session")
def smollm2_quants() -> dict[str, Path]:
    """{"F16": reference, "Q8_0": ..., "Q4_K_M": ..., "Q2_K": ...} as GGUF paths (kept
    between sessions by tests/model_cache.py)."""
    from backend.settings.default_model import default_model_path

    source = default_model_path()

    def build(out: Path) -> dict[str, Path]:
        models = {"F16": _quantize(source, out / "smollm2-F16.gguf", F16)}
        for name, ftype in QUANTS.items():
            models[name] = _quantize(models["F16"], out / f"smollm2-{name}.gguf", ftype)
        return models

    return cached_build("smollm2-quants", [source, Path(__file__), versions(*LLAMA_DISTS)], build)
