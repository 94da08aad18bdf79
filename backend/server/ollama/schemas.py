"""Ollama's request bodies (its API reference and ``api/types.go``), leniently: unknown
fields are kept and ignored, as Ollama ignores them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from backend.server.schemas import refuse_lone_surrogates

KeepAlive = float | int | str | None
Think = bool | str | None


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        return refuse_lone_surrogates(data)


class ToolCallFunction(_Lenient):
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class ToolCallIn(_Lenient):
    id: str | None = None
    function: ToolCallFunction


class OllamaMessage(_Lenient):
    role: str
    content: str = ""
    thinking: str | None = None
    images: list[str] | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None


class _Generating(_Lenient):
    model: str = Field(min_length=1)
    format: str | dict[str, Any] | None = None
    options: dict[str, Any] | None = None
    stream: bool = True
    keep_alive: KeepAlive = None
    think: Think = None


class OllamaChatRequest(_Generating):
    messages: list[OllamaMessage] = Field(default_factory=list, max_length=4096)
    tools: list[dict[str, Any]] | None = None
    # QuantDesk's: chat's tool_choice ("required" or a named function), which Ollama lacks
    tool_choice: str | dict[str, Any] | None = None


class OllamaGenerateRequest(_Generating):
    prompt: str = ""
    suffix: str | None = None
    system: str | None = None
    template: str | None = None
    images: list[str] | None = None
    raw: bool = False
    context: list[int] | None = None


class OllamaEmbedRequest(_Lenient):
    model: str = Field(min_length=1)
    input: str | list[str] = ""
    truncate: bool = True
    dimensions: int | None = Field(None, ge=1)
    options: dict[str, Any] | None = None
    keep_alive: KeepAlive = None


class OllamaEmbeddingsRequest(_Lenient):
    model: str = Field(min_length=1)
    prompt: str = ""
    options: dict[str, Any] | None = None
    keep_alive: KeepAlive = None


class OllamaModelRequest(_Lenient):
    """``/api/show``, ``/api/delete``, ``/api/pull``: the model as ``model`` or, as older
    clients (ollama-js) send it, ``name``."""

    model: str | None = None
    name: str | None = None
    stream: bool = True
    verbose: bool = False

    def which(self) -> str:
        from backend.server.errors import ApiError

        value = self.model or self.name
        if not value:
            raise ApiError(400, "model is required", param="model")
        return value


class OllamaCopyRequest(_Lenient):
    source: str = Field(min_length=1)
    destination: str = Field(min_length=1)
