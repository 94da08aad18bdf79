"""An image's place in a prompt: its token positions, its embeddings, its cache name.

A prompt with images is one token list like any other. An image's positions hold
placeholder ids made from its content hash (negative: no vocabulary token is negative), so
the prefix cache, the RAM and disk tiers and every prefix match work unchanged: the same
image sent again is the same ids, a different one differs at its first position. Only the
decode is different (embeddings instead of token ids), and a shared prefix may never end
inside an image (its tokens are decoded together, with non-causal attention for some
models).

A token's index in the prompt is its KV cell; its position (what RoPE rotates by) is the
same number except after an image of a model with M-RoPE (Qwen2-VL and later): there an
image of ``n_tokens`` takes only ``n_pos`` positions (the larger side of its token grid),
and each of its tokens has four position sections (time, row, column, unused) instead of
one. :func:`position_at` maps an index to its position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

_ID_RANGE = 2**31 - 2


class PositionSpan(NamedTuple):
    """What positions need of a span: where it is, and the positions it takes."""

    start: int
    n_tokens: int
    n_pos: int

    @property
    def end(self) -> int:
        return self.start + self.n_tokens

    @property
    def advance(self) -> int:
        return self.n_pos


@dataclass(eq=False)
class MediaSpan:
    """``n_tokens`` prompt positions from ``start`` that hold one image's embeddings
    (``embd``: n_tokens x n_embd float32), decoded together in one call."""

    start: int
    n_tokens: int
    digest: str
    embd: np.ndarray
    non_causal: bool = False
    # M-RoPE: the positions the span advances by, and its tokens' four sections (int32,
    # 4 x n_tokens, section-major as llama_batch wants them) at first position 0, with
    # which of them move with the first position (``moves``: 4 x n_tokens of 0 or 1)
    n_pos: int | None = None
    rel_pos: np.ndarray | None = None
    moves: np.ndarray | None = None
    # a piece of a longer M-RoPE span: where that span starts (its pieces share its first
    # position, and a prefix may not end between them)
    whole_start: int | None = None

    @property
    def end(self) -> int:
        return self.start + self.n_tokens

    @property
    def advance(self) -> int:
        """Positions the span takes: its tokens, or fewer with M-RoPE."""
        return self.n_tokens if self.n_pos is None else self.n_pos

    def position_span(self) -> PositionSpan | None:
        """Its place for the KV cache's positions, when they are not its cells."""
        if self.n_pos is None or self.n_pos == self.n_tokens:
            return None
        return PositionSpan(self.start, self.n_tokens, self.n_pos)

    def sections(self, pos_0: int) -> np.ndarray | None:
        """Its tokens' M-RoPE position sections when it (the whole span, for a piece)
        starts at position ``pos_0`` (int32, 4 x n_tokens), or None for one position per
        token."""
        if self.rel_pos is None or self.moves is None:
            return None
        return (self.rel_pos + pos_0 * self.moves).astype(np.int32)

    def pieces(self, size: int) -> list[MediaSpan]:
        """This span as consecutive spans of at most ``size`` positions, decoded one after
        another as one call would be (causal attention only). M-RoPE pieces keep their
        sections relative to the whole span's first position, which they all start from:
        all but the last take no positions, the last all the span's."""
        if self.n_tokens <= size:
            return [self]
        out: list[MediaSpan] = []
        for k in range(0, self.n_tokens, size):
            m = min(size, self.n_tokens - k)
            piece = MediaSpan(self.start + k, m, self.digest, self.embd[k : k + m])
            if self.rel_pos is not None and self.moves is not None:
                piece.n_pos = self.advance if k + m == self.n_tokens else 0
                piece.rel_pos = self.rel_pos[:, k : k + m]
                piece.moves = self.moves[:, k : k + m]
                piece.whole_start = self.start
            out.append(piece)
        return out


def placeholder_ids(digest: str, n_tokens: int) -> list[int]:
    """The token ids an image of this content hash stands for in a prompt."""
    base = int(digest[:15], 16)
    return [-1 - (base + k) % _ID_RANGE for k in range(n_tokens)]


def position_at(spans: Sequence[MediaSpan | PositionSpan], index: int) -> int:
    """The position of the token at ``index`` of a prompt with these media (for an index
    inside an M-RoPE span, the span's first position, which all its tokens share in time,
    and which a whole span's pieces share)."""
    pos = index
    for span in spans:
        if span.end <= index:
            pos -= span.n_tokens - span.advance
        elif span.start < index and span.n_pos is not None:
            pos -= index - span.start
    return pos


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
    """``n`` cut back to the start of an image it would end inside of (or between two
    pieces of, with M-RoPE)."""
    for span in spans:
        whole = span.start if span.whole_start is None else span.whole_start
        if span.start < n < span.end or whole < n == span.start:
            return whole
    return n
