"""The bounded parser of GGUF header bytes: the metadata values, the tensor table, and the
checks that keep a damaged or crafted file from reading past its bytes.

Format (little-endian, version 2 and 3): ``b"GGUF"``, ``u32 version``,
``u64 n_tensors``, ``u64 n_kv``; ``n_kv`` times ``(string key, u32 type, value)``;
``n_tensors`` times ``(string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type,
u64 offset)``; then tensor data aligned to ``general.alignment`` (default 32).

Any file in the models folder may be damaged or crafted, so every count and length is
checked against the bytes the file can still hold before anything is read or allocated,
nesting is bounded, and :func:`check_tensor_extent` checks that the tensors lie inside
the file. All of those checks live here; :mod:`backend.gguf_file.gguf_header` adds the
type and range checks of the values the library and the fit estimate read.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

from backend.core.units import human_bytes
from backend.gguf_file.errors import GGUFFormatError, GGUFIncompleteError, GGUFTruncatedError
from backend.gguf_file.ggml_types import GGMLType, ggml_type

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


def shown(value: Any) -> str:
    """A metadata value as an error message shows it: short, and long arrays by length."""
    if isinstance(value, ArrayInfo):
        return f"an array of {value.length} items"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


Buffer = bytes | bytearray | memoryview | mmap.mmap
_STRUCTS = {fmt: struct.Struct("<" + fmt) for fmt in {*_SCALAR_FORMATS.values(), "Q", "I"}}
_U64 = _STRUCTS["Q"]


class _Cursor:
    """Sequential little-endian reads over a buffer; every read and count is checked first.

    ``file_size`` is the size of the whole file (None: unknown); the buffer may be a
    prefix of it. Reading past the file is :class:`GGUFIncompleteError`, past only the
    buffer :class:`GGUFTruncatedError`.
    """

    def __init__(self, buf: Buffer, path: Path, file_size: int | None) -> None:
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
            f"{path.name}: general.alignment = {shown(value)} is not a power of two"
        )
    return value


@dataclass(frozen=True)
class ParsedHeader:
    """What the header bytes say: version, metadata, tensor table, where the data starts."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    data_offset: int
    file_size: int  # the whole file's when known, else the bytes at hand


def parse_header_bytes(buf: Buffer, path: Path, file_size: int | None) -> ParsedHeader:
    """The header in ``buf``, every count and length checked against the bytes left;
    ``file_size`` is the whole file's size (None: unknown)."""
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
    return ParsedHeader(path, version, metadata, tensors, data_offset, size)


def check_tensor_extent(parsed: ParsedHeader) -> None:
    """Every tensor must lie inside the file: one that is cut short is no model."""
    if not parsed.tensors:
        return
    needed = parsed.data_offset + max(t.offset + t.n_bytes for t in parsed.tensors)
    if needed > parsed.file_size:
        raise GGUFIncompleteError(
            f"{parsed.path.name} is truncated: its tensor data needs {human_bytes(needed)}, "
            f"the file has {human_bytes(parsed.file_size)} "
            f"({100 * parsed.file_size / needed:.0f}%; an incomplete download or copy?)"
        )
