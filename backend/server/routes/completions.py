"""POST /v1/completions."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from sse_starlette.sse import EventSourceResponse

from backend.engine.request_types import FinishEvent
from backend.server.auth import require_api_key
from backend.server.errors import ApiError
from backend.server.generation import (
    check_model,
    collect,
    finish_reason,
    new_id,
    now,
    ready_engine,
    sampling_params,
    stream_sse,
    timings_dict,
    usage_dict,
)
from backend.server.schemas import CompletionRequest

router = APIRouter(dependencies=[Depends(require_api_key)])


def _prompt_tokens(body: CompletionRequest, request: Request) -> list[int]:
    engine = request.app.state.engine
    prompt = body.prompt
    if isinstance(prompt, list):
        if prompt and all(isinstance(p, int) for p in prompt):
            return [int(p) for p in prompt]
        if len(prompt) != 1:
            raise ApiError(
                400, "send one prompt per request (a list of one string)", param="prompt"
            )
        prompt = str(prompt[0])
    if not prompt:
        raise ApiError(400, "prompt must not be empty", param="prompt")
    tokens: list[int] = engine.tokenize(str(prompt), add_special=True, parse_special=True)
    return tokens


@router.post("/v1/completions", response_model=None)
async def completions(body: CompletionRequest, request: Request) -> Any:
    engine = ready_engine(request)
    check_model(engine, body.model)
    if body.n != 1 or (body.best_of is not None and body.best_of != 1):
        raise ApiError(400, "n > 1 and best_of > 1 are not supported yet", param="n")
    if body.echo or body.logprobs or body.suffix:
        raise ApiError(400, "echo, logprobs and suffix are not supported yet", param="echo")
    tokens = _prompt_tokens(body, request)
    vocab = engine.runtime.n_vocab
    if any(not 0 <= t < vocab for t in tokens):
        raise ApiError(400, f"prompt token ids must be in 0..{vocab - 1}", param="prompt")
    limit = request.app.state.server_settings.max_tokens_limit
    max_tokens = engine.resolve_max_tokens(
        len(tokens), min(body.max_tokens, limit) if body.max_tokens else 16, limit
    )
    sampling = sampling_params(body, engine)
    stop = body.stop_list()
    cid = new_id("cmpl")
    created = now()
    model = engine.model_id

    def chunk(text: str, reason: str | None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "text": text, "finish_reason": reason, "logprobs": None}],
        }

    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)

        def usage_chunk(fin: FinishEvent) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage_dict(fin),
            }

        events = await stream_sse(
            engine,
            tokens,
            max_tokens,
            sampling,
            stop,
            first_chunks=[],
            delta_chunk=lambda text: chunk(text, None),
            final_chunk=lambda fin: chunk("", finish_reason(fin)),
            usage_chunk=usage_chunk if include_usage else None,
        )
        return EventSourceResponse(events, ping=15)

    text, fin = await collect(engine, tokens, max_tokens, sampling, stop)
    result = chunk(text, finish_reason(fin))
    result["usage"] = usage_dict(fin)
    result["timings"] = timings_dict(fin)
    return result
