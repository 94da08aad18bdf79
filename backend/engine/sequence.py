"""A sequence inside the scheduler: its tokens, KV progress, sampler and timings."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from backend.engine.media.media_span import MediaSpan
from backend.engine.request_types import (
    FinishEvent,
    FinishReason,
    GenerationRequest,
    TokenLogprob,
)
from backend.engine.sampler_chain import SamplerChain
from backend.engine.speculative.draft_policy import Acceptance
from backend.engine.speculative.ngram_draft import LongestMatch
from backend.engine.stop_detector import StopDetector


@dataclass(eq=False)
class Sequence:
    """``tokens`` is everything that will be in the KV cache: the prompt and each
    sampled token. ``n_past`` of them are decoded; the rest are decoded in chunks,
    and logits are read at the last one. Generation is a one-token prefill, or, with a
    ``draft`` (speculative decoding), the last token and the draft, read on every row."""

    request: GenerationRequest
    sampler: SamplerChain
    detector: StopDetector
    tokens: list[int]
    prompt_array: np.ndarray
    n_prompt: int
    seq_id: int = -1
    n_past: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    admit_order: int = 0
    t_admitted: float | None = None  # first admitted (a preempted one keeps it)
    t_first: float | None = None
    t_last: float | None = None
    cancelled: bool = False
    preempted: int = 0
    branch_at: int = 0  # waiting requests share the prompt up to here: end a chunk there
    cum_logprob: float = 0.0
    pending_logprobs: list[TokenLogprob] = field(default_factory=list)
    prompt_logprobs: list[TokenLogprob] = field(default_factory=list)
    # speculative decoding: this step's draft (tokens after ``tokens``, not in it), the
    # n-gram index of ``tokens``, and the draft tokens verified / accepted so far
    draft: list[int] = field(default_factory=list)
    ngram: LongestMatch | None = None
    draft_n: int = 0
    draft_n_accepted: int = 0
    # which drafter made ``draft`` ("ngram" or "model"), and how this sequence's drafts fared
    draft_source: str = "ngram"
    acceptance: Acceptance = field(default_factory=Acceptance)
    # the prompt's images: the positions that are decoded from embeddings
    media: list[MediaSpan] = field(default_factory=list)
    # context shift: one is due before the next step; the fewest tokens any shift kept at
    # the start; whether the context ran out (shifted, or stopped there)
    shift_due: bool = False
    shift_keep: int | None = None
    truncated: bool = False

    @property
    def remaining(self) -> int:
        """Tokens still to decode before logits can be read."""
        return len(self.tokens) - self.n_past

    @property
    def generating(self) -> bool:
        return self.completion_tokens > 0 and self.remaining == 1

    def finish_event(self, reason: FinishReason) -> FinishEvent:
        """What the sequence's client is told when it ends for ``reason``."""
        req = self.request
        ttft = 1000.0 * (self.t_first - req.arrival) if self.t_first else None
        gen_rate = None
        first, last = self.t_first, self.t_last
        if first and last and self.completion_tokens > 1 and last > first:
            gen_rate = (self.completion_tokens - 1) / (last - first)
        return FinishEvent(
            reason,
            self.n_prompt,
            self.completion_tokens,
            self.cached_tokens,
            ttft,
            gen_rate,
            cum_logprob=self.cum_logprob,
            prompt_logprobs=self.prompt_logprobs if req.prompt_logprobs is not None else None,
            draft_n=self.draft_n,
            draft_n_accepted=self.draft_n_accepted,
            truncated=self.truncated,
        )


@dataclass(eq=False)
class CacheEntry:
    """A finished sequence whose KV is kept so later prompts can reuse its prefix."""

    seq_id: int
    tokens: np.ndarray


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the common prefix of two token arrays."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n
