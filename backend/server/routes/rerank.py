"""POST /v1/rerank (also /rerank, /v1/reranking, /reranking, as llama-server answers):
documents ranked against a query by a reranker GGUF (``backend/engine/reranker.py``).

``documents`` gets the Jina/Cohere answer (``results`` of ``{index, relevance_score}``,
best first, ``document`` with ``return_documents``); ``texts`` gets Hugging Face TEI's bare
list of ``{index, score}`` (``text`` with ``return_text``), as llama-server does. Scores are
the head's raw logits, as llama-server reports them."""

from __future__ import annotations

import threading

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from backend.engine.embedder import EmbeddingCancelledError
from backend.engine.engine import Engine
from backend.engine.errors import InvalidRequestError
from backend.engine.reranker import NotARerankerError, Reranker, RerankInputTooLongError
from backend.server.auth import require_api_key
from backend.server.errors import ApiError
from backend.server.generation import (
    ClientDisconnectedError,
    engine_for,
    off_loop,
    on_disconnect,
)
from backend.server.pooled_context import closed_at_shutdown, context_for
from backend.server.rerank_schemas import (
    RerankDocument,
    RerankRequest,
    RerankResponse,
    RerankResult,
    RerankUsage,
    TeiRerankResult,
)
from backend.server.routes.tokenize import ensure_utf8

router = APIRouter(dependencies=[Depends(require_api_key)], lifespan=closed_at_shutdown("reranker"))


def get_reranker(request: Request, engine: Engine) -> Reranker:
    return context_for(request, engine, "reranker", Reranker)


def _documents(body: RerankRequest, max_documents: int) -> list[str]:
    documents = body.documents if body.documents is not None else body.texts
    if documents is None:
        raise ApiError(
            400, "documents: required: the texts to rank, a list of strings", param="documents"
        )
    if not documents:
        raise ApiError(400, "documents must not be empty", param="documents")
    if len(documents) > max_documents:
        raise ApiError(
            400,
            f"documents has {len(documents)} items; at most {max_documents} per request on "
            "this server (--max-embedding-inputs)",
            param="documents",
        )
    ensure_utf8(body.query, "query")
    for i, text in enumerate(documents):
        ensure_utf8(text, f"documents[{i}]")
    return documents


@router.post("/v1/rerank", response_model=RerankResponse)
@router.post("/rerank", response_model=RerankResponse, include_in_schema=False)
@router.post("/v1/reranking", response_model=RerankResponse, include_in_schema=False)
@router.post("/reranking", response_model=RerankResponse, include_in_schema=False)
async def rerank(body: RerankRequest, request: Request) -> JSONResponse:
    engine = engine_for(request, body.model)
    reranker = get_reranker(request, engine)
    max_documents: int = request.app.state.server_settings.max_embedding_inputs
    gone = threading.Event()  # the client left: stop between decodes, free the context
    try:
        await off_loop(reranker.check_model)  # reads the GGUF's tensor list once
        documents = _documents(body, max_documents)
        pairs = await off_loop(reranker.format_pairs, body.query, documents)
        reranker.check_lengths(pairs)
        async with on_disconnect(request, gone.set):
            # anyio's pool, as embeddings: calls queued on the context's lock must not take
            # the workers that prepare generation requests
            scores = await run_in_threadpool(reranker.score, pairs, gone.is_set)
    except EmbeddingCancelledError:
        raise ClientDisconnectedError from None
    except NotARerankerError as exc:
        raise ApiError(
            400,
            f"model '{engine.model_id}' is not a reranker: {exc}",
            param="model",
            code="model_not_reranker",
        ) from None
    except RerankInputTooLongError as exc:
        raise ApiError(400, str(exc), param=exc.param, code="context_length_exceeded") from None
    except InvalidRequestError as exc:
        raise ApiError(400, str(exc), param=exc.param, code="invalid_value") from None

    order = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable: ties keep order
    order = order[: body.top_n] if body.top_n is not None else order
    if body.documents is None:  # TEI: texts in, a bare list out
        return JSONResponse(
            [
                TeiRerankResult(
                    index=i, score=scores[i], text=documents[i] if body.return_text else None
                ).model_dump(exclude_none=True)
                for i in order
            ]
        )
    n_tokens = sum(len(p) for p in pairs)
    answer = RerankResponse(
        model=engine.model_id,
        usage=RerankUsage(prompt_tokens=n_tokens, total_tokens=n_tokens),
        results=[
            RerankResult(
                index=i,
                relevance_score=scores[i],
                document=RerankDocument(text=documents[i]) if body.return_documents else None,
            )
            for i in order
        ],
    )
    return JSONResponse(answer.model_dump(exclude_none=True))
