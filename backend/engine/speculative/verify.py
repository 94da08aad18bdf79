"""Verification of a draft, exact for any sampler (llama.cpp's
``common_sampler_sample_and_accept_n``).

The step decoded ``[last, d1..dk]`` with logits on every row. Row ``i`` holds the model's
distribution after the tokens so far and ``d1..di``. The sequence's own sampler draws at
row 0; while its token equals the draft's, the draft's next token is the context it
assumed, so the next row is valid and is sampled too; the first differing token is the
output there and the rest of the draft is dropped, and after ``k`` matches the last row
gives one more token. Every output token is drawn by the sequence's sampler from the
model's distribution given the tokens before it, exactly as without a draft: greedy
output is the same token for token, sampled output follows the same distribution, and the
sampler is called once per output token (a seeded sampler makes the same draws).
"""

from __future__ import annotations

from collections.abc import Callable

# take(row) samples the token at draft row ``row``, feeds it to the sequence, and says
# (token, whether the sequence still runs)
Take = Callable[[int], tuple[int, bool]]


def verify_draft(draft: list[int], take: Take) -> tuple[int, int]:
    """Take tokens row by row until one differs from ``draft``, the draft is used up (its
    last row gives one more token) or the sequence ends. Returns (rows taken, draft tokens
    accepted: sampled equal to the draft)."""
    for i, proposed in enumerate(draft):
        token, running = take(i)
        if token != proposed:
            return i + 1, i
        if not running:
            return i + 1, i + 1
    take(len(draft))  # every draft token matched: the last row gives one more
    return len(draft) + 1, len(draft)
