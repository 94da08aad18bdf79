"""Typed Responses request bodies. Unknown fields are accepted and ignored, as in chat."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from backend.server.schemas import MAX_MESSAGES, SamplingFields


class _Item(BaseModel):
    model_config = ConfigDict(extra="allow")


class ContentPart(_Item):
    """A part of a message: ``input_text`` (``output_text`` in an assistant's own turn
    sent back), ``input_image``; other types (``input_file``) are refused later."""

    type: str
    text: str | None = None
    refusal: str | None = None
    image_url: str | None = None  # input_image: a data: URL


class MessageItem(_Item):
    """``{"role", "content"}``, with or without ``"type": "message"``."""

    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[ContentPart]
    id: str | None = None
    status: str | None = None


class FunctionCallItem(_Item):
    """A call the model made in an earlier turn."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: str | None = None


class FunctionCallOutputItem(_Item):
    """What the client's function returned for ``call_id``."""

    type: Literal["function_call_output"]
    call_id: str
    output: str | list[ContentPart]
    id: str | None = None
    status: str | None = None


class ReasoningItem(_Item):
    """A reasoning item sent back by a client (Codex does): accepted, not shown to the
    model."""

    type: Literal["reasoning"]


def _item_type(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("type", "message"))
    return str(getattr(value, "type", "message"))


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(_item_type),
]


class TextConfig(_Item):
    """``text``: ``format`` is ``{"type": "text"}``, ``{"type": "json_object"}`` or
    ``{"type": "json_schema", "name", "schema", "strict"}``."""

    format: dict[str, Any] | None = None


class ResponsesRequest(SamplingFields):
    """``POST /v1/responses``. llama-server's sampling extras (top_k, min_p, seed, ...)
    are taken as in chat; ``n``, ``stop`` and ``max_tokens`` are not Responses fields."""

    input: Annotated[list[InputItem], Field(max_length=MAX_MESSAGES)] | str | None = None
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    store: bool | None = None  # OpenAI's default: true
    previous_response_id: str | None = None
    metadata: dict[str, Any] | None = None
    background: bool | None = None
    conversation: str | dict[str, Any] | None = None

    def stores(self) -> bool:
        return self.store is not False

    def input_items(self) -> list[InputItem]:
        """``input`` as items: a string is one user message."""
        if self.input is None:
            return []
        if isinstance(self.input, str):
            return [MessageItem(role="user", content=self.input)]
        return list(self.input)
