"""A minimal GGUF v3 writer for tests: typed metadata and zero-filled F32/F16 tensors.

Used to build tiny models of other architectures (e.g. gemma2 with sliding-window
layers) that llama.cpp really loads, so the fit estimate can be checked against it.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

_U32, _I32, _F32, _BOOL, _STRING, _ARRAY, _U64 = 4, 5, 6, 7, 8, 9, 10
_GGML_F32, _GGML_F16 = 0, 1
ALIGNMENT = 32


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack("<Q", len(raw)) + raw


def _value(value: Any) -> tuple[int, bytes]:
    if isinstance(value, bool):
        return _BOOL, struct.pack("<?", value)
    if isinstance(value, int):
        return (_U32, struct.pack("<I", value)) if value >= 0 else (_I32, struct.pack("<i", value))
    if isinstance(value, float):
        return _F32, struct.pack("<f", value)
    if isinstance(value, str):
        return _STRING, _string(value)
    if isinstance(value, list):
        item_type, _ = _value(value[0])
        body = b"".join(_value(v)[1] for v in value)
        return _ARRAY, struct.pack("<IQ", item_type, len(value)) + body
    raise TypeError(f"unsupported metadata value {value!r}")


def write_gguf(
    path: Path, metadata: dict[str, Any], tensors: dict[str, tuple[list[int], str]]
) -> Path:
    """Write ``tensors`` (name -> (shape in ggml order, "f32"|"f16")) as zeros."""
    header = bytearray(b"GGUF")
    header += struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, value in metadata.items():
        value_type, body = _value(value)
        header += _string(key) + struct.pack("<I", value_type) + body
    offset = 0
    sizes = []
    for name, (shape, dtype) in tensors.items():
        ggml_type, width = (_GGML_F32, 4) if dtype == "f32" else (_GGML_F16, 2)
        n = 1
        for d in shape:
            n *= d
        header += _string(name) + struct.pack("<I", len(shape))
        header += struct.pack(f"<{len(shape)}Q", *shape) + struct.pack("<IQ", ggml_type, offset)
        size = n * width
        sizes.append(size)
        offset += size + (-size % ALIGNMENT)
    header += b"\0" * (-len(header) % ALIGNMENT)
    with path.open("wb") as fh:
        fh.write(header)
        for size in sizes:
            fh.write(b"\0" * (size + (-size % ALIGNMENT)))
    return path


def tiny_gemma2(
    path: Path,
    *,
    n_layer: int = 6,
    n_embd: int = 256,
    n_head: int = 8,
    n_head_kv: int = 4,
    head_dim: int = 32,
    n_ff: int = 512,
    n_vocab: int = 2048,
    sliding_window: int = 256,
) -> Path:
    """A zero-weight gemma2 model (interleaved sliding-window attention) llama.cpp can load."""
    arch = "gemma2"
    metadata: dict[str, Any] = {
        "general.architecture": arch,
        "general.name": "tiny-gemma2-test",
        "general.file_type": 1,
        f"{arch}.context_length": 8192,
        f"{arch}.embedding_length": n_embd,
        f"{arch}.block_count": n_layer,
        f"{arch}.feed_forward_length": n_ff,
        f"{arch}.attention.head_count": n_head,
        f"{arch}.attention.head_count_kv": n_head_kv,
        f"{arch}.attention.key_length": head_dim,
        f"{arch}.attention.value_length": head_dim,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-6,
        f"{arch}.attention.sliding_window": sliding_window,
        f"{arch}.vocab_size": n_vocab,
        "tokenizer.ggml.model": "none",
    }
    tensors: dict[str, tuple[list[int], str]] = {
        "token_embd.weight": ([n_embd, n_vocab], "f16"),
        "output_norm.weight": ([n_embd], "f32"),
    }
    for il in range(n_layer):
        p = f"blk.{il}."
        tensors.update(
            {
                p + "attn_norm.weight": ([n_embd], "f32"),
                p + "attn_q.weight": ([n_embd, n_head * head_dim], "f16"),
                p + "attn_k.weight": ([n_embd, n_head_kv * head_dim], "f16"),
                p + "attn_v.weight": ([n_embd, n_head_kv * head_dim], "f16"),
                p + "attn_output.weight": ([n_head * head_dim, n_embd], "f16"),
                p + "post_attention_norm.weight": ([n_embd], "f32"),
                p + "ffn_norm.weight": ([n_embd], "f32"),
                p + "ffn_gate.weight": ([n_embd, n_ff], "f16"),
                p + "ffn_up.weight": ([n_embd, n_ff], "f16"),
                p + "ffn_down.weight": ([n_ff, n_embd], "f16"),
                p + "post_ffw_norm.weight": ([n_embd], "f32"),
            }
        )
    return write_gguf(path, metadata, tensors)


def tiny_llama(
    path: Path,
    *,
    n_layer: int = 4,
    n_embd: int = 256,
    n_head: int = 16,
    n_head_kv: int = 4,
    head_dim: int = 64,
    n_ff: int = 768,
    n_vocab: int = 4096,
    tied_output: bool = False,
) -> Path:
    """A zero-weight llama model whose attention width (n_head x head_dim) differs from n_embd."""
    arch = "llama"
    metadata: dict[str, Any] = {
        "general.architecture": arch,
        "general.name": "tiny-llama-test",
        "general.file_type": 1,
        f"{arch}.context_length": 4096,
        f"{arch}.embedding_length": n_embd,
        f"{arch}.block_count": n_layer,
        f"{arch}.feed_forward_length": n_ff,
        f"{arch}.attention.head_count": n_head,
        f"{arch}.attention.head_count_kv": n_head_kv,
        f"{arch}.attention.key_length": head_dim,
        f"{arch}.attention.value_length": head_dim,
        f"{arch}.rope.dimension_count": head_dim,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-5,
        f"{arch}.vocab_size": n_vocab,
        "tokenizer.ggml.model": "none",
    }
    tensors: dict[str, tuple[list[int], str]] = {
        "token_embd.weight": ([n_embd, n_vocab], "f16"),
        "output_norm.weight": ([n_embd], "f32"),
    }
    if not tied_output:
        tensors["output.weight"] = ([n_embd, n_vocab], "f16")
    for il in range(n_layer):
        p = f"blk.{il}."
        tensors.update(
            {
                p + "attn_norm.weight": ([n_embd], "f32"),
                p + "attn_q.weight": ([n_embd, n_head * head_dim], "f16"),
                p + "attn_k.weight": ([n_embd, n_head_kv * head_dim], "f16"),
                p + "attn_v.weight": ([n_embd, n_head_kv * head_dim], "f16"),
                p + "attn_output.weight": ([n_head * head_dim, n_embd], "f16"),
                p + "ffn_norm.weight": ([n_embd], "f32"),
                p + "ffn_gate.weight": ([n_embd, n_ff], "f16"),
                p + "ffn_up.weight": ([n_embd, n_ff], "f16"),
                p + "ffn_down.weight": ([n_ff, n_embd], "f16"),
            }
        )
    return write_gguf(path, metadata, tensors)
