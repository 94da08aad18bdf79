"""A pre-imported parent for model servers: the router's model servers start as forks of it.

    python -m backend.entrypoints.serve_zygote

A model server spends most of a cold start importing Python (FastAPI, pydantic schemas,
uvicorn, numpy, llama-cpp-python), which is the same work for every model. This process
does it once, then waits; for each model the router loads it forks, and the fork runs
``quantdesk serve ...`` (:func:`backend.entrypoints.main.main`) with its modules already in
memory, so a load costs the model's own work only. Forked servers share the imported pages
with this process (copy on write, ``gc.freeze`` keeps the collector from touching them).

It stays single-threaded and never initialises llama.cpp's backend or CUDA, so a fork is
safe (numpy's BLAS pool, the one other thread, re-creates itself in the child).

Protocol, one JSON object per line. On stdin, from the router:
    {"id": N, "argv": ["serve", ...], "env": {...}, "log": PATH}
On stdout, to the router:
    {"id": N, "pid": PID}            the server was forked
    {"id": N, "error": "..."}        it could not be
    {"exited": PID, "code": CODE}    a server ended (CODE as asyncio's returncode: -SIG
                                      when a signal ended it)
A server's stdin is /dev/null and its stdout and stderr go to PATH. Each server has its
own session (a Ctrl-C in a terminal reaches the router only) and gets SIGTERM when this
process ends; this process ends when the router closes its stdin, or the router does.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import selectors
import signal
import sys
from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15


# what ``quantdesk serve -m MODEL`` imports before it loads the model: the runner brings
# FastAPI, the routes, the engine and llama_cpp; uvicorn picks the others when it starts
PREIMPORTS = (
    "backend.entrypoints.main",
    "backend.entrypoints.serve_cmd",
    "backend.server.runner",
    "backend.settings.default_model",
    "uvicorn.lifespan.on",
    "uvicorn.loops.auto",
    "uvicorn.protocols.http.auto",
)


def preimport() -> None:
    for name in PREIMPORTS:
        importlib.import_module(name)


def _send(message: dict[str, Any]) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def _returncode(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send({"exited": pid, "code": _returncode(status)})


def _become_server(request: dict[str, Any]) -> None:
    """In the fork: detach, redirect, take the request's environment and run ``quantdesk``
    with its argv; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
            # its argv stays the zygote's; its name (top, ps -o comm) says what it is
            libc.prctl(PR_SET_NAME, ctypes.c_char_p(b"quantdesk-serve"), 0, 0, 0)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
        os.environ.clear()
        os.environ.update(request["env"])
        argv = [str(arg) for arg in request["argv"]]
        sys.argv = ["quantdesk", *argv]
        from backend.entrypoints.main import main

        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # anything else: say it in the log, exit 1
        with contextlib.suppress(Exception):
            sys.stderr.write(f"quantdesk: error: {type(exc).__name__}: {exc}\n")
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _fork(request: dict[str, Any]) -> None:
    try:
        pid = os.fork()
    except OSError as exc:
        _send({"id": request.get("id"), "error": f"fork failed: {exc}"})
        return
    if pid == 0:
        _become_server(request)
    _send({"id": request.get("id"), "pid": pid})


def serve_forks() -> int:
    """Read requests from stdin until it closes, forking a server for each."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the selector through wake_w
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ, "stdin")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    pending = b""
    while True:
        for key, _ in selector.select():
            if key.data == "child":
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 512)
                _reap()
                continue
            chunk = os.read(0, 65536)
            if not chunk:
                _reap()
                return 0
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.strip():
                    _fork(json.loads(line))


def main() -> int:
    preimport()
    gc.collect()
    gc.freeze()  # what was imported stays shared with the forks
    _send({"ready": os.getpid()})
    return serve_forks()


if __name__ == "__main__":
    sys.exit(main())
