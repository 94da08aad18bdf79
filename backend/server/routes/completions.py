"""POST /v1/completions: streaming, n / best_of, echo, logprobs and suffix (FIM)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from sse_starlette.sse import EventSourceResponse

from backend.engine.engine import Engine
from backend.engine.request_types import (
    ErrorEvent,
    FinishEvent,
    SamplingParams,
    TokenEvent,
    TokenLogprob,
)
from backend.server.auth import require_api_key
from backend.server.errors import ApiError
from backend.server.generation import (
    ChoiceStreams,
    check_choices,
    check_model,
    combined_usage,
    engine_error,
    finish_reason,
    new_id,
    now,
    off_loop,
    ready_engine,
    sampling_params,
    seeded_samplings,
    sse,
    sse_error,
)
from backend.server.schemas import CompletionRequest

router = APIRouter(dependencies=[Depends(require_api_key)])


def _tokens(body: CompletionRequest, engine: Engine) -> tuple[list[int], str]:
    prompt = body.prompt
    if isinstance(prompt, list):
        if prompt and all(isinstance(p, int) for p in prompt):
            tokens = [int(p) for p in prompt]
            vocab = engine.runtime.n_vocab
            if any(not 0 <= t < vocab for t in tokens):
                raise ApiError(400, f"prompt token ids must be in 0..{vocab - 1}", param="prompt")
            return tokens, engine.runtime.detokenize(tokens)
        if len(prompt) != 1:
            raise ApiError(
                400, "send one prompt per request (a list of one string)", param="prompt"
            )
        prompt = str(prompt[0])
    text = str(prompt)
    if body.suffix is not None:
        fim = engine.runtime.fim_tokens()
        if fim is None:
            raise ApiError(
                400,
                "suffix needs fill-in-the-middle tokens, which this model lacks",
                param="suffix",
            )
        pre = engine.tokenize(text, add_special=False, parse_special=False)
        suf = engine.tokenize(body.suffix, add_special=False, parse_special=False)
        return [fim["pre"], *pre, fim["suf"], *suf, fim["mid"]], text
    if not text:
        raise ApiError(400, "prompt must not be empty", param="prompt")
    return engine.tokenize(text, add_special=True, parse_special=True), text


@dataclasses.dataclass
class _Prepared:
    tokens: list[int]
    prompt_text: str
    max_tokens: int
    samplings: list[SamplingParams]


def _prepare(body: CompletionRequest, engine: Engine, limit: int, best_of: int) -> _Prepared:
    """Tokenise and set up sampling: blocking work, run off the event loop."""
    tokens, prompt_text = _tokens(body, engine)
    max_tokens = engine.resolve_max_tokens(
        len(tokens), min(body.max_tokens, limit) if body.max_tokens else 16, limit
    )
    sampling = sampling_params(body, engine)
    if body.logprobs is not None or best_of > body.n:
        sampling.logprobs = body.logprobs or 0
    return _Prepared(tokens, prompt_text, max_tokens, seeded_samplings(sampling, best_of))


def legacy_logprobs(entries: list[TokenLogprob], offset: int) -> dict[str, Any]:
    offsets, pos = [], offset
    for lp in entries:
        offsets.append(pos)
        pos += len(lp.token)
    return {
        "tokens": [lp.token for lp in entries],
        "token_logprobs": [lp.logprob for lp in entries],
        "top_logprobs": [{tok: val for _, tok, val in lp.top} for lp in entries],
        "text_offset": offsets,
    }


@router.post("/completions", response_model=None, include_in_schema=False)
@router.post("/v1/completions", response_model=None)
async def completions(body: CompletionRequest, request: Request) -> Any:
    engine = ready_engine(request)
    check_model(engine, body.model)
    best_of = body.best_of or body.n
    if best_of < body.n:
        raise ApiError(400, "best_of must be at least n", param="best_of")
    if body.stream and best_of > body.n:
        raise ApiError(400, "best_of > n cannot be streamed", param="best_of")
    if body.echo and body.logprobs is not None:
        raise ApiError(
            400, "echo with logprobs (prompt logprobs) is not supported", param="logprobs"
        )
    check_choices(body.n, request)
    check_choices(best_of, request, "best_of")
    limit = request.app.state.server_settings.max_tokens_limit
    prep = await off_loop(_prepare, body, engine, limit, best_of)
    # a streamed response notices a disconnect itself; a non-streamed one is watched
    streams = ChoiceStreams(engine, None if body.stream else request)
    await streams.start(prep.tokens, prep.max_tokens, prep.samplings, body.stop_list())
    cid = new_id("cmpl")
    echo = prep.prompt_text if body.echo else ""
    header = {"id": cid, "object": "text_completion", "created": now(), "model": engine.model_id}
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return EventSourceResponse(
            _stream(streams, header, best_of, echo, body.logprobs is not None, include_usage),
            ping=15,
            sep="\n",
        )
    texts: list[list[str]] = [[] for _ in range(best_of)]
    lps: list[list[TokenLogprob]] = [[] for _ in range(best_of)]
    finishes: dict[int, FinishEvent] = {}
    async for index, event in streams:
        if isinstance(event, TokenEvent):
            texts[index].append(event.text)
            lps[index].extend(event.logprobs)
        elif isinstance(event, FinishEvent):
            finishes[index] = event
        elif isinstance(event, ErrorEvent):
            streams.cancel()
            raise engine_error(event)
    ranked = sorted(range(best_of), key=lambda i: -finishes[i].cum_logprob)[: body.n]
    if best_of == body.n:
        ranked = list(range(body.n))
    choices = [
        {
            "index": k,
            "text": echo + "".join(texts[i]),
            "finish_reason": finish_reason(finishes[i]),
            "logprobs": legacy_logprobs(lps[i], len(echo)) if body.logprobs is not None else None,
        }
        for k, i in enumerate(ranked)
    ]
    return {
        **header,
        "choices": choices,
        "usage": combined_usage([finishes[i] for i in range(best_of)]),
    }


async def _stream(
    streams: ChoiceStreams,
    header: dict[str, Any],
    n: int,
    echo: str,
    with_logprobs: bool,
    include_usage: bool,
) -> AsyncIterator[dict[str, str]]:
    offsets = [len(echo)] * n

    def chunk(
        index: int, text: str, reason: str | None = None, entries: list[TokenLogprob] | None = None
    ) -> dict[str, Any]:
        logprobs = legacy_logprobs(entries or [], offsets[index]) if with_logprobs else None
        return {
            **header,
            "choices": [
                {"index": index, "text": text, "finish_reason": reason, "logprobs": logprobs}
            ],
        }

    if echo:
        for i in range(n):
            yield sse(chunk(i, echo))
    finishes: dict[int, FinishEvent] = {}
    async for index, event in streams:
        if isinstance(event, TokenEvent):
            if event.text or event.logprobs:
                yield sse(chunk(index, event.text, entries=event.logprobs))
                offsets[index] += len(event.text)
        elif isinstance(event, FinishEvent):
            finishes[index] = event
            yield sse(chunk(index, "", finish_reason(event)))
        elif isinstance(event, ErrorEvent):
            yield sse_error(event)
    if include_usage and len(finishes) == n:
        usage = combined_usage([finishes[i] for i in range(n)])
        yield sse({**header, "choices": [], "usage": usage})
    yield sse("[DONE]")
