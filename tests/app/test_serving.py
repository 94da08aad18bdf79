"""Drive the real widgets against the real server on SmolLM2: start, chat, watch, crash, restart."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import psutil
import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.pages.chat_page import ChatPage
from app.pages.dashboard_page import DashboardPage
from app.pages.server_page import ServerPage
from app.storage.chat_store import ChatStore
from app.workers.server_process import ServerState
from backend.core.units import human_bytes
from backend.engine.stats_model import StatsSnapshot
from tests.media.image_files import picture

START_TIMEOUT_MS = 180_000
REPLY_TIMEOUT_MS = 120_000


def _start(window: MainWindow, qtbot: QtBot) -> ServerPage:
    page = window.page("server")
    assert isinstance(page, ServerPage)
    window.show_page("server")
    with qtbot.waitSignal(window.context.server.server_started, timeout=START_TIMEOUT_MS):
        qtbot.mouseClick(page.status.start_button, Qt.MouseButton.LeftButton)
    return page


def _wait_reply(chat: ChatPage, qtbot: QtBot) -> None:
    qtbot.waitUntil(lambda: not chat.is_streaming(), timeout=REPLY_TIMEOUT_MS)


@pytest.mark.slow
def test_serve_chat_watch_crash_restart(window: MainWindow, qtbot: QtBot) -> None:
    window.context.poll_interval_s = 0.1
    server = window.context.server
    server_page = _start(window, qtbot)
    assert server.state is ServerState.RUNNING
    assert server_page.status.light.state == "running"
    assert server_page.endpoint.url_edit.text() == f"http://127.0.0.1:{server.port}/v1"
    assert f":{server.port}/v1" in server_page.endpoint.snippet_edits[0].toPlainText()
    assert "ready at" in server_page.server_log.log_view.toPlainText()
    assert (
        not server_page.status.start_button.isEnabled()
        and server_page.status.stop_button.isEnabled()
    )
    server_page.parallel_spin.setValue(3)
    assert "Restart to apply" in server_page.status.detail_label.text()
    server_page.parallel_spin.setValue(2)
    assert "2 parallel" in server_page.status.detail_label.text()

    # -- a chat reply streams in while the dashboard watches -------------------------------
    chat = window.page("chat")
    dash = window.page("dashboard")
    assert isinstance(chat, ChatPage) and isinstance(dash, DashboardPage)
    window.show_page("chat")
    chat.temp_spin.setValue(0.0)
    chat.max_tokens_spin.setValue(96)
    running_seen: list[int] = []
    in_flight: list[int] = []
    deltas: list[str] = []

    def on_stats(stats: StatsSnapshot, _received_at: float) -> None:
        running_seen.append(stats.requests.running)

    window.context.stats_received.connect(on_stats)
    stats_before = dash.stats_count
    qtbot.keyClicks(chat.composer, "Count from 1 to 60, separated by commas.")
    qtbot.mouseClick(chat.send_button, Qt.MouseButton.LeftButton)
    assert chat.is_streaming()
    assert chat.worker is not None
    chat.worker.yielded.connect(deltas.append)
    window.show_page("dashboard")
    qtbot.waitUntil(lambda: len(deltas) >= 3, timeout=REPLY_TIMEOUT_MS)
    in_flight.append(server.requests_in_flight())
    _wait_reply(chat, qtbot)

    reply = chat.session.messages[-1]
    assert reply.role == "assistant" and len(reply.content) > 10
    assert "".join(deltas) == reply.content  # the bubble got exactly the streamed text
    assert chat.transcript.bubbles[-1].text == reply.content
    assert reply.meta["tokens"] > 5 and reply.meta["ttft_ms"] > 0
    assert reply.meta["tokens_per_s"] > 0
    assert "tok/s" in chat.reply_stats.text() and "TTFT" in chat.reply_stats.text()
    assert in_flight[0] >= 1
    assert max(running_seen) >= 1, "the dashboard never saw the request running"
    assert dash.stats_count > stats_before
    # the next redraw shows the finished request (stats and redraws are asynchronous)
    qtbot.waitUntil(lambda: dash.tiles["done"].value.text() == "1", timeout=10_000)
    assert dash.redraw_count > 0
    assert dash.vram_stack.currentWidget() is dash.no_gpu_label or dash._gpu_names
    # the Server page says how the model's CPU weights run, as the server reports it
    path = window.context.latest_stats.model.cpu_path if window.context.latest_stats else "?"
    cpu_line = server_page.status.cpu_label.text()
    assert cpu_line.startswith(f"CPU path: {path}") and path in ("AMX", "repack", "plain")
    saved = ChatStore().list()
    assert len(saved) == 1 and saved[0].messages[-1].content == reply.content
    # a text-only model says so as soon as an image is attached, and nothing is attached
    chat.attachments.attach(picture("red-square"), "red.png")
    assert chat.session.attached == [] and not chat.attachments.strip.isVisible()
    assert "cannot read images" in chat.banner.label.text()

    # -- edit-and-resend replaces the message and the reply after it ------------------------
    window.show_page("chat")
    chat.max_tokens_spin.setValue(8)
    qtbot.mouseClick(chat.transcript.bubbles[0].action_button, Qt.MouseButton.LeftButton)
    assert chat.composer.toPlainText().startswith("Count from 1 to 60")
    chat.composer.setPlainText("Say hello.")
    qtbot.mouseClick(chat.send_button, Qt.MouseButton.LeftButton)
    _wait_reply(chat, qtbot)
    assert [m.role for m in chat.session.messages] == ["user", "assistant"]
    assert chat.session.messages[0].content == "Say hello."
    assert chat.session.messages[1].content

    # -- stop cuts a long reply short -------------------------------------------------------
    chat.max_tokens_spin.setValue(400)
    chat.composer.setPlainText("Write a long story about a lighthouse keeper.")
    qtbot.mouseClick(chat.send_button, Qt.MouseButton.LeftButton)
    assert chat.worker is not None
    got: list[str] = []
    chat.worker.yielded.connect(got.append)
    qtbot.waitUntil(lambda: len(got) >= 2, timeout=REPLY_TIMEOUT_MS)
    qtbot.mouseClick(chat.stop_button, Qt.MouseButton.LeftButton)
    _wait_reply(chat, qtbot)
    stopped = chat.session.messages[-1]
    assert stopped.meta.get("cancelled") is True
    assert stopped.meta["tokens"] < 400

    # -- killing the server is detected; Restart brings it back; the chat survives ----------
    pid = server.pid()
    assert pid is not None
    with qtbot.waitSignal(server.server_crashed, timeout=30_000) as crashed:
        os.kill(pid, signal.SIGKILL)
    assert "killed or crashed" in str(crashed.args[0])
    assert server.state is ServerState.CRASHED
    assert server_page.status.light.state == "crashed"
    assert server_page.banner.isVisibleTo(server_page)
    assert chat.banner.isVisibleTo(chat) and "Your conversation is kept" in chat.banner.label.text()
    assert not chat.send_button.isEnabled()
    messages_before = [m.content for m in chat.session.messages]
    with qtbot.waitSignal(server.server_started, timeout=START_TIMEOUT_MS):
        qtbot.mouseClick(server_page.banner.button, Qt.MouseButton.LeftButton)
    new_pid = server.pid()
    assert new_pid is not None and new_pid != pid
    assert [m.content for m in chat.session.messages] == messages_before

    # -- regenerate works against the restarted server --------------------------------------
    chat.max_tokens_spin.setValue(8)
    qtbot.mouseClick(chat.regen_button, Qt.MouseButton.LeftButton)
    assert chat.is_streaming()  # the last reply is asked for again
    _wait_reply(chat, qtbot)
    assert len(chat.session.messages) == len(messages_before)
    assert chat.session.messages[-1].content
    assert not chat.session.messages[-1].meta.get("error")

    # -- closing while a request runs asks first; "No" keeps everything running -------------
    chat.max_tokens_spin.setValue(400)
    chat.composer.setPlainText("Write a long story about a lighthouse keeper.")
    qtbot.mouseClick(chat.send_button, Qt.MouseButton.LeftButton)
    assert chat.worker is not None
    first: list[str] = []
    chat.worker.yielded.connect(first.append)
    qtbot.waitUntil(lambda: len(first) >= 1, timeout=REPLY_TIMEOUT_MS)
    questions: list[str] = []

    def answer_no() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            questions.append(box.text())
            box.button(QMessageBox.StandardButton.No).click()
        else:
            QTimer.singleShot(50, answer_no)

    window.confirm_close = True
    QTimer.singleShot(50, answer_no)
    assert window.close() is False
    assert questions and "request" in questions[0]
    assert window.isVisible() and server.state is ServerState.RUNNING
    chat.stop()
    _wait_reply(chat, qtbot)
    window.confirm_close = False

    # -- closing the window stops the server ------------------------------------------------
    window.close()
    assert server.state is ServerState.STOPPED
    assert not psutil.pid_exists(new_pid) or psutil.Process(new_pid).status() == "zombie"


def test_missing_model_is_reported_in_plain_words(
    window: MainWindow, qtbot: QtBot, tmp_path: Any
) -> None:
    page = window.page("server")
    assert isinstance(page, ServerPage)
    page.set_model(str(tmp_path / "nope.gguf"))
    assert "cannot be read" in page.model_picker.info.text()
    with qtbot.waitSignal(window.context.server.server_crashed, timeout=60_000) as crashed:
        qtbot.mouseClick(page.status.start_button, Qt.MouseButton.LeftButton)
    assert "could not be found" in str(crashed.args[0])
    assert window.context.server.last_error is not None
    assert window.context.server.last_error.kind == "model_not_found"
    assert page.banner.isVisibleTo(page)


# Runs the real CLI under a 2.5 GB address-space limit, so llama.cpp really fails to allocate.
_LIMITED = (
    "import os, resource, sys; "
    "resource.setrlimit(resource.RLIMIT_AS, (2_500_000_000, 2_500_000_000)); "
    "os.execv(sys.executable, [sys.executable, '-m', 'backend.entrypoints.main', *sys.argv[1:]])"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS semantics")
def test_out_of_memory_on_load_says_so_and_shows_the_estimate(qtbot: QtBot, settings: Any) -> None:
    from app.app_context import AppContext
    from app.workers.server_process import ServerSupervisor

    settings.server.ctx_size = 262_144  # ~6 GiB of f16 KV for SmolLM2
    supervisor = ServerSupervisor(launcher=lambda: [sys.executable, "-c", _LIMITED])
    context = AppContext(settings, supervisor)
    win = MainWindow(settings, context)
    win.confirm_close = False
    qtbot.addWidget(win)
    page = win.page("server")
    assert isinstance(page, ServerPage)
    with qtbot.waitSignal(supervisor.server_crashed, timeout=120_000) as crashed:
        qtbot.mouseClick(page.status.start_button, Qt.MouseButton.LeftButton)
    assert "ran out of memory" in str(crashed.args[0])
    assert supervisor.last_error is not None and supervisor.last_error.kind == "oom"
    text = page.banner.label.text()
    view = page.fit_bar.view
    assert view is not None and view.kv_bytes > 5 * 2**30  # 23 KiB/cell x 262k cells
    assert "Estimate for these settings" in text
    assert f"KV cache {human_bytes(view.kv_bytes)}" in text
    assert page.banner.button.text() == "Restart"
    win.close()
