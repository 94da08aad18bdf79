"""Start model servers as forks of one pre-imported process (the "zygote",
``backend/entrypoints/serve_zygote.py``) instead of a fresh Python each.

Why: a fresh ``quantdesk serve`` spends 1.5-3 s importing FastAPI, pydantic, uvicorn, numpy
and llama-cpp-python before it reads a byte of the model; a fork of a process that has
imported them starts in milliseconds. Why a zygote and not a spare, pre-started server: a
spare is used up by each load and its replacement's imports then compete for the CPU with
the model just loaded, while the zygote imports once and forks for every load; and the forks
share its imported pages (copy on write) instead of each holding a private copy. It costs
one idle process (about 75 MiB RSS, most of it pages its forks share).

The forks are the zygote's children, not the router's, so a :class:`ForkedProcess` stands
in for :class:`asyncio.subprocess.Process`: the zygote reports each exit and its code.
Where fork is not the way (not Linux, a frozen app) or the zygote failed, the caller
starts a fresh process instead (:func:`forking_supported`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import psutil

log = logging.getLogger(__name__)

ZYGOTE_MODULE = "backend.entrypoints.serve_zygote"
# how long the zygote may take to import everything (a loaded 2-core machine: ~5 s)
READY_TIMEOUT_S = 120.0


class ForkerError(RuntimeError):
    """The zygote is not running or could not fork."""


def forking_supported() -> bool:
    """Linux, run from Python sources (a frozen app has no ``-m`` to start the zygote)."""
    return sys.platform.startswith("linux") and not getattr(sys, "frozen", False)


class ForkedProcess:
    """A forked model server: what :class:`ChildServer` uses of an asyncio process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._exited = asyncio.Event()

    def _set_exited(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._exited.set()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is not None:
            raise ProcessLookupError(self.pid)
        os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ServerForker:
    """The zygote process and the forks it made; all methods run on one event loop."""

    def __init__(self, cli_prefix: list[str]) -> None:
        # the zygote runs as the CLI would (guarded to die with the router), as its module
        self._argv = [*cli_prefix[:-1], ZYGOTE_MODULE]
        self._process: asyncio.subprocess.Process | None = None
        self._ready: asyncio.Future[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._replies: dict[int, asyncio.Future[int]] = {}
        self._forks: dict[int, ForkedProcess] = {}
        self._early_exits: dict[int, int] = {}
        self._next_id = 0

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        """Start the zygote (once) and wait until it has imported everything."""
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._ready.add_done_callback(lambda f: f.cancelled() or f.exception())
            try:
                self._process = await asyncio.create_subprocess_exec(
                    *self._argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    start_new_session=True,
                )
            except OSError as exc:
                self._ready.set_exception(ForkerError(f"cannot start the zygote: {exc}"))
            else:
                self._reader = asyncio.create_task(self._read(), name="zygote-reader")
        await asyncio.wait_for(asyncio.shield(self._ready), READY_TIMEOUT_S)

    async def fork(self, argv: list[str], env: dict[str, str], log_path: Path) -> ForkedProcess:
        """A server forked from the zygote running ``quantdesk <argv>`` in ``env``, its
        output in ``log_path``."""
        await self.start()
        if not self.alive or self._process is None or self._process.stdin is None:
            raise ForkerError("the zygote is not running")
        self._next_id += 1
        request_id = self._next_id
        reply: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._replies[request_id] = reply
        line = json.dumps({"id": request_id, "argv": argv, "env": env, "log": str(log_path)})
        try:
            self._process.stdin.write(line.encode() + b"\n")
            await self._process.stdin.drain()
            pid = await reply
        except (OSError, ConnectionError) as exc:
            raise ForkerError(f"the zygote is gone: {exc}") from None
        finally:
            self._replies.pop(request_id, None)
        forked = self._forks[pid] = ForkedProcess(pid)
        if pid in self._early_exits:  # ended before the reply was read
            forked._set_exited(self._early_exits.pop(pid))
        return forked

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        try:
            while line := await self._process.stdout.readline():
                with contextlib.suppress(ValueError):
                    self._dispatch(json.loads(line))
        finally:
            await self._zygote_gone()

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "ready" in message and self._ready is not None and not self._ready.done():
            self._ready.set_result(None)
        elif "exited" in message:
            pid, code = int(message["exited"]), int(message["code"])
            forked = self._forks.pop(pid, None)
            if forked is not None:
                forked._set_exited(code)
            else:
                self._early_exits[pid] = code
        elif "id" in message:
            reply = self._replies.get(int(message["id"]))
            if reply is None or reply.done():
                return
            if "pid" in message:
                reply.set_result(int(message["pid"]))
            else:
                reply.set_exception(ForkerError(str(message.get("error"))))

    async def _zygote_gone(self) -> None:
        """The zygote ended: pending forks fail; its servers got SIGTERM from the kernel
        (their parent-death signal) and are waited for here, as they are no one's to reap."""
        error = ForkerError("the zygote ended")
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)
        for reply in self._replies.values():
            if not reply.done():
                reply.set_exception(error)
        if self._forks:
            log.warning("the model servers' zygote ended; its %d servers end too", len(self._forks))
        while self._forks:
            for pid, forked in list(self._forks.items()):
                if not _pid_alive(pid):
                    forked._set_exited(-signal.SIGTERM)
                    del self._forks[pid]
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        """End the zygote (closing its stdin); call after its servers have been stopped."""
        process = self._process
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 10.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader


def _pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
