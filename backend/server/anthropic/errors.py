"""Anthropic's error shape, ``{"type": "error", "error": {"type", "message"}}``, which every
answer under ``/v1/messages`` carries instead of OpenAI's (the SDKs and Claude Code read it).
"""

from __future__ import annotations

MESSAGES_PATH = "/v1/messages"

# Anthropic's error types by HTTP status (others: invalid_request_error below 500,
# api_error from 500 on). 503 (a model still loading) is their "overloaded": retry soon.
_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def is_messages_path(path: str) -> bool:
    """Whether ``path`` is one of the Messages API's (``/v1/messages``, ``.../count_tokens``)."""
    return path == MESSAGES_PATH or path.startswith(MESSAGES_PATH + "/")


def error_type(status: int) -> str:
    return _TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, message: str) -> dict[str, object]:
    return {"type": "error", "error": {"type": error_type(status), "message": message}}
