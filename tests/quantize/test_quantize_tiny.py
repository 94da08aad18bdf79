"""Tiny llama: HF folder -> F16 once -> several quant types; each loads and generates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import llama_cpp
import pytest

from backend.gguf_file.gguf_header import read_gguf_header
from backend.jobs.progress import Progress
from quantize.errors import NotGGUFError, SourceNotFoundError, UnknownQuantTypeError
from quantize.pipeline import run_quantize_job
from quantize.quant_types import QUANT_TYPES, quant_type
from quantize.quantizer import quantize_gguf


def test_ftypes_match_llama_cpp() -> None:
    for qt in QUANT_TYPES:
        assert getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{qt.name}") == qt.ftype, qt.name
    assert quant_type("q4_k_m").name == "Q4_K_M"


def test_hf_folder_to_several_types_convert_once(tiny_hf_model: Path, tmp_path: Path) -> None:
    events: list[Progress] = []
    types = ["Q8_0", "Q4_K_M", "Q4_0", "Q5_K_M", "F16"]
    job = run_quantize_job(tiny_hf_model, types, tmp_path, progress=events.append, threads=2)
    assert job.converted == tmp_path / "tiny-llama-F16.gguf"
    # the converter ran once: one "write" completion
    assert sum(1 for e in events if e.stage == "write" and e.done == e.total) == 1
    by_type = {o.type: o for o in job.outputs}
    assert set(by_type) == set(types)
    sizes = {t: o.size_bytes for t, o in by_type.items()}
    assert sizes["F16"] > sizes["Q8_0"] > sizes["Q5_K_M"] > sizes["Q4_K_M"]
    assert sizes["Q8_0"] > sizes["Q4_0"]
    for t, out in by_type.items():
        assert out.path == tmp_path / f"tiny-llama-{t}.gguf"
        assert read_gguf_header(out.path).file_type_name == t
        side = json.loads(out.sidecar.read_text())
        assert side["type"] == t and side["size_bytes"] == out.path.stat().st_size
        assert "llama-cpp-python" in side["llama_cpp_version"]
        llm = llama_cpp.Llama(model_path=str(out.path), n_ctx=64, verbose=False, n_threads=2)
        try:
            result = cast(dict[str, Any], llm("The invoice", max_tokens=4, temperature=0.0))
            assert result["usage"]["completion_tokens"] >= 1
        finally:
            llm.close()
    assert not list(tmp_path.glob("*.part"))
    # per-tensor progress for each quantised type, tagged with the type
    q4 = [e for e in events if e.stage == "quantize" and e.message.startswith("[Q4_K_M]")]
    n_tensors = len(read_gguf_header(by_type["Q4_K_M"].path).tensors)
    assert q4[-1].done == q4[-1].total == n_tensors
    assert len(q4) == n_tensors + 1  # the opening report, then one per tensor
    # K-quants applied (hidden size 256): no fallbacks on this model
    assert by_type["Q4_K_M"].fallbacks == []
    tensor_types = {t.type.name for t in read_gguf_header(by_type["Q4_K_M"].path).tensors}
    assert "Q4_K" in tensor_types


def test_unknown_type(tiny_f16: Path, tmp_path: Path) -> None:
    with pytest.raises(UnknownQuantTypeError, match=r"unknown quantisation type 'Q7_X'.*Q4_K_M"):
        quantize_gguf(tiny_f16, "Q7_X", tmp_path)


def test_missing_source(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError, match="not found"):
        quantize_gguf(tmp_path / "missing.gguf", "Q8_0", tmp_path)
    with pytest.raises(SourceNotFoundError, match="no such file or folder"):
        run_quantize_job(str(tmp_path / "missing.gguf"), ["Q8_0"], tmp_path)


def test_non_gguf_file(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_text("this is not a model\n" * 10)
    with pytest.raises(NotGGUFError, match="not a GGUF file"):
        quantize_gguf(fake, "Q8_0", tmp_path / "out")
    assert not (tmp_path / "out" / "model-Q8_0.gguf").exists()


def test_truncated_gguf(tiny_f16: Path, tmp_path: Path) -> None:
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(tiny_f16.read_bytes()[:100])
    with pytest.raises(NotGGUFError):
        quantize_gguf(bad, "Q8_0", tmp_path)
