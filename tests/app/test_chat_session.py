"""The Chat page's conversation, without Qt: the request a reply sends, edit-and-resend,
regenerate, a streamed reply saved where it belongs, and what the page says about the server."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.page_models.chat_session import (
    ChatSession,
    request_params,
    served_label,
    server_notice,
    with_params,
)
from app.storage.app_settings import ChatDefaults, ServerKnobs
from app.storage.chat_store import ChatMessage, ChatStore, Conversation


def _session(tmp_path: Path, **defaults: object) -> ChatSession:
    return ChatSession(ChatStore(tmp_path), ChatDefaults.model_validate(defaults))


def test_the_request_carries_the_settings_and_a_seed_only_when_fixed() -> None:
    params = request_params(ChatDefaults(temperature=0.2, top_k=0, max_tokens=64))
    assert params == {
        "temperature": 0.2,
        "top_p": 0.95,
        "top_k": 0,
        "min_p": 0.05,
        "repeat_penalty": 1.0,
        "max_tokens": 64,
    }
    assert request_params(ChatDefaults(seed=7))["seed"] == 7
    saved = with_params(ChatDefaults(temperature=0.9, seed=3), {"top_k": 7, "temperature": "x"})
    assert saved.top_k == 7 and saved.temperature == 0.9  # only numbers are taken
    assert saved.seed == -1  # none saved: random


def test_a_streamed_reply_is_saved_with_the_conversation(tmp_path: Path) -> None:
    session = _session(tmp_path, system_prompt="Be brief.", max_tokens=32, seed=5)
    assert session.add_user_message("Hello there, model") == 0
    payload = session.start_reply()
    assert payload["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello there, model"},
    ]
    assert payload["max_tokens"] == 32 and payload["seed"] == 5
    assert [m.role for m in session.messages] == ["user", "assistant"]
    session.add_delta("Hi")
    session.add_delta("!")
    session.finish_reply({"tokens": 2})
    saved = session.store.load(session.conversation.id)
    assert saved.title == "Hello there, model"
    assert saved.messages[-1].content == "Hi!" and saved.messages[-1].meta == {"tokens": 2}
    assert saved.params["seed"] == 5 and saved.system_prompt == "Be brief."
    assert session.has_reply


def test_a_reply_finishing_after_another_chat_opened_goes_to_its_own(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session.add_user_message("first chat")
    session.start_reply()
    first = session.conversation
    session.new()  # the user starts another chat while the reply streams
    session.add_delta("late text")
    session.finish_reply({"cancelled": True})
    assert session.messages == []
    assert session.store.load(first.id).messages[-1].content == "late text"


def test_edit_and_resend_replaces_the_message_and_what_followed(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session.conversation.messages += [
        ChatMessage(role="user", content="one"),
        ChatMessage(role="assistant", content="1"),
        ChatMessage(role="user", content="two"),
        ChatMessage(role="assistant", content="2"),
    ]
    assert session.begin_edit(9) is None and session.edit_index is None
    assert session.begin_edit(2) == "two"
    assert session.add_user_message("deux") == 2
    assert [m.content for m in session.messages] == ["one", "1", "deux"]
    assert session.edit_index is None
    assert session.add_user_message("trois") == 3  # no longer editing: appended


def test_regenerate_drops_the_reply_asked_for_and_what_followed(tmp_path: Path) -> None:
    session = _session(tmp_path)
    assert session.drop_reply() is None  # nothing to ask again
    session.conversation.messages += [
        ChatMessage(role="user", content="one"),
        ChatMessage(role="assistant", content="1"),
        ChatMessage(role="user", content="two"),
        ChatMessage(role="assistant", content="2"),
    ]
    assert session.drop_reply(2) == 1  # a user message: the reply before it
    assert [m.content for m in session.messages] == ["one"]
    session.conversation.messages.append(ChatMessage(role="assistant", content="1"))
    assert session.drop_reply() == 1 and [m.content for m in session.messages] == ["one"]


def test_open_gives_the_saved_settings_and_delete_says_if_it_was_open(tmp_path: Path) -> None:
    store = ChatStore(tmp_path)
    conv = Conversation(system_prompt="French.", params={"temperature": 1.3, "seed": 42})
    store.save(conv)
    session = ChatSession(store, ChatDefaults(top_k=9))
    shown = session.open(conv.id)
    assert session.conversation.id == conv.id
    assert shown.system_prompt == "French." and shown.temperature == 1.3 and shown.seed == 42
    assert shown.top_k == 9  # not saved: as it was
    other = Conversation()
    store.save(other)
    assert session.delete(other.id) is False
    assert session.delete(conv.id) is True
    assert [c.id for c in store.list()] == []


def test_the_banner_and_model_name_follow_the_server() -> None:
    assert server_notice("running") is None
    starting = server_notice("starting")
    assert starting is not None and starting.level == "info" and starting.action is None
    crashed = server_notice("crashed")
    assert crashed is not None and crashed.action == "Restart server"
    assert "Your conversation is kept" in crashed.text
    stopped = server_notice("stopped")
    assert stopped is not None and stopped.action == "Start server"
    assert served_label("running", None) == "● SmolLM2-135M-Instruct"
    assert served_label("running", ServerKnobs(model="/m/My-Q4.gguf")) == "● My-Q4.gguf"
    assert served_label("starting", None) == ""
    assert served_label("crashed", None) is None  # the name stays


def test_images_go_with_their_message_are_saved_and_survive_edit_and_regenerate(
    tmp_path: Path,
) -> None:
    from app.page_models.chat_images import AttachError, chat_image
    from tests.media.image_files import picture

    session = _session(tmp_path, system_prompt="")
    png = chat_image(picture("red-square"), "red.png")
    assert png.mime == "image/png"
    with pytest.raises(AttachError, match="not a PNG"):
        chat_image(b"%PDF-1.7", "doc.pdf")
    session.attached.append(png)
    session.add_user_message("What is this?")
    assert session.attached == []  # the composer's attachments went with the message
    payload = session.start_reply()
    assert payload["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": png.data_url()}},
                {"type": "text", "text": "What is this?"},
            ],
        }
    ]
    session.finish_reply({"tokens": 1})
    assert session.store.load(session.conversation.id).messages[0].images == [png]
    assert session.drop_reply() == 1  # regenerate: the message and its image stay
    assert session.messages[0].images == [png]
    assert session.begin_edit(0) == "What is this?"
    assert session.attached == [png]  # editing puts the image back in the composer
    session.add_user_message("And now?")
    assert session.messages[-1].images == [png] and session.attached == []
