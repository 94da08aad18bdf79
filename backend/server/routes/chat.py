"""POST /v1/chat/completions: streaming, n > 1, logprobs, tools and structured output."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from sse_starlette.sse import EventSourceResponse

from backend.engine.request_types import (
    ErrorEvent,
    FinishEvent,
    TokenEvent,
    TokenLogprob,
    piece_bytes,
)
from backend.server.auth import require_api_key
from backend.server.chat_preparation import PreparedChat, prepare_chat
from backend.server.generation import (
    ChoiceStreams,
    check_choices,
    combined_usage,
    draft_timings,
    engine_error,
    engine_for,
    finish_reason,
    new_id,
    now,
    prepared_while_connected,
    sse,
    sse_error,
)
from backend.server.reasoning import split_whole
from backend.server.schemas import ChatCompletionRequest
from backend.server.tool_calls import OPEN, ToolCall, ToolCallStream

router = APIRouter(dependencies=[Depends(require_api_key)])


def logprob_entry(lp: TokenLogprob) -> dict[str, Any]:
    return {
        "token": lp.token,
        "logprob": lp.logprob,
        "bytes": piece_bytes(lp.token),
        "top_logprobs": [
            {"token": tok, "logprob": val, "bytes": piece_bytes(tok)} for _, tok, val in lp.top
        ],
    }


@router.post("/chat/completions", response_model=None, include_in_schema=False)
@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(body: ChatCompletionRequest, request: Request) -> Any:
    engine = engine_for(request, body.model)
    engine.check_can_generate()  # an embedding model: a clear 400
    check_choices(body.n, request)
    prep = await prepared_while_connected(
        request, lambda cancelled: prepare_chat(body, engine, request, cancelled)
    )
    # a streamed response notices a disconnect itself; a non-streamed one is watched
    streams = ChoiceStreams(engine, None if body.stream else request)
    await streams.start(
        prep.tokens, prep.max_tokens, prep.samplings, prep.engine_stop(), prep.media
    )
    cid = new_id("chatcmpl")
    created = now()
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        events = _stream(streams, prep, body.n, cid, created, engine.model_id, include_usage)
        return EventSourceResponse(events, ping=15, sep="\n")
    return await _complete(streams, prep, body.n, cid, created, engine.model_id)


async def _complete(
    streams: ChoiceStreams, prep: PreparedChat, n: int, cid: str, created: int, model: str
) -> dict[str, Any]:
    texts: list[list[str]] = [[] for _ in range(n)]
    logprobs: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    finishes: dict[int, FinishEvent] = {}
    async for index, event in streams:
        if isinstance(event, TokenEvent):
            texts[index].append(event.text)
            logprobs[index].extend(logprob_entry(lp) for lp in event.logprobs)
        elif isinstance(event, FinishEvent):
            finishes[index] = event
        elif isinstance(event, ErrorEvent):
            streams.cancel()
            raise engine_error(event)
    choices = []
    for i in range(n):
        reasoning, text = split_whole(prep.reasoning_split(), "".join(texts[i]))
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if reasoning:
            message["reasoning_content"] = reasoning
        reason = finish_reason(finishes[i])
        if prep.with_tools:
            parser = ToolCallStream(prep.tool_names)
            content, _ = parser.feed(text)
            rest, _ = parser.finish()
            calls = parser.calls[:1] if prep.one_call else parser.calls
            if calls:
                message["content"] = (content + rest).strip() or None
                message["tool_calls"] = [c.to_openai() for c in calls]
                reason = "tool_calls"
            elif reason == "length":  # a call cut off: its raw markup is no answer
                message["content"] = content + rest.partition(OPEN)[0]
        choices.append(
            {
                "index": i,
                "message": message,
                "finish_reason": reason,
                "logprobs": {"content": logprobs[i]} if prep.with_logprobs else None,
            }
        )
    ordered = [finishes[i] for i in range(n)]
    return {
        "id": cid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": choices,
        "usage": combined_usage(ordered),
        "timings": {
            "ttft_ms": ordered[0].ttft_ms,
            "predicted_per_second": ordered[0].gen_tokens_per_s,
            **draft_timings(ordered),
        },
    }


async def _stream(
    streams: ChoiceStreams,
    prep: PreparedChat,
    n: int,
    cid: str,
    created: int,
    model: str,
    include_usage: bool,
) -> AsyncIterator[dict[str, str]]:
    def chunk(
        index: int,
        delta: dict[str, Any],
        reason: str | None = None,
        logprobs: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": index,
                    "delta": delta,
                    "finish_reason": reason,
                    "logprobs": {"content": logprobs} if logprobs is not None else None,
                }
            ],
        }

    parsers = [ToolCallStream(prep.tool_names) if prep.with_tools else None for _ in range(n)]
    splits = [prep.reasoning_split() for _ in range(n)]
    n_calls = [0] * n
    finishes: dict[int, FinishEvent] = {}

    def tool_delta(index: int, calls: list[ToolCall]) -> dict[str, Any] | None:
        deltas = []
        for call in calls:
            if prep.one_call and n_calls[index]:
                break  # parallel_tool_calls false: the first call only
            deltas.append(call.to_openai(index=n_calls[index]))
            n_calls[index] += 1
        return chunk(index, {"tool_calls": deltas}) if deltas else None

    for i in range(n):
        yield sse(chunk(i, {"role": "assistant", "content": ""}))
    async for index, event in streams:
        if isinstance(event, TokenEvent):
            lps = [logprob_entry(lp) for lp in event.logprobs] if prep.with_logprobs else None
            split = splits[index]
            reasoning, text = split.feed(event.text) if split is not None else ("", event.text)
            if reasoning:
                yield sse(chunk(index, {"reasoning_content": reasoning}, logprobs=lps))
                lps = None
            parser = parsers[index]
            if parser is None:
                if text or lps:
                    yield sse(chunk(index, {"content": text}, logprobs=lps))
                continue
            content, calls = parser.feed(text)
            if content or lps:
                yield sse(chunk(index, {"content": content}, logprobs=lps))
            if calls and (delta := tool_delta(index, calls)):
                yield sse(delta)
        elif isinstance(event, FinishEvent):
            finishes[index] = event
            reason = finish_reason(event)
            split = splits[index]
            reasoning, text = split.finish() if split is not None else ("", "")
            if reasoning:
                yield sse(chunk(index, {"reasoning_content": reasoning}))
            parser = parsers[index]
            if parser is None and text:
                yield sse(chunk(index, {"content": text}))
            if parser is not None:
                content, calls = parser.feed(text)
                rest, more = parser.finish()
                if reason == "length" and not more:  # a call cut off: its markup is no text
                    rest = rest.partition(OPEN)[0]
                if content + rest:
                    yield sse(chunk(index, {"content": content + rest}))
                if calls + more and (delta := tool_delta(index, calls + more)):
                    yield sse(delta)
                if parser.calls:
                    reason = "tool_calls"
            last = chunk(index, {}, reason)
            if timings := draft_timings([event]):
                last["timings"] = timings
            yield sse(last)
        elif isinstance(event, ErrorEvent):
            yield sse_error(event)
    if include_usage and len(finishes) == n:
        usage = combined_usage([finishes[i] for i in range(n)])
        yield sse(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage,
            }
        )
    yield sse("[DONE]")
