"""The pure-Python GGUF header reader, checked against llama.cpp reading the same file."""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

import pytest

from backend.gguf_file.errors import GGUFFormatError
from backend.gguf_file.ggml_types import GGML_TYPES_BY_NAME, cache_type, quant_from_filename
from backend.gguf_file.gguf_header import (
    ArrayInfo,
    GGUFTruncatedError,
    is_gguf,
    parse_gguf_header,
    read_gguf_header,
)
from tests.hub.gguf_writer import tiny_gemma2


def test_header_agrees_with_llama_cpp(smollm2_path: Path) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    header = read_gguf_header(smollm2_path)
    params = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(str(smollm2_path).encode(), params)
    assert model
    try:
        assert header.parameter_count == llama_cpp.llama_model_n_params(model)
        assert header.tensor_bytes == llama_cpp.llama_model_size(model)
        assert header.context_length == llama_cpp.llama_model_n_ctx_train(model)
        assert header.block_count == llama_cpp.llama_model_n_layer(model)
        assert header.embedding_length == llama_cpp.llama_model_n_embd(model)
        template = llama_cpp.llama_model_chat_template(model, None)
        assert header.chat_template is not None and header.chat_template.encode() == template
        buf = ctypes.create_string_buffer(256)
        llama_cpp.llama_model_meta_val_str(model, b"general.architecture", buf, 256)
        assert header.architecture == buf.value.decode()
        llama_cpp.llama_model_desc(model, buf, 256)
        assert str(header.file_type_name) in buf.value.decode()  # e.g. "llama ?B Q4_1"
    finally:
        llama_cpp.llama_model_free(model)


def test_header_layout_accounts_for_every_byte(smollm2_path: Path) -> None:
    header = read_gguf_header(smollm2_path)
    assert header.version == 3
    last = max(header.tensors, key=lambda t: t.offset)
    assert header.data_offset + last.offset + last.n_bytes == smollm2_path.stat().st_size
    per_layer, other = header.layer_bytes()
    assert len(per_layer) == header.block_count and sum(per_layer) + other == header.tensor_bytes
    tokens = header.get("tokenizer.ggml.tokens")
    assert isinstance(tokens, ArrayInfo) and tokens.length == header.arch_get("vocab_size")


def test_reading_is_fast_and_skips_tensor_data(smollm2_path: Path) -> None:
    read_gguf_header(smollm2_path)  # warm the page cache for the header
    start = time.perf_counter()
    for _ in range(5):
        read_gguf_header(smollm2_path)
    assert (time.perf_counter() - start) / 5 < 0.5


def test_prefix_parse_and_truncation(smollm2_path: Path, tmp_path: Path) -> None:
    full = read_gguf_header(smollm2_path)
    data = smollm2_path.read_bytes()
    prefix = parse_gguf_header(data[: full.data_offset], "x.gguf", file_size=len(data))
    assert prefix.metadata == full.metadata and prefix.tensors == full.tensors
    with pytest.raises(GGUFTruncatedError):
        parse_gguf_header(data[: full.data_offset // 2], "x.gguf")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:4096])
    with pytest.raises(GGUFFormatError, match="truncated"):
        read_gguf_header(cut)
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    assert not is_gguf(not_gguf)
    with pytest.raises(GGUFFormatError, match="not a GGUF"):
        read_gguf_header(not_gguf)


def test_written_gguf_round_trips(tmp_path: Path) -> None:
    path = tiny_gemma2(tmp_path / "g.gguf", n_layer=3)
    header = read_gguf_header(path)
    assert header.architecture == "gemma2" and header.block_count == 3
    assert header.arch_get("attention.sliding_window") == 256
    assert header.get("tokenizer.ggml.model") == "none"
    assert header.tensor("blk.2.ffn_down.weight") is not None
    assert header.file_type_name == "F16"


@pytest.mark.parametrize(
    ("name", "quant"),
    [
        ("Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("llama-3.2-1b-instruct-q8_0.gguf", "Q8_0"),
        ("gemma-2-9b-it-IQ3_XXS.gguf", "IQ3_XXS"),
        ("model.f16.gguf", "F16"),
        ("Mistral-7B-v0.3.BF16.gguf", "BF16"),
        ("phi-4-IQ4_NL.gguf", "IQ4_NL"),
        ("DeepSeek-R1-Q2_K_L-00001-of-00005.gguf", "Q2_K_L"),
        ("Qwen3-30B-A3B-UD-Q4_K_XL.gguf", "Q4_K_XL"),
        ("gpt-oss-20b-mxfp4.gguf", "MXFP4"),
        ("Meta-Llama-3-8B-Instruct.Q5_K_M.gguf", "Q5_K_M"),
        ("tokenizer.json", None),
    ],
)
def test_quant_from_filename(name: str, quant: str | None) -> None:
    assert quant_from_filename(name) == quant


def test_cache_type_block_sizes() -> None:
    assert cache_type("q8_0").row_bytes(64) == 68  # 34 bytes per 32 values
    assert cache_type("q4_0").row_bytes(64) == 36  # 18 bytes per 32 values
    assert cache_type("f16").row_bytes(64) == 128
    assert GGML_TYPES_BY_NAME["q4_k"].bits_per_weight == 4.5
    with pytest.raises(GGUFFormatError):
        cache_type("q4_k")
