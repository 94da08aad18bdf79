"""Bind, announce the port and run uvicorn: used by ``quantdesk serve`` and the tests."""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from pathlib import Path

import uvicorn

from backend.engine.errors import ModelLoadError
from backend.errors import ConfigError
from backend.server.app_factory import create_app
from backend.settings import EngineSettings, ServerSettings

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind_policy(settings: ServerSettings) -> None:
    if not is_loopback(settings.host) and not settings.api_key and not settings.insecure:
        raise ConfigError(
            f"refusing to listen on {settings.host} without --api-key "
            "(anyone on the network could use the model); pass --insecure to allow it"
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


class ServerHandle:
    """A uvicorn server on a bound socket; ``run()`` blocks, ``start_thread()`` does not."""

    def __init__(self, engine_settings: EngineSettings, server_settings: ServerSettings) -> None:
        check_bind_policy(server_settings)
        self.load_error: str | None = None
        self.sock = bind_socket(server_settings.host, server_settings.port)
        self.port: int = self.sock.getsockname()[1]
        app = create_app(engine_settings, server_settings, on_load_failed=self._load_failed)
        self.app = app
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, timeout_graceful_shutdown=5
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        if server_settings.port_file:
            path = Path(server_settings.port_file)
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(str(self.port))
            tmp.replace(path)
        host = server_settings.host
        shown = f"[{host}]" if ":" in host else host
        self.base_url = f"http://{shown}:{self.port}"

    def _load_failed(self, message: str) -> None:
        self.load_error = message
        self.server.should_exit = True

    def run(self) -> None:
        log.info("listening on %s", self.base_url)
        self.server.run(sockets=[self.sock])
        if self.load_error:
            raise ModelLoadError(self.load_error)

    def start_thread(self) -> None:
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, name="uvicorn", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.sock.close()
