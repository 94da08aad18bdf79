"""Run a ``quantdesk`` sub-command with ``--progress-jsonl`` in a child process (QProcess).

The quantise and compare pages use this: llama.cpp work never runs inside the
window's process, so a crash cannot take the window down, and cancel = terminate.
The child reports on stdout one job event per line (``backend.jobs.events``), parsed here
with ``parse_event``; its log goes to stderr.
"""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

from app.page_models.server_command import launcher_prefix
from backend.jobs.errors import JobProtocolError
from backend.jobs.events import (
    ErrorEvent,
    JobEvent,
    ProgressEvent,
    ResultEvent,
    WarningEvent,
    parse_event,
)

log = logging.getLogger(__name__)

# After SIGTERM the CLI finishes its current step and cleans up; kill if it takes longer.
KILL_AFTER_MS = 8000


class CliJob(QObject):
    """One child ``quantdesk ARGS... --progress-jsonl`` run.

    Signals, in order: any number of ``progress_reported(ProgressEvent)`` (typed progress:
    ``phase`` of ``phases``, ``stage``, ``done`` of ``total``, ``fraction``) and
    ``log_line(text)`` (stderr, warnings and lines that are not events); then exactly one
    of ``succeeded(payload)`` (the result event's payload dict, e.g. for
    ``CompareResult.from_json``) / ``failed(message)``; then ``finished()``.
    """

    progress_reported = Signal(object)  # ProgressEvent
    log_line = Signal(str)
    succeeded = Signal(object)  # dict: the result payload
    failed = Signal(str)
    finished = Signal()

    def __init__(self, args: list[str], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.args = [*args, "--progress-jsonl"]
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.cancelled = False
        self._stdout_buf = b""
        self._stderr_buf = b""
        self._stderr_tail: list[str] = []
        self._process: QProcess | None = None
        self._kill_timer = QTimer(self)
        self._kill_timer.setSingleShot(True)
        self._kill_timer.timeout.connect(self._kill)

    # -- control ---------------------------------------------------------------------------
    def start(self) -> None:
        prefix = launcher_prefix()
        process = QProcess(self)
        env = QProcessEnvironment.systemEnvironment()
        env.insert("PYTHONUNBUFFERED", "1")
        process.setProcessEnvironment(env)
        process.readyReadStandardOutput.connect(self._read_stdout)
        process.readyReadStandardError.connect(self._read_stderr)
        process.finished.connect(self._on_finished)
        process.errorOccurred.connect(self._on_error)
        self._process = process
        log.info("starting: %s", " ".join([*prefix, *self.args]))
        process.start(prefix[0], [*prefix[1:], *self.args])

    def is_running(self) -> bool:
        return (
            self._process is not None and self._process.state() != QProcess.ProcessState.NotRunning
        )

    def cancel(self) -> None:
        """Ask the child to stop (SIGTERM: it cleans up); kill it if it does not."""
        if not self.is_running():
            return
        self.cancelled = True
        assert self._process is not None
        self._process.terminate()
        self._kill_timer.start(KILL_AFTER_MS)

    def wait(self, msecs: int) -> bool:
        return self._process is None or self._process.waitForFinished(msecs)

    def _kill(self) -> None:
        if self.is_running():
            assert self._process is not None
            log.warning("child did not stop after SIGTERM; killing it")
            self._process.kill()

    # -- output ----------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        assert self._process is not None
        self._stdout_buf += bytes(self._process.readAllStandardOutput().data())
        *lines, self._stdout_buf = self._stdout_buf.split(b"\n")
        for raw in lines:
            self._handle_stdout(raw.decode("utf-8", errors="replace").strip())

    def _handle_stdout(self, line: str) -> None:
        if not line:
            return
        try:
            event = parse_event(line)
        except JobProtocolError:
            self.log_line.emit(line)
            return
        self._dispatch(event)

    def _dispatch(self, event: JobEvent) -> None:
        if isinstance(event, ProgressEvent):
            self.progress_reported.emit(event)
        elif isinstance(event, WarningEvent):
            self.log_line.emit(event.message)
        elif isinstance(event, ResultEvent):
            self.result = event.payload
        elif isinstance(event, ErrorEvent):
            self.error = event.message

    def _read_stderr(self) -> None:
        assert self._process is not None
        self._stderr_buf += bytes(self._process.readAllStandardError().data())
        *lines, self._stderr_buf = self._stderr_buf.split(b"\n")
        for raw in lines:
            text = raw.decode("utf-8", errors="replace").rstrip()
            if text:
                self._stderr_tail = [*self._stderr_tail[-19:], text]
                self.log_line.emit(text)

    # -- end -------------------------------------------------------------------------------
    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self.error = "could not start the quantdesk command (is the installation complete?)"
            self.failed.emit(self.error)
            self.finished.emit()

    def _on_finished(self, exit_code: int, exit_status: QProcess.ExitStatus) -> None:
        self._kill_timer.stop()
        self._read_stdout()
        self._read_stderr()
        for leftover in (self._stdout_buf, self._stderr_buf):
            if leftover.strip():
                self._handle_stdout(leftover.decode("utf-8", errors="replace").strip())
        self._stdout_buf = self._stderr_buf = b""
        if self.result is not None and exit_code == 0 and not self.cancelled:
            self.succeeded.emit(self.result)
        else:
            self.failed.emit(self._failure_text(exit_code, exit_status))
        self.finished.emit()

    def _failure_text(self, exit_code: int, exit_status: QProcess.ExitStatus) -> str:
        if self.cancelled:
            return "Cancelled."
        if self.error:
            return self.error
        if self.result is not None:  # e.g. compare's quality gate: results, non-zero exit
            return f"finished with exit code {exit_code}"
        crashed = exit_status == QProcess.ExitStatus.CrashExit
        tail = self._stderr_tail[-1] if self._stderr_tail else ""
        what = "crashed" if crashed else f"stopped with exit code {exit_code}"
        return f"The child process {what}." + (f" Last log line: {tail}" if tail else "")
