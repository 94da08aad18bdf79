"""Decoding an image's embeddings into a sequence: a ``llama_batch`` of embeddings.

One call per image, all its positions at once (with non-causal attention where the model
asks for it, as Gemma 3 does: then the whole image must fit one micro-batch), no logits.
With M-RoPE each token has four position sections, section-major: the batch then points
at a position array of its own, four times as long.
"""

from __future__ import annotations

import ctypes

import llama_cpp
import numpy as np

from backend.engine.media.media_span import MediaSpan

_POS_P = ctypes.POINTER(llama_cpp.llama_pos)


class EmbdBatch:
    """A reusable embeddings batch of up to ``n_max`` rows of ``n_embd`` floats."""

    def __init__(self, n_max: int, n_embd: int) -> None:
        self.n_max = n_max
        self.n_embd = n_embd
        self.batch = llama_cpp.llama_batch_init(n_max, n_embd, 1)
        self._sections = (llama_cpp.llama_pos * (4 * n_max))()
        # the address of the batch's own position array (reading the field gives a view
        # of it, which a later assignment would change too)
        self._own_pos = ctypes.cast(self.batch.pos, ctypes.c_void_p).value

    def close(self) -> None:
        if self.batch is not None:
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None

    def decode(self, ctx: object, span: MediaSpan, seq_id: int, pos_0: int) -> int:
        """``llama_decode`` of ``span`` into ``seq_id`` from position ``pos_0``, no logits
        (a prompt never ends with an image); llama.cpp's return code."""
        n = span.n_tokens
        assert n <= self.n_max and span.embd.shape == (n, self.n_embd)
        b = self.batch
        ctypes.memmove(b.embd, span.embd.ctypes.data, span.embd.nbytes)
        for i in range(n):
            b.pos[i] = pos_0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq_id
            b.logits[i] = 0
        b.n_tokens = n
        sections = span.sections(pos_0)
        try:
            if sections is not None:
                flat = np.ascontiguousarray(sections, dtype=np.int32).ravel()
                ctypes.memmove(self._sections, flat.ctypes.data, flat.nbytes)
                b.pos = ctypes.cast(self._sections, _POS_P)
            if span.non_causal:
                llama_cpp.llama_set_causal_attn(ctx, False)
            return int(llama_cpp.llama_decode(ctx, b))
        finally:
            b.pos = ctypes.cast(ctypes.c_void_p(self._own_pos), _POS_P)  # llama_batch_free frees it
            if span.non_causal:
                llama_cpp.llama_set_causal_attn(ctx, True)
