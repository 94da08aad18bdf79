"""llama-server's ``POST /completion`` (and ``/completions`` with a native body): the same
engine requests as ``/v1/completions`` (:class:`~backend.server.generation.ChoiceStreams`,
the same sampling, budgets and grammars), answered in llama-server's shape
(``backend/server/native/completion_result.py``). How ``/completions`` tells the native
body from OpenAI's: ``backend/server/native/completion_request.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from sse_starlette.sse import EventSourceResponse

from backend.engine.engine import Engine
from backend.engine.media.media_span import MediaSpan
from backend.engine.media.projector import MediaPrompt
from backend.engine.request_types import ErrorEvent, FinishEvent, SamplingParams, TokenEvent
from backend.server.auth import require_api_key
from backend.server.chat_preparation import engine_media
from backend.server.errors import ApiError
from backend.server.generation import (
    ChoiceStreams,
    check_choices,
    engine_error,
    engine_for,
    max_tokens_for,
    off_loop,
    sampling_params,
    sse,
    sse_error,
)
from backend.server.json_body import loads_body
from backend.server.native.completion_request import (
    MultimodalPrompt,
    NativeCompletionRequest,
    is_native_body,
)
from backend.server.native.completion_result import (
    SequenceResult,
    generation_settings,
    pick_fields,
    probabilities,
)
from backend.server.routes import completions as openai_completions
from backend.server.schemas import CompletionRequest
from backend.server.structured_output import schema_grammar

router = APIRouter(dependencies=[Depends(require_api_key)])

Prompt = list[int | str]


def _check_ids(tokens: list[int], engine: Engine) -> None:
    vocab = engine.runtime.n_vocab
    if any(not 0 <= t < vocab for t in tokens):
        raise ApiError(400, f"prompt token ids must be in 0..{vocab - 1}", param="prompt")


def _mixed_tokens(parts: Prompt, engine: Engine) -> list[int]:
    """One prompt from token ids and text, as llama-server tokenises it: a text part gets
    the model's BOS only when it comes first."""
    tokens: list[int] = []
    for i, part in enumerate(parts):
        if isinstance(part, str):
            tokens += engine.tokenize(part, add_special=i == 0, parse_special=True)
        else:
            _check_ids([part], engine)
            tokens.append(part)
    return tokens


def prompt_tokens(prompt: str | list[Any], engine: Engine) -> list[list[int]]:
    """Each prompt's tokens: a string or a list of ids (mixed with text or not) is one
    prompt; a list of strings and/or such lists is a batch."""
    if isinstance(prompt, str):
        batch: list[str | Prompt] = [prompt]
    elif prompt and (
        any(isinstance(p, list) for p in prompt) or all(isinstance(p, str) for p in prompt)
    ):
        batch = list(prompt)
    else:
        batch = [prompt]
    out = []
    for item in batch:
        if isinstance(item, str):
            tokens = engine.tokenize(item, add_special=True, parse_special=True)
        else:
            tokens = _mixed_tokens(item, engine)
        if not tokens:
            raise ApiError(400, "prompt must not be empty", param="prompt")
        out.append(tokens)
    return out


def multimodal_prompt(prompt: MultimodalPrompt, engine: Engine) -> MediaPrompt:
    """The tokens and images of llama-server's prompt object (BOS added, as for text)."""
    media = engine_media(engine)
    for i, data in enumerate(prompt.multimodal_data):
        media.add_base64(data, f"prompt.multimodal_data[{i}]")
    if not media.items:
        tokens = engine.tokenize(prompt.prompt_string, add_special=True, parse_special=True)
        return MediaPrompt(tokens, [])
    return engine.tokenize_with_media(prompt.prompt_string, media.items, add_special=True)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _bias_map(body: NativeCompletionRequest, engine: Engine) -> dict[str, float]:
    """``logit_bias`` as token id -> bias. llama-server's list form ``[[id or text, bias or
    false], ...]`` (text: each of its tokens; false: never sample it) or a map."""
    raw = body.logit_bias
    if raw is None:
        return {}
    pairs = list(raw.items()) if isinstance(raw, dict) else raw
    out: dict[str, float] = {}
    for pair in pairs:
        if not (isinstance(pair, list | tuple) and len(pair) == 2):
            raise ApiError(400, "logit_bias entries are [token, bias] pairs", param="logit_bias")
        key, value = pair
        if value is True:
            continue
        if value is False:
            bias = float("-inf")
        elif isinstance(value, int | float):
            bias = float(value)
        else:
            raise ApiError(400, "a logit_bias is a number or false", param="logit_bias")
        if isinstance(key, int) and not isinstance(key, bool):
            ids = [key]
        elif isinstance(key, str) and _is_int(key):
            ids = [int(key)]  # the map form's keys, and ids sent as text
        elif isinstance(key, str):
            ids = engine.tokenize(key, add_special=False, parse_special=False)
        else:
            raise ApiError(400, "a logit_bias token is an id or a text", param="logit_bias")
        for token in ids:
            out[str(token)] = bias
    return out


@dataclasses.dataclass
class _Prepared:
    prompts: list[tuple[list[int], int]]  # tokens, max_tokens
    texts: list[str]
    sampling: SamplingParams
    stop: list[str]
    settings: dict[str, Any]
    media: list[MediaSpan] = dataclasses.field(default_factory=list)  # one prompt's images


def _prepare(body: NativeCompletionRequest, engine: Engine, request: Request) -> _Prepared:
    """Tokenise, budget and set up sampling (blocking work: run off the event loop)."""
    if body.grammar and body.json_schema:
        raise ApiError(400, "give grammar or json_schema, not both", param="json_schema")
    media: list[MediaSpan] = []
    if isinstance(body.prompt, MultimodalPrompt):
        prompt = multimodal_prompt(body.prompt, engine)
        prompts, media, texts = [prompt.tokens], prompt.spans, [body.prompt.prompt_string]
    else:
        prompts = prompt_tokens(body.prompt, engine)
        texts = [engine.runtime.detokenize(tokens) for tokens in prompts]
    check_choices(len(prompts), request, "prompt")
    if body.n_predict is not None:  # llama-server: n_predict wins over max_tokens
        asked = body.n_predict if body.n_predict >= 0 else None
    else:
        asked = body.max_tokens
    jobs = [(tokens, max_tokens_for(engine, len(tokens), asked, request)) for tokens in prompts]
    bias = _bias_map(body, engine)
    sampling = sampling_params(body.model_copy(update={"logit_bias": bias}), engine)
    if body.repeat_last_n is not None:
        sampling.penalty_last_n = engine.n_ctx if body.repeat_last_n < 0 else body.repeat_last_n
    if body.json_schema is not None:
        sampling.grammar = schema_grammar(body.json_schema, param="json_schema")
    stop = body.stop_list()
    # the generated token ids come with log-probabilities (k = 0: the chosen token only):
    # a stream's chunks and return_tokens list them, and a stop string is named from them
    if body.n_probs or body.stream or body.return_tokens or stop:
        sampling.logprobs = body.n_probs
    settings = generation_settings(sampling, jobs[0][1], stop, body.stream, body.n_probs)
    return _Prepared(jobs, texts, sampling, stop, settings, media)


@router.post("/completion", response_model=None)
async def completion(body: NativeCompletionRequest, request: Request) -> Any:
    """llama-server's native completion: ``content``, ``stop_type``, ``timings``, ...;
    a batch of prompts answers a list, one result per prompt."""
    engine = engine_for(request, body.model)
    engine.check_can_generate()  # an embedding model: a clear 400
    prep = await off_loop(_prepare, body, engine, request)
    streams = ChoiceStreams(engine, None if body.stream else request)
    await streams.start_batch(prep.prompts, [prep.sampling], prep.stop, media=prep.media)
    results = [
        SequenceResult(i, text, len(tokens))
        for i, (text, (tokens, _)) in enumerate(zip(prep.texts, prep.prompts, strict=True))
    ]
    if body.stream:
        return EventSourceResponse(_stream(streams, results, body, prep, engine), ping=15, sep="\n")
    async for index, event in streams:
        result = results[index]
        if isinstance(event, TokenEvent):
            result.parts.append(event.text)
            result.entries.extend(event.logprobs)
        elif isinstance(event, FinishEvent):
            result.finish = event
        elif isinstance(event, ErrorEvent):
            streams.cancel()
            raise engine_error(event)
    answers = [
        pick_fields(
            r.final(
                engine,
                prep.stop,
                prep.settings,
                streamed=False,
                return_tokens=body.return_tokens,
                n_probs=body.n_probs,
            ),
            body.response_fields,
        )
        for r in results
    ]
    return answers[0] if len(answers) == 1 else answers


async def _stream(
    streams: ChoiceStreams,
    results: list[SequenceResult],
    body: NativeCompletionRequest,
    prep: _Prepared,
    engine: Engine,
) -> AsyncIterator[dict[str, str]]:
    """llama-server's stream: a ``data:`` chunk per piece of text (``stop`` false), then
    each prompt's final object (``stop`` true, ``timings``); no ``[DONE]``."""
    async for index, event in streams:
        result = results[index]
        if isinstance(event, TokenEvent):
            if not (event.text or event.logprobs):
                continue
            result.parts.append(event.text)
            result.entries.extend(event.logprobs)
            chunk: dict[str, Any] = {
                "index": index,
                "content": event.text,
                "tokens": [entry.token_id for entry in event.logprobs],
                "stop": False,
                "tokens_predicted": len(result.entries),
                "tokens_evaluated": result.n_prompt,
            }
            if body.n_probs:
                chunk["completion_probabilities"] = probabilities(engine, event.logprobs)
            yield sse(chunk)
        elif isinstance(event, FinishEvent):
            result.finish = event
            final = result.final(
                engine,
                prep.stop,
                prep.settings,
                streamed=True,
                return_tokens=body.return_tokens,
                n_probs=body.n_probs,
            )
            yield sse(pick_fields(final, body.response_fields))
        elif isinstance(event, ErrorEvent):
            yield sse_error(event)


async def _json_body(request: Request) -> Any:
    return loads_body(await request.body())


def _validated(model: type[BaseModel], data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors, body=data) from None


@router.post("/completions", response_model=None, include_in_schema=False)
async def completions_either(request: Request) -> Any:
    """llama-server's native completion or OpenAI's, by the body (see
    ``native/completion_request.py``); OpenAI's is the same handler as /v1/completions."""
    data = await _json_body(request)
    if is_native_body(data):
        return await completion(_validated(NativeCompletionRequest, data), request)
    body = _validated(CompletionRequest, data)
    return await openai_completions.completions(body, request)
