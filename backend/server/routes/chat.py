"""POST /v1/chat/completions."""

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
from backend.server.schemas import ChatCompletionRequest

router = APIRouter(dependencies=[Depends(require_api_key)])


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(body: ChatCompletionRequest, request: Request) -> Any:
    engine = ready_engine(request)
    check_model(engine, body.model)
    if body.n != 1:
        raise ApiError(400, "n > 1 is not supported yet", param="n")
    messages: list[dict[str, Any]] = []
    for m in body.messages:
        msg = m.model_dump(exclude_none=True)
        msg["content"] = m.text()
        messages.append(msg)
    tokens = engine.render_chat(messages, tools=body.tools)
    limit = request.app.state.server_settings.max_tokens_limit
    asked = body.max_completion_tokens or body.max_tokens
    max_tokens = engine.resolve_max_tokens(len(tokens), min(asked, limit) if asked else None, limit)
    sampling = sampling_params(body, engine)
    stop = body.stop_list()
    cid = new_id("chatcmpl")
    created = now()
    model = engine.model_id

    def chunk(delta: dict[str, Any], reason: str | None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}],
        }

    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)

        def usage_chunk(fin: FinishEvent) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "chat.completion.chunk",
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
            first_chunks=[chunk({"role": "assistant", "content": ""}, None)],
            delta_chunk=lambda text: chunk({"content": text}, None),
            final_chunk=lambda fin: chunk({}, finish_reason(fin)),
            usage_chunk=usage_chunk if include_usage else None,
        )
        return EventSourceResponse(events, ping=15)

    text, fin = await collect(engine, tokens, max_tokens, sampling, stop)
    return {
        "id": cid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason(fin),
                "logprobs": None,
            }
        ],
        "usage": usage_dict(fin),
        "timings": timings_dict(fin),
    }
