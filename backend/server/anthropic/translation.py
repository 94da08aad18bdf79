"""Anthropic Messages requests onto chat requests: system text, content blocks, tools and
tool_choice in chat's shapes. The chat request is then prepared and generated as chat's is.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from pydantic import ValidationError

from backend.server.anthropic.schemas import (
    CountTokensRequest,
    DocumentBlock,
    ImageBlock,
    Message,
    MessagesRequest,
    TextBlock,
    ThinkingBlock,
    ToolChoice,
    ToolResultBlock,
    ToolUseBlock,
)
from backend.server.errors import ApiError
from backend.server.media_parts import image_part
from backend.server.schemas import ChatCompletionRequest

log = logging.getLogger(__name__)

# Claude Code opens its system prompt with a billing header whose ``cch=`` stamp changes on
# every request; left in, no request would share its prompt prefix with the one before
# (llama.cpp PR 21793 blanks the stamp). It means nothing to a local model: it is dropped.
_BILLING_HEADER = re.compile(r"^x-anthropic-billing-header:(?:\s*[\w.-]+=[^;\n]*;)*\s*")

_said_billing_header: list[bool] = []  # the log says it once per process

# An Anthropic tool's ``type`` when it is the client's own (None: the usual, untyped form)
_CLIENT_TOOL_TYPES = frozenset({None, "custom"})

# prefixed to a tool_result with ``is_error``: chat's tool messages have no error flag
TOOL_ERROR_PREFIX = "Error: "


def _cannot_see(where: str, kind: str, model_id: str) -> ApiError:
    what = "images" if kind == "image" else "documents (PDF)"
    return ApiError(
        400,
        f"{where} is a {kind} block: {model_id} takes text only and cannot read {what}",
        param=where,
    )


def system_text(system: str | list[TextBlock] | None, keep_billing_header: bool = False) -> str:
    """The top-level ``system`` as one text, Claude Code's billing header left out unless
    ``keep_billing_header`` (``serve --keep-billing-header``)."""
    if system is None:
        return ""
    parts = [system] if isinstance(system, str) else [b.text for b in system]
    if not keep_billing_header:
        kept = [_BILLING_HEADER.sub("", p, count=1) for p in parts]
        if kept != parts and not _said_billing_header:
            _said_billing_header.append(True)
            log.info(
                "dropping Claude Code's x-anthropic-billing-header line from /v1/messages "
                "system prompts (metadata that changes on every request and would defeat "
                "prompt caching; --keep-billing-header keeps it)"
            )
        parts = kept
    return "\n".join(t for t in parts if t)


def _image(block: ImageBlock, where: str) -> dict[str, Any]:
    """Chat's ``image_url`` part for an image block (a ``url`` source is refused later,
    as chat refuses remote URLs)."""
    source = block.source or {}
    if source.get("type") == "base64":
        return image_part(str(source.get("media_type", "")), str(source.get("data", "")))
    if source.get("type") == "url":
        return {"type": "image_url", "image_url": {"url": str(source.get("url", ""))}}
    raise ApiError(400, f"{where}: an image source is base64 or url", param=where)


def _text_parts(
    message: Message, where: str, model_id: str, sees_images: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """A message's (text and image parts, tool calls, tool results) in chat's shapes."""
    if isinstance(message.content, str):
        return [{"type": "text", "text": message.content}], [], []
    texts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for j, block in enumerate(message.content):
        at = f"{where}.content[{j}]"
        if isinstance(block, TextBlock):
            texts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock) and sees_images:
            texts.append(_image(block, at))
        elif isinstance(block, ImageBlock | DocumentBlock):
            raise _cannot_see(at, block.type, model_id)
        elif isinstance(block, ThinkingBlock):
            continue  # an earlier answer's reasoning: not part of the prompt
        elif isinstance(block, ToolUseBlock):
            if message.role != "assistant":
                raise ApiError(400, f"{at}: tool_use blocks belong to assistant turns", param=at)
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": block.input},
                }
            )
        elif isinstance(block, ToolResultBlock):
            if message.role != "user":
                raise ApiError(400, f"{at}: tool_result blocks belong to user turns", param=at)
            results.append(
                {
                    "role": "tool",
                    "tool_call_id": block.tool_use_id,
                    "content": _tool_result_content(block, at, model_id, sees_images),
                }
            )
    return texts, calls, results


def _tool_result_content(
    block: ToolResultBlock, where: str, model_id: str, sees_images: bool
) -> str | list[dict[str, Any]]:
    """A tool result as a tool message's content: text, or parts when it holds images (a
    screenshot tool's)."""
    if block.content is None or isinstance(block.content, str):
        text = block.content or ""
        return TOOL_ERROR_PREFIX + text if block.is_error else text
    parts: list[dict[str, Any]] = []
    for k, part in enumerate(block.content):
        if isinstance(part, TextBlock):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImageBlock) and sees_images:
            parts.append(_image(part, f"{where}.content[{k}]"))
        else:
            raise _cannot_see(f"{where}.content[{k}]", part.type, model_id)
    if all(p["type"] == "text" for p in parts):
        text = "\n".join(p["text"] for p in parts)
        return TOOL_ERROR_PREFIX + text if block.is_error else text
    if block.is_error:
        parts.insert(0, {"type": "text", "text": TOOL_ERROR_PREFIX.rstrip()})
    return parts


def chat_messages(
    body: CountTokensRequest,
    model_id: str,
    keep_billing_header: bool = False,
    sees_images: bool = False,
) -> list[dict[str, Any]]:
    """Chat messages for ``body``: one system message first (the top-level ``system`` and any
    system-role messages, in order: chat templates take a system message only first), then
    each turn. A user turn's tool results become tool messages, ahead of its text."""
    system = [system_text(body.system, keep_billing_header)]
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(body.messages):
        where = f"messages[{i}]"
        texts, calls, results = _text_parts(message, where, model_id, sees_images)
        if message.role == "system":
            system.append("\n".join(t["text"] for t in texts))
            continue
        turns.extend(results)
        if message.role == "assistant":
            if texts or calls:
                turn: dict[str, Any] = {"role": "assistant", "content": texts or ""}
                if calls:
                    turn["tool_calls"] = calls
                turns.append(turn)
        elif texts or not results:
            turns.append({"role": "user", "content": texts})
    text = "\n\n".join(s for s in system if s)
    return ([{"role": "system", "content": text}] if text else []) + turns


def chat_tools(body: CountTokensRequest) -> list[dict[str, Any]] | None:
    if not body.tools:
        return None
    tools = []
    for i, tool in enumerate(body.tools):
        if tool.type not in _CLIENT_TOOL_TYPES:
            raise ApiError(
                400,
                f"tools[{i}] is '{tool.type}', one of Anthropic's server tools; "
                "this server calls back the client's own tools only",
                param=f"tools[{i}]",
            )
        function: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema}
        if tool.description:
            function["description"] = tool.description
        tools.append({"type": "function", "function": function})
    return tools


def chat_tool_choice(choice: ToolChoice | None) -> str | dict[str, Any] | None:
    """auto, any (some tool), tool (that one) and none in chat's words. A forced call is
    made by grammar, one call per answer (``disable_parallel_tool_use`` holds anyway)."""
    if choice is None:
        return None
    if choice.type == "any":
        return "required"
    if choice.type == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.type


def _one_call(choice: ToolChoice | None) -> bool:
    return choice is not None and choice.disable_parallel_tool_use is True


def to_chat_request(
    body: CountTokensRequest,
    model_id: str,
    keep_billing_header: bool = False,
    sees_images: bool = False,
) -> ChatCompletionRequest:
    """The chat request that ``body`` asks for; ``model_id`` names the model in errors,
    ``sees_images``: it has a projector (else an image block is a 400)."""
    chat: dict[str, Any] = {
        "model": body.model,
        "messages": chat_messages(body, model_id, keep_billing_header, sees_images),
        "tools": chat_tools(body),
        "tool_choice": chat_tool_choice(body.tool_choice),
        "parallel_tool_calls": False if _one_call(body.tool_choice) else None,
    }
    if isinstance(body, MessagesRequest):
        chat |= {
            "max_tokens": body.max_tokens,
            "temperature": body.temperature,
            "top_p": body.top_p,
            "top_k": body.top_k,
            "stop": body.stop_sequences,
            "stream": body.stream,
            "grammar": body.grammar,
        }
        if (schema := body.json_schema()) is not None:  # grammar-enforced, as chat's is
            chat["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": schema},
            }
    try:
        return ChatCompletionRequest.model_validate(chat)
    except ValidationError as exc:  # e.g. more messages than a chat request may carry
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ApiError(400, f"{where or 'body'}: {first.get('msg')}", param="messages") from None
