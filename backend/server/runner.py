"""Bind, announce the port and run uvicorn: used by ``quantdesk serve`` and the tests."""

from __future__ import annotations

import logging
import socket
import threading
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from backend.core.errors import ConfigError
from backend.engine.errors import ModelLoadError
from backend.server.app_factory import create_app
from backend.server.host_check import is_loopback
from backend.settings import EngineSettings, ServerSettings

log = logging.getLogger(__name__)


def check_bind_policy(settings: ServerSettings) -> None:
    """Refuse a keyless non-loopback bind unless --insecure, and then warn loudly."""
    if is_loopback(settings.host) or settings.api_key:
        return
    if not settings.insecure:
        raise ConfigError(
            f"refusing to listen on {settings.host} without --api-key "
            "(anyone on the network could use the model); pass --insecure to allow it"
        )
    log.warning(
        "INSECURE: listening on %s with no API key (--insecure): anyone who can reach this "
        "address can use the model and read /v1/stats; set --api-key to require a key",
        settings.host,
    )


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def ollama_socket(port: int, main: socket.socket) -> socket.socket:
    """The second listener of ``--ollama-port``, on loopback only; a taken port (Ollama
    itself running, most often) is said plainly."""
    try:
        return bind_socket("127.0.0.1", port)
    except ConfigError:
        main.close()
        raise ConfigError(
            f"--ollama-port {port}: the port is taken (is Ollama itself running? stop it, "
            "or choose another port)"
        ) from None


class UvicornHandle:
    """A uvicorn server on a bound socket; ``run()`` blocks, ``start_thread()`` does not.
    Subclasses build their app in ``__init__`` (with :meth:`_load_failed` as the app's
    load-failure callback) and pass it to :meth:`_serve`."""

    server_name = "server"
    join_timeout_s = 30.0

    def __init__(self, server_settings: ServerSettings) -> None:
        check_bind_policy(server_settings)
        self.load_error: str | None = None
        self.sock = bind_socket(server_settings.host, server_settings.port)
        self.port: int = self.sock.getsockname()[1]
        host = server_settings.host
        shown = f"[{host}]" if ":" in host else host
        self.base_url = f"http://{shown}:{self.port}"
        self.sockets = [self.sock]
        if server_settings.ollama_port is not None:
            self.sockets.append(ollama_socket(server_settings.ollama_port, self.sock))
        self._settings = server_settings
        self._thread: threading.Thread | None = None

    def _serve(self, app: FastAPI) -> None:
        self.app = app
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, timeout_graceful_shutdown=5
        )
        self.server = uvicorn.Server(config)
        app.state.uvicorn = self.server  # endless streams end when it is told to exit
        if self._settings.port_file:
            path = Path(self._settings.port_file)
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(str(self.port))
            tmp.replace(path)

    def _load_failed(self, message: str) -> None:
        self.load_error = message
        self.server.should_exit = True

    def run(self) -> None:
        log.info("%s listening on %s", self.server_name, self.base_url)
        if len(self.sockets) > 1:
            log.info("answering Ollama clients on http://127.0.0.1:%d too", self.ollama_port)
        self.server.run(sockets=self.sockets)
        if self.load_error:
            raise ModelLoadError(self.load_error)

    def start_thread(self) -> None:
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": self.sockets}, name="uvicorn", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=self.join_timeout_s)
        for sock in self.sockets:
            sock.close()

    @property
    def ollama_port(self) -> int | None:
        return self.sockets[1].getsockname()[1] if len(self.sockets) > 1 else None


class ServerHandle(UvicornHandle):
    """The single-model server."""

    def __init__(self, engine_settings: EngineSettings, server_settings: ServerSettings) -> None:
        super().__init__(server_settings)
        self._serve(create_app(engine_settings, server_settings, on_load_failed=self._load_failed))
