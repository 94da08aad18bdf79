"""HF folder -> GGUF with convert-hf-to-gguf in a child process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from backend.gguf_file.gguf_header import read_gguf_header
from backend.jobs.progress import Progress
from quantize.convert import convert_hf_to_gguf
from quantize.errors import (
    MissingTokenizerError,
    NotAModelFolderError,
    SourceNotFoundError,
    UnsupportedArchitectureError,
)


def test_convert_tiny_llama_to_f16_and_bf16(tiny_hf_model: Path, tmp_path: Path) -> None:
    events: list[Progress] = []
    result = convert_hf_to_gguf(tiny_hf_model, tmp_path, "BF16", progress=events.append)
    assert result.path == tmp_path / "tiny-llama-BF16.gguf"
    assert not list(tmp_path.glob("*.part"))
    header = read_gguf_header(result.path)
    assert header.architecture == "llama"
    assert header.file_type_name == "BF16"
    assert header.embedding_length == 256
    weights = {t.name: t.type.name for t in header.tensors}
    assert weights["blk.0.attn_q.weight"] == "BF16"
    assert weights["blk.0.attn_norm.weight"] == "F32"
    # progress: one report per tensor, counted against the safetensors tensor count
    per_tensor = [e for e in events if e.stage == "convert" and e.done > 0]
    assert len(per_tensor) == len(header.tensors)
    assert per_tensor[-1].done == per_tensor[-1].total == len(header.tensors)
    assert any(e.stage == "write" and e.done == e.total for e in events)


def test_f16_fixture_is_a_llama_gguf(tiny_f16: Path) -> None:
    header = read_gguf_header(tiny_f16)
    assert tiny_f16.name == "tiny-llama-F16.gguf"
    assert header.file_type_name == "F16"
    assert header.get("tokenizer.ggml.model") == "llama"  # the SentencePiece vocab


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError, match="not found"):
        convert_hf_to_gguf(tmp_path / "nope", tmp_path)


def test_file_instead_of_folder(tmp_path: Path) -> None:
    f = tmp_path / "model.safetensors"
    f.write_bytes(b"x")
    with pytest.raises(NotAModelFolderError, match="not a folder"):
        convert_hf_to_gguf(f, tmp_path)


def test_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(NotAModelFolderError, match=r"config\.json is missing"):
        convert_hf_to_gguf(tmp_path, tmp_path)


def test_missing_tokenizer(tiny_hf_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "no-tok"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_hf_model / name, folder / name)
    with pytest.raises(MissingTokenizerError, match="no tokenizer"):
        convert_hf_to_gguf(folder, tmp_path)


def test_unsupported_architecture_reported_by_converter(
    tiny_hf_model: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "odd-arch"
    shutil.copytree(tiny_hf_model, folder)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["MadeUpForCausalLM"]
    (folder / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    with pytest.raises(UnsupportedArchitectureError, match="MadeUpForCausalLM"):
        convert_hf_to_gguf(folder, out)
    assert not list(out.iterdir())  # no partial or final file left
