"""CORS with refusals a client can read: Starlette's middleware, whose refused preflight
(an origin, method or header not allowed) is a JSON error body instead of its plain text,
in Anthropic's shape under ``/v1/messages`` and OpenAI's elsewhere."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from backend.server.errors import error_body_for_path


class ShapedCORSMiddleware(CORSMiddleware):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "OPTIONS":
            headers = Headers(scope=scope)
            if headers.get("origin") is not None and "access-control-request-method" in headers:
                response = self.preflight_response(request_headers=headers)
                if response.status_code >= 400:
                    refusal = bytes(response.body).decode()  # "Disallowed CORS origin, ..."
                    message = (
                        f"{refusal}: this server allows loopback origins and those given "
                        "with --cors-origin"
                    )
                    kept = {
                        k: v
                        for k, v in response.headers.items()
                        if k.startswith("access-") or k == "vary"
                    }
                    body = error_body_for_path(
                        scope["path"], 403, message, "permission_error", "cors_refused"
                    )
                    response = JSONResponse(body, status_code=403, headers=kept)
                await response(scope, receive, send)
                return
        await super().__call__(scope, receive, send)
