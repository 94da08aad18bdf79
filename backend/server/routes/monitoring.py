"""GET /health, /v1/stats (JSON for the dashboard) and /metrics (Prometheus)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from backend.server.auth import require_api_key
from backend.server.generation import ready_engine

router = APIRouter()


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    state = request.app.state
    if getattr(state, "load_error", None):
        return JSONResponse({"status": "error", "error": state.load_error}, status_code=503)
    engine = getattr(state, "engine", None)
    if engine is None or not engine.ready:
        return JSONResponse({"status": "loading"}, status_code=503)
    if engine.scheduler.failure:
        return JSONResponse({"status": "error", "error": engine.scheduler.failure}, status_code=503)
    return JSONResponse({"status": "ok", "model": engine.model_id})


@router.get("/v1/stats", dependencies=[Depends(require_api_key)])
async def stats(request: Request) -> dict[str, Any]:
    snapshot: dict[str, Any] = ready_engine(request).stats()
    return snapshot


@router.get("/metrics", dependencies=[Depends(require_api_key)])
async def metrics(request: Request) -> Response:
    ready_engine(request)
    return Response(
        generate_latest(request.app.state.metrics_registry), media_type=CONTENT_TYPE_LATEST
    )
