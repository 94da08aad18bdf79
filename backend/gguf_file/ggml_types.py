"""ggml tensor types and llama.cpp file types: block sizes, names and bits per weight.

The numbers mirror ``GGML_QUANT_SIZES`` and ``LlamaFileType`` in llama.cpp's
``gguf-py/gguf/constants.py``: a tensor of ``n`` values of type ``t`` takes
``n // block_size(t) * type_size(t)`` bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from backend.gguf_file.errors import GGUFFormatError

QK_K = 256


@dataclass(frozen=True)
class GGMLType:
    """One ggml tensor type: ``type_size`` bytes store ``block_size`` values."""

    id: int
    name: str
    block_size: int
    type_size: int

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.type_size / self.block_size

    def row_bytes(self, n_values: int) -> int:
        """Bytes of ``n_values`` values (``ggml_row_size``); ``n_values`` must fill whole blocks."""
        if n_values % self.block_size:
            raise GGUFFormatError(
                f"{n_values} values do not fill whole {self.name} blocks of {self.block_size}"
            )
        return n_values // self.block_size * self.type_size


_TYPES = (
    GGMLType(0, "F32", 1, 4),
    GGMLType(1, "F16", 1, 2),
    GGMLType(2, "Q4_0", 32, 2 + 16),
    GGMLType(3, "Q4_1", 32, 2 + 2 + 16),
    GGMLType(6, "Q5_0", 32, 2 + 4 + 16),
    GGMLType(7, "Q5_1", 32, 2 + 2 + 4 + 16),
    GGMLType(8, "Q8_0", 32, 2 + 32),
    GGMLType(9, "Q8_1", 32, 2 + 2 + 32),
    GGMLType(10, "Q2_K", QK_K, 2 + 2 + QK_K // 16 + QK_K // 4),
    GGMLType(11, "Q3_K", QK_K, 2 + QK_K // 4 + QK_K // 8 + 12),
    GGMLType(12, "Q4_K", QK_K, 2 + 2 + QK_K // 2 + 12),
    GGMLType(13, "Q5_K", QK_K, 2 + 2 + QK_K // 2 + QK_K // 8 + 12),
    GGMLType(14, "Q6_K", QK_K, 2 + QK_K // 2 + QK_K // 4 + QK_K // 16),
    GGMLType(15, "Q8_K", QK_K, 4 + QK_K + QK_K // 8),
    GGMLType(16, "IQ2_XXS", QK_K, 2 + QK_K // 4),
    GGMLType(17, "IQ2_XS", QK_K, 2 + QK_K // 4 + QK_K // 32),
    GGMLType(18, "IQ3_XXS", QK_K, 2 + QK_K // 4 + QK_K // 8),
    GGMLType(19, "IQ1_S", QK_K, 2 + QK_K // 8 + QK_K // 16),
    GGMLType(20, "IQ4_NL", 32, 2 + 16),
    GGMLType(21, "IQ3_S", QK_K, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4),
    GGMLType(22, "IQ2_S", QK_K, 2 + QK_K // 4 + QK_K // 16),
    GGMLType(23, "IQ4_XS", QK_K, 2 + 2 + QK_K // 2 + QK_K // 64),
    GGMLType(24, "I8", 1, 1),
    GGMLType(25, "I16", 1, 2),
    GGMLType(26, "I32", 1, 4),
    GGMLType(27, "I64", 1, 8),
    GGMLType(28, "F64", 1, 8),
    GGMLType(29, "IQ1_M", QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),
    GGMLType(30, "BF16", 1, 2),
    GGMLType(34, "TQ1_0", QK_K, 2 + 4 * 13),
    GGMLType(35, "TQ2_0", QK_K, 2 + 64),
    GGMLType(39, "MXFP4", 32, 1 + 16),
    GGMLType(40, "NVFP4", 64, 4 + 32),
    GGMLType(41, "Q1_0", 128, 2 + 16),
    GGMLType(42, "Q2_0", 64, 2 + 16),
)

GGML_TYPES: dict[int, GGMLType] = {t.id: t for t in _TYPES}
GGML_TYPES_BY_NAME: dict[str, GGMLType] = {t.name.lower(): t for t in _TYPES}

# KV-cache types llama.cpp accepts for -ctk / -ctv.
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")


def ggml_type(type_id: int) -> GGMLType:
    try:
        return GGML_TYPES[type_id]
    except KeyError:
        raise GGUFFormatError(f"unknown ggml tensor type {type_id}") from None


def cache_type(name: str) -> GGMLType:
    """The ggml type of a KV-cache type name such as ``f16`` or ``q8_0``."""
    key = name.lower()
    if key not in CACHE_TYPES:
        raise GGUFFormatError(
            f"unknown KV-cache type {name!r}; choose one of {', '.join(CACHE_TYPES)}"
        )
    return GGML_TYPES_BY_NAME[key]


# general.file_type values (llama_ftype); "MOSTLY_" dropped.
FILE_TYPES: dict[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
    41: "Q2_0",
}

# Quant labels as they appear in file names: Q4_K_M, IQ3_XXS, Q8_0, Q4_K_XL, BF16, MXFP4_MOE...
_QUANT_IN_NAME = re.compile(
    r"(?<![A-Za-z0-9])(I?Q\d(?:_[A-Z0-9]{1,3})*|TQ\d_\d|BF16|F16|F32|MXFP4(?:_MOE)?)(?![A-Za-z0-9])",
    re.IGNORECASE,
)


def file_type_name(file_type: int | None) -> str | None:
    if file_type is None:
        return None
    return FILE_TYPES.get(file_type & ~1024 if file_type >= 1024 else file_type, f"type{file_type}")


def quant_from_filename(filename: str) -> str | None:
    """Recognise a quant label such as ``Q4_K_M`` or ``IQ3_XXS`` in a file name."""
    stem = filename.rsplit("/", 1)[-1]
    if stem.lower().endswith(".gguf"):
        stem = stem[:-5]
    matches = _QUANT_IN_NAME.findall(stem.replace("-", "_").replace(".", "_"))
    if not matches:
        return None
    return str(matches[-1]).upper()
