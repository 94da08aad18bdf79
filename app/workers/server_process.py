"""Supervise the ``quantdesk serve`` child process: start, health, crash, stop.

The server runs in its own process so a crash or out-of-memory abort inside
llama.cpp never takes the window down. Health checks use Qt's asynchronous
network manager, so nothing here blocks the GUI thread except the explicit
``stop_and_wait`` used when the window closes.

A model of the library (the embedded one included) is served by a library server
(``quantdesk serve`` without ``-m``, the knobs as every model's defaults): once it answers,
the supervisor loads the chosen model with ``POST /models/load`` and reports the server
running when that model is ready, so other models can be loaded beside it without a
restart. The knobs are remembered for that model (``ModelSettingsStore``), so every later
load of it, on demand too, uses them. A GGUF outside the library is served alone, as before.
"""

from __future__ import annotations

import collections
import enum
import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx
from PySide6.QtCore import QObject, QProcess, QTimer, QUrl, Signal
from PySide6.QtNetwork import QNetworkAccessManager, QNetworkReply, QNetworkRequest

from app.page_models.router_models import library_model_id, model_overrides
from app.page_models.server_command import (
    base_url,
    launcher_prefix,
    serve_arguments,
    serve_environment,
)
from app.page_models.server_errors import ServerProcessError, explain_exit, explain_load_failure
from app.storage.app_settings import ServerKnobs
from app.workers.quantdesk_process import quantdesk_process, read_lines
from backend.core.errors import QuantDeskError
from backend.settings.model_settings_store import ModelSettingsStore

log = logging.getLogger(__name__)


class ServerState(enum.StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    CRASHED = "crashed"


class ServerSupervisor(QObject):
    """One server child process and its life cycle, reported through signals."""

    server_started = Signal(str)  # base URL
    server_crashed = Signal(str)  # plain-words reason
    state_changed = Signal(str)
    log_line = Signal(str)

    POLL_MS = 250

    def __init__(
        self,
        parent: QObject | None = None,
        launcher: Callable[[], list[str]] = launcher_prefix,
        startup_timeout_s: float = 600.0,
    ) -> None:
        super().__init__(parent)
        self._launcher = launcher
        self._startup_timeout_ms = int(startup_timeout_s * 1000)
        self._process: QProcess | None = None
        self._state = ServerState.STOPPED
        self._knobs: ServerKnobs | None = None
        self._port: int | None = None
        self._port_dir: Path | None = None
        self._partial = ""
        self._tail: collections.deque[str] = collections.deque(maxlen=200)
        self._restart_pending = False
        self._health_inflight = False
        self._load_reply: QNetworkReply | None = None
        self._model_id: str | None = None
        self._waited_ms = 0
        self.last_error: ServerProcessError | None = None
        self._net = QNetworkAccessManager(self)
        self._poll = QTimer(self)
        self._poll.setInterval(self.POLL_MS)
        self._poll.timeout.connect(self._on_poll)

    # -- public state -------------------------------------------------------------------
    @property
    def state(self) -> ServerState:
        return self._state

    @property
    def knobs(self) -> ServerKnobs | None:
        return self._knobs

    @property
    def port(self) -> int | None:
        return self._port

    @property
    def base_url(self) -> str | None:
        if self._state is not ServerState.RUNNING or self._knobs is None or self._port is None:
            return None
        return base_url(self._knobs.host, self._port)

    @property
    def api_key(self) -> str:
        return self._knobs.api_key if self._knobs else ""

    @property
    def model_id(self) -> str | None:
        """The library id of the model the server was started with; ``None`` when it serves
        a file outside the library alone."""
        return self._model_id

    @property
    def serves_library(self) -> bool:
        """The server serves the library: other models load beside the chosen one."""
        return self._model_id is not None

    def pid(self) -> int | None:
        if self._process is None:
            return None
        pid = int(self._process.processId())
        return pid or None

    def is_active(self) -> bool:
        return self._state in (ServerState.STARTING, ServerState.RUNNING, ServerState.STOPPING)

    # -- commands -------------------------------------------------------------------------
    def start(self, knobs: ServerKnobs) -> None:
        """Launch the server with ``knobs``; ``server_started`` fires once /health is 200."""
        if self.is_active():
            raise ServerProcessError("busy", "The server is already running; stop it first.")
        self._knobs = knobs.model_copy(deep=True)
        self._port = None
        self._partial = ""
        self._tail.clear()
        self.last_error = None
        self._waited_ms = 0
        self._model_id = library_model_id(self._knobs.model)
        if self._model_id is not None:
            remember_model_knobs(self._model_id, self._knobs)
        self._port_dir = Path(tempfile.mkdtemp(prefix="quantdesk-serve-"))
        program, *prefix = self._launcher()
        args = [
            *prefix,
            *serve_arguments(
                self._knobs, self._port_dir / "port", library=self._model_id is not None
            ),
        ]
        process = quantdesk_process(self, serve_environment(self._knobs))
        process.readyReadStandardOutput.connect(self._on_output)
        process.finished.connect(self._on_finished)
        process.errorOccurred.connect(self._on_error)
        self._process = process
        self._emit_log(f"$ {' '.join([Path(program).name, *args])}")
        self._set_state(ServerState.STARTING)
        process.start(program, args)
        self._poll.start()

    def stop(self) -> None:
        """Ask the server to shut down (SIGTERM); ``state_changed("stopped")`` when it has."""
        if self._process is None or self._state in (ServerState.STOPPED, ServerState.CRASHED):
            return
        self._set_state(ServerState.STOPPING)
        self._poll.stop()
        self._abort_load()
        self._process.terminate()
        QTimer.singleShot(8000, self._kill_if_still_running)

    def restart(self, knobs: ServerKnobs | None = None) -> None:
        """Stop (if running) and start again, with new ``knobs`` or the last ones."""
        if knobs is not None:
            self._knobs = knobs.model_copy(deep=True)
        if self._knobs is None:
            raise ServerProcessError("no_config", "Nothing to restart: the server never ran.")
        if self.is_active():
            self._restart_pending = True
            self.stop()
        else:
            self.start(self._knobs)

    def stop_and_wait(self, timeout_ms: int = 8000) -> None:
        """Stop and block until the process is gone (used when the window closes)."""
        process = self._process
        if process is None or process.state() == QProcess.ProcessState.NotRunning:
            return
        self._restart_pending = False
        self.stop()
        if not process.waitForFinished(timeout_ms):
            process.kill()
            process.waitForFinished(3000)

    def requests_in_flight(self, timeout_s: float = 1.5) -> int:
        """Running + queued requests, from /v1/stats (0 if the server can't say)."""
        url = self.base_url
        if url is None:
            return 0
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            stats = httpx.get(f"{url}/v1/stats", headers=headers, timeout=timeout_s).json()
            # a library server answers every loaded model's stats
            each = stats.get("data", []) if stats.get("object") == "list" else [stats]
            return sum(
                int(s.get("requests", {}).get("running", 0))
                + int(s.get("requests", {}).get("queued", 0))
                for s in each
            )
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            log.debug("could not read in-flight requests: %s", exc)
            return 0

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

    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._poll.stop()
            program = self._launcher()[0]
            self._fail(
                ServerProcessError(
                    "launch", f"Could not launch the server ({program}).", while_starting=True
                )
            )

    def _on_finished(self, exit_code: int, exit_status: QProcess.ExitStatus) -> None:
        self._abort_load()
        self._on_output()
        if self._partial:
            self._emit_log(self._partial)
            self._partial = ""
        self._poll.stop()
        self._cleanup_port_dir()
        state = self._state
        if state is ServerState.STOPPING:
            self._emit_log(f"server stopped (exit code {exit_code})")
            self._set_state(ServerState.STOPPED)
            if self._restart_pending and self._knobs is not None:
                self._restart_pending = False
                self.start(self._knobs)
            return
        if state in (ServerState.STOPPED, ServerState.CRASHED):
            return
        crashed = exit_status == QProcess.ExitStatus.CrashExit
        port = self._knobs.port if self._knobs is not None else None
        error = explain_exit(list(self._tail), exit_code, crashed, port=port or None)
        error.while_starting = state is ServerState.STARTING
        self._fail(error)

    def _fail(self, error: ServerProcessError) -> None:
        self.last_error = error
        self._restart_pending = False
        self._emit_log(f"error: {error}")
        self._set_state(ServerState.CRASHED)
        self.server_crashed.emit(str(error))

    def _kill_if_still_running(self) -> None:
        if self._process is not None and self._state is ServerState.STOPPING:
            log.warning("server ignored SIGTERM; killing it")
            self._process.kill()

    def _cleanup_port_dir(self) -> None:
        if self._port_dir is not None:
            shutil.rmtree(self._port_dir, ignore_errors=True)
            self._port_dir = None

    # -- health polling -------------------------------------------------------------------
    def _on_poll(self) -> None:
        if self._state is not ServerState.STARTING:
            self._poll.stop()
            return
        self._waited_ms += self.POLL_MS
        if self._waited_ms > self._startup_timeout_ms:
            self._poll.stop()
            error = ServerProcessError(
                "timeout", "The server did not become ready in time.", while_starting=True
            )
            self._set_state(ServerState.STOPPING)  # expected exit; report the timeout ourselves
            if self._process is not None:
                self._process.kill()
            self._fail(error)
            return
        if self._port is None:
            self._port = self._read_port_file()
            if self._port is None:
                return
            self._emit_log(f"listening on port {self._port}; loading the model…")
        if not self._health_inflight:
            self._check_health()

    def _read_port_file(self) -> int | None:
        if self._port_dir is None:
            return None
        try:
            text = (self._port_dir / "port").read_text(encoding="utf-8").strip()
            return int(text) if text else None
        except (OSError, ValueError):
            return None

    def _check_health(self) -> None:
        assert self._knobs is not None and self._port is not None
        request = QNetworkRequest(QUrl(f"{base_url(self._knobs.host, self._port)}/health"))
        request.setTransferTimeout(2000)
        if self._knobs.api_key:
            request.setRawHeader(b"Authorization", f"Bearer {self._knobs.api_key}".encode())
        self._health_inflight = True
        reply = self._net.get(request)
        reply.finished.connect(lambda: self._on_health(reply))

    def _on_health(self, reply: QNetworkReply) -> None:
        self._health_inflight = False
        status = reply.attribute(QNetworkRequest.Attribute.HttpStatusCodeAttribute)
        reply.deleteLater()
        if self._state is ServerState.STARTING and status == 200:
            self._poll.stop()
            if self._model_id is not None:
                self._load_chosen_model()
            else:
                self._report_running()

    def _report_running(self) -> None:
        self._set_state(ServerState.RUNNING)
        url = self.base_url or ""
        self._emit_log(f"ready at {url}")
        self.server_started.emit(url)

    # -- the chosen model, in a library server --------------------------------------------
    def _load_chosen_model(self) -> None:
        """POST /models/load for the chosen model; running once it answers 200."""
        assert self._knobs is not None and self._port is not None
        self._emit_log(f"serving the library; loading {self._model_id}…")
        request = QNetworkRequest(QUrl(f"{base_url(self._knobs.host, self._port)}/models/load"))
        request.setHeader(QNetworkRequest.KnownHeaders.ContentTypeHeader, "application/json")
        request.setTransferTimeout(max(1000, self._startup_timeout_ms - self._waited_ms))
        if self._knobs.api_key:
            request.setRawHeader(b"Authorization", f"Bearer {self._knobs.api_key}".encode())
        body = json.dumps({"model": self._model_id}).encode()
        reply = self._net.post(request, body)
        self._load_reply = reply
        reply.finished.connect(lambda: self._on_model_loaded(reply))

    def _abort_load(self) -> None:
        reply, self._load_reply = self._load_reply, None
        if reply is not None:
            reply.abort()

    def _on_model_loaded(self, reply: QNetworkReply) -> None:
        status = reply.attribute(QNetworkRequest.Attribute.HttpStatusCodeAttribute)
        data = bytes(reply.readAll().data())
        network_error = reply.errorString() if status is None else ""
        reply.deleteLater()
        if reply is not self._load_reply or self._state is not ServerState.STARTING:
            return  # stopped, restarted or crashed meanwhile
        self._load_reply = None
        if status == 200:
            self._report_running()
            return
        model = self._model_id or "the model"
        message, code = _error_body(data) if data else (network_error or "no answer", None)
        self._emit_log(f"loading {model} failed: {message}")
        error = explain_load_failure(model, message, code)
        self._set_state(ServerState.STOPPING)  # expected exit; report the failure ourselves
        if self._process is not None:
            self._process.kill()
        self._fail(error)

    def _set_state(self, state: ServerState) -> None:
        if state is not self._state:
            self._state = state
            self.state_changed.emit(state.value)


def remember_model_knobs(model_id: str, knobs: ServerKnobs) -> None:
    """Keep ``knobs`` as ``model_id``'s settings, for every load of it (a failure to write
    them is logged: the server still starts with them)."""
    try:
        ModelSettingsStore().set(model_id, model_overrides(knobs))
    except (QuantDeskError, OSError) as exc:
        log.warning("could not remember the settings of %s: %s", model_id, exc)


def _error_body(data: bytes) -> tuple[str, str | None]:
    """The message and code of an OpenAI-shaped error body (else the text)."""
    try:
        body = json.loads(data)
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            code = error.get("code")
            return str(error.get("message") or error), str(code) if code else None
    except ValueError:
        pass
    return data.decode("utf-8", "replace")[:300], None
