"""Bytes per KV cell from the model's geometry and the K/V cache types."""

from __future__ import annotations

# (block bytes, values per block) for each cache type, as ggml stores them.
GGML_TYPE_BLOCK: dict[str, tuple[int, int]] = {
    "f32": (4, 1),
    "f16": (2, 1),
    "bf16": (2, 1),
    "q8_0": (34, 32),
    "q5_1": (24, 32),
    "q5_0": (22, 32),
    "q4_1": (20, 32),
    "q4_0": (18, 32),
    "iq4_nl": (18, 32),
}

GGML_TYPE_ID: dict[str, int] = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q5_0": 6,
    "q5_1": 7,
    "q8_0": 8,
    "iq4_nl": 20,
    "bf16": 30,
}


def type_bytes(cache_type: str, n_values: int) -> float:
    """Bytes that ``n_values`` values of ``cache_type`` occupy (fractional for block types)."""
    block_bytes, block_values = GGML_TYPE_BLOCK[cache_type]
    return n_values * block_bytes / block_values


def kv_bytes_per_cell(
    n_layer: int, n_embd_k_gqa: int, n_embd_v_gqa: int, type_k: str, type_v: str
) -> int:
    """K plus V bytes that one cell (one token position) takes across all layers."""
    per_layer = type_bytes(type_k, n_embd_k_gqa) + type_bytes(type_v, n_embd_v_gqa)
    return round(per_layer * n_layer)
