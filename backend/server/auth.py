"""Bearer API-key check, compared in constant time."""

from __future__ import annotations

import secrets

from fastapi import Request

from backend.server.errors import ApiError


async def require_api_key(request: Request) -> None:
    expected: str | None = request.app.state.server_settings.api_key
    if not expected:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(
        token.strip().encode(), expected.encode()
    ):
        raise ApiError(
            401,
            "missing or invalid API key: send 'Authorization: Bearer <key>'",
            type_="invalid_request_error",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
