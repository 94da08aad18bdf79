"""An image's place in a prompt: its token positions, its embeddings, its cache name.

A prompt with images is one token list like any other. An image's positions hold
placeholder ids made from its content hash (negative: no vocabulary token is negative), so
the prefix cache, the RAM and disk tiers and every prefix match work unchanged: the same
image sent again is the same ids, a different one differs at its first position. Only the
decode is different (embeddings instead of token ids), and a shared prefix may never end
inside an image (its tokens are decoded together, with non-causal attention for some
models).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_ID_RANGE = 2**31 - 2


@dataclass(eq=False)
class MediaSpan:
    """``n_tokens`` prompt positions from ``start`` that hold one image's embeddings
    (``embd``: n_tokens x n_embd float32), decoded together in one call."""

    start: int
    n_tokens: int
    digest: str
    embd: np.ndarray
    non_causal: bool = False

    @property
    def end(self) -> int:
        return self.start + self.n_tokens

    def pieces(self, size: int) -> list[MediaSpan]:
        """This span as consecutive spans of at most ``size`` positions (for causal
        attention only: decoded one after another, they are the same as one call)."""
        if self.n_tokens <= size:
            return [self]
        return [
            MediaSpan(
                self.start + k, min(size, self.n_tokens - k), self.digest, self.embd[k : k + size]
            )
            for k in range(0, self.n_tokens, size)
        ]


def placeholder_ids(digest: str, n_tokens: int) -> list[int]:
    """The token ids an image of this content hash stands for in a prompt."""
    base = int(digest[:15], 16)
    return [-1 - (base + k) % _ID_RANGE for k in range(n_tokens)]


def span_at(spans: list[MediaSpan], pos: int) -> MediaSpan | None:
    """The span that starts at ``pos``."""
    for span in spans:
        if span.start == pos:
            return span
    return None


def next_span_start(spans: list[MediaSpan], pos: int) -> int | None:
    """Where the first span at or after ``pos`` starts."""
    starts = [span.start for span in spans if span.start >= pos]
    return min(starts) if starts else None


def whole_media_prefix(spans: list[MediaSpan], n: int) -> int:
    """``n`` cut back to the start of an image it would end inside of."""
    for span in spans:
        if span.start < n < span.end:
            return span.start
    return n
