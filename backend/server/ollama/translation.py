"""Ollama's chat and generate bodies as chat completion requests, so that chat's own
preparation (template, tools, grammar, images) serves them too.

- ``images`` (base64) become ``image_url`` parts before the message's text;
- assistant ``tool_calls`` (arguments as an object) become chat's calls with JSON text;
  a ``tool`` message's ``tool_name`` is the tool's name;
- ``format``: ``"json"`` is chat's JSON mode, a schema object its ``json_schema``;
- ``think``: ``false`` leaves the thinking out of the answer; a model that cannot think
  answers ``true`` with a 400, as Ollama does;
- ``/api/generate`` without ``raw`` is a user turn (``system`` before it) rendered by the
  model's chat template; Go ``template`` overrides are not read (not Go templates here).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from backend.server.errors import ApiError
from backend.server.ollama.options import sampling_fields
from backend.server.ollama.schemas import (
    OllamaChatRequest,
    OllamaGenerateRequest,
    OllamaMessage,
    Think,
)
from backend.server.schemas import ChatCompletionRequest

THINK_LEVELS = ("high", "medium", "low")


def wants_thinking(think: Think, model: str, capabilities: list[str]) -> bool:
    """Whether the answer carries the model's thinking (400 for a model that cannot)."""
    if isinstance(think, str) and think not in THINK_LEVELS:
        raise ApiError(
            400,
            f'invalid think value: "{think}" (must be "high", "medium", "low", true, or false)',
            param="think",
        )
    if think not in (None, False) and "thinking" not in capabilities:
        raise ApiError(400, f'"{model}" does not support thinking', param="think")
    return think is not False


def _response_format(fmt: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if fmt is None or fmt == "":
        return None
    if fmt == "json":
        return {"type": "json_object"}
    if isinstance(fmt, dict):
        return {"type": "json_schema", "json_schema": {"name": "format", "schema": fmt}}
    raise ApiError(
        400,
        f'invalid format: "{fmt}"; expected "json" or a valid JSON Schema object',
        param="format",
    )


def _images(images: list[str] | None) -> list[dict[str, Any]]:
    return [
        {"type": "image_url", "image_url": {"url": f"data:image/*;base64,{data}"}}
        for data in images or []
    ]


def _message(m: OllamaMessage, i: int) -> dict[str, Any]:
    role = m.role.lower()
    out: dict[str, Any] = {"role": role}
    parts = _images(m.images)
    out["content"] = [*parts, {"type": "text", "text": m.content}] if parts else m.content
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id or f"call_{i}_{k}",
                "type": "function",
                "function": {
                    "name": call.function.name,
                    "arguments": call.function.arguments
                    if isinstance(call.function.arguments, str)
                    else json.dumps(call.function.arguments),
                },
            }
            for k, call in enumerate(m.tool_calls)
        ]
    if role == "tool":
        if m.tool_name:
            out["name"] = m.tool_name
        if m.tool_call_id:
            out["tool_call_id"] = m.tool_call_id
    return out


def _chat_request(fields: dict[str, Any]) -> ChatCompletionRequest:
    try:
        return ChatCompletionRequest.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        raise ApiError(400, f"{where}: {first.get('msg')}", param=where) from None


def _common(body: OllamaChatRequest | OllamaGenerateRequest) -> dict[str, Any]:
    fields: dict[str, Any] = {"model": body.model, "stream": body.stream}
    fields.update(sampling_fields(body.options))
    if (fmt := _response_format(body.format)) is not None:
        fields["response_format"] = fmt
    return fields


def chat_request(body: OllamaChatRequest) -> ChatCompletionRequest:
    roles = ("system", "user", "assistant", "tool")
    for i, m in enumerate(body.messages):
        if m.role.lower() not in roles:
            raise ApiError(400, f"messages[{i}].role: one of {', '.join(roles)}", param="messages")
    fields = _common(body)
    fields["messages"] = [_message(m, i) for i, m in enumerate(body.messages)]
    if body.tools:
        fields["tools"] = body.tools
        if body.tool_choice is not None:
            fields["tool_choice"] = body.tool_choice
    return _chat_request(fields)


def generate_request(body: OllamaGenerateRequest) -> ChatCompletionRequest:
    """A templated ``/api/generate`` (not ``raw``) as one user turn."""
    fields = _common(body)
    messages: list[dict[str, Any]] = []
    if body.system:
        messages.append({"role": "system", "content": body.system})
    parts = _images(body.images)
    content = [*parts, {"type": "text", "text": body.prompt}] if parts else body.prompt
    messages.append({"role": "user", "content": content})
    fields["messages"] = messages
    return _chat_request(fields)
