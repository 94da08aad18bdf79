"""GET /v1/models and /models (every library model with its state), POST /models/load and
POST /models/unload, as llama-server's router answers them."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from backend.router.model_pool import ModelPool, PoolEntry, llama_status
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
    said = llama_status(entry)
    status: dict[str, Any] = {"value": said.pop("status"), **said}
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


@router.get("/models/sse")
async def model_events(request: Request) -> StreamingResponse:
    """llama-server's router events: ``data: {"model", "event", "data"}`` as each model's
    state changes (``model_status``: loading, loaded, unloaded; a failure is unloaded with
    ``failed``), until the client leaves or the router stops."""
    pool = pool_of(request)

    async def stream() -> AsyncIterator[bytes]:
        with pool.events.subscribe() as queue:
            yield b": model events\n\n"  # headers out now: the client knows it is listening
            while not _stopping(request):
                try:
                    item = await asyncio.wait_for(queue.get(), timeout=1.0)
                except TimeoutError:
                    if await request.is_disconnected():
                        return
                    continue
                if item is None:
                    return
                yield f"data: {json.dumps(item)}\n\n".encode()

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


def _stopping(request: Request) -> bool:
    server = getattr(request.app.state, "uvicorn", None)
    return bool(getattr(server, "should_exit", False))


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
