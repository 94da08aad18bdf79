"""Ask an RPC worker who it is, in llama.cpp's RPC wire format, without llama.cpp.

llama.cpp's RPC client aborts the whole process (``GGML_ABORT``) when a worker cannot be
reached or its handshake fails. Before the server hands an endpoint to llama.cpp, it probes
it here: a TCP connection with a timeout, the HELLO handshake (protocol version), the
device count and each device's memory, the same commands llama.cpp sends
(``ggml/src/ggml-rpc/ggml-rpc.cpp``: one command byte, a little-endian uint64 size, the
payload; the answer is a uint64 size and the payload). The probe's connection then closes,
so the worker is free for the server's own.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from backend.llama.rpc_errors import RpcEndpointError

# ggml-rpc.h / ggml-rpc.cpp of the llama.cpp that llama-cpp-python 0.3.36 vendors
RPC_PROTO_MAJOR_VERSION = 7
RPC_CONN_CAPS_SIZE = 24
_CMD_GET_DEVICE_MEMORY = 11
_CMD_HELLO = 14
_CMD_DEVICE_COUNT = 15


@dataclass(frozen=True)
class RemoteDevice:
    """One device an RPC worker offers."""

    index: int
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class WorkerProbe:
    """What an RPC worker answered."""

    endpoint: str
    version: tuple[int, int, int]
    devices: tuple[RemoteDevice, ...]

    @property
    def free_bytes(self) -> int:
        return sum(device.free_bytes for device in self.devices)


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``host:port`` as llama.cpp parses it (the first colon splits them)."""
    host, sep, port_text = endpoint.strip().partition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise RpcEndpointError(f"RPC endpoint {endpoint!r} is not host:port")
    return host, int(port_text)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the worker closed the connection")
        data += chunk
    return bytes(data)


def _command(sock: socket.socket, cmd: int, payload: bytes, answer_size: int) -> bytes:
    sock.sendall(bytes([cmd]) + struct.pack("<Q", len(payload)) + payload)
    (size,) = struct.unpack("<Q", _recv_exact(sock, 8))
    if size != answer_size:
        raise ConnectionError(f"answer of {size} bytes to command {cmd}, expected {answer_size}")
    return _recv_exact(sock, size)


def probe_worker(endpoint: str, timeout_s: float = 5.0) -> WorkerProbe:
    """Connect to ``endpoint``, shake hands and read its devices' memory; raise
    :class:`RpcEndpointError` saying what went wrong, within about ``timeout_s`` seconds
    per step. A worker serves one client at a time: one that is serving another server
    accepts the connection but answers nothing, and is reported busy."""
    host, port = split_endpoint(endpoint)
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as exc:
        raise RpcEndpointError(f"RPC worker {endpoint} is unreachable: {exc}") from None
    with sock:
        try:
            hello = _command(sock, _CMD_HELLO, bytes(RPC_CONN_CAPS_SIZE), 4 + RPC_CONN_CAPS_SIZE)
            version = (hello[0], hello[1], hello[2])
            if version[0] != RPC_PROTO_MAJOR_VERSION:
                raise RpcEndpointError(
                    f"RPC worker {endpoint} speaks protocol {'.'.join(map(str, version))}, "
                    f"this build {RPC_PROTO_MAJOR_VERSION}.x: run the same llama.cpp on both"
                )
            (count,) = struct.unpack("<I", _command(sock, _CMD_DEVICE_COUNT, b"", 4))
            devices = []
            for index in range(count):
                answer = _command(sock, _CMD_GET_DEVICE_MEMORY, struct.pack("<I", index), 16)
                free, total = struct.unpack("<QQ", answer)
                devices.append(RemoteDevice(index, free, total))
        except TimeoutError:
            raise RpcEndpointError(
                f"RPC worker {endpoint} accepted but did not answer within {timeout_s:g} s "
                "(busy serving another client? a worker serves one at a time)"
            ) from None
        except (OSError, ConnectionError) as exc:
            raise RpcEndpointError(
                f"RPC worker {endpoint} broke off the handshake ({exc}): not a llama.cpp RPC "
                "worker, or another protocol version"
            ) from None
    if not devices:
        raise RpcEndpointError(f"RPC worker {endpoint} offers no devices")
    return WorkerProbe(endpoint, version, tuple(devices))
