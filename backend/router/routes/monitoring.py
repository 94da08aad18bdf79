"""GET /health (the router, or one model with ?model=), /v1/stats and /metrics, each
model's numbers labelled with its id."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from backend.router.child_server import ChildServer
from backend.router.metrics_relabel import escape_label, merge_metrics
from backend.router.routes.models import pool_of
from backend.server.auth import has_valid_key, require_api_key
from backend.server.errors import ApiError

router = APIRouter()


def _client(request: Request) -> httpx.AsyncClient:
    client: httpx.AsyncClient = request.app.state.upstream
    return client


@router.get("/health")
async def health(request: Request, model: str | None = None) -> JSONResponse:
    """Without ``model``: the router is up (200) and, for a client with the key, which
    models are resident. With it: 200 once that model is loaded and its server ready;
    503 with ``status`` loading / unloaded / error otherwise."""
    pool = pool_of(request)
    detailed = has_valid_key(request)
    if model is None:
        body: dict[str, Any] = {"status": "ok", "role": "router"}
        if detailed:
            body["models"] = {e.model_id: e.state for e in pool.resident()}
        return JSONResponse(body)
    entry = pool.entry(model)
    if entry.state == "failed":
        shown = entry.error if detailed else "see the server log"
        return JSONResponse({"status": "error", "error": shown}, status_code=503)
    child = entry.child
    if entry.state != "loaded" or child is None:
        return JSONResponse({"status": entry.state}, status_code=503)
    try:
        r = await _client(request).get(f"{child.base_url}/health", headers=child.headers)
    except httpx.TransportError:
        return JSONResponse({"status": "error", "error": "no answer"}, status_code=503)
    answer: dict[str, Any] = r.json()
    if not detailed:
        answer.pop("model", None)
        answer.pop("error", None)
    return JSONResponse(answer, status_code=r.status_code)


async def _fetch(request: Request, child: ChildServer, path: str) -> httpx.Response | None:
    try:
        return await _client(request).get(f"{child.base_url}{path}", headers=child.headers)
    except httpx.TransportError:
        return None


def _loaded(request: Request, model: str | None) -> list[ChildServer]:
    pool = pool_of(request)
    if model is not None:
        entry = pool.entry(model)
        if entry.child is None or entry.state != "loaded":
            raise ApiError(
                503,
                f"the model '{entry.model_id}' is {entry.state}",
                type_="server_error",
                code="model_not_loaded",
            )
        return [entry.child]
    return [e.child for e in pool.resident() if e.child is not None and e.state == "loaded"]


@router.get("/v1/stats", dependencies=[Depends(require_api_key)])
async def stats(request: Request, model: str | None = None) -> JSONResponse:
    """With ``model``: that model's snapshot, as a single server answers. Without: the
    snapshot of every loaded model (each names its model in ``model.id``)."""
    children = _loaded(request, model)
    answers = await asyncio.gather(*(_fetch(request, c, "/v1/stats") for c in children))
    snapshots = [r.json() for r in answers if r is not None and r.status_code == 200]
    if model is not None:
        if not snapshots:
            raise ApiError(503, "the model did not answer", type_="server_error")
        return JSONResponse(snapshots[0])
    return JSONResponse({"object": "list", "data": snapshots})


@router.get("/metrics", dependencies=[Depends(require_api_key)])
async def metrics(request: Request) -> Response:
    """Every loaded model's metrics, each sample labelled ``model="<id>"``."""
    children = _loaded(request, None)
    answers = await asyncio.gather(*(_fetch(request, c, "/metrics") for c in children))
    texts = {
        c.model_id: r.text
        for c, r in zip(children, answers, strict=True)
        if r is not None and r.status_code == 200
    }
    return Response(merge_metrics(texts) + _router_metrics(request), media_type=CONTENT_TYPE_LATEST)


def _router_metrics(request: Request) -> str:
    """The router's own view of each resident model: its admitted memory estimate and the
    requests it is answering."""
    resident = [e for e in pool_of(request).resident() if e.state == "loaded"]
    families = (
        ("quantdesk_router_model_memory_bytes", "Memory estimate a resident model was "
         "admitted with, bytes", lambda e: e.memory_bytes or 0),
        ("quantdesk_router_model_in_flight", "Requests a resident model is answering",
         lambda e: e.in_flight),
    )  # fmt: skip
    lines: list[str] = []
    for name, help_text, value in families:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [
            f'{name}{{model="{escape_label(e.model_id)}"}} {float(value(e))}' for e in resident
        ]
    return "".join(line + "\n" for line in lines)
