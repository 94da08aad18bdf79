"""A small, fast reader of GGUF headers: metadata key/values and tensor infos, never tensor data.

The file is memory-mapped and only its header pages are touched, so reading a
70 GB model takes milliseconds. Long string arrays (the tokenizer's vocabulary
and merges) are skipped and kept as :class:`ArrayInfo` (type and length only).

The bytes are parsed by :mod:`backend.gguf_file.gguf_parser`, which bounds every count,
length and nesting by the bytes the file can still hold and checks that the tensors lie
inside the file; this module is the header it yields, with the accessors the rest of
QuantDesk reads, whose values are type- and range-checked on reading (those the library
and the fit estimate use, at once). Whatever the bytes, reading ends in a header or one
:class:`GGUFFormatError`, in time proportional to the file.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.gguf_file.errors import GGUFFormatError, GGUFIncompleteError, GGUFTruncatedError
from backend.gguf_file.ggml_types import file_type_name
from backend.gguf_file.gguf_parser import (
    GGUF_MAGIC,
    ArrayInfo,
    Buffer,
    TensorInfo,
    check_tensor_extent,
    parse_header_bytes,
    shown,
)

# The two truncation errors and the parser's types are imported from here by callers.
__all__ = [
    "GGUF_MAGIC",
    "ArrayInfo",
    "GGUFHeader",
    "GGUFIncompleteError",
    "GGUFTruncatedError",
    "TensorInfo",
    "is_gguf",
    "parse_gguf_header",
    "read_gguf_header",
]

# llama.cpp's LLAMA_MAX_LAYERS: no model it loads has more blocks.
MAX_BLOCK_COUNT = 512
# Metadata counts (context length, heads, widths) are uint32 in every GGUF writer.
COUNT_LIMIT = 1 << 32


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


def _checked_count(path: Path, key: str, value: Any, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
        raise GGUFFormatError(
            f"{path.name}: {key} = {shown(value)} is not a whole number from 0 to {limit - 1}"
        )
    return value


def _check_metadata(header: GGUFHeader) -> None:
    """The entries the library and the fit estimate read must have sane types and ranges."""
    arch = header.metadata.get("general.architecture")
    if arch is not None and not isinstance(arch, str):
        raise GGUFFormatError(
            f"{header.path.name}: general.architecture = {shown(arch)} is not a name"
        )
    # each raises GGUFFormatError for a value of the wrong type or range
    _ = (header.block_count, header.context_length, header.embedding_length, header.file_type)


def _read(buf: Buffer, path: Path, file_size: int | None) -> GGUFHeader:
    """The header in ``buf``; ``file_size`` is the whole file's size (None: unknown, so the
    tensor data cannot be checked)."""
    parsed = parse_header_bytes(buf, path, file_size)
    header = GGUFHeader(
        path, parsed.version, parsed.metadata, parsed.tensors, parsed.data_offset, parsed.file_size
    )
    _check_metadata(header)
    if file_size is not None:  # after the values: a damaged one is named before a short file
        check_tensor_extent(parsed)
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
