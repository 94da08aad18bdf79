"""Ollama's discovery and embedding routes on the single-model server: ``/`` ("Ollama is
running"), ``/api/version``, ``/api/tags``, ``/api/show``, ``/api/ps``, ``/api/embed`` and
``/api/embeddings``. Pulling, deleting and copying manage a library: ``quantdesk serve``
over the library answers them (backend/router/routes/ollama_library.py); here they are a
clear 400."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import PlainTextResponse

from backend.engine.engine import Engine
from backend.gguf_file.gguf_header import read_gguf_header
from backend.server.auth import require_api_key
from backend.server.errors import ApiError
from backend.server.generation import (
    DEFAULT_MIN_P,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_K,
    DEFAULT_TOP_P,
    model_names,
    off_loop,
    ready_engine,
)
from backend.server.ollama.model_facts import details, digest, show_body, tag_entry
from backend.server.ollama.names import ollama_name, served_name
from backend.server.ollama.schemas import (
    OllamaEmbeddingsRequest,
    OllamaEmbedRequest,
    OllamaModelRequest,
)
from backend.server.routes import embeddings

OLLAMA_VERSION = "0.12.6"  # the Ollama API version these routes follow
FOREVER = "2318-01-01T00:00:00Z"  # Ollama's expires_at of a model kept loaded

router = APIRouter(dependencies=[Depends(require_api_key)])
public = APIRouter()  # what Ollama answers without a key


@public.get("/", response_class=PlainTextResponse, include_in_schema=False)
@public.head("/", response_class=PlainTextResponse, include_in_schema=False)
async def running() -> str:
    return "Ollama is running"


@public.get("/api/version")
async def version() -> dict[str, str]:
    return {"version": OLLAMA_VERSION}


def named_engine(request: Request, name: str) -> Engine:
    """The served engine if ``name`` names it (``:latest`` or not), else Ollama's 404."""
    engine = ready_engine(request)
    if served_name(name).casefold() not in model_names(engine):
        raise ApiError(404, f"model '{name}' not found", param="model")
    return engine


def default_parameters(engine: Engine) -> dict[str, Any]:
    return {
        "num_ctx": engine.n_ctx,
        "temperature": DEFAULT_TEMPERATURE,
        "top_k": DEFAULT_TOP_K,
        "top_p": DEFAULT_TOP_P,
        "min_p": DEFAULT_MIN_P,
    }


@router.get("/api/tags")
async def tags(request: Request) -> dict[str, Any]:
    engine = ready_engine(request)
    header = await off_loop(read_gguf_header, engine.model_path)
    return {"models": [tag_entry(engine.model_id, engine.model_path, header)]}


@router.post("/api/show")
async def show(body: OllamaModelRequest, request: Request) -> dict[str, Any]:
    engine = named_engine(request, body.which())
    template = engine.chat_template.source if engine.can_generate else None
    return show_body(
        engine.model_id,
        engine.model_path,
        await off_loop(read_gguf_header, engine.model_path),
        engine.capabilities,
        template,
        default_parameters(engine),
    )


@router.get("/api/ps")
async def ps(request: Request) -> dict[str, Any]:
    engine = ready_engine(request)
    path = engine.model_path
    stats = engine.stats()
    size = path.stat().st_size
    on_gpu = stats.model.n_gpu_layers
    header = await off_loop(read_gguf_header, path)
    blocks = max(header.block_count, 1)
    name = ollama_name(engine.model_id)
    return {
        "models": [
            {
                "name": name,
                "model": name,
                "size": size,
                "digest": digest(path),
                "details": details(header),
                "expires_at": FOREVER,  # one model, served until the server stops
                "size_vram": int(size * min(on_gpu, blocks) / blocks),
                "context_length": engine.n_ctx,
            }
        ]
    }


async def _vectors(request: Request, model: str, texts: list[str]) -> list[list[float]]:
    body = embeddings.EmbeddingRequest.model_validate({"input": texts, "model": served_name(model)})
    answer = await embeddings.create_embeddings(body, request)
    data = json.loads(bytes(answer.body))["data"]
    return [item["embedding"] for item in sorted(data, key=lambda d: d["index"])]


@router.post("/api/embed")
async def embed(body: OllamaEmbedRequest, request: Request) -> dict[str, Any]:
    named_engine(request, body.model)
    texts = [body.input] if isinstance(body.input, str) else list(body.input)
    if texts == [""]:
        texts = []  # Ollama's empty input: no vectors (it only loads)
    for i, text in enumerate(texts):
        if not text:
            raise ApiError(400, f"input[{i}] is empty: every input needs text", param="input")
    t0 = datetime.now(UTC)
    vectors = await _vectors(request, body.model, texts) if texts else []
    if body.dimensions is not None:
        vectors = [_shortened(v, body.dimensions) for v in vectors]
    took = int((datetime.now(UTC) - t0).total_seconds() * 1e9)
    return {"model": body.model, "embeddings": vectors, "total_duration": took}


def _shortened(vector: list[float], n: int) -> list[float]:
    """The first ``n`` values, normalised again (Ollama's ``dimensions``)."""
    head = vector[:n]
    norm = sum(x * x for x in head) ** 0.5 or 1.0
    return [x / norm for x in head]


@router.post("/api/embeddings")
async def embeddings_legacy(body: OllamaEmbeddingsRequest, request: Request) -> dict[str, Any]:
    named_engine(request, body.model)
    if not body.prompt:
        return {"embedding": []}
    return {"embedding": (await _vectors(request, body.model, [body.prompt]))[0]}


def _library_only(what: str) -> ApiError:
    return ApiError(
        400,
        f"{what} manages the model library: this server serves one model (serve -m); "
        "run `quantdesk serve` over the library to pull, delete or copy models",
    )


@router.post("/api/pull")
async def pull(_body: OllamaModelRequest) -> None:
    raise _library_only("pull")


@router.delete("/api/delete")
async def delete(_body: OllamaModelRequest) -> None:
    raise _library_only("delete")


@router.post("/api/copy")
async def copy(_body: OllamaModelRequest) -> None:
    raise _library_only("copy")
