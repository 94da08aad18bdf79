"""The Chat page's tools, in the window: the Tools panel lists mcp.json's servers (a
started one with its tools, a switched-off one, a bad file's error), and a saved reply
that used tools shows its thinking and a card per call, opened with a click."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.pages.chat_page import ChatPage
from app.storage.chat_store import ChatMessage, ChatStore, Conversation
from backend.mcp_tools.mcp_config import default_mcp_path

ROOT = Path(__file__).resolve().parents[2]


def _words_config(word: str) -> dict[str, object]:
    env = {"WORD": word, "PYTHONPATH": str(ROOT)}
    server = {"command": sys.executable, "args": ["-m", "tests.mcp_chat.word_server"], "env": env}
    return {"mcpServers": {"words": server}}


def test_the_tools_panel_lists_the_servers(window: MainWindow, qtbot: QtBot) -> None:
    chat = window.page("chat")
    assert isinstance(chat, ChatPage)
    assert chat.tools_panel.rows == {} and "No MCP servers" in chat.tools_panel.note.text()

    default_mcp_path().write_text(json.dumps(_words_config("qxpanel")), encoding="utf-8")
    chat.tools_panel.reload_requested.emit()  # the panel's "Reload mcp.json"
    box, label = chat.tools_panel.rows["words"]
    assert box.isChecked() and label.text() == "starts when a chat uses it"
    assert chat.tools.start("words") is None  # what the first reply with tools does
    chat._show_tools()
    assert label.text().startswith("ready · secret_word, big_report")
    box.setChecked(False)
    assert chat.tools.enabled() == []

    default_mcp_path().write_text('{"mcpServers": {"notes": {"args": []}}}', encoding="utf-8")
    chat._reload_tools()
    assert chat.tools_panel.rows == {} and '"notes"' in chat.tools_panel.note.text()


def test_a_reply_with_tools_shows_its_thinking_and_its_calls(
    window: MainWindow, qtbot: QtBot
) -> None:
    chat = window.page("chat")
    assert isinstance(chat, ChatPage)
    call = {
        "tool": "words__secret_word",
        "arguments": {"day": "today"},
        "result": "The secret word is qxcard.",
        "is_error": False,
        "denied": False,
        "seconds": 0.2,
    }
    denied = {**call, "result": "The user denied this tool call; it did not run.", "denied": True}
    conv = Conversation()
    conv.messages += [
        ChatMessage(role="user", content="What is the word?"),
        ChatMessage(
            role="assistant",
            content="The word is qxcard.",
            thinking="The user wants the word; the tool has it.",
            calls=[call, denied],
            meta={"tool_calls": 2, "seconds": 1.5},
        ),
    ]
    ChatStore().save(conv)
    chat.open_conversation(conv.id)
    bubble = chat.transcript.bubbles[1]
    assert bubble.thinking.isVisibleTo(bubble)
    assert [c.header.text() for c in bubble.cards] == [
        "Tool words__secret_word (200 ms)",
        "Tool words__secret_word: not run",
    ]
    card = bubble.cards[0]
    assert not card.body.isVisibleTo(card)
    qtbot.mouseClick(card.header, Qt.MouseButton.LeftButton)
    assert card.body.isVisibleTo(card) and "qxcard" in card.body.text()
    assert '"day": "today"' in card.body.text()
    assert bubble.meta.text() == "2 tool calls · 1.5 s"
