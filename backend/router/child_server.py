"""One resident model: a ``quantdesk serve -m <path>`` child process on a loopback port.

A child process, not a thread: an abort inside llama.cpp (``GGML_ASSERT``) ends only
its own process, and only a process exit gives all of a model's memory back, CUDA
included. The child listens on 127.0.0.1 with a random API key that only the router
knows, so nothing else on the machine can reach a model around the router.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx
import psutil

from backend.router.child_log import ChildLogForwarder
from backend.router.errors import ModelLoadFailedError
from backend.router.server_forker import ForkerError, ServerForker, forking_supported
from backend.settings import EngineSettings, ServerSettings
from backend.settings.flags import settings_argv

log = logging.getLogger(__name__)

# How long a child may take from start to a 200 from /health (the model loads in it).
START_TIMEOUT_S = 600.0
# How long a child has to exit after SIGTERM before it is killed.
STOP_GRACE_S = 10.0
# /health polls while a child loads: a 200 is seen this long after the model is ready, at most
_POLL_S = 0.02
_LOG_TAIL_LINES = 12


def cli_prefix() -> list[str]:
    """The program and leading arguments that run the ``quantdesk`` CLI; from a venv on
    Linux through :mod:`backend.core.die_with_parent`, so that a child never outlives
    the router."""
    if getattr(sys, "frozen", False):  # PyInstaller: the app binary is the CLI
        return [sys.executable]
    cli = [sys.executable, "-m", "backend.entrypoints.main"]
    if sys.platform.startswith("linux"):
        guard = [sys.executable, "-m", "backend.core.die_with_parent", str(os.getpid())]
        return [*guard, *cli]
    return cli


def child_server_settings(router: ServerSettings, port_file: Path) -> ServerSettings:
    """The router's request limits for a child on a free loopback port, without the router's
    key, origins or hosts (the child gets its own key through the environment)."""
    return router.model_copy(
        update={
            "host": "127.0.0.1",
            "port": 0,
            "port_file": str(port_file),
            "api_key": None,
            "cors_origins": [],
            "allowed_hosts": [],
            "insecure": False,
            "ollama_port": None,  # the router's second listener, not the child's
        }
    )


def child_argv(engine: EngineSettings, server: ServerSettings) -> list[str]:
    return [*cli_prefix(), *serve_args(engine, server)]


def serve_args(engine: EngineSettings, server: ServerSettings) -> list[str]:
    """``serve`` and its flags: the CLI's arguments for a child, after the program; ``-v``
    first when the router logs at debug level (``quantdesk -v serve``), so the model's
    server, llama.cpp's log included, does too."""
    verbose = ["-v"] if logging.getLogger().isEnabledFor(logging.DEBUG) else []
    return [*verbose, "serve", "--model-server", *settings_argv(engine), *settings_argv(server)]


def new_forker() -> ServerForker | None:
    """The zygote that children fork from, where forking is supported (else None)."""
    return ServerForker(cli_prefix()) if forking_supported() else None


class ServerProcess(Protocol):
    """What a child needs of its process: an asyncio subprocess or a fork of the zygote."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    async def wait(self) -> int: ...
    def send_signal(self, sig: int) -> None: ...
    def kill(self) -> None: ...


def _child_env(api_key: str) -> dict[str, str]:
    """This environment without the router's QUANTDESK_* settings (the flags say it all),
    except where QuantDesk keeps its files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUANTDESK_")}
    if "QUANTDESK_HOME" in os.environ:
        env["QUANTDESK_HOME"] = os.environ["QUANTDESK_HOME"]
    env["QUANTDESK_API_KEY"] = api_key
    return env


@dataclass
class ChildServer:
    """A started child: its process, address and key. ``start()`` returns once it is ready."""

    model_id: str
    process: ServerProcess
    base_url: str
    api_key: str
    log_path: Path
    settings: EngineSettings
    stopping: bool = field(default=False, init=False)
    log_forwarder: ChildLogForwarder | None = field(default=None, init=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def rss_bytes(self) -> int:
        """Resident memory of the child process now (0 once it has exited)."""
        try:
            return int(psutil.Process(self.pid).memory_info().rss)
        except psutil.Error:
            return 0

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    @classmethod
    async def start(
        cls,
        model_id: str,
        engine: EngineSettings,
        server: ServerSettings,
        workdir: Path,
        *,
        timeout_s: float = START_TIMEOUT_S,
        forker: ServerForker | None = None,
    ) -> ChildServer:
        """Start ``quantdesk serve`` on ``engine.model`` (forked from ``forker``'s zygote
        when one is given and running, else a fresh process) and wait until its /health is
        200. Its log lines are forwarded to this process's log as they come.

        A child that exits or does not get ready in ``timeout_s`` is stopped and its log's
        last lines become a :class:`ModelLoadFailedError`."""
        workdir.mkdir(parents=True, exist_ok=True)
        port_file = workdir / "port"
        port_file.unlink(missing_ok=True)
        log_path = workdir / "serve.log"
        log_path.write_bytes(b"")  # empty before the child and its log forwarder start
        api_key = secrets.token_urlsafe(24)
        args = serve_args(engine, child_server_settings(server, port_file))
        env = _child_env(api_key)
        process: ServerProcess | None = None
        if forker is not None:
            try:
                process = await forker.fork(args, env, log_path)
            except ForkerError as exc:
                log.warning("model %s: %s; starting a fresh process instead", model_id, exc)
        how = "forked"
        if process is None:
            how = "started"
            with log_path.open("ab") as out:
                process = await asyncio.create_subprocess_exec(
                    *cli_prefix(),
                    *args,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=asyncio.subprocess.STDOUT,
                    env=env,
                    start_new_session=True,  # a Ctrl-C in the terminal reaches the router only
                )
        log.info("model %s: %s its server (pid %d)", model_id, how, process.pid)
        child = cls(model_id, process, "", api_key, log_path, engine)
        child.log_forwarder = ChildLogForwarder.start(model_id, log_path)
        try:
            await asyncio.wait_for(child._wait_ready(port_file), timeout_s)
        except BaseException as exc:
            await child.stop()
            if isinstance(exc, ModelLoadFailedError):
                raise
            if isinstance(exc, TimeoutError):
                raise ModelLoadFailedError(
                    f"model {model_id} was not ready after {timeout_s:.0f} s"
                ) from None
            raise
        log.info("model %s: ready at %s", model_id, child.base_url)
        return child

    async def _wait_ready(self, port_file: Path) -> None:
        async with httpx.AsyncClient(timeout=10.0) as client:
            while True:
                if not self.alive:
                    tail = self.log_tail()
                    raise ModelLoadFailedError(
                        f"model {self.model_id} failed to load (its server exited with code "
                        f"{self.process.returncode})" + (f": {_last_error(tail)}" if tail else "")
                    )
                if not self.base_url and port_file.is_file():
                    text = port_file.read_text().strip()
                    if text:
                        self.base_url = f"http://127.0.0.1:{int(text)}"
                if self.base_url:
                    with contextlib.suppress(httpx.TransportError):
                        r = await client.get(f"{self.base_url}/health", headers=self.headers)
                        if r.status_code == 200:
                            return
                await asyncio.sleep(_POLL_S)

    async def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM, then SIGKILL after ``grace_s``; returns once the process has exited."""
        self.stopping = True
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), grace_s)
            except TimeoutError:
                log.warning("model %s: server ignored SIGTERM; killing it", self.model_id)
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
        await self.process.wait()
        await self._end_log()
        log.info("model %s: server stopped (pid %d)", self.model_id, self.pid)

    async def _end_log(self) -> None:
        """Forward what the ended process wrote last, then stop following its log."""
        if self.log_forwarder is not None:
            await self.log_forwarder.close()

    def watch(self, on_exit: Callable[[ChildServer], None]) -> asyncio.Task[None]:
        """A task that calls ``on_exit`` when the process ends without ``stop()``."""

        async def wait() -> None:
            await self.process.wait()
            if not self.stopping:
                await self._end_log()
                on_exit(self)

        return asyncio.create_task(wait(), name=f"watch-{self.model_id}")


def _last_error(tail: str) -> str:
    """The log line that says why: the last 'error' line, else the last line."""
    lines = [line for line in tail.splitlines() if line.strip()]
    for line in reversed(lines):
        if "error" in line.lower():
            return line.strip()
    return lines[-1].strip() if lines else ""
