"""How the GUI launches ``quantdesk serve``: the command line, generated from the knobs.

Kept apart from the supervisor so the launcher can be swapped (a frozen app runs
its own executable with ``serve``; a venv runs ``python -m backend.entrypoints.main serve``).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from app.storage.app_settings import ServerKnobs
from backend.settings.flags import settings_argv


def launcher_prefix() -> list[str]:
    """The program and leading arguments that run the ``quantdesk`` CLI.

    From a venv the CLI runs through :mod:`app.workers.child_guard`, so on Linux the
    server is terminated if the window dies without stopping it.
    """
    frozen = getattr(sys, "frozen", False)  # PyInstaller: the app binary is the CLI too
    cli = [sys.executable] if frozen else [sys.executable, "-m", "backend.entrypoints.main"]
    if sys.platform.startswith("linux"):
        return [sys.executable, "-m", "app.workers.child_guard", str(os.getpid()), *cli]
    return cli


def serve_arguments(
    knobs: ServerKnobs, port_file: Path, port: int | None = None, *, library: bool = False
) -> list[str]:
    """Arguments after the launcher prefix: every knob, written by the flags ``serve`` reads.

    ``library``: serve the whole library (no ``-m``; the knobs are every model's defaults,
    and the GUI loads the chosen model with ``POST /models/load`` once the server is up)."""
    if port is not None:
        knobs = knobs.model_copy(update={"port": port})
    argv = settings_argv(knobs, skip=("model",) if library else ())
    return ["serve", *argv, "--port-file", str(port_file)]


API_KEY_ENV = "QUANTDESK_API_KEY"


def serve_environment(knobs: ServerKnobs) -> dict[str, str | None]:
    """Environment changes for the ``serve`` child: the API key goes here, not into argv
    (``ps`` shows every process's arguments). ``None`` removes an inherited variable, so a
    blank key box means no key even if the GUI's own environment has one."""
    return {API_KEY_ENV: knobs.api_key or None}


def client_host(host: str) -> str:
    """The address a local client should dial for a bind address."""
    if host in ("0.0.0.0", "", "*"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


def base_url(host: str, port: int) -> str:
    return f"http://{client_host(host)}:{port}"


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET


def _bind_host(host: str) -> str:
    return host.strip("[]") if host not in ("", "*") else "0.0.0.0"


def port_is_free(host: str, port: int) -> bool:
    """Whether ``quantdesk serve`` could listen on ``host:port`` right now.

    Binds the way the server does (``SO_REUSEADDR``, so a port in TIME_WAIT counts
    as free) and lets go at once. Port 0 is always free.
    """
    if port == 0:
        return True
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((_bind_host(host), port))
        except OSError:
            return False
    return True


def find_free_port(host: str) -> int:
    """A port nothing listens on at ``host`` (the system's pick; racy, but rarely lost)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.bind((_bind_host(host), 0))
        return int(sock.getsockname()[1])
