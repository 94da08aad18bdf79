"""Supervise the ``quantdesk worker`` child behind the Server page's "Share this machine".

The worker offers this machine's devices to other machines' ``quantdesk serve --rpc``
(llama.cpp's RPC backend). It runs as a child process launched like the server
(:func:`app.page_models.server_command.launcher_prefix`: on Linux through
:mod:`app.workers.child_guard`, so it dies with the window even if the window is killed),
and :meth:`ShareSupervisor.stop_and_wait` ends it when the window closes. It is reported
sharing once it prints that it answers its own handshake.
"""

from __future__ import annotations

import collections
import enum
import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QTimer, Signal

from app.page_models.rpc_workers import READY_MARK, worker_arguments, worker_failure
from app.page_models.server_command import launcher_prefix
from app.workers.quantdesk_process import quantdesk_process, read_lines

log = logging.getLogger(__name__)


class ShareState(enum.StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    SHARING = "sharing"
    STOPPING = "stopping"
    FAILED = "failed"


class ShareSupervisor(QObject):
    """One ``quantdesk worker`` child and its life cycle, reported through signals."""

    state_changed = Signal(str)
    log_line = Signal(str)

    def __init__(
        self, parent: QObject | None = None, launcher: Callable[[], list[str]] = launcher_prefix
    ) -> None:
        super().__init__(parent)
        self._launcher = launcher
        self._process: QProcess | None = None
        self._state = ShareState.STOPPED
        self._partial = ""
        self._tail: collections.deque[str] = collections.deque(maxlen=60)
        self.port: int | None = None
        self.allow_remote = False
        self.last_error = ""

    @property
    def state(self) -> ShareState:
        return self._state

    def is_active(self) -> bool:
        return self._state in (ShareState.STARTING, ShareState.SHARING, ShareState.STOPPING)

    def pid(self) -> int | None:
        if self._process is None:
            return None
        return int(self._process.processId()) or None

    def device_lines(self) -> list[str]:
        """The devices the worker said it offers ('  CPU: ... free of ...')."""
        return [
            line.strip() for line in self._tail if line.startswith("  ") and " free of " in line
        ]

    def start(self, port: int, allow_remote: bool) -> None:
        """Launch ``quantdesk worker`` on ``port``; ``state_changed("sharing")`` once ready."""
        if self.is_active():
            return
        self.port, self.allow_remote = port, allow_remote
        self.last_error = ""
        self._partial = ""
        self._tail.clear()
        program, *prefix = self._launcher()
        args = [*prefix, *worker_arguments(port, allow_remote)]
        process = quantdesk_process(self)
        process.readyReadStandardOutput.connect(self._on_output)
        process.finished.connect(self._on_finished)
        process.errorOccurred.connect(self._on_error)
        self._process = process
        self._emit_log(f"$ {' '.join([Path(program).name, *args])}")
        self._set_state(ShareState.STARTING)
        process.start(program, args)

    def stop(self) -> None:
        """Ask the worker to end (SIGTERM); killed if it has not within a few seconds."""
        if self._process is None or not self.is_active():
            return
        self._set_state(ShareState.STOPPING)
        self._process.terminate()
        QTimer.singleShot(5000, self._kill_if_still_running)

    def stop_and_wait(self, timeout_ms: int = 5000) -> None:
        """Stop and block until the worker is gone (the window is closing)."""
        process = self._process
        if process is None or process.state() == QProcess.ProcessState.NotRunning:
            return
        self.stop()
        if not process.waitForFinished(timeout_ms):
            process.kill()
            process.waitForFinished(3000)

    # -- process events -------------------------------------------------------------------
    def _emit_log(self, line: str) -> None:
        self._tail.append(line)
        self.log_line.emit(line)

    def _on_output(self) -> None:
        if self._process is None:
            return
        lines, self._partial = read_lines(self._process, self._partial)
        for line in lines:
            self._emit_log(line)
            if READY_MARK in line and self._state is ShareState.STARTING:
                self._set_state(ShareState.SHARING)

    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self.last_error = f"Could not launch the worker ({self._launcher()[0]})."
            self._emit_log(f"error: {self.last_error}")
            self._set_state(ShareState.FAILED)

    def _on_finished(self, exit_code: int, _status: QProcess.ExitStatus) -> None:
        self._on_output()
        if self._partial:
            self._emit_log(self._partial)
            self._partial = ""
        if self._state is ShareState.STOPPING:
            self._emit_log(f"worker stopped (exit code {exit_code})")
            self._set_state(ShareState.STOPPED)
        elif self._state in (ShareState.STARTING, ShareState.SHARING):
            self.last_error = worker_failure(list(self._tail), exit_code)
            self._emit_log(f"error: {self.last_error}")
            self._set_state(ShareState.FAILED)

    def _kill_if_still_running(self) -> None:
        if self._process is not None and self._state is ShareState.STOPPING:
            log.warning("the RPC worker ignored SIGTERM; killing it")
            self._process.kill()

    def _set_state(self, state: ShareState) -> None:
        if state is not self._state:
            self._state = state
            self.state_changed.emit(state.value)
