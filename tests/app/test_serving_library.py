"""The window against a real library server (``quantdesk serve`` without -m) on SmolLM2:
the chosen model loads through POST /models/load and keeps its knobs per model, the Chat
page switches to another library model that loads on demand, the Server page's resident
models table loads, pins and unloads, the dashboard filters by model, and the Models
page's Load puts a model beside the others."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.pages.chat_page import ChatPage
from app.pages.dashboard_page import DashboardPage
from app.pages.models_page import ModelsPage
from app.pages.server_page import ServerPage
from app.workers.server_process import ServerState
from backend.settings.default_model import DEFAULT_MODEL_ID
from backend.settings.model_settings_store import ModelSettingsStore

START_TIMEOUT_MS = 180_000
LOAD_TIMEOUT_MS = 180_000


@pytest.fixture
def beta(isolated_home: Path, smollm2_path: Path) -> Path:
    """The embedded model again in the library, as 'beta': a second model id."""
    models = isolated_home / "models"
    models.mkdir(exist_ok=True)
    path = models / "beta.gguf"
    try:
        os.symlink(smollm2_path, path)
    except OSError:
        shutil.copyfile(smollm2_path, path)
    return path


def _state(window: MainWindow, model_id: str) -> str | None:
    return window.context.model_state(model_id)


def _card(window: MainWindow, model_id: str) -> object:
    return next((c for c in window.context.latest_models if c.id == model_id), None)


def test_picking_a_model_shows_its_remembered_knobs(
    window: MainWindow, qtbot: QtBot, beta: Path
) -> None:
    ModelSettingsStore().set("beta", {"ctx_size": 2048, "parallel": 1})
    page = window.page("server")
    assert isinstance(page, ServerPage)
    assert page.ctx_spin.value() == 1024  # the fixture's knobs, for the embedded model
    page.set_model(str(beta))
    assert (page.ctx_spin.value(), page.parallel_spin.value()) == (2048, 1)
    assert window.settings.server.ctx_size == 2048  # the settings follow the page


@pytest.mark.slow
def test_library_server_switch_load_pin_unload_filter(
    window: MainWindow, qtbot: QtBot, beta: Path
) -> None:
    window.context.poll_interval_s = 0.1
    server = window.context.server
    ModelSettingsStore().set("beta", {"ctx_size": 768, "parallel": 1})
    page = window.page("server")
    assert isinstance(page, ServerPage)
    window.show_page("server")
    with qtbot.waitSignal(server.server_started, timeout=START_TIMEOUT_MS):
        qtbot.mouseClick(page.status.start_button, Qt.MouseButton.LeftButton)
    assert server.serves_library and server.model_id == DEFAULT_MODEL_ID
    assert "--model" not in page.server_log.log_view.toPlainText().split("\n")[0].split()
    # the Server page's knobs are now the embedded model's, for every load of it
    assert ModelSettingsStore().get(DEFAULT_MODEL_ID)["ctx_size"] == 1024
    qtbot.waitUntil(lambda: _state(window, DEFAULT_MODEL_ID) == "loaded", timeout=10_000)
    qtbot.waitUntil(lambda: page.resident.select(DEFAULT_MODEL_ID), timeout=10_000)
    assert _state(window, "beta") == "unloaded"

    # -- the chat switches to beta, which loads on demand ---------------------------------
    chat = window.page("chat")
    assert isinstance(chat, ChatPage)
    window.show_page("chat")
    qtbot.waitUntil(lambda: chat.model_combo.findData("beta") >= 0, timeout=10_000)
    assert chat.model_combo.isVisible() and chat.chosen_model() == DEFAULT_MODEL_ID
    assert chat.choose_model("beta")
    chat.temp_spin.setValue(0.0)
    chat.max_tokens_spin.setValue(8)
    qtbot.keyClicks(chat.composer, "Say hello.")
    qtbot.mouseClick(chat.send_button, Qt.MouseButton.LeftButton)
    assert chat.reply_stats.text() == "Loading beta…"
    qtbot.waitUntil(lambda: not chat.is_streaming(), timeout=LOAD_TIMEOUT_MS)
    reply = chat.session.messages[-1]
    assert reply.content and not reply.meta.get("error")
    assert window.settings.pages["chat"]["model"] == "beta"
    qtbot.waitUntil(lambda: _state(window, "beta") == "loaded", timeout=10_000)

    # -- the dashboard shows beta alone, loaded with its own remembered knobs -------------
    dash = window.page("dashboard")
    assert isinstance(dash, DashboardPage)
    window.show_page("dashboard")
    qtbot.waitUntil(lambda: dash.filter_model("beta"), timeout=10_000)
    qtbot.waitUntil(
        lambda: dash._latest is not None and dash._latest.model.id == "beta", timeout=10_000
    )
    assert dash._latest is not None
    assert (dash._latest.model.n_ctx, dash._latest.model.n_parallel) == (768, 1)
    assert dash._latest.requests.completed == 1
    assert dash.filter_model(None)
    qtbot.waitUntil(
        lambda: dash._latest is not None and dash._latest.model.id == "2 models", timeout=10_000
    )

    # -- the resident models table pins and unloads ---------------------------------------
    window.show_page("server")
    qtbot.waitUntil(lambda: "Also resident: beta" in page.resident_note.text(), timeout=10_000)
    qtbot.waitUntil(lambda: page.resident.select("beta"), timeout=10_000)
    assert page.resident.pin_button.text() == "Pin"
    qtbot.mouseClick(page.resident.pin_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: getattr(_card(window, "beta"), "pinned", False), timeout=10_000)
    qtbot.waitUntil(lambda: page.resident.pin_button.text() == "Unpin", timeout=10_000)
    qtbot.mouseClick(page.resident.unload_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _state(window, "beta") == "unloaded", timeout=60_000)
    qtbot.waitUntil(lambda: "beta: unloaded" in page.resident.message.text(), timeout=10_000)
    assert page.resident.select("beta")  # still listed: the user acted on it
    assert _state(window, DEFAULT_MODEL_ID) == "loaded"

    # -- a failed request says why ----------------------------------------------------------
    with qtbot.waitSignal(window.context.model_action_failed, timeout=30_000) as failed:
        window.context.load_model("gamma")
    assert failed.args[0] == "gamma" and "does not exist" in failed.args[1]

    # -- the Models page's Load puts beta back beside the embedded model --------------------
    models = window.page("models")
    assert isinstance(models, ModelsPage)
    window.show_page("models")
    qtbot.waitUntil(lambda: any(e.name == "beta" for e in models.library.entries), timeout=20_000)
    entry = next(e for e in models.library.entries if e.name == "beta")
    assert models.library.select_path(entry.path)
    assert models.library.load_button.isEnabled()
    qtbot.mouseClick(models.library.load_button, Qt.MouseButton.LeftButton)
    assert "Loading beta" in models.banner.label.text()
    qtbot.waitUntil(lambda: _state(window, "beta") == "loaded", timeout=LOAD_TIMEOUT_MS)
    assert server.state is ServerState.RUNNING
    window.close()
    assert server.state is ServerState.STOPPED
