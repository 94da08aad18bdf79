"""Decoding an image's embeddings into a sequence: a ``llama_batch`` of embeddings.

One call per image, all its positions at once (with non-causal attention where the model
asks for it, as Gemma 3 does: then the whole image must fit one micro-batch), no logits.
"""

from __future__ import annotations

import ctypes

import llama_cpp

from backend.engine.media.media_span import MediaSpan


class EmbdBatch:
    """A reusable embeddings batch of up to ``n_max`` rows of ``n_embd`` floats."""

    def __init__(self, n_max: int, n_embd: int) -> None:
        self.n_max = n_max
        self.n_embd = n_embd
        self.batch = llama_cpp.llama_batch_init(n_max, n_embd, 1)

    def close(self) -> None:
        if self.batch is not None:
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None

    def decode(self, ctx: object, span: MediaSpan, seq_id: int) -> int:
        """``llama_decode`` of ``span`` into ``seq_id`` at its positions, no logits (a
        prompt never ends with an image); llama.cpp's return code."""
        n = span.n_tokens
        assert n <= self.n_max and span.embd.shape == (n, self.n_embd)
        b = self.batch
        ctypes.memmove(b.embd, span.embd.ctypes.data, span.embd.nbytes)
        for i in range(n):
            b.pos[i] = span.start + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq_id
            b.logits[i] = 0
        b.n_tokens = n
        if span.non_causal:
            llama_cpp.llama_set_causal_attn(ctx, False)
        try:
            return int(llama_cpp.llama_decode(ctx, b))
        finally:
            if span.non_causal:
                llama_cpp.llama_set_causal_attn(ctx, True)
