"""GET /health, /v1/stats (JSON for the dashboard) and /metrics (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from backend.engine.stats_model import StatsSnapshot
from backend.server.auth import has_valid_key, require_api_key
from backend.server.generation import ready_engine

router = APIRouter()


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    """Open to all (load balancers probe it), but with a key set only a client that
    sends it learns which model (whose id is often its file name) or what failed."""
    state = request.app.state
    detailed = has_valid_key(request)
    engine = getattr(state, "engine", None)
    failure = getattr(state, "load_error", None) or (
        engine.scheduler.failure if engine is not None and engine.ready else None
    )
    if failure:
        shown = failure if detailed else "see the server log"
        return JSONResponse({"status": "error", "error": shown}, status_code=503)
    if engine is None or not engine.ready:
        return JSONResponse({"status": "loading"}, status_code=503)
    if not detailed:
        return JSONResponse({"status": "ok"})
    return JSONResponse({"status": "ok", "model": engine.model_id})


@router.get("/v1/stats", dependencies=[Depends(require_api_key)])
async def stats(request: Request) -> StatsSnapshot:
    """The engine's counters, rates, latencies, KV and memory use (docs/STATS.md)."""
    return ready_engine(request).stats()


@router.get("/metrics", dependencies=[Depends(require_api_key)])
async def metrics(request: Request) -> Response:
    ready_engine(request)
    return Response(
        generate_latest(request.app.state.metrics_registry), media_type=CONTENT_TYPE_LATEST
    )
