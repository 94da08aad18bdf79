"""Every other POST (chat, completions, embeddings, infill, tokenize, and any path a model's
server answers) goes to the model its body names, loaded on demand; the child answers it,
validation included. A body without ``model`` goes where backend/router/model_choice.py
says, and so does one under /v1/messages that names no library model (Claude Code's
``claude-...`` names)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from backend.router.model_choice import model_for_messages, model_for_unnamed_request
from backend.router.proxy import proxy
from backend.router.routes.models import pool_of
from backend.server.anthropic.errors import is_messages_path
from backend.server.auth import require_api_key
from backend.server.errors import ApiError
from backend.server.json_body import loads_body

router = APIRouter(dependencies=[Depends(require_api_key)])


def _model_and_ttl(body: bytes) -> tuple[str | None, float | None, bytes]:
    """The body's ``model`` and ``ttl`` (seconds, as LM Studio takes it; removed from the
    body the child sees)."""
    data: Any = loads_body(body) if body else {}
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_request")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, "model: must be a string", param="model", code="invalid_request")
    ttl: float | None = None
    if "ttl" in data:
        value = data.pop("ttl")
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ApiError(400, "ttl: seconds, a number >= 0", param="ttl", code="invalid_value")
        ttl = float(value)
        body = json.dumps(data).encode()
    return model, ttl, body


@router.post("/{path:path}", include_in_schema=False)
async def proxied(path: str, request: Request) -> Response:
    body = await request.body()
    model, ttl, body = _model_and_ttl(body)
    pool = pool_of(request)
    preloaded = request.app.state.preloaded
    if not model:
        model_id = model_for_unnamed_request(pool, preloaded)
    elif is_messages_path(request.url.path):
        model_id = await model_for_messages(
            pool, preloaded, model, request.app.state.fallback_names_told
        )
    else:
        model_id = (await pool.find(model)).model_id
    return await proxy(request, pool, request.app.state.relay, model_id, body, ttl)
