"""Shared request handling for chat and completions: validation, sampling, streaming."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request

from backend.engine.engine import Engine
from backend.engine.request_types import ErrorEvent, FinishEvent, SamplingParams, TokenEvent
from backend.server.errors import ApiError, error_body, to_api_error
from backend.server.event_stream import EventStream
from backend.server.schemas import SamplingFields

# llama-server's defaults for fields a client leaves out
DEFAULT_TEMPERATURE = 0.8
DEFAULT_TOP_K = 40
DEFAULT_TOP_P = 0.95
DEFAULT_MIN_P = 0.05


def ready_engine(request: Request) -> Engine:
    engine: Engine | None = getattr(request.app.state, "engine", None)
    if engine is None or not engine.ready:
        raise ApiError(
            503,
            "the model is still loading",
            type_="server_error",
            code="model_loading",
            headers={"Retry-After": "1"},
        )
    return engine


def check_model(engine: Engine, model: str | None) -> None:
    if model and model not in (engine.model_id, engine.model_path.name):
        raise ApiError(
            404,
            f"the model '{model}' does not exist; this server serves '{engine.model_id}'",
            param="model",
            code="model_not_found",
            type_="not_found_error",
        )


def sampling_params(body: SamplingFields, engine: Engine) -> SamplingParams:
    bias: dict[int, float] = {}
    for key, value in (body.logit_bias or {}).items():
        try:
            bias[int(key)] = float(value)
        except ValueError:
            raise ApiError(
                400, f"logit_bias key '{key}' is not a token id", param="logit_bias"
            ) from None
    seed = body.seed if body.seed is not None else engine.settings.seed
    return SamplingParams(
        temperature=DEFAULT_TEMPERATURE if body.temperature is None else body.temperature,
        top_k=DEFAULT_TOP_K if body.top_k is None else body.top_k,
        top_p=DEFAULT_TOP_P if body.top_p is None else body.top_p,
        min_p=DEFAULT_MIN_P if body.min_p is None else body.min_p,
        repeat_penalty=1.0 if body.repeat_penalty is None else body.repeat_penalty,
        presence_penalty=body.presence_penalty or 0.0,
        frequency_penalty=body.frequency_penalty or 0.0,
        seed=seed if seed is not None and seed >= 0 else None,
        logit_bias=bias,
        grammar=body.grammar,
        ignore_eos=body.ignore_eos,
    )


def usage_dict(finish: FinishEvent) -> dict[str, Any]:
    return {
        "prompt_tokens": finish.prompt_tokens,
        "completion_tokens": finish.completion_tokens,
        "total_tokens": finish.prompt_tokens + finish.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": finish.cached_tokens},
    }


def timings_dict(finish: FinishEvent) -> dict[str, Any]:
    return {"ttft_ms": finish.ttft_ms, "predicted_per_second": finish.gen_tokens_per_s}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def finish_reason(finish: FinishEvent) -> str:
    return "length" if finish.finish_reason == "length" else "stop"


async def collect(
    engine: Engine, tokens: list[int], max_tokens: int, sampling: SamplingParams, stop: list[str]
) -> tuple[str, FinishEvent]:
    """Run one sequence to the end and return its text and finish event."""
    stream = EventStream()
    req = engine.submit(
        tokens, max_tokens=max_tokens, sampling=sampling, sink=stream.sink, stop=stop
    )
    parts: list[str] = []
    finished = False
    try:
        async for event in stream:
            if isinstance(event, TokenEvent):
                parts.append(event.text)
            elif isinstance(event, ErrorEvent):
                finished = True
                raise ApiError(500, event.message, type_="server_error", code="engine_error")
            elif isinstance(event, FinishEvent):
                finished = True
                return "".join(parts), event
    finally:
        if not finished:  # the client went away: free the sequence now
            engine.cancel(req.request_id)
    raise ApiError(500, "the sequence ended without a result", type_="server_error")


async def stream_sse(
    engine: Engine,
    tokens: list[int],
    max_tokens: int,
    sampling: SamplingParams,
    stop: list[str],
    *,
    first_chunks: list[dict[str, Any]],
    delta_chunk: Callable[[str], dict[str, Any]],
    final_chunk: Callable[[FinishEvent], dict[str, Any]],
    usage_chunk: Callable[[FinishEvent], dict[str, Any]] | None,
) -> AsyncIterator[dict[str, str]]:
    """Submit (errors raise before the response starts), then yield SSE events."""
    stream = EventStream()
    req = engine.submit(
        tokens, max_tokens=max_tokens, sampling=sampling, sink=stream.sink, stop=stop
    )

    async def events() -> AsyncIterator[dict[str, str]]:
        finished = False
        try:
            for chunk in first_chunks:
                yield {"data": json.dumps(chunk)}
            async for event in stream:
                if isinstance(event, TokenEvent):
                    yield {"data": json.dumps(delta_chunk(event.text))}
                elif isinstance(event, FinishEvent):
                    finished = True
                    yield {"data": json.dumps(final_chunk(event))}
                    if usage_chunk is not None:
                        yield {"data": json.dumps(usage_chunk(event))}
                elif isinstance(event, ErrorEvent):
                    finished = True
                    err = to_api_error(ApiError(500, event.message, type_="server_error"))
                    yield {
                        "data": json.dumps(error_body(err.message, err.type, None, "engine_error"))
                    }
            yield {"data": "[DONE]"}
        finally:
            if not finished:  # disconnect: the sequence leaves the batch next step
                engine.cancel(req.request_id)

    return events()


def now() -> int:
    return int(time.time())
