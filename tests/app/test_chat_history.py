"""Saved conversations are listed, reopen with their settings, and can be deleted (no server)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.pages.chat_page import ChatPage
from app.storage.chat_store import ChatMessage, ChatStore, Conversation


def test_history_reopen_and_delete(window: MainWindow, qtbot: QtBot) -> None:
    chat = window.page("chat")
    assert isinstance(chat, ChatPage)
    window.show_page("chat")
    assert chat.history.count() == 1 and chat.history.item(0).text() == "No saved chats yet"
    assert chat.banner.isVisibleTo(chat) and "not running" in chat.banner.label.text()
    assert not chat.send_button.isEnabled()

    conv = Conversation(
        system_prompt="Answer in French.",
        params={"temperature": 1.3, "top_k": 7, "max_tokens": 99, "seed": 42},
    )
    reply = "Bonjour **!**\n\n```python\nx = 1\n```"
    conv.messages += [
        ChatMessage(role="user", content="Hello there"),
        ChatMessage(
            role="assistant",
            content=reply,
            meta={"tokens": 9, "tokens_per_s": 30.5, "ttft_ms": 120.0},
        ),
    ]
    conv.auto_title()
    ChatStore().save(conv)
    chat.refresh_history()
    item = chat.history.item(0)
    assert item.text() == "Hello there"
    rect = chat.history.visualItemRect(item)
    qtbot.mouseClick(chat.history.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert chat.session.conversation.id == conv.id
    assert chat.system_edit.toPlainText() == "Answer in French."
    assert chat.temp_spin.value() == 1.3 and chat.top_k_spin.value() == 7
    assert chat.max_tokens_spin.value() == 99 and chat.seed_spin.value() == 42
    bubbles = chat.transcript.bubbles
    assert len(bubbles) == 2
    assert "<strong>!</strong>" in bubbles[1].body.text()
    assert bubbles[1].meta.text() == "9 tokens · 30.5 tok/s · TTFT 120 ms"
    assert chat.title_label.full_text() == "Hello there"

    qtbot.mouseClick(chat.new_button, Qt.MouseButton.LeftButton)
    assert chat.session.conversation.id != conv.id and not chat.transcript.bubbles
    assert chat.transcript.currentWidget() is chat.transcript.empty

    chat.history.setCurrentRow(0)
    qtbot.mouseClick(chat.delete_button, Qt.MouseButton.LeftButton)
    assert ChatStore().list() == []
    assert chat.history.item(0).text() == "No saved chats yet"
