"""Typed OpenAI request bodies. Unknown fields are accepted and ignored."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from backend.settings.server_settings import ReasoningFormat

# Fields with a default that some clients send as an explicit ``null`` (OpenAI accepts it).
_NULL_MEANS_DEFAULT = frozenset({"stream", "n", "ignore_eos", "include_usage", "logprobs", "echo"})

# Bounds on what one request may carry (issue 14: each list's cost grows with its length).
# n and best_of have a lower, configurable bound too (--max-choices).
MAX_MESSAGES = 4096
# OpenAI allows 4 stop strings; each is matched against the held-back text after every token
MAX_STOP_STRINGS = 16
MAX_STOP_LENGTH = 1024
MAX_CHOICES = 128  # OpenAI's bound on n


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None or k not in _NULL_MEANS_DEFAULT}
        return data


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate_path(data: Any) -> str | None:
    """Where a decoded JSON body holds a lone UTF-16 surrogate (``"\\ud800"``): JSON allows
    it, UTF-8 cannot encode it, and the tokenizer or grammar parser would fail on it later.
    A valid pair decodes to one character, so any surrogate left is a lone one."""
    # repr() (in C) writes any surrogate as an escape: most bodies never need the walk,
    # which took a third of a second on the event loop for 270,000 messages
    if "\\ud" not in repr(data):
        return None
    stack: list[tuple[str, Any]] = [("", data)]  # iterative: bodies may nest deeply
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return path or "body"
        elif isinstance(value, dict):
            for key, item in value.items():
                key = str(key)
                if _SURROGATE.search(key):
                    return path or "body"
                stack.append((f"{path}.{key}" if path else key, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
    return None


def refuse_lone_surrogates(data: Any) -> Any:
    """The body of a request model's ``mode="before"`` validator: ``data`` unchanged, or a
    400-bound validation error that names where a lone surrogate sits."""
    if (path := lone_surrogate_path(data)) is not None:
        raise PydanticCustomError(
            "lone_surrogate",
            "not valid Unicode: it holds a lone UTF-16 surrogate "
            "(an unpaired \\ud800-\\udfff escape)",
            {"param": path},
        )
    return data


class StreamOptions(_Lenient):
    include_usage: bool = False


class FunctionCall(_Lenient):
    name: str
    arguments: str | dict[str, Any] | None = None  # a JSON string; some clients send the object


class AssistantToolCall(_Lenient):
    """A call in an earlier assistant message: ``{"id", "type", "function"}``."""

    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Lenient):
    role: Literal["system", "user", "assistant", "tool", "developer", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[AssistantToolCall] | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        """Content as plain text; the text parts of a multi-part message are joined by
        newlines, as llama-server does (see :meth:`non_text_parts`)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")

    def non_text_parts(self) -> list[str]:
        """Types of the parts this text-only server cannot take (images, audio, files)."""
        if not isinstance(self.content, list):
            return []
        return [str(p.get("type")) for p in self.content if p.get("type") != "text"]


class SamplingFields(_Lenient):
    """Sampling fields shared by chat and completions (OpenAI + llama-server extras)."""

    model: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    n_predict: int | None = Field(None, ge=-1)  # llama-server's name; -1: no limit
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repeat_penalty: float | None = Field(None, ge=0.0, le=10.0)
    seed: int | None = None
    logit_bias: dict[str, float] | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=MAX_CHOICES)
    ignore_eos: bool = False
    grammar: str | None = None
    user: str | None = None
    # llama-server's per-request speculative decoding, literal dotted keys in the body:
    # the most and fewest draft tokens per step (n_max 0: no speculation for this request)
    # and the draft model's probability to stop drafting under
    speculative_n_max: int | None = Field(None, ge=0, alias="speculative.n_max")
    speculative_n_min: int | None = Field(None, ge=0, alias="speculative.n_min")
    speculative_p_min: float | None = Field(None, ge=0.0, le=1.0, alias="speculative.p_min")
    # llama-server's context shift (with --context-shift): tokens kept at the start (-1:
    # the whole prompt) and dropped after them (0: half the rest) when the context fills
    n_keep: int = Field(0, ge=-1, le=1 << 30)
    n_discard: int = Field(0, ge=0, le=1 << 30)

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        return refuse_lone_surrogates(data)

    @field_validator("stop")
    @classmethod
    def _few_stop_strings(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and len(value) > MAX_STOP_STRINGS:
            raise PydanticCustomError(
                "too_many_stop_strings",
                "at most {limit} stop strings, not {count}",
                {"limit": MAX_STOP_STRINGS, "count": len(value)},
            )
        stops = [value] if isinstance(value, str) else value or []
        if (longest := max((len(stop) for stop in stops), default=0)) > MAX_STOP_LENGTH:
            raise PydanticCustomError(
                "stop_string_too_long",
                "a stop string may have at most {limit} characters, not {count}",
                {"limit": MAX_STOP_LENGTH, "count": longest},
            )
        return value

    def asked_max_tokens(self) -> int | None:
        """``max_tokens``, or llama-server's ``n_predict`` (-1: as many as fit)."""
        if self.max_tokens is not None:
            return self.max_tokens
        return self.n_predict if self.n_predict is not None and self.n_predict >= 0 else None

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_completion_tokens: int | None = Field(None, ge=1)
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    # vLLM's and llama-server's: a last assistant message is continued (prefill) unless
    # add_generation_prompt asks for a new turn; both true is a contradiction
    continue_final_message: bool | None = None
    add_generation_prompt: bool | None = None
    # llama-server's per-request --reasoning-format (None: the server's)
    reasoning_format: ReasoningFormat | None = None

    @model_validator(mode="after")
    def _one_way_to_end(self) -> ChatCompletionRequest:
        if self.continue_final_message and self.add_generation_prompt:
            raise PydanticCustomError(
                "continue_and_add",
                "continue_final_message and add_generation_prompt cannot both be true",
            )
        if self.continue_final_message and self.messages[-1].role != "assistant":
            raise PydanticCustomError(
                "continue_needs_assistant",
                "continue_final_message needs the last message to be the assistant's",
                {"param": "continue_final_message"},
            )
        return self

    def continues_final_message(self) -> bool:
        """Whether the prompt leaves the last message open for the model to go on with."""
        if self.continue_final_message is not None:
            return self.continue_final_message
        return self.messages[-1].role == "assistant" and self.add_generation_prompt is not True

    @field_validator("tool_choice")
    @classmethod
    def _named_function(cls, value: Any) -> Any:
        if isinstance(value, dict):
            function = value.get("function")
            if (
                value.get("type", "function") != "function"
                or not isinstance(function, dict)
                or not isinstance(function.get("name"), str)
            ):
                raise PydanticCustomError(
                    "tool_choice",
                    "must be 'none', 'auto', 'required' or "
                    "{'type': 'function', 'function': {'name': NAME}}",
                )
        return value


class CompletionRequest(SamplingFields):
    # one prompt, or a batch (lm-eval-harness sends lists of token-id lists): a choice each
    prompt: str | list[str] | list[int] | list[list[int]] = ""
    max_tokens: int | None = Field(None, ge=0)  # 0 with echo + logprobs: score the prompt
    echo: bool = False
    suffix: str | None = None
    logprobs: int | None = Field(None, ge=0, le=20)
    best_of: int | None = Field(None, ge=1, le=MAX_CHOICES)
