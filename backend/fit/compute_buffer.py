"""The working memory of llama.cpp's compute graph: the compute buffer and the logits buffer.

The compute buffer is the peak of the worst-case graph (a full micro-batch over a full
cache): the largest of the logits, attention-score and feed-forward working sets plus the
activations alive across them. It was fitted against the sizes llama.cpp reports (see
``tests/hub/test_fit_estimate.py``).
"""

from __future__ import annotations

from backend.fit.fit_settings import FitSettings
from backend.fit.kv_cache_size import KV_PAD, KvLayout, flash_attention_enabled, pad_to
from backend.fit.model_shape import ModelShape


def compute_buffer_bytes(shape: ModelShape, settings: FitSettings, layout: KvLayout) -> int:
    """Estimated peak of llama.cpp's worst-case compute graph (one full micro-batch).

    The graph allocator reuses memory, so the peak is the larger of two phases, not a sum:

    - inside the layers: the attention masks (one per cache kind, ``cells x n_tokens``,
      f32 without flash attention, f16 with it) stay alive throughout, plus either the
      attention scores of one layer (``cells x n_tokens x n_head`` f32, only without
      flash attention) or the feed-forward activations, plus a few hidden states;
    - at the output: the logits of a full micro-batch plus two hidden states.

    Fitted to llama.cpp's reported "compute buffer size" on CPU for a llama and a
    gemma2 (sliding-window) model; see tests/hub/test_fit_estimate.py.
    """
    f32 = 4
    n_tokens = min(pad_to(settings.ctx_size, KV_PAD), settings.ubatch_size, settings.batch_size)
    n_outputs = min(n_tokens, settings.batch_size)
    n_head = max(shape.n_head) if shape.n_head else 1
    head_dim = max(shape.head_dim_k) if shape.head_dim_k else 0
    hidden = shape.n_embd * n_tokens * f32
    cells = [layout.cells] + ([layout.swa_cells] if any(shape.is_swa) else [])
    if not settings.kv_unified:  # a stream per slot: each token row sees its stream's cells
        cells = [c // settings.n_seq_max for c in cells]
    feed_forward = 3 * shape.n_ff * n_tokens * f32 + 3 * hidden
    if flash_attention_enabled(settings):
        masks = sum(c * n_tokens * 2 for c in cells)
        attention = 3 * n_head * head_dim * n_tokens * f32 + 3 * hidden
    else:
        masks = sum(c * n_tokens * f32 for c in cells)
        attention = max(cells) * n_tokens * n_head * f32 + 7 * hidden
    layers_phase = masks + max(attention, feed_forward)
    output_phase = shape.n_vocab * n_outputs * f32 + 2 * hidden
    return max(layers_phase, output_phase)


def output_buffer_bytes(shape: ModelShape, settings: FitSettings) -> int:
    """The host buffer for logits, sized for one output per sequence at start-up."""
    return settings.n_seq_max * shape.n_vocab * 4
