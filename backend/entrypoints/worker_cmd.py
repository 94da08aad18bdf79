"""``quantdesk worker``: offer this machine's devices to other machines' llama.cpp, as
llama.cpp's ``rpc-server`` does (``quantdesk serve --rpc`` or ``llama-server --rpc``).

llama.cpp's RPC server blocks for good and cannot be stopped from inside, so it runs on a
daemon thread and the process ends on Ctrl-C or SIGTERM (without Python's shutdown, which
would tear down llama.cpp under the serving thread).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from backend.core.errors import ConfigError, QuantDeskError
from backend.core.units import human_bytes
from backend.llama.backend_init import init_llama_backend
from backend.llama.rpc_errors import RpcEndpointError, RpcError
from backend.llama.rpc_ggml import rpc_supported
from backend.llama.rpc_probe import probe_worker
from backend.llama.rpc_worker import describe, run_rpc_server, worker_devices
from backend.settings.flags import add_settings_flags, settings_from_args
from backend.settings.paths import subdir
from backend.settings.worker_settings import WorkerSettings, is_loopback

log = logging.getLogger(__name__)

NO_AUTH_WARNING = (
    "WARNING: llama.cpp's RPC protocol has no authentication and no encryption: anyone who "
    "can reach {endpoint} can use this machine's devices and memory and send it tensors. "
    "Use it on a LAN or VPN you trust only."
)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "worker",
        help="offer this machine's GPUs or CPU to another machine's server (llama.cpp RPC)",
        description="Serve this machine's devices as a llama.cpp RPC worker, like llama.cpp's "
        "rpc-server: another machine runs 'quantdesk serve --rpc HOST:PORT' (or "
        "llama-server --rpc) and places layers of its model here. The RPC protocol has no "
        "authentication: binds 127.0.0.1 unless --allow-remote; LAN or VPN only.",
    )
    add_settings_flags(parser, WorkerSettings)
    parser.add_argument(
        "--check",
        action="store_true",
        help="say whether this build has llama.cpp's RPC backend and list the devices it "
        "would offer, then exit (0: available, 2: not built with RPC)",
    )
    parser.set_defaults(handler=run)


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _device_lines(names: list[str]) -> list[str]:
    return [
        f"  {d.name}: {d.description} ({human_bytes(d.free_bytes)} free of "
        f"{human_bytes(d.total_bytes)})"
        for d in describe(worker_devices(names))
    ]


def _check(settings: WorkerSettings) -> int:
    if not rpc_supported():
        _out("RPC: not available (llama-cpp-python was built without GGML_RPC; make install "
             "builds it with RPC)")  # fmt: skip
        return 2
    _out("RPC: available (llama.cpp RPC backend); this worker would offer:")
    for line in _device_lines(settings.devices):
        _out(line)
    return 0


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(WorkerSettings, args)
    init_llama_backend(logging.getLogger("llama_cpp.native"))
    if args.check:
        return _check(settings)
    if not is_loopback(settings.host) and not settings.allow_remote:
        raise ConfigError(
            f"refusing to bind {settings.host}: the RPC protocol has no authentication, so "
            "anyone who can reach the port could use this machine; pass --allow-remote to "
            "offer it on a LAN or VPN you trust"
        )
    if not rpc_supported():
        raise RpcError("this llama.cpp build has no RPC backend (rebuild with make install)")
    cache_dir = settings.cache_dir or (subdir("rpc-cache") if settings.cache else None)
    devices = worker_devices(settings.devices)
    sys.stderr.write(NO_AUTH_WARNING.format(endpoint=settings.endpoint) + "\n")
    _out(f"quantdesk worker: offering {len(devices)} device(s) on {settings.endpoint}")
    for line in _device_lines(settings.devices):
        _out(line)
    if cache_dir is not None:
        _out(f"  tensor cache: {cache_dir}")

    stopped = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = threading.Thread(
        target=run_rpc_server,
        args=(settings.endpoint, devices, settings.threads, cache_dir),
        name="rpc-server",
        daemon=True,
    )
    server.start()
    ready = False
    while not stopped.wait(0.2):
        if not server.is_alive():
            raise QuantDeskError(
                f"the RPC server stopped: could not listen on {settings.endpoint} "
                "(port in use? llama.cpp's message is above)"
            )
        if not ready:
            ready = _ready(settings.endpoint)
    _out("quantdesk worker: stopped")
    sys.stderr.flush()
    os._exit(0)


def _ready(endpoint: str) -> bool:
    """Whether the worker answers its own handshake yet (printed once it does)."""
    host, _, port = endpoint.partition(":")
    local = f"127.0.0.1:{port}" if host in ("0.0.0.0", "localhost") else endpoint
    try:
        probe = probe_worker(local, timeout_s=2.0)
    except RpcEndpointError:
        return False
    version = ".".join(map(str, probe.version))
    _out(f"quantdesk worker: ready on {endpoint} (RPC protocol {version})")
    return True
