"""``quantdesk worker``: llama.cpp's RPC server behind our CLI, on loopback ports."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
from collections.abc import Callable

import pytest

from backend.llama.rpc_errors import RpcEndpointError
from backend.llama.rpc_probe import probe_worker
from tests.rpc.conftest import QUANTDESK, Worker, free_port, needs_rpc

pytestmark = needs_rpc


def test_check_reports_rpc_and_the_devices_offered() -> None:
    done = subprocess.run([*QUANTDESK, "worker", "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "RPC: available" in done.stdout
    assert "  CPU: " in done.stdout and "free of" in done.stdout


def test_a_non_loopback_host_is_refused_without_allow_remote() -> None:
    port = free_port()
    done = subprocess.run(
        [*QUANTDESK, "worker", "--host", "0.0.0.0", "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--allow-remote" in lines[0] and "no authentication" in lines[0]
    with pytest.raises(RpcEndpointError, match="unreachable"):
        probe_worker(f"127.0.0.1:{port}", timeout_s=2)  # nothing listens there


def test_worker_answers_the_rpc_handshake_and_stops_on_sigterm(
    start_worker: Callable[..., Worker],
) -> None:
    worker = start_worker()
    probe = probe_worker(worker.endpoint)
    assert probe.version[0] == 7 and len(probe.devices) == 1
    device = probe.devices[0]
    assert 0 < device.free_bytes <= device.total_bytes
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(timeout=30) == 0
    out = worker.output()
    assert f"offering 1 device(s) on {worker.endpoint}" in out
    assert "no authentication" in out and "LAN or VPN" in out  # the warning, on loopback too
    assert f"ready on {worker.endpoint}" in out and "quantdesk worker: stopped" in out
    with pytest.raises(RpcEndpointError, match="unreachable"):
        probe_worker(worker.endpoint, timeout_s=2)


def test_ctrl_c_stops_the_worker_cleanly(start_worker: Callable[..., Worker]) -> None:
    worker = start_worker()
    worker.proc.send_signal(signal.SIGINT)
    assert worker.proc.wait(timeout=30) == 0
    assert "quantdesk worker: stopped" in worker.output()


def test_a_port_in_use_is_an_error_not_a_hang(start_worker: Callable[..., Worker]) -> None:
    worker = start_worker()
    port = worker.endpoint.rsplit(":", 1)[1]
    done = subprocess.run(
        [*QUANTDESK, "worker", "--port", port, "-t", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "could not listen" in done.stderr


def test_probe_tells_a_stranger_from_a_worker() -> None:
    """A TCP server that is not an RPC worker (it closes at once) is not taken for one."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def close_each() -> None:
            conn, _ = server.accept()
            conn.close()

        thread = threading.Thread(target=close_each, daemon=True)
        thread.start()
        port = server.getsockname()[1]
        with pytest.raises(RpcEndpointError, match="broke off the handshake"):
            probe_worker(f"127.0.0.1:{port}", timeout_s=5)
        thread.join(timeout=5)


def test_a_worker_serving_another_client_is_reported_busy(
    start_worker: Callable[..., Worker],
) -> None:
    """A worker serves one client at a time: a second server's probe says so instead of
    waiting (llama.cpp's own handshake would block until the first client leaves)."""
    worker = start_worker()
    host, port = worker.endpoint.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as first:
        first.sendall(bytes([14]) + (24).to_bytes(8, "little") + bytes(24))  # HELLO
        assert len(first.recv(8)) == 8  # it answers the first client
        with pytest.raises(RpcEndpointError, match="busy"):
            probe_worker(worker.endpoint, timeout_s=1)
    probe_worker(worker.endpoint)  # free again once the first client left
