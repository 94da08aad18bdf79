"""API-key check, compared in constant time: ``Authorization: Bearer <key>`` (OpenAI's
clients, Claude Code's ANTHROPIC_AUTH_TOKEN) or ``x-api-key: <key>`` (Anthropic's SDKs,
Claude Code's ANTHROPIC_API_KEY)."""

from __future__ import annotations

import secrets

from fastapi import Request

from backend.server.errors import ApiError
from backend.server.host_check import is_loopback


def has_valid_key(request: Request) -> bool:
    """Whether the request carries the server's key (always true on a keyless server)."""
    expected: str | None = request.app.state.server_settings.api_key
    if not expected:
        return True
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and secrets.compare_digest(
        token.strip().encode(), expected.encode()
    ):
        return True
    api_key = request.headers.get("x-api-key")
    return api_key is not None and secrets.compare_digest(
        api_key.strip().encode(), expected.encode()
    )


def shows_local_paths(request: Request) -> bool:
    """Whether the client may see file paths on this machine (they name the user's home and
    account): only a client on loopback that sends the key; a keyless server shows none."""
    if not request.app.state.server_settings.api_key or not has_valid_key(request):
        return False
    return request.client is not None and is_loopback(request.client.host)


async def require_api_key(request: Request) -> None:
    if not has_valid_key(request):
        raise ApiError(
            401,
            "missing or invalid API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'",
            type_="invalid_request_error",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
