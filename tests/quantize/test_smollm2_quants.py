"""Real weights: SmolLM2-135M as F16 -> Q8_0, Q4_K_M, Q2_K; sizes in order, all load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import llama_cpp
import pytest

from backend.gguf_file.gguf_header import read_gguf_header
from quantize.errors import RequantizeNotAllowedError
from quantize.quantizer import quantize_gguf


def test_requantising_needs_permission_and_warns(smollm2_path: Path, tmp_path: Path) -> None:
    with pytest.raises(RequantizeNotAllowedError, match=r"already quantised.*--allow-requantize"):
        quantize_gguf(smollm2_path, "Q4_K_M", tmp_path)
    assert not list(tmp_path.iterdir())


def test_smollm2_f16_fixture(smollm2_f16: Path, smollm2_path: Path) -> None:
    assert smollm2_f16.name == "SmolLM2-135M-Instruct-F16.gguf"
    header = read_gguf_header(smollm2_f16)
    assert header.file_type_name == "F16"
    assert {t.type.name for t in header.tensors} <= {"F16", "F32"}
    side = json.loads((smollm2_f16.parent / (smollm2_f16.name + ".json")).read_text())
    assert side["source"] == str(smollm2_path.resolve())


@pytest.mark.slow
def test_smollm2_sizes_ordered_and_all_load(smollm2_f16: Path, tmp_path: Path) -> None:
    results = {
        t: quantize_gguf(smollm2_f16, t, tmp_path, threads=2) for t in ("Q8_0", "Q4_K_M", "Q2_K")
    }
    f16_size = smollm2_f16.stat().st_size
    sizes = {t: r.size_bytes for t, r in results.items()}
    assert f16_size > sizes["Q8_0"] > sizes["Q4_K_M"] > sizes["Q2_K"]
    assert sizes["Q8_0"] < 0.6 * f16_size  # about half
    for t, r in results.items():
        assert r.path.name == f"SmolLM2-135M-Instruct-{t}.gguf"
        assert r.warnings == []  # F16 source: no requantise warning
        llm = llama_cpp.Llama(model_path=str(r.path), n_ctx=128, verbose=False, n_threads=2)
        try:
            out = cast(dict[str, Any], llm("The capital of", max_tokens=4, temperature=0.0))
            assert out["usage"]["completion_tokens"] >= 1
        finally:
            llm.close()
    # SmolLM2's hidden size 576 is not a multiple of 256, so K-quant tensors fall back
    fallbacks = results["Q4_K_M"].fallbacks
    assert fallbacks, "expected K-quant fallbacks for 576-wide rows"
    assert all(f.ncols % 256 != 0 for f in fallbacks)
    header = read_gguf_header(results["Q4_K_M"].path)
    types = {t.name: t.type.name for t in header.tensors}
    for f in fallbacks:
        assert types[f.tensor] == f.used
    side = json.loads(results["Q2_K"].sidecar.read_text())
    assert len(side["fallbacks"]) == len(results["Q2_K"].fallbacks)
