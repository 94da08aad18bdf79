"""The window against a real library server (``quantdesk serve`` without -m) on SmolLM2:
the chosen model loads through POST /models/load and keeps its knobs per model, the Chat
page switches to another library model that loads on demand, the dashboard filters by model
(RAM: the model's own server, or the router and every model server together), the Server
page's fit bars stack the resident models and its resident models table loads, pins and
unloads, the Models page's Load puts a model beside the others, and the serving pages keep
their layout at 1280x720 and 1440x900."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.page_models.router_models import ModelCard
from app.pages.chat_page import ChatPage
from app.pages.dashboard_page import DashboardPage
from app.pages.models_page import ModelsPage
from app.pages.server_page import ServerPage
from app.workers.server_process import ServerState
from backend.settings.default_model import DEFAULT_MODEL_ID
from backend.settings.model_settings_store import ModelSettingsStore
from tests.app.layout_check import layout_problems

START_TIMEOUT_MS = 180_000
LOAD_TIMEOUT_MS = 180_000
GiB = float(1 << 30)


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


def _layout_problems(window: MainWindow, qtbot: QtBot, key: str) -> dict[str, list[str]]:
    """Overlapping, clipped or squeezed widgets of page ``key`` at 1280x720 and 1440x900."""
    problems: dict[str, list[str]] = {}
    for width, height in ((1280, 720), (1440, 900)):
        window.resize(width, height)
        window.show_page(key)
        qtbot.wait(400)
        found = layout_problems(window)
        if found:
            problems[f"{key} at {width}x{height}"] = found
    return problems


def _ram_name(dash: DashboardPage) -> str:
    """What the dashboard's RAM chart calls its server line."""
    legend = dash.plots["ram"].getPlotItem().legend
    return str(legend.items[0][1].text) if legend is not None and legend.items else ""


def _stacked(page: ServerPage) -> set[str]:
    """The models the Server page's RAM bar stacks."""
    stacks = page.fit_bar.stacks
    return {s.model_id for s in stacks[0].segments} if stacks is not None else set()


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
    # RAM: beta's own server process, as its snapshot reads it
    qtbot.waitUntil(lambda: _ram_name(dash) == "model RSS", timeout=10_000)
    assert dash.buffers["ram"].last(0) == dash._latest.system.rss_bytes / GiB
    beta_rss = dash._latest.system.rss_bytes
    assert dash.filter_model(None)
    qtbot.waitUntil(
        lambda: dash._latest is not None and dash._latest.model.id == "2 models", timeout=10_000
    )
    # RAM of every model: the whole server, the router and both model servers together
    qtbot.waitUntil(lambda: _ram_name(dash) == "router + 2 models", timeout=10_000)
    memory = window.context.latest_memory
    assert memory is not None and memory.children == 2
    assert dash.buffers["ram"].last(0) == memory.total / GiB
    models_rss = dash._latest.system.rss_bytes  # the two model servers' snapshots added up
    assert memory.main > 0 and memory.total > models_rss > beta_rss
    assert "The whole server" in dash.chart_cards["ram"].toolTip()
    assert not _layout_problems(window, qtbot, "dashboard")
    assert not _layout_problems(window, qtbot, "chat")

    # -- the resident models table pins and unloads ---------------------------------------
    window.show_page("server")
    # the fit bars stack the resident models: the chosen (embedded) one and beta, each
    # with the memory the server counts for it (no GPU here: all of it RAM)
    qtbot.waitUntil(lambda: _stacked(page) >= {DEFAULT_MODEL_ID, "beta"}, timeout=10_000)
    assert page.fit_bar.stacks is not None
    ram, vram = page.fit_bar.stacks
    sizes = {s.model_id: (s.size_bytes, s.role) for s in ram.segments}
    beta_card = _card(window, "beta")
    assert isinstance(beta_card, ModelCard) and beta_card.memory_bytes
    if vram is None:
        assert sizes["beta"] == (beta_card.memory_bytes, "resident")
    assert sizes[DEFAULT_MODEL_ID][1] == "chosen"
    assert "beta" in page.fit_bar.legend.text()
    assert page.fit_bar.plan.text == f"{DEFAULT_MODEL_ID} is loaded beside 1 other model."
    # another model chosen: it is stacked after them, with what loading it would do
    delta = beta.parent / "delta.gguf"
    os.symlink(beta.resolve(), delta)
    page.set_model(str(delta))
    qtbot.waitUntil(lambda: "delta" in _stacked(page), timeout=10_000)
    assert page.fit_bar.stacks is not None
    ram, _ = page.fit_bar.stacks
    assert [s.role for s in ram.segments if s.model_id == "delta"] == ["new"]
    assert "delta&nbsp;(to&nbsp;load)" in page.fit_bar.legend.text()
    assert page.fit_bar.plan.kind in ("fits", "evicts", "refused") and page.fit_bar.plan.text
    # no restart needed for it: the Status box says how to load it beside the others
    assert page.status.detail_label.text().startswith("delta is not loaded: Load")
    assert not _layout_problems(window, qtbot, "server")  # the legend and plan included
    page.set_model("default")
    qtbot.waitUntil(lambda: page.fit_bar.plan.kind == "loaded", timeout=10_000)
    assert "2 parallel" in page.status.detail_label.text()  # what it serves, as before
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
