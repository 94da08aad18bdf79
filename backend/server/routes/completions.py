"""POST /v1/completions: streaming, n / best_of, echo, logprobs and suffix (FIM).

``/completions`` (no ``/v1``) reaches the same handler through ``native_completion.py``,
which answers a llama-server native body there in llama-server's shape.
"""

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
    piece_text,
)
from backend.server.auth import require_api_key
from backend.server.errors import ApiError
from backend.server.generation import (
    ChoiceStreams,
    check_choices,
    combined_usage,
    draft_timings,
    engine_error,
    engine_for,
    finish_reason,
    max_tokens_for,
    new_id,
    now,
    off_loop,
    sampling_params,
    seeded_samplings,
    sse,
    sse_error,
)
from backend.server.schemas import CompletionRequest

router = APIRouter(dependencies=[Depends(require_api_key)])


def _token_prompt(tokens: list[int], engine: Engine) -> tuple[list[int], str]:
    vocab = engine.runtime.n_vocab
    if not tokens or any(not 0 <= t < vocab for t in tokens):
        raise ApiError(400, f"prompt token ids must be in 0..{vocab - 1}", param="prompt")
    return tokens, engine.runtime.detokenize(tokens)


def _text_prompt(text: str, body: CompletionRequest, engine: Engine) -> tuple[list[int], str]:
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


def _prompts(body: CompletionRequest, engine: Engine) -> list[tuple[list[int], str]]:
    """Each prompt's tokens and text: a string, token ids, or a batch of either."""
    prompt = body.prompt
    if isinstance(prompt, str):
        return [_text_prompt(prompt, body, engine)]
    if not prompt:
        raise ApiError(400, "prompt must not be empty", param="prompt")
    if all(isinstance(p, int) for p in prompt):
        return [_token_prompt([int(p) for p in prompt], engine)]  # type: ignore[arg-type]
    out = []
    for item in prompt:
        if isinstance(item, list):
            out.append(_token_prompt([int(t) for t in item], engine))
        else:
            out.append(_text_prompt(str(item), body, engine))
    return out


@dataclasses.dataclass
class _Prepared:
    prompts: list[tuple[list[int], int]]  # tokens, max_tokens
    texts: list[str]
    samplings: list[SamplingParams]
    first_pieces: list[str]  # each prompt's first token as text (its logprob is null)


def _prepare(body: CompletionRequest, engine: Engine, request: Request, best_of: int) -> _Prepared:
    """Tokenise and set up sampling: blocking work, run off the event loop."""
    prompts = _prompts(body, engine)
    asked = body.asked_max_tokens()
    jobs = [
        (tokens, max_tokens_for(engine, len(tokens), 16 if asked is None else asked, request))
        for tokens, _ in prompts
    ]
    sampling = sampling_params(body, engine)
    if body.logprobs is not None or best_of > body.n:
        sampling.logprobs = body.logprobs or 0
    firsts = [piece_text(engine.runtime.token_piece(tokens[0])) for tokens, _ in prompts]
    return _Prepared(
        jobs, [text for _, text in prompts], seeded_samplings(sampling, best_of), firsts
    )


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


def echoed_logprobs(
    first: str, scored: list[TokenLogprob], generated: list[TokenLogprob]
) -> dict[str, Any]:
    """echo + logprobs: the prompt's tokens (the first has no logprob, as OpenAI and vLLM
    give it) followed by the generated ones, with offsets into prompt + completion."""
    out = legacy_logprobs([*scored, *generated], len(first))
    out["tokens"].insert(0, first)
    out["token_logprobs"].insert(0, None)
    out["top_logprobs"].insert(0, None)
    out["text_offset"].insert(0, 0)
    return out


@router.post("/v1/completions", response_model=None)
async def completions(body: CompletionRequest, request: Request) -> Any:
    engine = engine_for(request, body.model)
    engine.check_can_generate()  # an embedding model: a clear 400
    best_of = body.best_of or body.n
    if best_of < body.n:
        raise ApiError(400, "best_of must be at least n", param="best_of")
    if body.stream and best_of > body.n:
        raise ApiError(400, "best_of > n cannot be streamed", param="best_of")
    scoring = body.echo and body.logprobs is not None
    if body.stream and (scoring or (isinstance(body.prompt, list) and _is_batch(body.prompt))):
        raise ApiError(
            400,
            "a streamed completion takes one prompt and no echo with logprobs",
            param="stream",
        )
    check_choices(body.n, request)
    check_choices(best_of, request, "best_of")
    prep = await off_loop(_prepare, body, engine, request, best_of)
    check_choices(len(prep.prompts) * best_of, request, "prompt")
    # a streamed response notices a disconnect itself; a non-streamed one is watched
    streams = ChoiceStreams(engine, None if body.stream else request)
    await streams.start_batch(
        prep.prompts, prep.samplings, body.stop_list(), body.logprobs if scoring else None
    )
    cid = new_id("cmpl")
    header = {"id": cid, "object": "text_completion", "created": now(), "model": engine.model_id}
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        echo = prep.texts[0] if body.echo else ""
        return EventSourceResponse(
            _stream(streams, header, best_of, echo, body.logprobs is not None, include_usage),
            ping=15,
            sep="\n",
        )
    total = len(prep.prompts) * best_of
    texts: list[list[str]] = [[] for _ in range(total)]
    lps: list[list[TokenLogprob]] = [[] for _ in range(total)]
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
    choices: list[dict[str, Any]] = []
    for p, prompt_text in enumerate(prep.texts):
        mine = range(p * best_of, (p + 1) * best_of)
        ranked = sorted(mine, key=lambda i: -finishes[i].cum_logprob)[: body.n]
        if best_of == body.n:
            ranked = list(mine)
        echo = prompt_text if body.echo else ""
        for i in ranked:
            logprobs = None
            if scoring:
                scored = finishes[i].prompt_logprobs or []
                logprobs = echoed_logprobs(prep.first_pieces[p], scored, lps[i])
            elif body.logprobs is not None:
                logprobs = legacy_logprobs(lps[i], len(echo))
            choices.append(
                {
                    "index": len(choices),
                    "text": echo + "".join(texts[i]),
                    "finish_reason": finish_reason(finishes[i]),
                    "logprobs": logprobs,
                }
            )
    ordered = [finishes[i] for i in range(total)]
    response: dict[str, Any] = {
        **header,
        "choices": choices,
        "usage": combined_usage(ordered, best_of),
    }
    if timings := draft_timings(ordered):
        response["timings"] = timings
    return response


def _is_batch(prompt: list[Any]) -> bool:
    return not all(isinstance(p, int) for p in prompt) and len(prompt) > 1


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
            last = chunk(index, "", finish_reason(event))
            if timings := draft_timings([event]):
                last["timings"] = timings
            yield sse(last)
        elif isinstance(event, ErrorEvent):
            yield sse_error(event)
    if include_usage and len(finishes) == n:
        usage = combined_usage([finishes[i] for i in range(n)])
        yield sse({**header, "choices": [], "usage": usage})
    yield sse("[DONE]")
