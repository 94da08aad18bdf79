"""GET /v1/models and /models (every library model with its state), POST /models/load and
POST /models/unload, as llama-server's router answers them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from backend.router.model_pool import ModelPool, PoolEntry
from backend.server.auth import require_api_key, shows_local_paths

router = APIRouter(dependencies=[Depends(require_api_key)])


class ModelRequest(BaseModel):
    model: str = Field(min_length=1, description="Model id (or file name) from GET /models")


class LoadRequest(ModelRequest):
    pin: bool | None = Field(
        default=None,
        description="true: never evict it or unload it when idle; false: it may be again; "
        "absent: keep it as it is",
    )


def pool_of(request: Request) -> ModelPool:
    pool: ModelPool = request.app.state.pool
    return pool


def model_card(entry: PoolEntry, request: Request) -> dict[str, Any]:
    status: dict[str, Any] = {"value": entry.state}
    if entry.state == "failed":
        status["failed"] = True
        status["error"] = entry.error
    card: dict[str, Any] = {
        "id": entry.model_id,
        "object": "model",
        "created": int(entry.path.stat().st_mtime) if entry.path.exists() else 0,
        "owned_by": "quantdesk",
        "status": status,
        "pinned": entry.pinned,
        "in_flight": entry.in_flight,
        "memory_bytes": entry.memory_bytes,
    }
    facts = pool_of(request).catalog.get(entry.model_id)
    if facts is not None:
        card["architecture"] = facts.architecture
        card["type"] = facts.model_type  # "embeddings" serves /v1/embeddings only
        card["modalities"] = facts.modalities()
        card["capabilities"], card["context_length"] = facts.facts()
    if entry.state == "loaded":
        card["idle_s"] = round(max(0.0, time.monotonic() - entry.last_used), 1)
    card["path"] = str(entry.path) if shows_local_paths(request) else entry.path.name
    return card


@router.get("/models", include_in_schema=False)
@router.get("/v1/models")
async def list_models(request: Request) -> dict[str, Any]:
    pool = pool_of(request)
    await asyncio.to_thread(pool.catalog.refresh)  # reads every GGUF header: off the loop
    return {"object": "list", "data": [model_card(e, request) for e in pool.entries()]}


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(model_id: str, request: Request) -> dict[str, Any]:
    return model_card(await pool_of(request).find(model_id), request)


@router.post("/models/load")
async def load_model(body: LoadRequest, request: Request) -> dict[str, Any]:
    """Load the model now (answered once it is ready, or with the load's error); ``pin``
    pins or unpins it (a loaded model is pinned or unpinned without a reload)."""
    pool = pool_of(request)
    entry = await pool.load((await pool.find(body.model)).model_id, pin=body.pin)
    return {
        "success": True,
        "model": entry.model_id,
        "status": {"value": entry.state},
        "pinned": entry.pinned,
    }


@router.post("/models/unload")
async def unload_model(body: ModelRequest, request: Request) -> dict[str, Any]:
    """Stop the model's server (its requests in flight end with an error)."""
    pool = pool_of(request)
    entry = await pool.unload((await pool.find(body.model)).model_id)
    return {"success": True, "model": entry.model_id, "status": {"value": entry.state}}
