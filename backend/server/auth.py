"""Bearer API-key check, compared in constant time."""

from __future__ import annotations

import secrets

from fastapi import Request

from backend.server.errors import ApiError


def has_valid_key(request: Request) -> bool:
    """Whether the request carries the server's key (always true on a keyless server)."""
    expected: str | None = request.app.state.server_settings.api_key
    if not expected:
        return True
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(
        token.strip().encode(), expected.encode()
    )


async def require_api_key(request: Request) -> None:
    if not has_valid_key(request):
        raise ApiError(
            401,
            "missing or invalid API key: send 'Authorization: Bearer <key>'",
            type_="invalid_request_error",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
