"""Responses requests onto chat requests: input items to messages, tools, tool_choice and
``text.format`` to chat's shapes. The chat request is then prepared as chat prepares it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from backend.server.errors import ApiError
from backend.server.responses.schemas import (
    ContentPart,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputItem,
    MessageItem,
    ResponsesRequest,
)
from backend.server.schemas import ChatCompletionRequest, SamplingFields

log = logging.getLogger(__name__)

TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_OTHER_PARTS = frozenset({"refusal", "input_image"})

# Chat's names for the fields a Responses client knows by other names (in error answers)
RESPONSES_PARAMS = {
    "messages": "input",
    "response_format": "text.format",
    "max_completion_tokens": "max_output_tokens",
}

# Responses fields that have no counterpart in chat
_NOT_SAMPLING = frozenset({"n", "stream", "stream_options"})


_ITEMS: TypeAdapter[list[InputItem]] = TypeAdapter(list[InputItem])


@dataclass(frozen=True)
class ChatTranslation:
    """The chat request for a Responses request, and the conversation items it is made
    of (earlier turns, then this input) as they are stored for a later turn."""

    chat: ChatCompletionRequest
    conversation: list[dict[str, Any]]


def translate(body: ResponsesRequest, history: list[dict[str, Any]]) -> ChatTranslation:
    """``body`` (after the conversation ``history`` of its previous response) as a chat
    request; 400 for what chat cannot express."""
    if body.background:
        raise ApiError(400, "background responses are not supported", param="background")
    if body.conversation is not None:
        raise ApiError(
            400,
            "conversations are not supported; chain turns with previous_response_id",
            param="conversation",
        )
    items = body.input_items()
    earlier = _parse_history(history)
    messages = _messages(body.instructions, earlier, items)
    if not messages:
        raise ApiError(400, "input is empty", param="input")
    fields = body.model_dump(
        include=set(SamplingFields.model_fields) - _NOT_SAMPLING, by_alias=True, exclude_none=True
    )
    fields.update(
        messages=messages,
        tools=chat_tools(body.tools),
        tool_choice=chat_tool_choice(body.tool_choice),
        parallel_tool_calls=body.parallel_tool_calls,
        response_format=chat_response_format(body.text.format if body.text else None),
        max_completion_tokens=body.max_output_tokens,
    )
    try:
        chat = ChatCompletionRequest.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        param = RESPONSES_PARAMS.get(loc.split(".")[0], loc) or None
        raise ApiError(400, f"{param or 'body'}: {first.get('msg')}", param=param) from None
    conversation = history + [item.model_dump(exclude_none=True) for item in items]
    return ChatTranslation(chat, conversation)


def responses_param(error: ApiError) -> ApiError:
    """``error`` from chat's preparation with the field named as a Responses client knows it."""
    if error.param is not None:
        head, dot, rest = error.param.partition(".")
        if head in RESPONSES_PARAMS:
            error.param = RESPONSES_PARAMS[head] + dot + rest
            error.message = error.message.replace(head, RESPONSES_PARAMS[head], 1)
    return error


def _parse_history(history: list[dict[str, Any]]) -> list[InputItem]:
    """Stored items (input items, and output items, which parse as input items)."""
    return _ITEMS.validate_python(history)


def _messages(
    instructions: str | None, earlier: list[InputItem], items: list[InputItem]
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    names: dict[str, str] = {}  # call_id -> function name, for the tool result's message
    labelled = [(f"previous_response_id's input[{i}]", it) for i, it in enumerate(earlier)]
    labelled += [(f"input[{i}]", it) for i, it in enumerate(items)]
    for label, item in labelled:
        if isinstance(item, MessageItem):
            role = "system" if item.role == "developer" else item.role
            messages.append({"role": role, "content": _text(item.content, f"{label}.content")})
        elif isinstance(item, FunctionCallItem):
            names[item.call_id] = item.name
            call = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": item.arguments},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)  # the same turn as its text
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif isinstance(item, FunctionCallOutputItem):
            message = {
                "role": "tool",
                "tool_call_id": item.call_id,
                "content": _text(item.output, f"{label}.output"),
            }
            if item.call_id in names:
                message["name"] = names[item.call_id]
            messages.append(message)
        # reasoning items are not shown to the model
    return _leading_system_merged(messages)


def _leading_system_merged(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``instructions`` and the system/developer messages right after it as one system
    message: many chat templates take a single one, first (Codex sends both)."""
    n = 0
    while (
        n < len(messages)
        and messages[n]["role"] == "system"
        and not isinstance(messages[n]["content"], list)  # one with an image stays apart
    ):
        n += 1
    if n < 2:
        return messages
    text = "\n\n".join(m["content"] for m in messages[:n] if m["content"])
    return [{"role": "system", "content": text}, *messages[n:]]


def _text(content: str | list[ContentPart], param: str) -> str | list[dict[str, Any]]:
    """Text parts joined by newlines (as chat joins its text parts), or, with images, chat's
    parts (``input_image`` as ``image_url``); other parts: 400."""
    if isinstance(content, str):
        return content
    other = sorted(
        {p.type for p in content if p.type not in TEXT_PARTS and p.type not in _OTHER_PARTS}
    )
    if other:
        raise ApiError(
            400,
            f"{param} has parts of type {', '.join(other)}; this server takes text and images "
            "(input_text and input_image parts)",
            param=param,
        )
    texts = [(p.refusal if p.type == "refusal" else p.text) or "" for p in content]
    if all(p.type != "input_image" for p in content):
        return "\n".join(texts)
    return [
        {"type": "image_url", "image_url": {"url": p.image_url or ""}}
        if p.type == "input_image"
        else {"type": "text", "text": text}
        for p, text in zip(content, texts, strict=True)
    ]


def chat_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Function tools (``{"type": "function", "name", "description", "parameters"}``) in
    chat's shape; hosted tools (web search, file search, ...) are left out: there is
    nothing here to run them."""
    out: list[dict[str, Any]] = []
    for i, tool in enumerate(tools or []):
        kind = tool.get("type")
        if kind != "function":
            log.info("tools[%d] of type %r left out: only function tools are served", i, kind)
            continue
        if isinstance(tool.get("function"), dict):  # chat's shape, sent to /responses
            out.append({"type": "function", "function": tool["function"]})
            continue
        if not isinstance(tool.get("name"), str):
            raise ApiError(
                400,
                f"tools[{i}] must be {{'type': 'function', 'name', 'parameters'}}",
                param=f"tools[{i}]",
            )
        function = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
        out.append({"type": "function", "function": function})
    return out or None


def chat_tool_choice(choice: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
    """``"none"``, ``"auto"``, ``"required"`` or ``{"type": "function", "name"}``."""
    if choice is None or choice in ("none", "auto", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice.get("name")
        if name is None and isinstance(choice.get("function"), dict):  # chat's shape
            name = choice["function"].get("name")
        if isinstance(name, str):
            return {"type": "function", "function": {"name": name}}
    raise ApiError(
        400,
        "tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'name': NAME}",
        param="tool_choice",
    )


def chat_response_format(fmt: dict[str, Any] | None) -> dict[str, Any] | None:
    """``text.format`` as chat's ``response_format`` (grammar-enforced there)."""
    kind = (fmt or {}).get("type", "text")
    if fmt is None or kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema = fmt.get("schema")
        if not isinstance(schema, dict):
            raise ApiError(
                400,
                "text.format.schema must be a JSON schema object",
                param="text.format.schema",
            )
        spec = {"name": fmt.get("name") or "response", "schema": schema}
        return {"type": "json_schema", "json_schema": spec}
    raise ApiError(
        400,
        f"unknown text.format type '{kind}'; use text, json_object or json_schema",
        param="text.format",
    )
