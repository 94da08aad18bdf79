"""RPC workers as child processes: ``quantdesk worker`` on free loopback ports."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from backend.llama.rpc_errors import RpcEndpointError
from backend.llama.rpc_ggml import rpc_supported
from backend.llama.rpc_probe import WorkerProbe, probe_worker

QUANTDESK = [sys.executable, "-m", "backend.entrypoints.main"]

needs_rpc = pytest.mark.skipif(
    not rpc_supported(), reason="llama-cpp-python built without GGML_RPC (make install builds it)"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_worker(
    endpoint: str, proc: subprocess.Popen[str], timeout: float = 60.0
) -> WorkerProbe:
    """Probe ``endpoint`` until the worker answers its handshake."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"worker exited with {proc.returncode}"
        try:
            return probe_worker(endpoint, timeout_s=2.0)
        except RpcEndpointError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@dataclass
class Worker:
    proc: subprocess.Popen[str]
    endpoint: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    """Start ``quantdesk worker -t 1`` on a free loopback port; stopped at the end."""
    started: list[Worker] = []

    def start(*extra: str) -> Worker:
        port = free_port()
        log = tmp_path / f"worker-{port}.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [*QUANTDESK, "worker", "--port", str(port), "-t", "1", *extra],
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )
        worker = Worker(proc, f"127.0.0.1:{port}", log)
        started.append(worker)
        wait_for_worker(worker.endpoint, proc)
        deadline = time.monotonic() + 60  # and it said so (its own handshake got through)
        while f"ready on {worker.endpoint}" not in worker.output():
            assert proc.poll() is None and time.monotonic() < deadline, worker.output()
            time.sleep(0.1)
        return worker

    yield start
    for worker in started:
        if worker.proc.poll() is None:
            worker.proc.terminate()
        worker.proc.wait(timeout=30)


def layers_as_placed(model: str, endpoints: str, tmp_path: Path, *extra: str) -> dict[str, str]:
    """Start ``quantdesk -v serve -m MODEL --rpc ENDPOINTS EXTRA`` until it serves, stop it,
    and read llama.cpp's own log: layer index -> the device it was assigned to (and the
    server's log text as ``"log"``)."""
    command = [*QUANTDESK, "-v", "serve", "-m", model, "-t", "1", "-c", "512", "-np", "1"]
    command += ["--rpc", endpoints, "--port", "0", "--port-file", str(tmp_path / "port"), *extra]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = []
    assert proc.stdout is not None
    for line in proc.stdout:
        log.append(line)
        if "ready: serving" in line or "Traceback" in line:
            break
    proc.terminate()
    proc.wait(timeout=60)
    text = "".join(log)
    placed = dict(re.findall(r"layer +(\d+) assigned to device (\w+)", text))
    return {**placed, "log": text}
