"""Reject requests whose ``Host`` is not a local name, against DNS rebinding.

A keyless server on loopback trusts whatever reaches it. A web page on a domain whose
DNS record the attacker points at 127.0.0.1 can then call the API from the victim's
browser as a same-origin request (CORS does not apply), but the browser still sends the
attacker's domain as ``Host``. So while the server is bound to loopback, only loopback
names are accepted, plus names the user allows with ``--allowed-host``.

A request without a ``Host`` header (HTTP/1.0) passes: rebinding needs a browser, and
browsers always send one.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from backend.server.errors import error_body_for_path

LOCAL_NAMES = frozenset({"localhost"})


def is_loopback(host: str) -> bool:
    """Whether a bind address (or a ``Host`` name) only reaches this machine."""
    host = host.strip("[]").lower()
    if host in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """The name in a ``Host`` value, without port, lower-cased: ``[::1]:8080`` -> ``[::1]``."""
    value = value.strip().lower()
    if value.startswith("["):  # IPv6 literal, maybe with a port
        end = value.find("]")
        return value[: end + 1] if end != -1 else value
    if value.count(":") > 1:  # a bare IPv6 address, as a user may type it
        return f"[{value}]"
    name = value.partition(":")[0]
    return name[:-1] if name.endswith(".") else name


class HostCheck:
    """Pure ASGI middleware: 403 for a ``Host`` not allowed, in OpenAI's error shape (in
    Anthropic's under ``/v1/messages``)."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(host_name(h) for h in allowed_hosts)

    def allows(self, host: str | None) -> bool:
        if host is None:
            return True
        name = host_name(host)
        # any loopback IP literal passes too: an IP literal cannot be rebound
        return is_loopback(name) or name in self.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        raw = next((v for k, v in scope["headers"] if k == b"host"), None)
        host = raw.decode("latin-1") if raw is not None else None
        if self.allows(host):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await _forbidden(send, host or "", scope["path"])


async def _forbidden(send: Send, host: str, path: str) -> None:
    message = (
        f"Host '{host}' is not allowed: this server is bound to loopback and answers only "
        "localhost, 127.0.0.1 and [::1]; start it with --allowed-host NAME to accept another name"
    )
    shaped = error_body_for_path(path, 403, message, "permission_error", "host_not_allowed")
    body = json.dumps(shaped).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
