"""The embeddings routes: OpenAI's ``POST /v1/embeddings`` and llama-server's native
``POST /embeddings`` (also ``/embedding``), on a context of their own on the loaded model
(backend/engine/embedder.py). The bodies and prompt shapes: backend/server/embedding_inputs.py.

As llama-server answers them:

- /v1/embeddings with ``input``: OpenAI's list object, ``usage`` counting every prompt's
  tokens (special tokens included; prompt_tokens = total_tokens); base64 items also say
  ``"encoding_format": "base64"``. With ``content`` instead: the native answer below. A
  model that pools none (``--pooling none``) is refused: per-token vectors are not OpenAI's.
- /embeddings, /embedding: a bare list of ``{"index", "embedding"}``, ``embedding`` a list
  of vectors: the one pooled vector, or with pooling none one per token, not normalised.
  ``encoding_format`` is checked but the vectors are floats, as there.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from backend.engine.embedder import (
    Embedder,
    EmbeddingCancelledError,
    EmbeddingInputTooLongError,
    EmbeddingUnsupportedError,
)
from backend.engine.engine import Engine
from backend.engine.errors import InvalidRequestError
from backend.server.auth import require_api_key
from backend.server.embedding_inputs import EmbeddingRequest, prompt_tokens, split_prompts
from backend.server.errors import ApiError
from backend.server.generation import (
    ClientDisconnectedError,
    engine_for,
    off_loop,
    on_disconnect,
)
from backend.server.pooled_context import closed_at_shutdown, context_for

__all__ = ["EmbeddingRequest", "create_embeddings", "router"]

router = APIRouter(dependencies=[Depends(require_api_key)], lifespan=closed_at_shutdown("embedder"))

# the most numbers a per-token answer (pooling none) holds: 16M floats are ~64 MB as
# float32 and several times that as JSON, held at once while the answer is written
PER_TOKEN_FLOATS = 16 * 1024 * 1024
# llama-server's refusal of pooling none on /v1/embeddings, and where to go instead
POOLING_NONE_REFUSAL = (
    "Pooling type 'none' is not OAI compatible. Please use a different pooling type: this "
    "server embeds per token (--pooling none, or a GGUF that declares pooling none), and "
    "POST /embeddings answers those vectors; serve the model with --pooling mean, cls or "
    "last for /v1/embeddings"
)


def get_embedder(request: Request, engine: Engine) -> Embedder:
    return context_for(request, engine, "embedder", Embedder)


def _token_lists(body: EmbeddingRequest, engine: Engine, max_inputs: int) -> list[list[int]]:
    """Each prompt's tokens (backend/server/embedding_inputs.py), with 400s that name the
    field and the item."""
    field = "content" if body.native else "input"
    prompts, batch = split_prompts(body.prompts())
    if not prompts:
        raise ApiError(400, f"{field} must not be empty", param=field)
    if len(prompts) > max_inputs:
        raise ApiError(
            400,
            f"{field} has {len(prompts)} items; at most {max_inputs} per request on this server "
            "(--max-embedding-inputs)",
            param=field,
        )
    return [
        prompt_tokens(engine, prompt, f"{field}[{i}]" if batch else field)
        for i, prompt in enumerate(prompts)
    ]


@router.post("/v1/embeddings", response_model=dict[str, Any])
async def create_embeddings(body: EmbeddingRequest, request: Request) -> JSONResponse:
    """OpenAI's embeddings (llama-server's bare list for a body with ``content``)."""
    return await _embeddings(body, request, openai_route=True)


@router.post("/embeddings", response_model=list[dict[str, Any]])
async def native_embeddings(body: EmbeddingRequest, request: Request) -> JSONResponse:
    """llama-server's embeddings: per token with pooling none."""
    return await _embeddings(body, request, openai_route=False)


@router.post("/embedding", response_model=list[dict[str, Any]])
async def native_embedding(body: EmbeddingRequest, request: Request) -> JSONResponse:
    """llama-server's older name for POST /embeddings."""
    return await _embeddings(body, request, openai_route=False)


async def _embeddings(
    body: EmbeddingRequest, request: Request, *, openai_route: bool
) -> JSONResponse:
    engine = engine_for(request, body.model)
    embedder = get_embedder(request, engine)
    try:
        per_token = embedder.pools_none
    except EmbeddingUnsupportedError as exc:
        raise ApiError(400, str(exc), param=exc.param, code="model_cannot_embed") from None
    if openai_route and per_token:
        raise ApiError(400, POOLING_NONE_REFUSAL, param="model", code="pooling_none")
    if body.dimensions is not None and body.dimensions != embedder.n_embd:
        raise ApiError(
            400,
            f"dimensions={body.dimensions} is not supported: this model's embeddings have "
            f"{embedder.n_embd} dimensions",
            param="dimensions",
        )
    max_inputs: int = request.app.state.server_settings.max_embedding_inputs
    lists = await off_loop(_token_lists, body, engine, max_inputs)
    native = not openai_route or body.native
    gone = threading.Event()  # the client left: stop between decodes, free the context
    n_tokens = sum(len(t) for t in lists)
    if per_token and n_tokens * embedder.n_embd > PER_TOKEN_FLOATS:
        raise ApiError(
            400,
            f"per-token embeddings of {n_tokens} tokens x "
            f"{embedder.n_embd} dimensions are more than one answer carries here "
            f"({PER_TOKEN_FLOATS:,} numbers): send fewer or shorter inputs",
            param="input",
            code="invalid_value",
        )
    try:
        embedder.check_lengths(lists)
        async with on_disconnect(request, gone.set):
            # anyio's pool, not off_loop's: calls queued on the embedder's lock must not
            # take the workers that prepare generation requests
            if native:
                rows = await run_in_threadpool(
                    lambda: embedder.embed_tokens(lists, gone.is_set, norm=body.embd_normalize)
                )
            else:
                vectors = await run_in_threadpool(
                    lambda: embedder.embed(lists, gone.is_set, norm=body.embd_normalize)
                )
    except EmbeddingCancelledError:
        raise ClientDisconnectedError from None
    except EmbeddingUnsupportedError as exc:
        raise ApiError(400, str(exc), param=exc.param, code="model_cannot_embed") from None
    except EmbeddingInputTooLongError as exc:
        raise ApiError(400, str(exc), param=exc.param, code="context_length_exceeded") from None
    except InvalidRequestError as exc:
        raise ApiError(400, str(exc), param=exc.param, code="invalid_value") from None
    # hundreds of thousands of floats as JSON: off the loop
    if native:
        return await off_loop(_native_answer, rows)
    return await off_loop(_openai_answer, vectors, body, engine, n_tokens)


def _native_answer(rows: list[np.ndarray]) -> JSONResponse:
    return JSONResponse([{"index": i, "embedding": r.tolist()} for i, r in enumerate(rows)])


def _openai_answer(
    vectors: np.ndarray, body: EmbeddingRequest, engine: Engine, n_tokens: int
) -> JSONResponse:
    data: list[dict[str, Any]] = []
    for i, row in enumerate(vectors):
        item: dict[str, Any] = {"object": "embedding", "index": i}
        if body.encoding_format == "base64":
            item["embedding"] = base64.b64encode(row.astype("<f4").tobytes()).decode()
            item["encoding_format"] = "base64"
        else:
            item["embedding"] = row.tolist()
        data.append(item)
    return JSONResponse(
        {
            "object": "list",
            "data": data,
            "model": engine.model_id,
            # llama-server's count: every prompt's tokens, special tokens included
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        }
    )
