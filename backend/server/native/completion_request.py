"""The body of llama-server's ``POST /completion``, and how ``/completions`` tells it from
OpenAI's.

llama-server serves its native completion on both ``/completion`` and ``/completions``
and OpenAI's on ``/v1/completions``. QuantDesk has long answered ``/completions`` in
OpenAI's shape (clients configured with the server root as their base URL), so that path
decides per body (:func:`is_native_body`):

1. a field only OpenAI's API has (``max_tokens``, ``logprobs``, ``echo``, ``best_of``,
   ``suffix``, ``n``, ``stream_options``): OpenAI;
2. else a field only llama-server's has (``n_predict``, ``n_probs``, ``cache_prompt``,
   ``json_schema``, ``return_tokens``, ``id_slot``, ...) or a prompt that mixes token ids
   and text in one list: native;
3. else (a bare ``prompt`` with shared fields such as ``temperature`` or ``stop``):
   OpenAI when the body names a ``model`` (the OpenAI SDKs always do), native when it
   does not (llama-server's own clients and tests don't).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from backend.server.schemas import SamplingFields

OPENAI_ONLY_FIELDS = frozenset(
    {"max_tokens", "logprobs", "echo", "best_of", "suffix", "n", "stream_options"}
)
NATIVE_ONLY_FIELDS = frozenset(
    {
        "n_predict",
        "n_probs",
        "cache_prompt",
        "json_schema",
        "return_tokens",
        "id_slot",
        "n_keep",
        "n_indent",
        "response_fields",
        "post_sampling_probs",
        "samplers",
        "repeat_last_n",
        "typical_p",
        "mirostat",
        "mirostat_tau",
        "mirostat_eta",
        "dry_multiplier",
        "xtc_probability",
        "t_max_predict_ms",
        "timings_per_token",
    }
)
MAX_PROMPTS = 128  # prompts in one batch (each one is a sequence of its own)
MAX_N_PROBS = 100


def _mixes_ids_and_text(prompt: Any) -> bool:
    return (
        isinstance(prompt, list)
        and any(isinstance(p, int) for p in prompt)
        and any(isinstance(p, str) for p in prompt)
    )


def is_native_body(body: Any) -> bool:
    """Whether a ``/completions`` body is llama-server's native one (module docstring)."""
    if not isinstance(body, dict):
        return False
    keys = set(body)
    if keys & OPENAI_ONLY_FIELDS:
        return False
    if keys & NATIVE_ONLY_FIELDS or _mixes_ids_and_text(body.get("prompt")):
        return True
    return body.get("model") is None


PromptPart = int | str


class MultimodalPrompt(BaseModel):
    """llama-server's prompt object for images: the text, with a media marker
    (``<__media__>``) where each image goes, and the images, base64 in that order."""

    model_config = ConfigDict(extra="forbid")

    prompt_string: str
    multimodal_data: list[str] = Field(default_factory=list, max_length=1000)


class NativeCompletionRequest(SamplingFields):
    """llama-server's ``/completion`` body: its field names, its defaults where ours agree.

    ``prompt``: a string; token ids, possibly mixed with strings (one prompt); a list of
    strings and/or such lists (a batch: one result each); or a :class:`MultimodalPrompt`
    (one prompt with images). ``n_predict`` -1 (the
    default): as many tokens as fit, up to ``--max-tokens-limit``. ``cache_prompt`` is
    accepted; the prefix cache is always on, and the output does not depend on it.
    """

    prompt: str | MultimodalPrompt | list[PromptPart | list[PromptPart]] = ""
    n_probs: int = Field(0, ge=0, le=MAX_N_PROBS)
    cache_prompt: bool = True
    json_schema: dict[str, Any] | None = None
    return_tokens: bool = False
    repeat_last_n: int | None = Field(None, ge=-1, le=1 << 30)  # -1: the whole context
    post_sampling_probs: bool = False
    response_fields: list[str] | None = Field(None, max_length=64)
    # llama-server's list form: [[token id or text, bias or false], ...], or OpenAI's map
    logit_bias: dict[str, float | bool] | list[list[Any]] | None = None  # type: ignore[assignment]

    @field_validator("prompt")
    @classmethod
    def _bounded_batch(cls, value: Any) -> Any:
        batch = isinstance(value, list) and (
            any(isinstance(p, list) for p in value) or all(isinstance(p, str) for p in value)
        )
        if batch and len(value) > MAX_PROMPTS:
            raise PydanticCustomError(
                "too_many_prompts",
                "at most {limit} prompts in one request",
                {"limit": MAX_PROMPTS},
            )
        return value

    @field_validator("post_sampling_probs")
    @classmethod
    def _pre_sampling_only(cls, value: bool) -> bool:
        if value:
            raise PydanticCustomError(
                "post_sampling_probs",
                "post_sampling_probs is not supported: n_probs gives log-probabilities of "
                "the model's full distribution, before sampling",
            )
        return value
