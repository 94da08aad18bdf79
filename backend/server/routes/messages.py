"""POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API (Claude Code).

A translation, not a second pipeline: the body becomes a chat request
(``anthropic/translation.py``), which chat's own preparation turns into prompt tokens,
sampling and grammar; the generated text comes back as Anthropic content blocks
(``anthropic/content_blocks.py``). Query strings (Claude Code's ``?beta=true``) and the
``anthropic-version`` and ``anthropic-beta`` headers are accepted and change nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from sse_starlette.sse import EventSourceResponse, ServerSentEvent

from backend.engine.engine import Engine
from backend.engine.errors import ContextOverflowError
from backend.engine.request_types import ErrorEvent, FinishEvent, TokenEvent
from backend.server.anthropic.content_blocks import ContentBlocks, Event
from backend.server.anthropic.errors import error_body
from backend.server.anthropic.schemas import CountTokensRequest, MessagesRequest
from backend.server.anthropic.stop_reason import StopWitness, stop_reason
from backend.server.anthropic.translation import to_chat_request
from backend.server.auth import require_api_key
from backend.server.chat_preparation import PreparedChat, prepare_chat
from backend.server.errors import ApiError
from backend.server.generation import (
    ChoiceStreams,
    engine_error,
    engine_for,
    prepared_while_connected,
)

router = APIRouter(dependencies=[Depends(require_api_key)])


def _prepare(
    body: CountTokensRequest,
    engine: Engine,
    request: Request,
    cancelled: Callable[[], bool] = lambda: False,
) -> PreparedChat:
    """Chat's preparation of the translated request; a prompt that cannot fit in the context
    is answered in the words Anthropic uses ("prompt is too long"), which Claude Code reads
    as the sign to compact the conversation."""
    keep_header: bool = request.app.state.server_settings.keep_billing_header
    chat = to_chat_request(body, engine.model_id, keep_header, engine.accepts_images)
    try:
        return prepare_chat(chat, engine, request, cancelled)
    except ContextOverflowError as exc:
        raise ApiError(
            400, f"prompt is too long: {exc}", param=exc.param, code="context_length_exceeded"
        ) from None


@router.post("/v1/messages/count_tokens")
async def count_tokens(body: CountTokensRequest, request: Request) -> dict[str, int]:
    """The prompt tokens that /v1/messages would report for the same body (system, tools
    and chat template included)."""
    engine = engine_for(request, body.model)
    prep = await prepared_while_connected(
        request, lambda cancelled: _prepare(body, engine, request, cancelled)
    )
    return {"input_tokens": len(prep.tokens)}


@router.post("/v1/messages", response_model=None)
async def messages(body: MessagesRequest, request: Request) -> Any:
    engine = engine_for(request, body.model)
    prep = await prepared_while_connected(
        request, lambda cancelled: _prepare(body, engine, request, cancelled)
    )
    witness = StopWitness(prep.stop) if prep.stop else None
    if witness is not None:  # the chosen tokens show which stop sequence matched
        for sampling in prep.samplings:
            sampling.logprobs = 0
    # a streamed response notices a disconnect itself; a non-streamed one is watched
    streams = ChoiceStreams(engine, None if body.stream else request)
    await streams.start(
        prep.tokens, prep.max_tokens, prep.samplings, prep.engine_stop(), prep.media
    )
    one_call = body.tool_choice is not None and body.tool_choice.disable_parallel_tool_use is True
    blocks = ContentBlocks(
        prep.tool_names if prep.with_tools else None, one_call, prep.reasoning_split()
    )
    answer = _Answer(f"msg_{uuid.uuid4().hex[:24]}", engine.model_id, len(prep.tokens))
    if body.stream:
        return EventSourceResponse(
            _stream(streams, blocks, witness, answer),
            ping=15,
            sep="\n",
            ping_message_factory=lambda: _sse({"type": "ping"}),
        )
    async for _, event in streams:
        if isinstance(event, TokenEvent):
            blocks.feed(event.text)
            if witness is not None:
                witness.add(event.logprobs)
        elif isinstance(event, FinishEvent):
            blocks.finish(truncated=event.finish_reason == "length")
            return answer.message(blocks, event, witness)
        elif isinstance(event, ErrorEvent):
            streams.cancel()
            raise engine_error(event)
    raise ApiError(500, "the sequence ended without a result", type_="server_error")


class _Answer:
    """What an answer says besides its content: id, model and usage."""

    def __init__(self, message_id: str, model: str, prompt_tokens: int) -> None:
        self.id = message_id
        self.model = model
        self.prompt_tokens = prompt_tokens

    def start(self) -> dict[str, Any]:
        """The message as ``message_start`` announces it: no content, no usage yet."""
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self.model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.prompt_tokens, "output_tokens": 0},
        }

    @staticmethod
    def usage(finish: FinishEvent) -> dict[str, int]:
        """Anthropic counts a prompt's cached tokens apart from its input tokens (their sum
        is the prompt, as count_tokens gives it)."""
        return {
            "input_tokens": finish.prompt_tokens - finish.cached_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": finish.cached_tokens,
            "output_tokens": finish.completion_tokens,
        }

    @staticmethod
    def stop(
        blocks: ContentBlocks, finish: FinishEvent, witness: StopWitness | None
    ) -> dict[str, Any]:
        matched = witness.matched if witness is not None else None
        reason = stop_reason(finish, blocks.used_tools, matched)
        return {
            "stop_reason": reason,
            "stop_sequence": matched if reason == "stop_sequence" else None,
        }

    def message(
        self, blocks: ContentBlocks, finish: FinishEvent, witness: StopWitness | None
    ) -> dict[str, Any]:
        return {
            **self.start(),
            "content": blocks.blocks,
            **self.stop(blocks, finish, witness),
            "usage": self.usage(finish),
        }


def _sse(event: Event) -> ServerSentEvent:
    """An Anthropic stream event: its type as the SSE event name (the SDKs read only named
    events) and in the data."""
    return ServerSentEvent(data=json.dumps(event), event=event["type"])


async def _stream(
    streams: ChoiceStreams, blocks: ContentBlocks, witness: StopWitness | None, answer: _Answer
) -> AsyncIterator[ServerSentEvent]:
    yield _sse({"type": "message_start", "message": answer.start()})
    yield _sse({"type": "ping"})
    async for _, event in streams:
        if isinstance(event, TokenEvent):
            for block_event in blocks.feed(event.text):
                yield _sse(block_event)
            if witness is not None:
                witness.add(event.logprobs)
        elif isinstance(event, FinishEvent):
            for block_event in blocks.finish(truncated=event.finish_reason == "length"):
                yield _sse(block_event)
            delta = answer.stop(blocks, event, witness)
            yield _sse({"type": "message_delta", "delta": delta, "usage": answer.usage(event)})
            yield _sse({"type": "message_stop"})
        elif isinstance(event, ErrorEvent):
            err = engine_error(event)
            yield _sse(error_body(err.status, err.message))
