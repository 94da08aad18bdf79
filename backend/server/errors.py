"""OpenAI-shaped error bodies: ``{"error": {"message", "type", "param", "code"}}``; under
``/v1/messages``, Anthropic's ``{"type": "error", "error": {"type", "message"}}``; under
``/api/``, Ollama's ``{"error": "..."}``."""

from __future__ import annotations

import logging
import sys

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend.core.errors import QuantDeskError
from backend.engine.errors import (
    ContextOverflowError,
    EngineStoppedError,
    InvalidRequestError,
    QueueFullError,
)
from backend.engine.media.media_errors import MediaError
from backend.server.anthropic import errors as anthropic_errors
from backend.server.ollama import errors as ollama_errors

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error answered as-is by the exception handler."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code
        self.headers = headers


def error_body(message: str, type_: str, param: str | None, code: str | None) -> dict[str, object]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def error_body_for_path(
    path: str, status: int, message: str, type_: str, code: str | None
) -> dict[str, object]:
    """The error body a client of ``path`` reads: Anthropic's under ``/v1/messages``,
    OpenAI's elsewhere (for the answers made before routing: the body limit, the Host check)."""
    if anthropic_errors.is_messages_path(path):
        return anthropic_errors.error_body(status, message)
    if ollama_errors.is_ollama_path(path):
        return ollama_errors.error_body(message)
    return error_body(message, type_, None, code)


def too_deep_message() -> str:
    """The 400 for a JSON body nested past Python's JSON decoder (a RecursionError)."""
    return (
        "the request body nests arrays or objects deeper than the JSON decoder takes "
        f"(about {sys.getrecursionlimit()} levels)"
    )


def _printable(text: str | None) -> str | None:
    """``text`` with any lone surrogate (echoed from a hostile body) written as ``\\udXXX``,
    since UTF-8 cannot encode it and the error response itself would fail."""
    return None if text is None else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _response(err: ApiError, request: Request) -> JSONResponse:
    message = _printable(err.message) or ""
    if anthropic_errors.is_messages_path(request.url.path):
        body = anthropic_errors.error_body(err.status, message)
    elif ollama_errors.is_ollama_path(request.url.path):
        body = ollama_errors.error_body(message)
    else:
        body = error_body(message, err.type, _printable(err.param), err.code)
    return JSONResponse(body, status_code=err.status, headers=err.headers)


def to_api_error(exc: Exception) -> ApiError:
    """Map engine exceptions onto HTTP statuses."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ContextOverflowError):
        return ApiError(400, str(exc), param=exc.param, code="context_length_exceeded")
    if isinstance(exc, MediaError):
        code = "image_too_large" if exc.status == 413 else "invalid_image"
        return ApiError(exc.status, str(exc), param=exc.param, code=code)
    if isinstance(exc, InvalidRequestError):
        return ApiError(400, str(exc), param=exc.param, code="invalid_value")
    if isinstance(exc, QueueFullError):
        return ApiError(
            429,
            str(exc),
            type_="rate_limit_error",
            code="server_busy",
            headers={"Retry-After": str(exc.retry_after_s)},
        )
    if isinstance(exc, EngineStoppedError):
        return ApiError(503, str(exc), type_="server_error", code="engine_unavailable")
    if isinstance(exc, UnicodeEncodeError) and "surrogate" in exc.reason:
        # request text with a lone surrogate that no validator caught before it was encoded
        return ApiError(
            400,
            "the request holds text that is not valid Unicode (a lone UTF-16 surrogate)",
            code="invalid_request",
        )
    log.exception("unhandled error", exc_info=exc)
    return ApiError(500, f"internal error: {exc}", type_="server_error", code="internal_error")


_SCALAR_TAGS = frozenset({"str", "int", "float", "bool"})


def _union_tag(part: object) -> bool:
    """A union member pydantic puts in an error's location (``str``, ``list[int]``,
    ``literal['none','auto']``): a type, not a field of the request."""
    return isinstance(part, str) and (part in _SCALAR_TAGS or "[" in part)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _response(exc, request)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        loc = [str(p) for p in first.get("loc", ()) if p != "body" and not _union_tag(p)]
        # a model-level validator names the field it faults in its context
        ctx = first.get("ctx")
        ctx_param = ctx.get("param") if isinstance(ctx, dict) else None
        param = ctx_param if isinstance(ctx_param, str) else ".".join(loc) or None
        if first.get("type") == "json_invalid":
            message = "the request body is not valid JSON"
        else:
            message = f"{param or 'body'}: {first.get('msg')}"
        return _response(ApiError(400, message, param=param, code="invalid_request"), request)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        type_ = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        message = str(exc.detail)
        if isinstance(exc.__cause__, RecursionError):  # FastAPI's own body parsing
            message = too_deep_message()
        return _response(ApiError(exc.status_code, message, type_=type_), request)

    @app.exception_handler(QuantDeskError)
    async def _engine(request: Request, exc: QuantDeskError) -> JSONResponse:
        return _response(to_api_error(exc), request)

    @app.exception_handler(Exception)
    async def _any(request: Request, exc: Exception) -> JSONResponse:
        return _response(to_api_error(exc), request)
