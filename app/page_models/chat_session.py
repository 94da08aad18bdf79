"""The Chat page's conversation without Qt: the open conversation, editing a message and
regenerating a reply, the reply being streamed, saving, and what the page says about the
server. The page shows it and runs the request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.storage.app_settings import ChatDefaults, ServerKnobs
from app.storage.chat_store import ChatImage, ChatMessage, ChatStore, Conversation
from backend.settings.default_model import DEFAULT_MODEL_ID

SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "max_tokens")


def request_params(defaults: ChatDefaults) -> dict[str, Any]:
    """The sampling fields of a ``/v1/chat/completions`` request (no seed when random)."""
    params: dict[str, Any] = {name: getattr(defaults, name) for name in SAMPLING_FIELDS}
    if defaults.seed >= 0:
        params["seed"] = defaults.seed
    return params


def with_params(defaults: ChatDefaults, params: dict[str, Any]) -> ChatDefaults:
    """``defaults`` with a saved conversation's sampling settings (its numbers; no seed
    saved: random)."""
    update: dict[str, Any] = {
        name: params[name] for name in SAMPLING_FIELDS if isinstance(params.get(name), int | float)
    }
    update["seed"] = int(params.get("seed", -1))
    return defaults.model_copy(update=update)


@dataclass(frozen=True)
class ServerNotice:
    """The banner above the chat while the server cannot answer."""

    text: str
    level: str
    action: str | None = None


def server_notice(state: str) -> ServerNotice | None:
    """What to say in each server state (``ServerState`` values); ``None`` while it runs."""
    if state == "running":
        return None
    if state == "starting":
        return ServerNotice("The server is loading the model…", "info")
    if state == "crashed":
        return ServerNotice(
            "The server stopped unexpectedly. Your conversation is kept.",
            "error",
            "Restart server",
        )
    return ServerNotice("The server is not running.", "warning", "Start server")


def served_label(state: str, knobs: ServerKnobs | None) -> str | None:
    """The model name beside the title: '● name' while running, blank while the server
    stops or starts, ``None`` (keep it) after a crash."""
    if state == "crashed":
        return None
    if state != "running":
        return ""
    name = (
        DEFAULT_MODEL_ID
        if knobs is None or knobs.model == "default"
        else knobs.model.rsplit("/", 1)[-1]
    )
    return f"● {name}"


class ChatSession:
    """The open conversation, kept in ``store``; new ones start from ``defaults`` (the
    page's settings column, which also gives each request its sampling settings)."""

    def __init__(self, store: ChatStore, defaults: ChatDefaults) -> None:
        self.store = store
        self.defaults = defaults
        self.conversation = Conversation(system_prompt=defaults.system_prompt)
        self.edit_index: int | None = None  # the message being edited in the composer
        # images for the next message (the composer's); one list, changed in place
        self.attached: list[ChatImage] = []
        self.reply = ""  # the streamed reply so far
        self._replying: Conversation | None = None  # the conversation it goes into

    @property
    def messages(self) -> list[ChatMessage]:
        return self.conversation.messages

    @property
    def has_reply(self) -> bool:
        return any(m.role == "assistant" for m in self.messages)

    def new(self) -> None:
        self.conversation = Conversation(system_prompt=self.defaults.system_prompt)
        self.edit_index = None
        self.attached.clear()

    def open(self, conv_id: str) -> ChatDefaults:
        """Open a saved conversation; the settings it was held with, to show."""
        self.conversation = self.store.load(conv_id)
        self.edit_index = None
        return with_params(
            self.defaults.model_copy(update={"system_prompt": self.conversation.system_prompt}),
            self.conversation.params,
        )

    def delete(self, conv_id: str) -> bool:
        """Delete a saved conversation; True when it is the open one (start a new one)."""
        self.store.delete(conv_id)
        return conv_id == self.conversation.id

    def save(self) -> None:
        """Save with the current system prompt and sampling settings (titled by its first
        message)."""
        self.conversation.system_prompt = self.defaults.system_prompt
        self.conversation.params = request_params(self.defaults)
        self.conversation.auto_title()
        self.store.save(self.conversation)

    # -- editing ---------------------------------------------------------------------------
    def begin_edit(self, index: int) -> str | None:
        """Edit message ``index``: its text for the composer (``None``: no such message)."""
        if index >= len(self.messages):
            return None
        self.edit_index = index
        self.attached[:] = self.messages[index].images  # an edit keeps its images
        return self.messages[index].content

    def add_user_message(self, text: str) -> int:
        """Append the user's message (with the attached images), replacing the one being
        edited and all after it; how many earlier messages stay."""
        if self.edit_index is not None:
            del self.messages[self.edit_index :]
            self.edit_index = None
        images = list(self.attached)
        self.attached.clear()
        self.messages.append(ChatMessage(role="user", content=text, images=images))
        return len(self.messages) - 1

    def drop_reply(self, index: int | None = None) -> int | None:
        """Drop the reply at ``index`` (default: the last; a user message: the reply before
        it) and all after it, to ask again; how many messages stay (``None``: no reply)."""
        if index is None:
            index = len(self.messages) - 1
        while index >= 0 and self.messages[index].role != "assistant":
            index -= 1
        if index < 0:
            return None
        del self.messages[index:]
        return index

    # -- the reply -------------------------------------------------------------------------
    def start_reply(self) -> dict[str, Any]:
        """Add an empty reply to stream into, save, and return the request body."""
        self.conversation.system_prompt = self.defaults.system_prompt
        payload = {"messages": self.conversation.api_messages(), **request_params(self.defaults)}
        self.messages.append(ChatMessage(role="assistant", content=""))
        self.reply = ""
        self._replying = self.conversation
        self.save()
        return payload

    def add_delta(self, text: str) -> None:
        self.reply += text

    def replying_message(self) -> ChatMessage | None:
        """The reply being streamed (thinking and tool calls go on it as they come)."""
        return self._replying.messages[-1] if self._replying is not None else None

    def add_thinking(self, text: str) -> None:
        if (message := self.replying_message()) is not None:
            message.thinking += text

    def add_call(self, record: dict[str, Any]) -> None:
        if (message := self.replying_message()) is not None:
            message.calls.append(record)

    def finish_reply(self, meta: dict[str, Any]) -> None:
        """The reply ended (``meta``: timings, ``cancelled`` or ``error``): keep and save it,
        in its own conversation if another one was opened meanwhile."""
        conversation, self._replying = self._replying, None
        if conversation is None:
            return
        message = conversation.messages[-1]
        message.content = self.reply
        message.steps = list(meta.pop("steps", []))
        message.meta = meta
        if conversation is self.conversation:
            self.save()
        else:
            self.store.save(conversation)
