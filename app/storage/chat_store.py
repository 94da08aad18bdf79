"""Conversations saved as JSON files under ``quantdesk_home()/chats``."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from app.storage.atomic_file import write_text_atomic
from backend.settings.paths import subdir

log = logging.getLogger(__name__)


class ChatImage(BaseModel):
    """An image attached to a message, kept in the chat file itself (base64)."""

    mime: str
    data: str  # base64 of the file as it was attached
    name: str = ""

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.data}"


class ChatMessage(BaseModel):
    role: Literal["user", "assistant"]
    content: str
    meta: dict[str, Any] = Field(default_factory=dict)  # ttft_ms, tokens_per_s, tokens, error
    images: list[ChatImage] = Field(default_factory=list)
    thinking: str = ""  # the model's reasoning before its answer
    # a reply that used tools: each call as the transcript shows it (tool, arguments,
    # result, is_error, denied, seconds), and the API messages before the answer (the
    # calls and their results), sent again with the next turns
    calls: list[dict[str, Any]] = Field(default_factory=list)
    steps: list[dict[str, Any]] = Field(default_factory=list)

    def api_content(self) -> str | list[dict[str, Any]]:
        """The message's content for /v1/chat/completions: its text, or its images and
        then its text as content parts."""
        if not self.images:
            return self.content
        parts: list[dict[str, Any]] = [
            {"type": "image_url", "image_url": {"url": image.data_url()}} for image in self.images
        ]
        return [*parts, {"type": "text", "text": self.content}]


class Conversation(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    title: str = "New chat"
    created: float = Field(default_factory=time.time)
    updated: float = Field(default_factory=time.time)
    system_prompt: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    messages: list[ChatMessage] = Field(default_factory=list)

    def api_messages(self) -> list[dict[str, Any]]:
        """Messages for /v1/chat/completions (system prompt first, no empty replies)."""
        out: list[dict[str, Any]] = (
            [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        )
        for m in self.messages:
            out += m.steps
            if m.content or m.role == "user":
                out.append({"role": m.role, "content": m.api_content()})
        return out

    def auto_title(self) -> None:
        if self.title == "New chat":
            first = next((m.content for m in self.messages if m.role == "user"), "")
            line = " ".join(first.split())
            if line:
                self.title = line[:48] + ("…" if len(line) > 48 else "")


class ChatStore:
    """One JSON file per conversation, written atomically."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or subdir("chats")
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, conv_id: str) -> Path:
        return self.folder / f"{conv_id}.json"

    def save(self, conv: Conversation) -> Path:
        conv.updated = time.time()
        return write_text_atomic(self.path(conv.id), conv.model_dump_json(indent=1))

    def load(self, conv_id: str) -> Conversation:
        return Conversation.model_validate_json(self.path(conv_id).read_text(encoding="utf-8"))

    def delete(self, conv_id: str) -> None:
        self.path(conv_id).unlink(missing_ok=True)

    def list(self) -> list[Conversation]:
        """All readable conversations, most recently updated first."""
        items = []
        for file in self.folder.glob("*.json"):
            try:
                items.append(Conversation.model_validate_json(file.read_text(encoding="utf-8")))
            except (OSError, ValidationError) as exc:
                log.warning("skipping unreadable chat %s: %s", file.name, exc)
        return sorted(items, key=lambda c: c.updated, reverse=True)
