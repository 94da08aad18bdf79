"""What goes into the scheduler (a request) and what comes out (events)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

_ids = itertools.count(1)


@dataclass
class SamplingParams:
    """Per-sequence sampling, mapped onto a llama.cpp sampler chain."""

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    penalty_last_n: int = 64
    seed: int | None = None
    logit_bias: dict[int, float] = field(default_factory=dict)
    grammar: str | None = None
    ignore_eos: bool = False
    logprobs: int | None = None  # None: off; k >= 0: chosen token plus the top k
    # speculative decoding for this sequence (llama-server's speculative.n_max / n_min /
    # p_min); None: the server's setting. draft_n_max 0 turns speculation off.
    draft_n_max: int | None = None
    draft_n_min: int | None = None
    draft_p_min: float | None = None
    # context shift (--context-shift): tokens kept at the start (-1: the prompt), tokens
    # dropped after them (0: half the rest), as llama-server's n_keep and n_discard
    n_keep: int = 0
    n_discard: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


def piece_text(piece: bytes) -> str:
    """A token's text for logprobs: the piece, or ``bytes:\\xNN...`` when it is not whole
    UTF-8 (part of a multi-byte character), as OpenAI writes such tokens."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in piece)


def piece_bytes(text: str) -> list[int]:
    """The raw bytes of a token text made by :func:`piece_text`."""
    if text.startswith("bytes:\\x"):
        return [int(h, 16) for h in text[len("bytes:") :].split("\\x")[1:]]
    return list(text.encode("utf-8"))


@dataclass
class TokenLogprob:
    """A generated token, its log-probability and the top alternatives (model distribution)."""

    token_id: int
    token: str
    logprob: float
    top: list[tuple[int, str, float]] = field(default_factory=list)


@dataclass
class TokenEvent:
    """New text for the client (already stop-string filtered)."""

    text: str
    token_ids: list[int]
    logprobs: list[TokenLogprob] = field(default_factory=list)


# "stop": an end-of-generation token, a stop string or a complete grammar; "length":
# max_tokens or the context is used up; "cancelled": the client went away or cancelled.
FinishReason = Literal["stop", "length", "cancelled"]


@dataclass
class FinishEvent:
    """The sequence ended; carries the usage and timing figures."""

    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    ttft_ms: float | None
    gen_tokens_per_s: float | None
    cum_logprob: float = 0.0
    # speculative decoding: draft tokens verified, and how many the model sampled too
    draft_n: int = 0
    draft_n_accepted: int = 0
    # with prompt_logprobs: one entry per prompt token after the first (what the model
    # gave each prompt token, given the tokens before it)
    prompt_logprobs: list[TokenLogprob] | None = None
    # the context ran out: shifted (--context-shift) or stopped there
    truncated: bool = False


@dataclass
class ErrorEvent:
    """The sequence failed inside the engine; ``invalid_request`` when the request itself
    could not be carried out (a grammar no token can continue), not the server."""

    message: str
    invalid_request: bool = False


EngineEvent = TokenEvent | FinishEvent | ErrorEvent
EventSink = Callable[[EngineEvent], None]


@dataclass
class GenerationRequest:
    """One sequence to generate. ``sink`` is called from the scheduler thread."""

    prompt_tokens: list[int]
    max_tokens: int
    sampling: SamplingParams
    sink: EventSink
    stop: list[str] = field(default_factory=list)
    # None: off; k >= 0: score every prompt token (and its top k), as echo + logprobs asks.
    # Such a prompt is computed whole, never taken from the prefix cache (cached cells
    # have no logits). max_tokens may then be 0: score only.
    prompt_logprobs: int | None = None
    request_id: int = field(default_factory=lambda: next(_ids))
    arrival: float = field(default_factory=time.perf_counter)
