"""GGUF helpers for tests.

``write_gguf``: a minimal GGUF v3 writer, typed metadata and zero-filled F32/F16 tensors.
Used to build tiny models of other architectures (e.g. gemma2 with sliding-window
layers) that llama.cpp really loads, so the fit estimate can be checked against it.

``shrink_arrays``: a real GGUF header with its long arrays (vocabulary, merges) cut short, a
fast base for fuzzing the header reader with the layout of a real model.

``copy_with_metadata``: copy a GGUF with extra metadata entries, how the server tests
make a model with FIM tokens (or another declared property) out of the embedded SmolLM2.
Only the key/value section changes: the new entries are appended after the old ones,
the tensor infos are copied as they are (their offsets are relative to the data
section), the data section is re-aligned and copied byte for byte.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

_U32, _I32, _F32, _BOOL, _STRING, _ARRAY, _U64 = 4, 5, 6, 7, 8, 9, 10
# byte width of each fixed-size GGUF value type
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGML_F32, _GGML_F16 = 0, 1
ALIGNMENT = 32


class U64(int):
    """A metadata integer written as a GGUF uint64 (plain ints are written as uint32)."""


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack("<Q", len(raw)) + raw


def _value(value: Any) -> tuple[int, bytes]:
    if isinstance(value, bool):
        return _BOOL, struct.pack("<?", value)
    if isinstance(value, U64):
        return _U64, struct.pack("<Q", value)
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


def _entry(key: str, value: Any) -> bytes:
    value_type, body = _value(value)
    return _string(key) + struct.pack("<I", value_type) + body


def write_gguf(
    path: Path, metadata: dict[str, Any], tensors: dict[str, tuple[list[int], str]]
) -> Path:
    """Write ``tensors`` (name -> (shape in ggml order, "f32"|"f16")) as zeros."""
    header = bytearray(b"GGUF")
    header += struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, value in metadata.items():
        header += _entry(key, value)
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


def _block_tensors(
    il: int,
    n_embd: int,
    n_head: int,
    n_head_kv: int,
    head_dim: int,
    n_ff: int,
    *,
    post_norms: bool = False,
) -> dict[str, tuple[list[int], str]]:
    """The tensors of llama-style block ``il``; ``post_norms`` adds gemma2's post-norms."""
    p = f"blk.{il}."
    tensors: dict[str, tuple[list[int], str]] = {
        p + "attn_norm.weight": ([n_embd], "f32"),
        p + "attn_q.weight": ([n_embd, n_head * head_dim], "f16"),
        p + "attn_k.weight": ([n_embd, n_head_kv * head_dim], "f16"),
        p + "attn_v.weight": ([n_embd, n_head_kv * head_dim], "f16"),
        p + "attn_output.weight": ([n_head * head_dim, n_embd], "f16"),
    }
    if post_norms:
        tensors[p + "post_attention_norm.weight"] = ([n_embd], "f32")
    tensors.update(
        {
            p + "ffn_norm.weight": ([n_embd], "f32"),
            p + "ffn_gate.weight": ([n_embd, n_ff], "f16"),
            p + "ffn_up.weight": ([n_embd, n_ff], "f16"),
            p + "ffn_down.weight": ([n_ff, n_embd], "f16"),
        }
    )
    if post_norms:
        tensors[p + "post_ffw_norm.weight"] = ([n_embd], "f32")
    return tensors


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
        tensors.update(
            _block_tensors(il, n_embd, n_head, n_head_kv, head_dim, n_ff, post_norms=True)
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
        tensors.update(_block_tensors(il, n_embd, n_head, n_head_kv, head_dim, n_ff))
    return write_gguf(path, metadata, tensors)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> bytes:
        n = self.unpack("Q")
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        return raw

    def skip_value(self, vtype: int) -> None:
        if vtype in _FIXED:
            self.pos += _FIXED[vtype]
        elif vtype == _STRING:
            self.string()
        elif vtype == _ARRAY:
            item_type = self.unpack("I")
            count = self.unpack("Q")
            if item_type in _FIXED:
                self.pos += _FIXED[item_type] * count
            else:
                for _ in range(count):
                    self.skip_value(item_type)
        else:
            raise ValueError(f"unknown GGUF value type {vtype}")


def copy_with_metadata(src: Path, dst: Path, extra: dict[str, int]) -> Path:
    """Write ``dst``: ``src`` plus integer metadata ``extra`` (keys must be new)."""
    with src.open("rb") as f:
        head = f.read(64 * 1024 * 1024)  # the header of a small model fits easily
    r = _Reader(head)
    if head[:4] != b"GGUF":
        raise ValueError(f"{src} is not a GGUF file")
    r.pos = 4
    version = r.unpack("I")
    n_tensors = r.unpack("Q")
    n_kv = r.unpack("Q")
    kv_start = r.pos
    alignment = 32
    for _ in range(n_kv):
        key = r.string().decode()
        vtype = r.unpack("I")
        if key in extra:
            raise ValueError(f"{src} already has {key}")
        if key == "general.alignment" and vtype == _U32:
            alignment = r.unpack("I")
        else:
            r.skip_value(vtype)
    kv_end = r.pos
    for _ in range(n_tensors):
        r.string()
        n_dims = r.unpack("I")
        r.pos += 8 * n_dims + 4 + 8
    infos_end = r.pos
    data_start = -(-infos_end // alignment) * alignment

    header = bytearray(b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv + len(extra)))
    header += head[kv_start:kv_end]
    for key, value in extra.items():
        header += _entry(key, value)
    header += head[kv_end:infos_end]
    header += b"\0" * (-len(header) % alignment)

    part = dst.with_name(dst.name + ".part")
    with src.open("rb") as fin, part.open("wb") as fout:
        fout.write(header)
        fin.seek(data_start)
        shutil.copyfileobj(fin, fout, 1 << 20)
    part.replace(dst)
    return dst


def shrink_arrays(src: Path, keep: int) -> tuple[bytes, int]:
    """The header of the GGUF ``src`` with every array cut to its first ``keep`` items, and
    the size of ``src``'s tensor data (the tensor infos are unchanged: their offsets are
    relative to the data section, so the header plus that many bytes is a consistent file)."""
    data = src.read_bytes()
    r = _Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError(f"{src} is not a GGUF file")
    r.pos = 4
    version = r.unpack("I")
    n_tensors = r.unpack("Q")
    n_kv = r.unpack("Q")
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv))
    alignment = ALIGNMENT
    for _ in range(n_kv):
        start = r.pos
        key = r.string()
        vtype = r.unpack("I")
        if vtype != _ARRAY:
            if key == b"general.alignment":
                alignment = r.unpack("I")
            else:
                r.skip_value(vtype)
            out += data[start : r.pos]
            continue
        item_type = r.unpack("I")
        count = r.unpack("Q")
        items = []
        for i in range(count):
            item_start = r.pos
            r.skip_value(item_type)
            if i < keep:
                items.append(data[item_start : r.pos])
        out += struct.pack("<Q", len(key)) + key
        out += struct.pack("<IIQ", _ARRAY, item_type, len(items)) + b"".join(items)
    infos_start = r.pos
    for _ in range(n_tensors):
        r.string()
        n_dims = r.unpack("I")
        r.pos += 8 * n_dims + 4 + 8
    out += data[infos_start : r.pos]
    data_start = -(-r.pos // alignment) * alignment
    out += b"\0" * (-len(out) % alignment)
    return bytes(out), len(data) - data_start
