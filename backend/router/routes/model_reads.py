"""The GET and DELETE routes that belong to one model's server, in router mode:

- llama-server's ``GET /props`` and ``GET /slots`` (llama.vscode and the llama.cpp web UI
  read ``/props`` first): the model that ``?model=`` names, as llama-server's router takes
  it, else the one a request without a model gets (backend/router/model_choice.py), loaded
  on demand like any request;
- ``GET``/``DELETE /v1/responses/{id}``: a stored response lives in the server of the
  model that made it, so the resident models are asked in turn; the first that has it
  answers, and none having it is the 404 a single server gives.
"""

from __future__ import annotations

import asyncio

import httpx
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from backend.router.child_server import ChildServer
from backend.router.model_choice import model_for_unnamed_request
from backend.router.proxy import proxy
from backend.router.routes.models import pool_of
from backend.server.auth import require_api_key
from backend.server.errors import ApiError

router = APIRouter(dependencies=[Depends(require_api_key)])


async def _one_model(request: Request, model: str | None) -> Response:
    pool = pool_of(request)
    if model:
        model_id = (await pool.find(model)).model_id
    else:
        model_id = model_for_unnamed_request(pool, request.app.state.preloaded)
    relay = request.app.state.relay
    dropped = ("model",)
    return await proxy(request, pool, relay, model_id, b"", None, method="GET", drop_query=dropped)


@router.get("/props", include_in_schema=False)
async def props(request: Request, model: str | None = None) -> Response:
    return await _one_model(request, model)


@router.get("/slots", include_in_schema=False)
async def slots(request: Request, model: str | None = None) -> Response:
    return await _one_model(request, model)


async def _ask(
    client: httpx.AsyncClient, child: ChildServer, method: str, path: str
) -> httpx.Response | None:
    try:
        return await client.request(method, f"{child.base_url}{path}", headers=child.headers)
    except httpx.TransportError:
        return None


async def _stored_response(request: Request, response_id: str) -> Response:
    pool = pool_of(request)
    client: httpx.AsyncClient = request.app.state.upstream
    children = [e.child for e in pool.resident() if e.state == "loaded" and e.child is not None]
    answers = await asyncio.gather(
        *(_ask(client, c, request.method, request.url.path) for c in children)
    )
    for answer in answers:
        if answer is not None and answer.status_code != 404:
            return Response(
                answer.content,
                status_code=answer.status_code,
                media_type=answer.headers.get("content-type"),
            )
    raise ApiError(
        404,
        f"no stored response has the id '{response_id}' (responses are kept by the server "
        "of the model that made them, while it stays loaded)",
        param="response_id",
        code="response_not_found",
    )


@router.get("/responses/{response_id}", include_in_schema=False)
@router.get("/v1/responses/{response_id}", include_in_schema=False)
async def get_response(request: Request, response_id: str) -> Response:
    return await _stored_response(request, response_id)


@router.delete("/responses/{response_id}", include_in_schema=False)
@router.delete("/v1/responses/{response_id}", include_in_schema=False)
async def delete_response(request: Request, response_id: str) -> Response:
    return await _stored_response(request, response_id)
