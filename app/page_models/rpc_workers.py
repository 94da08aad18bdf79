"""The Server page's RPC workers, without Qt: the list as ``serve --rpc`` takes it, what a
probe of one worker says in words, and how the window starts ``quantdesk worker`` to share
this machine.

A worker is another machine's ``quantdesk worker`` (or llama.cpp's ``rpc-server``) whose
devices hold layers of the served model. The list is the ``rpc`` knob itself
(``host:port,host:port``), so it is saved with the other knobs, remembered per model, and
reaches ``serve`` as ``--rpc``. A probe (:mod:`backend.llama.rpc_probe`, pure Python) says
whether a worker answers and how much memory its devices have free.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Literal

from backend.core.units import human_bytes
from backend.llama.rpc_errors import RpcEndpointError
from backend.llama.rpc_probe import WorkerProbe, probe_worker, split_endpoint
from backend.settings.engine_settings import rpc_endpoints

PROBE_TIMEOUT_S = 4.0
"""How long a Test waits for each step of a worker's answer (a busy one says nothing)."""

WorkerState = Literal["untested", "testing", "ready", "unreachable", "busy", "error"]

STATE_WORDS: dict[WorkerState, str] = {
    "untested": "not tested",
    "testing": "testing…",
    "ready": "ready",
    "unreachable": "unreachable",
    "busy": "busy",
    "error": "not a worker",
}


def parse_workers(rpc: str | None) -> list[str]:
    """The endpoints of an ``rpc`` knob, in order."""
    return rpc_endpoints(rpc)


def join_workers(endpoints: list[str]) -> str | None:
    """The ``rpc`` knob for ``endpoints`` (``None``: no workers, serve alone)."""
    return ",".join(endpoints) or None


def normalize_endpoint(text: str) -> str:
    """``host:port`` as typed, checked the way llama.cpp parses it; a bare host gets
    the worker's default port. Raises ``ValueError`` with words for the page."""
    text = text.strip()
    for scheme in ("tcp://", "rpc://"):
        if text.lower().startswith(scheme):
            text = text[len(scheme) :]
    if text and ":" not in text:
        text = f"{text}:{DEFAULT_WORKER_PORT}"
    try:
        host, port = split_endpoint(text)
    except RpcEndpointError:
        example = "e.g. 192.168.1.20:50052"
        raise ValueError(f"{text or 'an empty address'} is not host:port ({example})") from None
    if any(c.isspace() for c in host):
        raise ValueError(f"{host!r} is not a host name or address")
    return f"{host}:{port}"


@dataclass(frozen=True)
class WorkerView:
    """One row of the Workers list: its state in a word, the free memory, and the
    detail (the devices, or what went wrong) for the tooltip and the line below."""

    state: WorkerState
    memory: str
    detail: str

    @property
    def state_text(self) -> str:
        return STATE_WORDS[self.state]


UNTESTED = WorkerView("untested", "", "Press Test to ask the worker for its devices")
TESTING = WorkerView("testing", "", "asking the worker for its devices…")


def probe_view(probe: WorkerProbe) -> WorkerView:
    """A worker that answered: its devices' free memory."""
    devices = "; ".join(
        f"device {d.index}: {human_bytes(d.free_bytes)} free of {human_bytes(d.total_bytes)}"
        for d in probe.devices
    )
    count = len(probe.devices)
    plural = "s" if count != 1 else ""
    memory = f"{human_bytes(probe.free_bytes)} free ({count} device{plural})"
    version = ".".join(map(str, probe.version))
    return WorkerView("ready", memory, f"RPC protocol {version}; {devices}")


def failure_view(message: str) -> WorkerView:
    """A worker that did not answer: the probe's message, sorted into a state word."""
    text = message.lower()
    if "unreachable" in text:
        state: WorkerState = "unreachable"
        hint = " Is 'quantdesk worker' running there, and is the port open?"
    elif "did not answer" in text or "busy" in text:
        state, hint = "busy", ""
    else:
        state, hint = "error", ""
    message = message.rstrip()
    if hint and not message.endswith((".", "?", "!")):
        message += "."
    return WorkerView(state, "", message + hint)


def probe(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> WorkerProbe:
    """Ask ``endpoint`` for its devices (blocking: run it off the GUI thread)."""
    return probe_worker(endpoint, timeout_s=timeout_s)


# -- sharing this machine -----------------------------------------------------------------

DEFAULT_WORKER_PORT = 50052
"""``quantdesk worker``'s port, as llama.cpp's ``rpc-server``."""

READY_MARK = "quantdesk worker: ready on"
"""What ``quantdesk worker`` prints once it answers its own handshake."""


def worker_arguments(port: int, allow_remote: bool) -> list[str]:
    """Arguments after the launcher prefix for ``quantdesk worker``: loopback unless other
    machines are allowed, which binds every address and says so with ``--allow-remote``."""
    host = "0.0.0.0" if allow_remote else "127.0.0.1"
    argv = ["worker", "-H", host, "-p", str(port)]
    return [*argv, "--allow-remote"] if allow_remote else argv


def lan_address() -> str:
    """This machine's address on its network, as another machine would dial it (the
    route to a private address is looked up; nothing is sent). Falls back to the host
    name."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("10.255.255.255", 1))
            address = str(sock.getsockname()[0])
            if not address.startswith("127.") and address != "0.0.0.0":
                return address
    except OSError:
        pass
    return socket.gethostname()


def share_endpoint(port: int, allow_remote: bool) -> str:
    """What another machine passes to ``--rpc`` (this machine alone: the loopback one)."""
    return f"{lan_address() if allow_remote else '127.0.0.1'}:{port}"


NO_AUTH_WARNING = (
    "No password, no encryption: anyone who can reach port {port} of this machine can use "
    "its devices and memory and send it data. Share only on a LAN or VPN you trust."
)
LOOPBACK_NOTE = (
    "Only programs on this machine can connect (127.0.0.1). llama.cpp's RPC protocol has "
    "no authentication; allowing other machines opens the port to the network."
)


def share_note(port: int, allow_remote: bool) -> str:
    """The warning under the toggle: plain when other machines may connect."""
    return NO_AUTH_WARNING.format(port=port) if allow_remote else LOOPBACK_NOTE


def worker_failure(lines: list[str], exit_code: int) -> str:
    """Why ``quantdesk worker`` ended on its own, from its last lines."""
    for line in reversed(lines):
        text = line.strip()
        if text and not text.startswith("WARNING:") and not text.startswith("$ "):
            return f"The worker stopped (exit code {exit_code}): {text}"
    return f"The worker stopped (exit code {exit_code})."


def check_tensor_split(text: str) -> str | None:
    """The ``-ts`` knob for ``text`` (``None``: blank, split by free memory), validated as
    ``serve`` validates it; raises ``ValueError`` with its words."""
    from pydantic import ValidationError

    from backend.settings.engine_settings import ServingKnobs

    if not text.strip():
        return None
    try:
        return ServingKnobs.model_validate({"tensor_split": text}).tensor_split
    except ValidationError as exc:
        raise ValueError(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None
