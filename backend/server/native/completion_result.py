"""llama-server's ``/completion`` answer, built from the engine's events.

Field by field, what the engine knows and how it maps onto llama-server's names:

- ``content``: the text, stop strings cut off, as for ``/v1/completions``;
- ``tokens``: the generated token ids (with ``return_tokens``, and in every streamed chunk);
- ``tokens_predicted`` / ``tokens_evaluated``: generated / prompt tokens;
- ``stop_type``: ``limit`` when the budget or the context ran out; ``word`` when a stop
  string ended it (``stopping_word`` names it); otherwise ``eos`` (an end-of-generation
  token, or a grammar that is complete);
- ``truncated``: the context ran out while generating (a context shift dropped tokens, or
  generation stopped at the context length); a prompt is never cut (one too long for the
  context is a 400);
- ``timings``: ``cache_n`` prompt tokens reused from the prefix cache, ``prompt_n`` the
  others (those decoded); ``prompt_ms`` is measured from the request's arrival at the
  engine to its first token, so it includes any time spent waiting for a free slot;
  ``predicted_ms`` from the first token to the last, as llama-server measures it
  (``predicted_per_second`` is then ``(predicted_n - 1)`` tokens over it, 0 below 2);
- ``completion_probabilities`` (with ``n_probs``): per token ``id``, ``token``, ``bytes``,
  ``logprob`` and the ``top_logprobs`` of the model's distribution before sampling.

Not given, because the engine does not know them per request: ``id_slot`` and
``tokens_cached``.
"""

from __future__ import annotations

import codecs
import dataclasses
from typing import Any

from backend.engine.engine import Engine
from backend.engine.request_types import FinishEvent, SamplingParams, TokenLogprob


def _token_json(engine: Engine, token: int, logprob: float) -> dict[str, Any]:
    piece = engine.runtime.token_piece(token)
    return {
        "id": token,
        "token": piece.decode("utf-8", errors="ignore"),  # whole characters, as llama-server
        "bytes": list(piece),
        "logprob": logprob,
    }


def probabilities(engine: Engine, entries: list[TokenLogprob]) -> list[dict[str, Any]]:
    """``completion_probabilities`` in llama-server's current shape."""
    out = []
    for entry in entries:
        item = _token_json(engine, entry.token_id, entry.logprob)
        item["top_logprobs"] = [_token_json(engine, tok, val) for tok, _, val in entry.top]
        out.append(item)
    return out


def generated_text(engine: Engine, tokens: list[int]) -> str:
    """The tokens' text before stop strings are cut, decoded as the stop detector does."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return "".join(decoder.decode(engine.runtime.token_piece(t)) for t in tokens)


def stopping_word(full_text: str, content: str, stops: list[str]) -> str:
    """The stop string that ended the text (the first one listed that starts where the
    content ends; the detector cuts at the earliest match), or "" for none."""
    at = len(content)
    if full_text[:at] != content:
        return ""
    return next((stop for stop in stops if stop and full_text.startswith(stop, at)), "")


def timings(finish: FinishEvent) -> dict[str, Any]:
    """llama-server's ``timings`` from a finished sequence (see the module docstring)."""
    cache_n = finish.cached_tokens
    prompt_n = max(finish.prompt_tokens - cache_n, 0)
    prompt_ms = finish.ttft_ms or 0.0
    predicted_n = finish.completion_tokens
    rate = finish.gen_tokens_per_s or 0.0
    predicted_ms = 1000.0 * (predicted_n - 1) / rate if rate > 0 and predicted_n > 1 else 0.0
    out: dict[str, Any] = {
        "cache_n": cache_n,
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
        "prompt_per_second": 1000.0 * prompt_n / prompt_ms if prompt_ms > 0 else 0.0,
        "predicted_n": predicted_n,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / (predicted_n - 1) if predicted_ms else 0.0,
        "predicted_per_second": rate,
    }
    if finish.draft_n:
        out["draft_n"] = finish.draft_n
        out["draft_n_accepted"] = finish.draft_n_accepted
    return out


def sampling_settings(sampling: SamplingParams) -> dict[str, Any]:
    """A sequence's sampling under llama-server's names (``seed`` -1: not seeded)."""
    return {
        "seed": -1 if sampling.seed is None else sampling.seed,
        "temperature": sampling.temperature,
        "top_k": sampling.top_k,
        "top_p": sampling.top_p,
        "min_p": sampling.min_p,
        "repeat_last_n": sampling.penalty_last_n,
        "repeat_penalty": sampling.repeat_penalty,
        "presence_penalty": sampling.presence_penalty,
        "frequency_penalty": sampling.frequency_penalty,
        "ignore_eos": sampling.ignore_eos,
    }


def generation_settings(
    sampling: SamplingParams, max_tokens: int, stop: list[str], stream: bool, n_probs: int
) -> dict[str, Any]:
    """The settings this request ran with (a true subset of llama-server's)."""
    return {
        **sampling_settings(sampling),
        "max_tokens": max_tokens,
        "n_predict": max_tokens,
        "stop": stop,
        "stream": stream,
        "n_probs": n_probs,
        "grammar": sampling.grammar or "",
    }


@dataclasses.dataclass
class SequenceResult:
    """One prompt's sequence as its events arrive."""

    index: int
    prompt_text: str
    n_prompt: int
    parts: list[str] = dataclasses.field(default_factory=list)
    entries: list[TokenLogprob] = dataclasses.field(default_factory=list)
    finish: FinishEvent | None = None

    @property
    def content(self) -> str:
        return "".join(self.parts)

    def token_ids(self) -> list[int]:
        return [entry.token_id for entry in self.entries]

    def final(
        self,
        engine: Engine,
        stop: list[str],
        settings: dict[str, Any],
        *,
        streamed: bool,
        return_tokens: bool,
        n_probs: int,
    ) -> dict[str, Any]:
        """llama-server's final object; streamed, its content was sent in the chunks."""
        finish = self.finish
        assert finish is not None
        content = self.content
        stop_type, word = "eos", ""
        if finish.finish_reason == "length":
            stop_type = "limit"
        elif stop:
            word = stopping_word(generated_text(engine, self.token_ids()), content, stop)
            stop_type = "word" if word else "eos"
        result: dict[str, Any] = {
            "index": self.index,
            "content": "" if streamed else content,
            "tokens": self.token_ids() if return_tokens and not streamed else [],
            "stop": True,
            "model": engine.model_id,
            "tokens_predicted": finish.completion_tokens,
            "tokens_evaluated": finish.prompt_tokens,
            "generation_settings": settings,
            "prompt": self.prompt_text,
            "has_new_line": "\n" in content,
            "truncated": finish.truncated,
            "stop_type": stop_type,
            "stopping_word": word,
            "timings": timings(finish),
        }
        if n_probs and not streamed:
            result["completion_probabilities"] = probabilities(engine, self.entries)
        return result


def pick_fields(result: dict[str, Any], fields: list[str] | None) -> dict[str, Any]:
    """llama-server's ``response_fields``: only the named fields, a nested one by its
    ``a/b`` path (kept under that path as its key); none named: the whole result."""
    if not fields:
        return result
    out: dict[str, Any] = {}
    for path in fields:
        value: Any = result
        for key in path.split("/"):
            if not isinstance(value, dict) or key not in value:
                break
            value = value[key]
        else:
            out[path] = value
    return out
