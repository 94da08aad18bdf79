"""A small, fast reader of GGUF headers: metadata key/values and tensor infos, never tensor data.

The file is memory-mapped and only its header pages are touched, so reading a
70 GB model takes milliseconds. Long string arrays (the tokenizer's vocabulary
and merges) are skipped and kept as :class:`ArrayInfo` (type and length only).

Format (little-endian, version 2 and 3): ``b"GGUF"``, ``u32 version``,
``u64 n_tensors``, ``u64 n_kv``; ``n_kv`` times ``(string key, u32 type, value)``;
``n_tensors`` times ``(string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type,
u64 offset)``; then tensor data aligned to ``general.alignment`` (default 32).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

from backend.hub.errors import GGUFFormatError
from backend.hub.ggml_types import GGMLType, file_type_name, ggml_type

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# Value types of metadata entries.
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL, _STRING, _ARRAY = range(10)
_UINT64, _INT64, _FLOAT64 = 10, 11, 12

_SCALAR_FORMATS: dict[int, str] = {
    _UINT8: "B",
    _INT8: "b",
    _UINT16: "H",
    _INT16: "h",
    _UINT32: "I",
    _INT32: "i",
    _FLOAT32: "f",
    _BOOL: "?",
    _UINT64: "Q",
    _INT64: "q",
    _FLOAT64: "d",
}

# Arrays longer than these are summarised as ArrayInfo instead of being materialised.
MAX_STRING_ARRAY = 256
MAX_NUMERIC_ARRAY = 65_536


@dataclass(frozen=True)
class ArrayInfo:
    """A long metadata array that was skipped: its element type and length."""

    item_type: int
    length: int


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's name, shape (ggml order: ``ne[0]`` first), type and data offset."""

    name: str
    shape: tuple[int, ...]
    type: GGMLType
    offset: int

    @property
    def n_elements(self) -> int:
        return prod(self.shape) if self.shape else 1

    @property
    def n_bytes(self) -> int:
        return self.n_elements // self.type.block_size * self.type.type_size

    @property
    def layer(self) -> int | None:
        """The block index for ``blk.N.*`` tensors, else None."""
        if self.name.startswith("blk."):
            index = self.name.split(".", 2)[1]
            if index.isdigit():
                return int(index)
        return None


@dataclass
class GGUFHeader:
    """Everything in a GGUF file except the tensor data."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    data_offset: int
    file_size: int
    _tensor_index: dict[str, TensorInfo] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._tensor_index = {t.name: t for t in self.tensors}

    # --- generic access -------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def arch_get(self, name: str, default: Any = None) -> Any:
        """``{architecture}.{name}``, e.g. ``arch_get("block_count")``."""
        return self.metadata.get(f"{self.architecture}.{name}", default)

    def tensor(self, name: str) -> TensorInfo | None:
        return self._tensor_index.get(name)

    # --- model facts ----------------------------------------------------------------------
    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    @property
    def name(self) -> str | None:
        value = self.metadata.get("general.name")
        return str(value) if value else None

    @property
    def block_count(self) -> int:
        return int(self.arch_get("block_count", 0) or 0)

    @property
    def context_length(self) -> int | None:
        value = self.arch_get("context_length")
        return int(value) if value is not None else None

    @property
    def embedding_length(self) -> int:
        return int(self.arch_get("embedding_length", 0) or 0)

    @property
    def file_type(self) -> int | None:
        value = self.metadata.get("general.file_type")
        return int(value) if value is not None else None

    @property
    def file_type_name(self) -> str | None:
        return file_type_name(self.file_type)

    @property
    def chat_template(self) -> str | None:
        value = self.metadata.get("tokenizer.chat_template")
        return str(value) if isinstance(value, str) and value else None

    @property
    def parameter_count(self) -> int:
        """Number of weights, counted from the tensor shapes."""
        return sum(t.n_elements for t in self.tensors)

    @property
    def tensor_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)

    @property
    def bits_per_weight(self) -> float | None:
        params = self.parameter_count
        return 8.0 * self.tensor_bytes / params if params else None

    def per_layer(self, name: str, n_layer: int, default: int = 0) -> list[int]:
        """An ``{arch}.{name}`` value that may be a scalar or one value per layer."""
        value = self.arch_get(name)
        if value is None:
            return [default] * n_layer
        if isinstance(value, list | tuple):
            values = [int(v) for v in value]
            if len(values) < n_layer:
                values += [values[-1] if values else default] * (n_layer - len(values))
            return values[:n_layer]
        if isinstance(value, ArrayInfo):
            raise GGUFFormatError(f"{self.architecture}.{name} is too long to read")
        return [int(value)] * n_layer

    def layer_bytes(self) -> tuple[list[int], int]:
        """Weight bytes per ``blk.N`` layer, and the bytes of all other tensors."""
        per_layer = [0] * self.block_count
        other = 0
        for tensor in self.tensors:
            index = tensor.layer
            if index is not None and index < len(per_layer):
                per_layer[index] += tensor.n_bytes
            else:
                other += tensor.n_bytes
        return per_layer, other


class GGUFTruncatedError(GGUFFormatError):
    """The bytes end inside the header (an incomplete file, or a prefix fetched remotely)."""


_Buffer = bytes | bytearray | memoryview | mmap.mmap


class _Cursor:
    """Sequential little-endian reads over a buffer, with clear errors on truncation."""

    def __init__(self, buf: _Buffer, path: Path) -> None:
        self.buf = buf
        self.pos = 0
        self.path = path

    def _need(self, n: int) -> None:
        if self.pos + n > len(self.buf):
            raise GGUFTruncatedError(
                f"{self.path.name}: GGUF header is truncated (incomplete file?)"
            )

    def scalar(self, fmt: str) -> Any:
        size = struct.calcsize("<" + fmt)
        self._need(size)
        (value,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += size
        return value

    def many(self, fmt: str, count: int) -> tuple[Any, ...]:
        size = struct.calcsize("<" + fmt) * count
        self._need(size)
        values = struct.unpack_from(f"<{count}{fmt}", self.buf, self.pos)
        self.pos += size
        return values

    def string(self) -> str:
        length = self.scalar("Q")
        self._need(length)
        raw = self.buf[self.pos : self.pos + length]
        self.pos += length
        return bytes(raw).decode("utf-8", errors="replace")

    def skip_strings(self, count: int) -> None:
        for _ in range(count):
            length = self.scalar("Q")
            self._need(length)
            self.pos += length


def _read_value(cur: _Cursor, value_type: int) -> Any:
    if value_type in _SCALAR_FORMATS:
        return cur.scalar(_SCALAR_FORMATS[value_type])
    if value_type == _STRING:
        return cur.string()
    if value_type == _ARRAY:
        item_type = cur.scalar("I")
        length = cur.scalar("Q")
        if item_type in _SCALAR_FORMATS:
            fmt = _SCALAR_FORMATS[item_type]
            if length > MAX_NUMERIC_ARRAY:
                cur._need(struct.calcsize("<" + fmt) * length)
                cur.pos += struct.calcsize("<" + fmt) * length
                return ArrayInfo(item_type, length)
            return list(cur.many(fmt, length))
        if item_type == _STRING:
            if length > MAX_STRING_ARRAY:
                cur.skip_strings(length)
                return ArrayInfo(item_type, length)
            return [cur.string() for _ in range(length)]
        if item_type == _ARRAY:
            return [_read_value(cur, _ARRAY) for _ in range(length)]
        raise GGUFFormatError(f"{cur.path.name}: unknown GGUF array item type {item_type}")
    raise GGUFFormatError(f"{cur.path.name}: unknown GGUF value type {value_type}")


def _read(buf: _Buffer, path: Path, file_size: int) -> GGUFHeader:
    cur = _Cursor(buf, path)
    cur._need(4)
    if bytes(buf[:4]) != GGUF_MAGIC:
        raise GGUFFormatError(f"{path.name} is not a GGUF file (bad magic)")
    cur.pos = 4
    version = cur.scalar("I")
    if version not in (2, 3):
        raise GGUFFormatError(f"{path.name}: unsupported GGUF version {version} (or big-endian)")
    n_tensors = cur.scalar("Q")
    n_kv = cur.scalar("Q")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.string()
        value_type = cur.scalar("I")
        metadata[key] = _read_value(cur, value_type)
    tensors: list[TensorInfo] = []
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.scalar("I")
        if n_dims > 8:
            raise GGUFFormatError(f"{path.name}: tensor {name} has {n_dims} dimensions")
        shape = tuple(int(d) for d in cur.many("Q", n_dims))
        tensor_type = ggml_type(cur.scalar("I"))
        offset = cur.scalar("Q")
        tensors.append(TensorInfo(name, shape, tensor_type, offset))
    alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT) or DEFAULT_ALIGNMENT)
    data_offset = (cur.pos + alignment - 1) // alignment * alignment
    return GGUFHeader(path, version, metadata, tensors, data_offset, file_size)


def read_gguf_header(path: str | Path) -> GGUFHeader:
    """Read the metadata and tensor infos of the GGUF file at ``path``."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            file_size = path.stat().st_size
            if file_size < 24:
                raise GGUFFormatError(f"{path.name} is too small to be a GGUF file")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _read(buf, path, file_size)
    except FileNotFoundError:
        raise GGUFFormatError(f"GGUF file not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise GGUFFormatError(f"cannot read {path}: {exc}") from exc


def parse_gguf_header(data: bytes, name: str, file_size: int | None = None) -> GGUFHeader:
    """Parse a GGUF header from the first bytes of a file (e.g. fetched with an HTTP Range).

    Raises :class:`GGUFTruncatedError` when ``data`` ends inside the header.
    """
    return _read(data, Path(name), file_size if file_size is not None else len(data))


def is_gguf(path: str | Path) -> bool:
    """True when the file starts with the GGUF magic."""
    try:
        with Path(path).open("rb") as fh:
            return fh.read(4) == GGUF_MAGIC
    except OSError:
        return False
