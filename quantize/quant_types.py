"""The quantisation types QuantDesk offers, as llama.cpp file types (``llama_ftype``).

Plain data, no llama_cpp import, so the GUI can list the choices. The numbers are
llama.cpp's ``LLAMA_FTYPE_MOSTLY_*`` values; a test checks them against llama_cpp.
"""

from __future__ import annotations

from dataclasses import dataclass

from quantize.errors import UnknownQuantTypeError


@dataclass(frozen=True)
class QuantType:
    """One output type: its name, ``llama_ftype`` value and a one-line description."""

    name: str
    ftype: int
    bits_per_weight: float
    description: str


QUANT_TYPES: tuple[QuantType, ...] = (
    QuantType("Q8_0", 7, 8.5, "8-bit, near-lossless; half of F16"),
    QuantType("Q6_K", 18, 6.56, "6-bit K-quant, very close to F16"),
    QuantType("Q5_K_M", 17, 5.5, "5-bit K-quant, mixed; high quality"),
    QuantType("Q5_0", 8, 5.5, "5-bit legacy quant"),
    QuantType("Q4_K_M", 15, 4.8, "4-bit K-quant, mixed; the usual default"),
    QuantType("Q4_K_S", 14, 4.5, "4-bit K-quant, small"),
    QuantType("Q4_0", 2, 4.5, "4-bit legacy quant; fast on many back ends"),
    QuantType("IQ4_XS", 30, 4.25, "4-bit i-quant; benefits from an importance matrix"),
    QuantType("Q3_K_M", 12, 3.9, "3-bit K-quant, mixed; noticeable quality loss"),
    QuantType("Q2_K", 10, 2.96, "2-bit K-quant; large quality loss, use an importance matrix"),
    QuantType("F16", 1, 16.0, "16-bit float, no quantisation"),
    QuantType("BF16", 32, 16.0, "bfloat16, no quantisation"),
)

_BY_NAME = {t.name: t for t in QUANT_TYPES}

# Types whose quality depends most on an importance matrix.
IMATRIX_RECOMMENDED = frozenset({"IQ4_XS", "Q3_K_M", "Q2_K"})


def quant_type(name: str) -> QuantType:
    """Look up a type by name, case-insensitively (``q4_k_m`` -> ``Q4_K_M``)."""
    key = name.strip().upper()
    try:
        return _BY_NAME[key]
    except KeyError:
        choices = ", ".join(t.name for t in QUANT_TYPES)
        raise UnknownQuantTypeError(
            f"unknown quantisation type {name!r}; choose one of {choices}"
        ) from None
