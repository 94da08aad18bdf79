"""POST /api/chat and /api/generate: Ollama's inference routes (Zed, JetBrains, Continue's
and Cline's ``ollama`` providers, Open WebUI, aider's ``ollama_chat/``).

Chat and templated generate are translations (``ollama/translation.py``) that chat's own
preparation serves; ``raw`` and ``suffix`` (fill in the middle) generate from the prompt's
own tokens. Answers stream as NDJSON by default (``ollama/answer.py``). A request with no
messages (or an empty prompt) only loads the model, as Ollama's clients use it;
``keep_alive`` is the router's business (its unload timer), read there.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError

from backend.engine.engine import Engine
from backend.engine.media.media_span import MediaSpan
from backend.engine.request_types import SamplingParams
from backend.server.auth import require_api_key
from backend.server.chat_preparation import PreparedChat, prepare_chat
from backend.server.errors import ApiError
from backend.server.generation import (
    ChoiceStreams,
    engine_for,
    max_tokens_for,
    off_loop,
    prepared_while_connected,
    sampling_params,
)
from backend.server.ollama.answer import Answer, Kind, loaded, ndjson_lines, pieces, whole
from backend.server.ollama.names import served_name
from backend.server.ollama.options import keep_alive_seconds, repeat_last_n, sampling_fields
from backend.server.ollama.schemas import OllamaChatRequest, OllamaGenerateRequest
from backend.server.ollama.translation import chat_request, generate_request, wants_thinking
from backend.server.schemas import CompletionRequest
from backend.server.tool_calls import ToolCallStream

router = APIRouter(dependencies=[Depends(require_api_key)])

# tokens, max_tokens, samplings, stop strings, media spans
Prompt = tuple[list[int], int, list[SamplingParams], list[str], list[MediaSpan]]


def _check(engine: Engine, model: str, *, tools: bool) -> None:
    engine.check_can_generate()
    if tools and "tools" not in engine.capabilities:
        raise ApiError(400, f'"{model}" does not support tools', param="tools")


async def _answer(
    request: Request,
    engine: Engine,
    answer: Answer,
    prompt: Prompt,
    prep: PreparedChat | None,
    stream: bool,
) -> Response:
    tokens, max_tokens, samplings, stop, media = prompt
    streams = ChoiceStreams(engine, None if stream else request)
    await streams.start(tokens, max_tokens, samplings, stop, media)
    split = prep.reasoning_split() if prep is not None else None
    parser = ToolCallStream(prep.tool_names) if prep is not None and prep.with_tools else None
    chunks = pieces(streams, answer, split, parser)
    if stream:
        return StreamingResponse(ndjson_lines(chunks), media_type="application/x-ndjson")
    return JSONResponse(await whole(chunks, answer))


async def _templated(
    request: Request,
    engine: Engine,
    body: OllamaChatRequest | OllamaGenerateRequest,
    kind: Kind,
) -> Response:
    show = wants_thinking(body.think, body.model, engine.capabilities)
    chat = chat_request(body) if isinstance(body, OllamaChatRequest) else generate_request(body)
    prep = await prepared_while_connected(
        request, lambda cancelled: prepare_chat(chat, engine, request, cancelled)
    )
    if (last_n := repeat_last_n(body.options, engine.n_ctx)) is not None:
        for sampling in prep.samplings:
            sampling.penalty_last_n = last_n
    prompt: Prompt = (prep.tokens, prep.max_tokens, prep.samplings, prep.engine_stop(), prep.media)
    return await _answer(request, engine, Answer(kind, body.model, show), prompt, prep, body.stream)


@router.post("/api/chat", response_model=None)
async def ollama_chat(body: OllamaChatRequest, request: Request) -> Response:
    engine = engine_for(request, served_name(body.model))
    keep_alive_seconds(body.keep_alive)  # checked; the router's to act on
    if not body.messages:
        return JSONResponse(loaded("chat", body.model, keep_alive_seconds(body.keep_alive) == 0))
    _check(engine, body.model, tools=bool(body.tools))
    return await _templated(request, engine, body, "chat")


def _raw_prompt(body: OllamaGenerateRequest, engine: Engine) -> list[int]:
    """The tokens of a ``raw`` prompt, or of ``suffix``'s fill-in-the-middle prompt."""
    if body.suffix is None:
        return engine.tokenize(body.prompt, add_special=True, parse_special=True)
    fim = engine.runtime.fim_tokens()
    if fim is None:
        raise ApiError(400, f'"{body.model}" does not support insert', param="suffix")
    pre = engine.tokenize(body.prompt, add_special=False, parse_special=False)
    suf = engine.tokenize(body.suffix, add_special=False, parse_special=False)
    return [fim["pre"], *pre, fim["suf"], *suf, fim["mid"]]


@router.post("/api/generate", response_model=None)
async def ollama_generate(body: OllamaGenerateRequest, request: Request) -> Response:
    engine = engine_for(request, served_name(body.model))
    keep_alive_seconds(body.keep_alive)
    if not body.prompt and not body.images and body.suffix is None:
        return JSONResponse(
            loaded("generate", body.model, keep_alive_seconds(body.keep_alive) == 0)
        )
    _check(engine, body.model, tools=False)
    if not body.raw and body.suffix is None:
        return await _templated(request, engine, body, "generate")
    if body.images or body.format:
        raise ApiError(400, "raw and suffix prompts take no images or format", param="raw")
    show = wants_thinking(body.think, body.model, engine.capabilities)
    tokens = await off_loop(_raw_prompt, body, engine)
    try:
        fields = CompletionRequest.model_validate(
            {"prompt": body.prompt, **sampling_fields(body.options)}
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ApiError(400, f"options.{where}: {first.get('msg')}", param="options") from None
    sampling = sampling_params(fields, engine)
    if (last_n := repeat_last_n(body.options, engine.n_ctx)) is not None:
        sampling.penalty_last_n = last_n
    max_tokens = max_tokens_for(engine, len(tokens), fields.asked_max_tokens(), request)
    prompt: Prompt = (tokens, max_tokens, [sampling], fields.stop_list(), [])
    return await _answer(
        request, engine, Answer("generate", body.model, show), prompt, None, body.stream
    )
