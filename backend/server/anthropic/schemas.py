"""Typed Anthropic Messages request bodies. Unknown fields (``cache_control``, ``citations``,
``service_tier``, ``context_management``...) are accepted and ignored, as chat's are."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from backend.server.schemas import (
    MAX_MESSAGES,
    MAX_STOP_LENGTH,
    MAX_STOP_STRINGS,
    refuse_lone_surrogates,
)


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow")


def _text_or_blocks(value: Any) -> str:
    """The branch of ``str | list[blocks]`` that ``value`` is in, so that its errors come from
    that branch (a bad block, not "Input should be a valid string"). The tags are type names,
    which the error handler leaves out of the field's path."""
    return "str" if isinstance(value, str) else "list[blocks]"


class TextBlock(_Block):
    type: Literal["text"]
    text: str


class ImageBlock(_Block):
    type: Literal["image"]
    source: dict[str, Any] | None = None


class DocumentBlock(_Block):
    type: Literal["document"]
    source: dict[str, Any] | None = None


class ToolUseBlock(_Block):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


ResultPart = Annotated[TextBlock | ImageBlock | DocumentBlock, Field(discriminator="type")]
ResultContent = Annotated[
    Annotated[str, Tag("str")] | Annotated[list[ResultPart], Tag("list[blocks]")],
    Discriminator(_text_or_blocks),
]


class ToolResultBlock(_Block):
    type: Literal["tool_result"]
    tool_use_id: str
    content: ResultContent | None = None
    is_error: bool = False


class ThinkingBlock(_Block):
    """An earlier answer's reasoning, sent back by the client; the model does not see it."""

    type: Literal["thinking", "redacted_thinking"]


ContentBlock = Annotated[
    TextBlock | ImageBlock | DocumentBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock,
    Field(discriminator="type"),
]
MessageContent = Annotated[
    Annotated[str, Tag("str")] | Annotated[list[ContentBlock], Tag("list[blocks]")],
    Discriminator(_text_or_blocks),
]
SystemContent = Annotated[
    Annotated[str, Tag("str")] | Annotated[list[TextBlock], Tag("list[blocks]")],
    Discriminator(_text_or_blocks),
]


class Message(_Block):
    # "system" inside messages: Claude Code >= 2.1.154 sends mid-conversation system text
    role: Literal["user", "assistant", "system"]
    content: MessageContent


class Tool(_Block):
    """A client tool. Anthropic's server tools (``web_search_20250305``, ``bash_20250124``...)
    carry a versioned ``type`` and run at Anthropic: they are refused in translation."""

    name: str = Field(min_length=1)
    type: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class ToolChoice(_Block):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None

    @model_validator(mode="after")
    def _tool_has_a_name(self) -> ToolChoice:
        if self.type == "tool" and not self.name:
            raise PydanticCustomError(
                "tool_choice_name", "tool_choice of type 'tool' needs the tool's name"
            )
        return self


class OutputFormat(_Block):
    """Structured output: ``{"type": "json_schema", "schema": {...}}``."""

    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(_Block):
    """``output_config``: ``format`` is enforced by grammar; ``effort`` is accepted and
    changes nothing here."""

    format: OutputFormat | None = None


class CountTokensRequest(_Block):
    """``POST /v1/messages/count_tokens``: a Messages body without ``max_tokens``."""

    model: str | None = None
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    system: SystemContent | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    # accepted: a reasoning model's thinking comes back as thinking blocks whatever it says
    # (--reasoning-format decides, as for the other dialects)
    thinking: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        return refuse_lone_surrogates(data)


class MessagesRequest(CountTokensRequest):
    """``POST /v1/messages``."""

    max_tokens: int = Field(ge=1)
    stop_sequences: list[str] | None = Field(None, max_length=MAX_STOP_STRINGS)
    temperature: float | None = Field(None, ge=0.0, le=1.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0)
    stream: bool = False
    metadata: dict[str, Any] | None = None  # accepted and ignored (``user_id``)
    output_config: OutputConfig | None = None
    output_format: OutputFormat | None = None  # the structured-outputs beta's place for it
    grammar: str | None = None  # llama-server's GBNF extension, as chat takes it

    def json_schema(self) -> dict[str, Any] | None:
        """The schema every answer must follow (``output_config.format``), or None."""
        fmt = self.output_config.format if self.output_config else None
        fmt = fmt or self.output_format
        return fmt.schema_ if fmt else None

    @field_validator("stream", mode="before")
    @classmethod
    def _null_stream(cls, value: Any) -> Any:
        return False if value is None else value

    @field_validator("stop_sequences")
    @classmethod
    def _short_stops(cls, value: list[str] | None) -> list[str] | None:
        if value and (longest := max(len(s) for s in value)) > MAX_STOP_LENGTH:
            raise PydanticCustomError(
                "stop_string_too_long",
                "a stop sequence may have at most {limit} characters, not {count}",
                {"limit": MAX_STOP_LENGTH, "count": longest},
            )
        return value
