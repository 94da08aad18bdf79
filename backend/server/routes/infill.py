"""POST /infill: llama-server-compatible fill-in-the-middle for code completion.

The prompt follows llama-server's ``format_infill`` (the repo-level FIM pattern,
https://arxiv.org/pdf/2409.12186)::

    [FIM_REP]myproject\\n [FIM_SEP]file0\\n extra0 ... [FIM_SEP]filename\\n
    [BOS] [FIM_PRE]prefix prompt [FIM_SUF]suffix [FIM_MID]

The extra chunks are separated by a ``--- snippet ---`` line when the model has no
FIM_SEP token. The prefix keeps its last 3/4 of the FIM window, the suffix its first
1/4 (less the prompt), the extra context (its end) what is left of the context after
the window and twice ``n_predict``; cuts set ``truncated``. Generation goes through the engine's
normal scheduler path.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import llama_cpp
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette.sse import EventSourceResponse

from backend.engine.engine import Engine
from backend.engine.request_types import ErrorEvent, FinishEvent, SamplingParams, TokenEvent
from backend.server.auth import require_api_key
from backend.server.errors import ApiError
from backend.server.generation import (
    ChoiceStreams,
    collect,
    engine_for,
    finish_reason,
    max_tokens_for,
    off_loop,
    sampling_params,
    sse,
    sse_error,
)
from backend.server.routes.tokenize import ensure_utf8
from backend.server.schemas import SamplingFields

log = logging.getLogger(__name__)

router = APIRouter(dependencies=[Depends(require_api_key)])

# Tokens of prefix + prompt + suffix kept around the cursor, at most (llama-server: n_batch);
# half the context when that is smaller, leaving the other half to extra context and output.
FIM_WINDOW = 2048
_SNIPPET_SEPARATOR = "\n\n--- snippet ---\n\n"


class InfillExtra(BaseModel):
    model_config = ConfigDict(extra="allow")

    filename: str = Field("tmp", description="File the chunk comes from")
    text: str = Field("", description="Context from another file")


class InfillRequest(SamplingFields):
    """llama-server's /infill body, plus the usual sampling fields."""

    input_prefix: str = Field("", description="Code before the cursor")
    input_suffix: str = Field("", description="Code after the cursor")
    input_extra: list[InfillExtra] = Field(
        default_factory=list, description="Context chunks from other files"
    )
    prompt: str = Field("", description="Text appended after the prefix (the current line)")
    n_predict: int | None = Field(
        None, ge=-1, description="Tokens to generate at most (-1: until the context ends)"
    )


@dataclass(frozen=True)
class FimTokens:
    pre: int
    suf: int
    mid: int
    rep: int
    sep: int


def fim_tokens(engine: Engine) -> FimTokens:
    """The model's FIM tokens; a clear 400 when it has none."""
    ids = engine.runtime.fim_tokens()
    if ids is None:
        raise ApiError(
            400,
            f"the model '{engine.model_id}' has no fill-in-the-middle tokens (FIM prefix/"
            "suffix/middle), so /infill cannot be used with it; serve a code model trained "
            "for FIM (e.g. Qwen2.5-Coder, StarCoder2, CodeLlama, Codestral)",
            code="fim_unsupported",
        )
    return FimTokens(ids["pre"], ids["suf"], ids["mid"], ids.get("rep", -1), ids.get("sep", -1))


def build_infill_prompt(
    engine: Engine, body: InfillRequest, fim: FimTokens, n_predict: int
) -> tuple[list[int], bool]:
    """Token ids of the FIM prompt, and whether any input was cut to fit."""

    def tok(text: str) -> list[int]:
        return engine.tokenize(text, add_special=False, parse_special=False) if text else []

    ensure_utf8(body.input_prefix, "input_prefix")
    ensure_utf8(body.input_suffix, "input_suffix")
    ensure_utf8(body.prompt, "prompt")
    for i, chunk in enumerate(body.input_extra):
        ensure_utf8(chunk.filename, f"input_extra[{i}].filename")
        ensure_utf8(chunk.text, f"input_extra[{i}].text")

    extra: list[int] = []
    if fim.rep >= 0:
        extra += [fim.rep, *tok("myproject\n")]
    for chunk in body.input_extra:
        if fim.sep >= 0:
            extra += [fim.sep, *tok(chunk.filename + "\n")]
        else:
            extra += tok(_SNIPPET_SEPARATOR)
        extra += tok(chunk.text)
    if fim.sep >= 0:
        extra += [fim.sep, *tok("filename\n")]

    prefix = tok(body.input_prefix)
    suffix = tok(body.input_suffix)
    prompt = engine.tokenize(body.prompt, add_special=False, parse_special=True)
    window = min(FIM_WINDOW, engine.n_ctx // 2)
    n_prefix = min(len(prefix), 3 * (window // 4))
    n_suffix = min(len(suffix), max(0, window // 4 - (2 + len(prompt))))
    n_extra = min(len(extra), max(0, engine.n_ctx - window - 2 * n_predict))
    truncated = n_prefix < len(prefix) or n_suffix < len(suffix) or n_extra < len(extra)
    if truncated:
        log.info(
            "infill cut to fit: prefix %d/%d, suffix %d/%d, extra %d/%d tokens",
            n_prefix,
            len(prefix),
            n_suffix,
            len(suffix),
            n_extra,
            len(extra),
        )

    tokens = extra[len(extra) - n_extra :]
    bos = int(llama_cpp.llama_vocab_bos(engine.runtime.vocab))
    if engine.runtime.add_bos and bos >= 0:
        tokens.append(bos)
    tokens += [fim.pre, *prefix[len(prefix) - n_prefix :], *prompt]
    tokens += [fim.suf, *suffix[:n_suffix], fim.mid]
    return tokens, truncated


def _max_tokens(body: InfillRequest) -> int | None:
    """n_predict (llama-server) or max_tokens (OpenAI); None: no limit asked."""
    if body.n_predict is not None:
        if body.n_predict == 0:
            raise ApiError(400, "n_predict must be -1 or at least 1", param="n_predict")
        return None if body.n_predict < 0 else body.n_predict
    return body.max_tokens


@router.post("/infill", response_model=None)
async def infill(body: InfillRequest, request: Request) -> Any:
    engine = engine_for(request, body.model)
    engine.check_can_generate()  # an embedding model: a clear 400
    if body.n != 1:
        raise ApiError(400, "/infill generates one completion (n must be 1)", param="n")
    fim = fim_tokens(engine)
    asked = _max_tokens(body)

    def prepare() -> tuple[list[int], bool, int, SamplingParams]:
        tokens, truncated = build_infill_prompt(engine, body, fim, asked or 0)
        max_tokens = max_tokens_for(engine, len(tokens), asked, request)
        return tokens, truncated, max_tokens, sampling_params(body, engine)

    tokens, truncated, max_tokens, sampling = await off_loop(prepare)
    stop = body.stop_list()
    model = engine.model_id

    def final(text: str, fin: FinishEvent) -> dict[str, Any]:
        return {
            "index": 0,
            "content": text,
            "tokens": [],
            "stop": True,
            "model": model,
            "finish_reason": finish_reason(fin),
            "tokens_predicted": fin.completion_tokens,
            "tokens_evaluated": fin.prompt_tokens,
            "tokens_cached": fin.cached_tokens,
            "truncated": truncated,
            "timings": {
                "prompt_n": fin.prompt_tokens,
                "predicted_n": fin.completion_tokens,
                "ttft_ms": fin.ttft_ms,
                "predicted_per_second": fin.gen_tokens_per_s,
            },
        }

    if not body.stream:
        text, fin = await collect(engine, tokens, max_tokens, sampling, stop, request)
        return final(text, fin)

    streams = ChoiceStreams(engine)  # cancels the sequence if the client goes away
    await streams.start(tokens, max_tokens, [sampling], stop)

    async def events() -> AsyncIterator[dict[str, str]]:
        n_predicted = 0
        async for _, event in streams:
            if isinstance(event, TokenEvent):
                n_predicted += len(event.token_ids)
                yield sse(
                    {
                        "index": 0,
                        "content": event.text,
                        "tokens": event.token_ids,
                        "stop": False,
                        "tokens_predicted": n_predicted,
                        "tokens_evaluated": len(tokens),
                    }
                )
            elif isinstance(event, FinishEvent):
                yield sse(final("", event))
            elif isinstance(event, ErrorEvent):
                yield sse_error(event)

    return EventSourceResponse(events(), ping=15, sep="\n")
