"""The Server page's RPC section on real components: the Workers list probes real
``quantdesk worker`` processes on loopback ports, a dead port reads as unreachable, the
list reaches ``serve`` as ``--rpc``, and "Share this machine" runs a real worker that
stops with its toggle and with the window."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.page_models.rpc_workers import (
    check_tensor_split,
    normalize_endpoint,
    parse_workers,
    worker_arguments,
)
from app.page_models.server_command import serve_arguments
from app.pages.server_page import ServerPage
from app.storage.app_settings import AppSettings
from app.workers.share_process import ShareState
from backend.llama.rpc_errors import RpcEndpointError
from backend.llama.rpc_probe import probe_worker
from tests.rpc.conftest import Worker, free_port, needs_rpc


def dead_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    return free_port()


@pytest.fixture
def worker(start_worker: Callable[..., Worker]) -> str:
    """A real ``quantdesk worker`` on a free loopback port, answering its handshake."""
    return start_worker().endpoint


def server_page(window: MainWindow) -> ServerPage:
    window.show_page("server")
    page = window.page("server")
    assert isinstance(page, ServerPage)
    return page


def row_texts(page: ServerPage, endpoint: str) -> tuple[str, str]:
    box = page.workers_box
    row = box.workers().index(endpoint)
    state, memory = box.table.item(row, 1), box.table.item(row, 2)
    return (state.text() if state else "", memory.text() if memory else "")


# -- without Qt ------------------------------------------------------------------------------
def test_endpoints_are_checked_as_llama_cpp_parses_them() -> None:
    assert normalize_endpoint(" 192.168.1.20:50053 ") == "192.168.1.20:50053"
    assert normalize_endpoint("gpu-box") == "gpu-box:50052"  # the worker's default port
    for bad in ("", "host:0", "host:port", ":50052", "a b:1"):
        with pytest.raises(ValueError, match=r"is not (host:port|a host name)"):
            normalize_endpoint(bad)
    assert parse_workers("a:1, b:2,") == ["a:1", "b:2"]
    assert parse_workers(None) == []


def test_tensor_split_is_validated_as_serve_validates_it() -> None:
    assert check_tensor_split(" ") is None
    assert check_tensor_split("3, 1") == "3,1"
    with pytest.raises(ValueError, match="proportions"):
        check_tensor_split("3,x")


def test_the_status_line_says_the_model_is_split_across_workers() -> None:
    from app.page_models.server_status import serving_detail
    from app.storage.app_settings import ServerKnobs

    knobs = ServerKnobs(model="default", ctx_size=4096, parallel=1)
    assert "RPC" not in serving_detail(knobs, 7)
    two = knobs.model_copy(update={"rpc": "10.0.0.2:50052,10.0.0.3:50052"})
    assert serving_detail(two, 7).endswith("· with 2 RPC workers · pid 7")


def test_sharing_binds_loopback_unless_other_machines_are_allowed() -> None:
    assert worker_arguments(50052, False) == ["worker", "-H", "127.0.0.1", "-p", "50052"]
    remote = worker_arguments(50060, True)
    assert remote[:3] == ["worker", "-H", "0.0.0.0"] and "--allow-remote" in remote


def test_settings_saved_before_the_rpc_section_still_load(tmp_path: Path) -> None:
    old = tmp_path / "gui-settings.json"
    old.write_text(json.dumps({"server": {"ctx_size": 2048}, "recent_models": []}))
    loaded = AppSettings.load(old)
    assert loaded.server.ctx_size == 2048
    assert loaded.server.rpc is None and loaded.share.port == 50052
    assert not loaded.share.allow_remote
    loaded.server.rpc = "10.0.0.2:50052,10.0.0.3:50052"
    loaded.share.port = 50070
    loaded.save(old)
    again = AppSettings.load(old)
    assert again.server.rpc == "10.0.0.2:50052,10.0.0.3:50052" and again.share.port == 50070


# -- the page, with real workers -------------------------------------------------------------
@needs_rpc
def test_workers_list_probes_a_real_worker_and_a_dead_port(
    qtbot: QtBot, window: MainWindow, worker: str
) -> None:
    page = server_page(window)
    box = page.workers_box
    dead = f"127.0.0.1:{dead_port()}"
    for endpoint in (worker, dead):
        box.endpoint_edit.setText(endpoint)
        qtbot.mouseClick(box.add_button, qtbot_left())
    assert box.workers() == [worker, dead]
    qtbot.waitUntil(lambda: row_texts(page, worker)[0] == "ready", timeout=30_000)
    qtbot.waitUntil(lambda: row_texts(page, dead)[0] == "unreachable", timeout=30_000)
    memory = row_texts(page, worker)[1]
    assert "free" in memory and "1 device" in memory, memory
    assert row_texts(page, dead)[1] == ""
    box.table.selectRow(1)
    assert "unreachable" in box.detail_label.text() and dead in box.detail_label.text()

    # the list is the rpc knob: saved with the settings and passed to serve as --rpc
    knobs = page.knobs()
    assert knobs.rpc == f"{worker},{dead}"
    assert window.settings.server.rpc == knobs.rpc
    argv = serve_arguments(knobs, Path("port"))
    assert argv[argv.index("--rpc") + 1] == f"{worker},{dead}"

    box.split_edit.setText("3,1")
    box.split_mode_combo.setCurrentText("row")
    argv = serve_arguments(page.knobs(), Path("port"))
    assert argv[argv.index("--tensor-split") + 1] == "3,1"
    assert argv[argv.index("--split-mode") + 1] == "row"
    box.split_edit.setText("3,x")  # not a split: the last good one stays
    assert page.knobs().tensor_split == "3,1"

    box.table.selectRow(1)
    qtbot.mouseClick(box.remove_button, qtbot_left())
    assert box.workers() == [worker]
    assert "--rpc" in serve_arguments(page.knobs(), Path("port"))
    box.table.selectRow(0)
    qtbot.mouseClick(box.remove_button, qtbot_left())
    assert page.knobs().rpc is None
    assert "--rpc" not in serve_arguments(page.knobs(), Path("port"))


def test_a_typo_is_said_and_not_added(qtbot: QtBot, window: MainWindow) -> None:
    box = server_page(window).workers_box
    box.endpoint_edit.setText("gpu-box:port")
    qtbot.mouseClick(box.add_button, qtbot_left())
    assert box.workers() == []
    assert "not host:port" in box.detail_label.text()


def qtbot_left() -> object:
    from PySide6.QtCore import Qt

    return Qt.MouseButton.LeftButton


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@needs_rpc
def test_share_toggle_runs_a_worker_that_answers_and_stops_it(
    qtbot: QtBot, window: MainWindow
) -> None:
    page = server_page(window)
    share = page.share_box
    port = free_port()
    share.port_spin.setValue(port)
    assert window.settings.share.port == port
    assert "127.0.0.1" in share.note_label.text() and share.warning.isHidden()

    share.toggle.setChecked(True)
    supervisor = window.context.share
    qtbot.waitUntil(lambda: supervisor.state is ShareState.SHARING, timeout=90_000)
    pid = supervisor.pid()
    assert pid is not None
    probe = probe_worker(f"127.0.0.1:{port}", timeout_s=5.0)
    assert probe.devices and probe.free_bytes > 0
    assert f"127.0.0.1:{port}" in share.state_label.text()
    assert not share.port_spin.isEnabled()  # the port is fixed while it shares

    share.toggle.setChecked(False)
    qtbot.waitUntil(lambda: supervisor.state is ShareState.STOPPED, timeout=30_000)
    qtbot.waitUntil(lambda: gone(pid), timeout=30_000)
    with pytest.raises(RpcEndpointError, match="unreachable"):
        probe_worker(f"127.0.0.1:{port}", timeout_s=2.0)
    assert not share.toggle.isChecked() and share.port_spin.isEnabled()


@needs_rpc
def test_closing_the_window_stops_the_shared_worker(qtbot: QtBot, window: MainWindow) -> None:
    page = server_page(window)
    port = free_port()
    page.share_box.port_spin.setValue(port)
    page.share_box.toggle.setChecked(True)
    supervisor = window.context.share
    qtbot.waitUntil(lambda: supervisor.state is ShareState.SHARING, timeout=90_000)
    pid = supervisor.pid()
    assert pid is not None
    window.close()
    qtbot.waitUntil(lambda: gone(pid), timeout=30_000)
    with pytest.raises(RpcEndpointError, match="unreachable"):
        probe_worker(f"127.0.0.1:{port}", timeout_s=2.0)


@needs_rpc
def test_allowing_other_machines_warns_plainly_and_a_taken_port_reads_as_failed(
    qtbot: QtBot, window: MainWindow, worker: str
) -> None:
    share = server_page(window).share_box
    share.remote_check.setChecked(True)
    assert share.warning.isVisibleTo(share) and share.note_label.isHidden()
    assert "no password" in share.warning.label.text().lower()
    share.remote_check.setChecked(False)
    assert share.warning.isHidden()

    share.port_spin.setValue(int(worker.rsplit(":", 1)[1]))  # a real worker holds it
    share.toggle.setChecked(True)
    supervisor = window.context.share
    qtbot.waitUntil(lambda: supervisor.state is ShareState.FAILED, timeout=90_000)
    assert "worker stopped" in share.state_label.text()
    assert not share.toggle.isChecked()


@needs_rpc
def test_a_busy_worker_reads_as_busy_while_the_window_stays_responsive(
    qtbot: QtBot, window: MainWindow, worker: str
) -> None:
    page = server_page(window)
    box = page.workers_box
    host, port = worker.rsplit(":", 1)
    # another client holds the worker (it serves one at a time): it accepts, answers nothing
    with socket.create_connection((host, int(port)), timeout=5):
        box.endpoint_edit.setText(worker)
        qtbot.mouseClick(box.add_button, qtbot_left())
        # a probe on the GUI thread would block the event loop until it gave up ("busy")
        seen: list[str] = []
        QTimer.singleShot(50, lambda: seen.append(row_texts(page, worker)[0]))
        qtbot.waitUntil(lambda: bool(seen), timeout=30_000)
        assert seen == ["testing…"]
        qtbot.waitUntil(lambda: row_texts(page, worker)[0] == "busy", timeout=60_000)
    assert "did not answer" in box.detail_label.text()
    qtbot.mouseClick(box.test_button, qtbot_left())  # free again once the other client left
    qtbot.waitUntil(lambda: row_texts(page, worker)[0] == "ready", timeout=30_000)


@needs_rpc
def test_serving_with_a_dead_worker_says_which_and_marks_its_row(
    qtbot: QtBot, window: MainWindow
) -> None:
    from app.workers.server_process import ServerState

    page = server_page(window)
    dead = f"127.0.0.1:{dead_port()}"
    page.workers_box.endpoint_edit.setText(dead)
    qtbot.mouseClick(page.workers_box.add_button, qtbot_left())
    qtbot.waitUntil(lambda: row_texts(page, dead)[0] == "unreachable", timeout=30_000)
    page.start_server()
    server = window.context.server
    qtbot.waitUntil(lambda: server.state is ServerState.CRASHED, timeout=180_000)
    assert server.last_error is not None and server.last_error.kind == "rpc_worker"
    text = page.banner.label.text()
    assert text.startswith(f"RPC worker {dead} is unreachable"), text
    assert "Workers list" in text
    assert page.rpc_tabs.currentWidget() is page.workers_box
