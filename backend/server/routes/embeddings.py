"""POST /v1/embeddings: OpenAI-shaped embeddings from the loaded model."""

from __future__ import annotations

import base64
import threading
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
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
from backend.server.errors import ApiError
from backend.server.generation import (
    ClientDisconnectedError,
    engine_for,
    off_loop,
    on_disconnect,
)
from backend.server.pooled_context import closed_at_shutdown, context_for
from backend.server.routes.tokenize import ensure_utf8

router = APIRouter(dependencies=[Depends(require_api_key)], lifespan=closed_at_shutdown("embedder"))


class EmbeddingRequest(BaseModel):
    """OpenAI's embeddings request; unknown fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    input: str | list[str] | list[int] | list[list[int]] = Field(
        description="Text, a list of texts, a token array or a list of token arrays"
    )
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, ge=1, description="Must equal the model's dimension")
    user: str | None = None


def get_embedder(request: Request, engine: Engine) -> Embedder:
    return context_for(request, engine, "embedder", Embedder)


def _token_lists(body: EmbeddingRequest, engine: Engine, max_inputs: int) -> list[list[int]]:
    raw = body.input
    items: list[str | list[int]]
    if isinstance(raw, str):
        items = [raw]
    elif raw and all(isinstance(x, int) for x in raw):
        items = [[int(x) for x in raw if isinstance(x, int)]]
    else:
        items = [x for x in raw if isinstance(x, str)] or [  # strings or token arrays
            [int(t) for t in x] for x in raw if isinstance(x, list)
        ]
    if not items:
        raise ApiError(400, "input must not be empty", param="input")
    if len(items) > max_inputs:
        raise ApiError(
            400,
            f"input has {len(items)} items; at most {max_inputs} per request on this server "
            "(--max-embedding-inputs)",
            param="input",
        )
    vocab = engine.runtime.n_vocab
    lists: list[list[int]] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            if not item:
                raise ApiError(400, f"input[{i}] is an empty string", param="input")
            text = ensure_utf8(item, f"input[{i}]")
            tokens = engine.tokenize(text, add_special=True, parse_special=False)
        else:
            tokens = [int(t) for t in item]
            if any(not 0 <= t < vocab for t in tokens):
                raise ApiError(
                    400, f"input[{i}]: token ids must be in 0..{vocab - 1}", param="input"
                )
        if not tokens:
            raise ApiError(400, f"input[{i}] has no tokens", param="input")
        lists.append(tokens)
    return lists


@router.post("/v1/embeddings", response_model=dict[str, Any])
async def create_embeddings(body: EmbeddingRequest, request: Request) -> JSONResponse:
    engine = engine_for(request, body.model)
    embedder = get_embedder(request, engine)
    if body.dimensions is not None and body.dimensions != embedder.n_embd:
        raise ApiError(
            400,
            f"dimensions={body.dimensions} is not supported: this model's embeddings have "
            f"{embedder.n_embd} dimensions",
            param="dimensions",
        )
    max_inputs: int = request.app.state.server_settings.max_embedding_inputs
    lists = await off_loop(_token_lists, body, engine, max_inputs)
    gone = threading.Event()  # the client left: stop between decodes, free the context
    try:
        embedder.check_lengths(lists)
        async with on_disconnect(request, gone.set):
            # anyio's pool, not off_loop's: calls queued on the embedder's lock must not
            # take the workers that prepare generation requests
            vectors = await run_in_threadpool(embedder.embed, lists, gone.is_set)
    except EmbeddingCancelledError:
        raise ClientDisconnectedError from None
    except EmbeddingUnsupportedError as exc:
        raise ApiError(400, str(exc), param=exc.param, code="model_cannot_embed") from None
    except EmbeddingInputTooLongError as exc:
        raise ApiError(400, str(exc), param=exc.param, code="context_length_exceeded") from None
    except InvalidRequestError as exc:
        raise ApiError(400, str(exc), param=exc.param, code="invalid_value") from None
    n_tokens = sum(len(t) for t in lists)

    def answer() -> JSONResponse:  # hundreds of thousands of floats as JSON: off the loop
        data: list[dict[str, Any]] = []
        for i, row in enumerate(vectors):
            embedding: list[float] | str
            if body.encoding_format == "base64":
                embedding = base64.b64encode(row.astype("<f4").tobytes()).decode()
            else:
                embedding = row.tolist()
            data.append({"object": "embedding", "index": i, "embedding": embedding})
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": engine.model_id,
                "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
            }
        )

    return await off_loop(answer)
