"""A small, fast reader of GGUF headers: metadata key/values and tensor infos, never tensor data.

The file is memory-mapped and only its header pages are touched, so reading a
70 GB model takes milliseconds. Long string arrays (the tokenizer's vocabulary
and merges) are skipped and kept as :class:`ArrayInfo` (type and length only).

Format (little-endian, version 2 and 3): ``b"GGUF"``, ``u32 version``,
``u64 n_tensors``, ``u64 n_kv``; ``n_kv`` times ``(string key, u32 type, value)``;
``n_tensors`` times ``(string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type,
u64 offset)``; then tensor data aligned to ``general.alignment`` (default 32).

Any file in the models folder may be damaged or crafted, so every count and length is
checked against the bytes the file can still hold before anything is read or allocated,
nesting is bounded, the values the library and the fit estimate use are type-checked,
and the tensors must lie inside the file: whatever the bytes, reading ends in a header
or one :class:`GGUFFormatError`, in time proportional to the file.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

from backend.core.units import human_bytes
from backend.gguf_file.errors import GGUFFormatError
from backend.gguf_file.ggml_types import GGMLType, file_type_name, ggml_type

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
# Arrays of arrays (llama.cpp itself reads none) are read this deep at most.
MAX_ARRAY_NESTING = 4
MAX_TENSOR_DIMS = 8
# llama.cpp's LLAMA_MAX_LAYERS: no model it loads has more blocks.
MAX_BLOCK_COUNT = 512
# Metadata counts (context length, heads, widths) are uint32 in every GGUF writer.
COUNT_LIMIT = 1 << 32

# The fewest bytes each item can take, to bound a count by the bytes left in the file.
_MIN_KV_BYTES = 8 + 4 + 1  # key length, value type, a one-byte value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # name length, n_dims, type, offset
_MIN_ARRAY_BYTES = 4 + 8  # item type, length
_MIN_STRING_BYTES = 8  # length


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

    def count(self, key: str, default: int = 0, *, limit: int = COUNT_LIMIT) -> int:
        """Metadata ``key`` as a count: an integer from 0 to ``limit - 1`` (``default`` when
        absent); GGUFFormatError for anything else, e.g. a string or a list in a crafted file."""
        value = self.metadata.get(key)
        return default if value is None else _checked_count(self.path, key, value, limit)

    def arch_count(self, name: str, default: int = 0, *, limit: int = COUNT_LIMIT) -> int:
        """:meth:`count` of ``{architecture}.{name}``."""
        return self.count(f"{self.architecture}.{name}", default, limit=limit)

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
        return self.arch_count("block_count", limit=MAX_BLOCK_COUNT + 1)

    @property
    def context_length(self) -> int | None:
        if self.arch_get("context_length") is None:
            return None
        return self.arch_count("context_length")

    @property
    def embedding_length(self) -> int:
        return self.arch_count("embedding_length")

    @property
    def file_type(self) -> int | None:
        if self.metadata.get("general.file_type") is None:
            return None
        return self.count("general.file_type")

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
        key = f"{self.architecture}.{name}"
        value = self.metadata.get(key)
        if value is None:
            return [default] * n_layer
        if isinstance(value, list | tuple):
            values = [_checked_count(self.path, key, v, COUNT_LIMIT) for v in value]
            if len(values) < n_layer:
                values += [values[-1] if values else default] * (n_layer - len(values))
            return values[:n_layer]
        if isinstance(value, ArrayInfo):
            raise GGUFFormatError(f"{self.path.name}: {key} is too long to read")
        return [self.count(key)] * n_layer

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
    """The bytes at hand end inside the header, before the end of the file: a prefix
    fetched remotely, which a longer prefix may complete."""


class GGUFIncompleteError(GGUFFormatError):
    """The file ends before what its header describes: an interrupted download or copy
    (or a count a damaged or crafted file claims); more bytes of it would not help."""


def _shown(value: Any) -> str:
    if isinstance(value, ArrayInfo):
        return f"an array of {value.length} items"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _checked_count(path: Path, key: str, value: Any, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
        raise GGUFFormatError(
            f"{path.name}: {key} = {_shown(value)} is not a whole number from 0 to {limit - 1}"
        )
    return value


_Buffer = bytes | bytearray | memoryview | mmap.mmap
_STRUCTS = {fmt: struct.Struct("<" + fmt) for fmt in {*_SCALAR_FORMATS.values(), "Q", "I"}}
_U64 = _STRUCTS["Q"]


class _Cursor:
    """Sequential little-endian reads over a buffer; every read and count is checked first.

    ``file_size`` is the size of the whole file (None: unknown); the buffer may be a
    prefix of it. Reading past the file is :class:`GGUFIncompleteError`, past only the
    buffer :class:`GGUFTruncatedError`.
    """

    def __init__(self, buf: _Buffer, path: Path, file_size: int | None) -> None:
        self.buf = buf
        self.pos = 0
        self.path = path
        self.have = len(buf)
        self.file_size = None if file_size is None else max(file_size, self.have)

    def _need(self, n: int, what: str = "data") -> None:
        end = self.pos + n
        if self.file_size is not None and end > self.file_size:
            raise GGUFIncompleteError(
                f"{self.path.name} is truncated or corrupt: {what} at byte {self.pos} needs "
                f"{n} bytes, but the file ends at byte {self.file_size} "
                "(an incomplete download or copy?)"
            )
        if end > self.have:
            raise GGUFTruncatedError(
                f"{self.path.name}: GGUF header is truncated (it goes on past byte {self.have})"
            )

    def check_count(self, count: int, min_bytes: int, what: str) -> None:
        """Refuse ``count`` items of at least ``min_bytes`` each that the file cannot hold,
        before looping over or allocating them."""
        room = (self.file_size if self.file_size is not None else self.have) - self.pos
        if count * min_bytes <= room:
            return
        if self.file_size is None:
            raise GGUFTruncatedError(
                f"{self.path.name}: GGUF header is truncated ({count} {what} at byte {self.pos})"
            )
        raise GGUFIncompleteError(
            f"{self.path.name} is truncated or corrupt: its header claims {count} {what} at "
            f"byte {self.pos}, more than the {room} bytes left in the file can hold"
        )

    def scalar(self, fmt: str) -> Any:
        unpacker = _STRUCTS[fmt]
        self._need(unpacker.size, "a value")
        (value,) = unpacker.unpack_from(self.buf, self.pos)
        self.pos += unpacker.size
        return value

    def many(self, fmt: str, count: int) -> tuple[Any, ...]:
        size = _STRUCTS[fmt].size * count
        self._need(size, f"{count} values")
        values = struct.unpack_from(f"<{count}{fmt}", self.buf, self.pos)
        self.pos += size
        return values

    def skip(self, n: int, what: str) -> None:
        self._need(n, what)
        self.pos += n

    def string(self) -> str:
        length = self.scalar("Q")
        self._need(length, "a string")
        raw = self.buf[self.pos : self.pos + length]
        self.pos += length
        return bytes(raw).decode("utf-8", errors="replace")

    def skip_strings(self, count: int) -> None:
        """Step over ``count`` strings (a vocabulary: keep the loop lean)."""
        self.check_count(count, _MIN_STRING_BYTES, "strings")
        buf, have, unpack = self.buf, self.have, _U64.unpack_from
        pos = self.pos
        for _ in range(count):
            if pos + 8 > have:
                break
            (length,) = unpack(buf, pos)
            if pos + 8 + length > have:
                break
            pos += 8 + length
        else:
            self.pos = pos
            return
        self.pos = pos
        self.string()  # raises the right error for the string that does not fit


def _read_array(cur: _Cursor, depth: int, keep: bool) -> Any:
    """An array value (after its type): a list, an :class:`ArrayInfo` for a long one, or
    nothing when ``keep`` is false (stepping over an array inside a long one)."""
    if depth > MAX_ARRAY_NESTING:
        raise GGUFFormatError(
            f"{cur.path.name} is corrupt: arrays nested more than {MAX_ARRAY_NESTING} deep"
        )
    item_type = cur.scalar("I")
    length = cur.scalar("Q")
    if item_type in _SCALAR_FORMATS:
        fmt = _SCALAR_FORMATS[item_type]
        item_size = _STRUCTS[fmt].size
        cur.check_count(length, item_size, "array items")
        if not keep or length > MAX_NUMERIC_ARRAY:
            cur.skip(item_size * length, f"an array of {length} values")
            return ArrayInfo(item_type, length) if keep else None
        return list(cur.many(fmt, length))
    if item_type == _STRING:
        cur.check_count(length, _MIN_STRING_BYTES, "strings")
        if not keep or length > MAX_STRING_ARRAY:
            cur.skip_strings(length)
            return ArrayInfo(item_type, length) if keep else None
        return [cur.string() for _ in range(length)]
    if item_type == _ARRAY:
        cur.check_count(length, _MIN_ARRAY_BYTES, "arrays")
        keep_items = keep and length <= MAX_STRING_ARRAY
        items = [_read_array(cur, depth + 1, keep_items) for _ in range(length)]
        if keep_items:
            return items
        return ArrayInfo(item_type, length) if keep else None
    raise GGUFFormatError(f"{cur.path.name}: unknown GGUF array item type {item_type}")


def _read_value(cur: _Cursor, value_type: int) -> Any:
    if value_type in _SCALAR_FORMATS:
        return cur.scalar(_SCALAR_FORMATS[value_type])
    if value_type == _STRING:
        return cur.string()
    if value_type == _ARRAY:
        return _read_array(cur, 1, keep=True)
    raise GGUFFormatError(f"{cur.path.name}: unknown GGUF value type {value_type}")


def _read_tensor_info(cur: _Cursor, path: Path) -> TensorInfo:
    name = cur.string()
    n_dims = cur.scalar("I")
    if n_dims > MAX_TENSOR_DIMS:
        raise GGUFFormatError(f"{path.name}: tensor {name} has {n_dims} dimensions")
    shape = tuple(int(d) for d in cur.many("Q", n_dims))
    tensor_type = ggml_type(cur.scalar("I"))
    offset = cur.scalar("Q")
    if any(d >= 1 << 63 for d in shape) or prod(shape) >= 1 << 63:
        raise GGUFFormatError(f"{path.name}: tensor {name} has an impossible shape {shape}")
    if shape and shape[0] % tensor_type.block_size:
        raise GGUFFormatError(
            f"{path.name}: tensor {name} has rows of {shape[0]} values, not a multiple of "
            f"the {tensor_type.block_size}-value blocks of {tensor_type.name}"
        )
    return TensorInfo(name, shape, tensor_type, offset)


def _alignment(metadata: dict[str, Any], path: Path) -> int:
    value = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise GGUFFormatError(
            f"{path.name}: general.alignment = {_shown(value)} is not a power of two"
        )
    return value


def _check_metadata(header: GGUFHeader) -> None:
    """The entries the library and the fit estimate read must have sane types and ranges."""
    arch = header.metadata.get("general.architecture")
    if arch is not None and not isinstance(arch, str):
        raise GGUFFormatError(
            f"{header.path.name}: general.architecture = {_shown(arch)} is not a name"
        )
    # each raises GGUFFormatError for a value of the wrong type or range
    _ = (header.block_count, header.context_length, header.embedding_length, header.file_type)


def _check_tensor_data(header: GGUFHeader) -> None:
    """Every tensor must lie inside the file: one that is cut short is no model."""
    if not header.tensors:
        return
    needed = header.data_offset + max(t.offset + t.n_bytes for t in header.tensors)
    if needed > header.file_size:
        raise GGUFIncompleteError(
            f"{header.path.name} is truncated: its tensor data needs {human_bytes(needed)}, "
            f"the file has {human_bytes(header.file_size)} "
            f"({100 * header.file_size / needed:.0f}%; an incomplete download or copy?)"
        )


def _read(buf: _Buffer, path: Path, file_size: int | None) -> GGUFHeader:
    """The header in ``buf``; ``file_size`` is the whole file's size (None: unknown, so the
    tensor data cannot be checked)."""
    cur = _Cursor(buf, path, file_size)
    cur._need(4, "the magic")
    if bytes(buf[:4]) != GGUF_MAGIC:
        raise GGUFFormatError(f"{path.name} is not a GGUF file (bad magic)")
    cur.pos = 4
    version = cur.scalar("I")
    if version not in (2, 3):
        raise GGUFFormatError(f"{path.name}: unsupported GGUF version {version} (or big-endian)")
    n_tensors = cur.scalar("Q")
    n_kv = cur.scalar("Q")
    cur.check_count(n_kv, _MIN_KV_BYTES, "metadata entries")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.string()
        value_type = cur.scalar("I")
        metadata[key] = _read_value(cur, value_type)
    cur.check_count(n_tensors, _MIN_TENSOR_INFO_BYTES, "tensors")
    tensors = [_read_tensor_info(cur, path) for _ in range(n_tensors)]
    alignment = _alignment(metadata, path)
    data_offset = (cur.pos + alignment - 1) // alignment * alignment
    size = cur.file_size if cur.file_size is not None else cur.have
    header = GGUFHeader(path, version, metadata, tensors, data_offset, size)
    _check_metadata(header)
    if file_size is not None:
        _check_tensor_data(header)
    return header


def read_gguf_header(path: str | Path) -> GGUFHeader:
    """Read the metadata and tensor infos of the GGUF file at ``path``.

    Raises GGUFFormatError (GGUFIncompleteError for a file cut short) for anything that
    is not a complete, well-formed GGUF file.
    """
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

    Raises :class:`GGUFTruncatedError` when ``data`` ends inside the header before the
    file does (a longer prefix may do), :class:`GGUFIncompleteError` when the file of
    ``file_size`` bytes is shorter than its header says. Without ``file_size`` the file
    size is unknown: the tensor data is not checked.
    """
    return _read(data, Path(name), file_size)


def is_gguf(path: str | Path) -> bool:
    """True when the file starts with the GGUF magic."""
    try:
        with Path(path).open("rb") as fh:
            return fh.read(4) == GGUF_MAGIC
    except OSError:
        return False
