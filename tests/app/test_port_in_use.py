"""A port another program holds: said in plain words, fixed with one button, never on first run.

The sockets are real: a listening socket on the port the GUI asks for, and the real
``quantdesk serve`` child failing to bind it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.app_context import AppContext
from app.main_window import MainWindow
from app.page_models.server_command import find_free_port, port_is_free
from app.page_models.server_errors import explain_exit, failure_title
from app.pages.server_page import ServerPage
from app.storage.app_settings import AppSettings
from app.workers.server_process import ServerState
from tests.app.layout_check import layout_problems

START_TIMEOUT_MS = 180_000


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port with another program's socket listening on it, as 8080 often has."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


def test_the_serve_error_line_names_the_port() -> None:
    line = "quantdesk: error: cannot listen on 127.0.0.1:8080: Address already in use"
    error = explain_exit(["loading", line], 1, False, port=9999)
    assert error.kind == "port_in_use" and error.port == 8080
    assert str(error).startswith("Port 8080 is in use by another program")
    v6 = explain_exit(
        ["quantdesk: error: cannot listen on ::1:8081: Address already in use"], 1, False
    )
    assert v6.port == 8081
    bare = explain_exit(["OSError: [Errno 98] Address already in use"], 1, False, port=8082)
    assert bare.port == 8082 and "Port 8082 is in use" in str(bare)
    assert failure_title(error) == "Port 8080 in use"


def test_port_probe_sees_a_listening_socket(taken_port: int) -> None:
    assert not port_is_free("127.0.0.1", taken_port)
    free = find_free_port("127.0.0.1")
    assert free != taken_port and port_is_free("127.0.0.1", free)
    assert port_is_free("127.0.0.1", 0)


@pytest.mark.slow
def test_port_in_use_says_so_and_use_a_free_port_starts(
    window: MainWindow, qtbot: QtBot, taken_port: int, isolated_home: Path
) -> None:
    page = window.page("server")
    assert isinstance(page, ServerPage)
    window.show_page("server")
    window.resize(1280, 720)
    page.port_spin.setValue(taken_port)
    server = window.context.server
    with qtbot.waitSignal(server.server_crashed, timeout=START_TIMEOUT_MS) as crashed:
        qtbot.mouseClick(page.status.start_button, Qt.MouseButton.LeftButton)
    message = str(crashed.args[0])
    assert message.startswith(f"Port {taken_port} is in use by another program")
    assert server.last_error is not None and server.last_error.kind == "port_in_use"
    assert server.last_error.while_starting
    # the status says what happened, and whole: not "Stopped unexpect…"
    assert page.status.state_label.text() == f"Port {taken_port} in use"
    assert "unexpectedly" not in page.status.state_label.text() + window.footer_text.text()
    assert window.footer_text.text() == f"Port {taken_port} in use"
    assert page.banner.isVisibleTo(page)
    assert page.banner.button.text() == "Use a free port"  # not Restart, which can't help
    qtbot.wait(50)
    assert layout_problems(window) == []
    assert not window.page_holder.verticalScrollBar().isVisible()  # fits, banner and all

    with qtbot.waitSignal(server.server_started, timeout=START_TIMEOUT_MS):
        qtbot.mouseClick(page.banner.button, Qt.MouseButton.LeftButton)
    assert server.state is ServerState.RUNNING
    assert server.port is not None and server.port != taken_port
    assert page.port_spin.value() == server.port
    assert window.settings.server.port == server.port
    assert AppSettings.load().server.port == server.port  # saved for the next run
    assert not page.banner.isVisibleTo(page)
    assert window.footer_text.text() == f"Serving on port {server.port}"
    window.close()


@pytest.mark.slow
def test_first_run_takes_a_free_port_instead_of_an_error(
    qtbot: QtBot, taken_port: int, isolated_home: Path
) -> None:
    settings = AppSettings.load()  # no settings file yet: a first run
    settings.server.port = taken_port  # stands in for the default 8080, taken
    settings.server.ctx_size = 1024
    settings.server.parallel = 1
    settings.server.threads = 2
    assert settings.autostart_server
    context = AppContext(settings)
    assert context.first_run
    window = MainWindow(settings, context)
    window.confirm_close = False
    qtbot.addWidget(window)
    window.show()
    server = window.context.server
    with qtbot.waitSignal(server.server_started, timeout=START_TIMEOUT_MS):
        pass  # the window autostarts the server
    page = window.page("server")
    assert isinstance(page, ServerPage)
    assert server.port is not None and server.port != taken_port
    assert page.port_spin.value() == server.port == settings.server.port
    assert AppSettings.load().server.port == server.port
    assert page.banner.isVisibleTo(page)
    assert f"Port {taken_port} is in use by another program" in page.banner.label.text()
    assert f"serves on port {server.port}" in page.banner.label.text()
    window.close()


def test_a_returning_user_keeps_their_port(isolated_home: Path, taken_port: int) -> None:
    AppSettings().save()
    settings = AppSettings.load()
    settings.server.port = taken_port
    context = AppContext(settings)
    assert not context.first_run
    moved: list[tuple[int, int]] = []
    context.port_moved.connect(lambda a, b: moved.append((a, b)))
    context.server.start = lambda knobs: None  # type: ignore[method-assign]
    context.autostart_server()
    assert moved == [] and settings.server.port == taken_port
