"""The KV cache a model needs with given settings, exactly as llama.cpp allocates it.

``llama_kv_cache`` pads ``n_ctx`` to 256 cells; with a KV stream per slot (the server's
default) each of the ``n_seq`` streams holds ``pad256(n_ctx / n_seq)`` of them, with a
unified cache (``--kv-unified``) all sequences share them. Each layer stores K as
``row_size(type_k, n_head_kv(il) * head_dim_k(il)) * cells`` and the same for V (with V
transposed, i.e. without flash attention, V rows are padded to the largest layer).
``row_size`` counts whole blocks: q8_0 = 34 bytes per 32 values, q4_0 = 18 per 32, and so
on. Sliding-window layers hold ``pad256(min(cells, n_swa * n_seq + n_ubatch))`` cells
(unified) or ``pad256(min(stream, n_swa + n_ubatch))`` per stream, unless ``swa_full``.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.fit.fit_settings import FitSettings
from backend.fit.model_shape import ModelShape
from backend.gguf_file.ggml_types import GGMLType, cache_type

KV_PAD = 256


def pad_to(value: int, to: int) -> int:
    """``value`` rounded up to a multiple of ``to``."""
    return (value + to - 1) // to * to


@dataclass(frozen=True)
class KvLayout:
    """The cache's cells (full and sliding-window layers) and its K and V bytes per layer."""

    cells: int
    swa_cells: int
    k_bytes_per_layer: list[int]
    v_bytes_per_layer: list[int]

    @property
    def k_bytes(self) -> int:
        return sum(self.k_bytes_per_layer)

    @property
    def v_bytes(self) -> int:
        return sum(self.v_bytes_per_layer)

    @property
    def total(self) -> int:
        return self.k_bytes + self.v_bytes


def flash_attention_enabled(settings: FitSettings) -> bool:
    """``auto`` resolves to on: every llama.cpp backend QuantDesk ships (CPU, CUDA) supports it."""
    return settings.flash_attn != "off"


def kv_cache_layout(shape: ModelShape, settings: FitSettings) -> KvLayout:
    """Exact KV-cache bytes per layer for these settings (as llama_kv_cache allocates them)."""
    settings.check()
    type_k: GGMLType = cache_type(settings.cache_type_k)
    type_v: GGMLType = cache_type(settings.cache_type_v)
    n_seq = settings.n_seq_max
    n_ctx = pad_to(settings.ctx_size, KV_PAD)
    cells = n_ctx if settings.kv_unified else pad_to(n_ctx // n_seq, KV_PAD) * n_seq
    swa_cells = cells
    if any(shape.is_swa) and not settings.swa_full:
        n_ubatch = min(settings.ubatch_size, settings.batch_size)
        if settings.kv_unified:
            swa_cells = pad_to(min(cells, shape.n_swa * n_seq + n_ubatch), KV_PAD)
        else:  # each stream is sized alone
            swa_cells = pad_to(min(cells // n_seq, shape.n_swa + n_ubatch), KV_PAD) * n_seq
    v_trans = not flash_attention_enabled(settings)
    n_embd_v = [shape.n_head_kv[il] * shape.head_dim_v[il] for il in range(shape.n_layer)]
    v_max = max(n_embd_v) if n_embd_v else 0
    k_bytes, v_bytes = [], []
    for il in range(shape.n_layer):
        layer_cells = swa_cells if shape.is_swa[il] else cells
        n_embd_k = shape.n_head_kv[il] * shape.head_dim_k[il]
        n_v = v_max if v_trans else n_embd_v[il]
        k_bytes.append(type_k.row_bytes(n_embd_k) * layer_cells if n_embd_k else 0)
        v_bytes.append(type_v.row_bytes(n_v) * layer_cells if n_embd_v[il] else 0)
    return KvLayout(cells, swa_cells, k_bytes, v_bytes)
