"""GET /v1/models."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from backend.server.auth import require_api_key, shows_local_paths
from backend.server.generation import check_model, ready_engine

router = APIRouter(dependencies=[Depends(require_api_key)])


def model_card(request: Request) -> dict[str, Any]:
    engine = ready_engine(request)
    path = engine.model_path if shows_local_paths(request) else engine.model_path.name
    return {
        "id": engine.model_id,
        "object": "model",
        "created": engine.created,
        "owned_by": "quantdesk",
        "capabilities": engine.capabilities,
        "context_length": engine.n_ctx,
        "meta": {
            "path": str(path),
            "n_ctx": engine.n_ctx,
            "n_ctx_train": engine.runtime.info.n_ctx_train,
            "n_params": engine.runtime.info.n_params,
            "size": engine.runtime.info.size_bytes,
            "modalities": engine.modalities(),
            "capabilities": engine.capabilities,
            "mmproj": engine.projector.path.name if engine.projector else None,
        },
    }


@router.get("/models", include_in_schema=False)
@router.get("/v1/models")
async def list_models(request: Request) -> dict[str, Any]:
    return {"object": "list", "data": [model_card(request)]}


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(model_id: str, request: Request) -> dict[str, Any]:
    check_model(ready_engine(request), model_id)
    return model_card(request)
