"""POST /v1/responses, GET and DELETE /v1/responses/{id}: OpenAI's Responses API.

A thin translation (``backend/server/responses/``) onto the chat request, prepared and run
as chat completions are: the same template, sampling, grammar and tool-call parsing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from sse_starlette.sse import EventSourceResponse

from backend.engine.engine import Engine
from backend.engine.request_types import ErrorEvent, FinishEvent, TokenEvent
from backend.server.auth import require_api_key
from backend.server.chat_preparation import PreparedChat, prepare_chat
from backend.server.errors import ApiError
from backend.server.generation import (
    ChoiceStreams,
    engine_error,
    engine_for,
    now,
    prepared_while_connected,
)
from backend.server.responses.event_writer import Event, ResponseEventWriter
from backend.server.responses.response_object import base_response, new_item_id
from backend.server.responses.response_store import ResponseStore
from backend.server.responses.schemas import ResponsesRequest
from backend.server.responses.translation import ChatTranslation, responses_param, translate

router = APIRouter(dependencies=[Depends(require_api_key)])


def store_of(request: Request) -> ResponseStore:
    """The server's response store, made on first use (``--responses-store-mib``)."""
    store: ResponseStore | None = getattr(request.app.state, "responses_store", None)
    if store is None:
        mib: int = request.app.state.server_settings.responses_store_mib
        store = ResponseStore(mib * 1024 * 1024)
        request.app.state.responses_store = store
    return store


def _not_found(response_id: str, param: str | None = None) -> ApiError:
    return ApiError(
        404,
        f"no response '{response_id}' is stored on this server: responses are kept in its "
        "memory only while it runs (the oldest go first past --responses-store-mib), and "
        "not at all with store=false",
        param=param,
        code="response_not_found",
    )


def _prepare(
    body: ChatTranslation,
    engine: Engine,
    request: Request,
    cancelled: Callable[[], bool] = lambda: False,
) -> PreparedChat:
    try:
        return prepare_chat(body.chat, engine, request, cancelled)
    except ApiError as exc:
        raise responses_param(exc) from None


@router.post("/responses", response_model=None, include_in_schema=False)
@router.post("/v1/responses", response_model=None)
async def create_response(body: ResponsesRequest, request: Request) -> Any:
    engine = engine_for(request, body.model)
    store = store_of(request)
    history: list[dict[str, Any]] = []
    if body.previous_response_id:
        previous = store.get(body.previous_response_id)
        if previous is None:
            raise _not_found(body.previous_response_id, "previous_response_id")
        history = previous.conversation + previous.response["output"]
    translation = translate(body, history)
    prep = await prepared_while_connected(
        request, lambda cancelled: _prepare(translation, engine, request, cancelled)
    )
    streams = ChoiceStreams(engine, None if body.stream else request)
    await streams.start(
        prep.tokens, prep.max_tokens, prep.samplings[:1], prep.engine_stop(), prep.media
    )
    response = base_response(body, new_item_id("resp"), now(), engine.model_id)
    writer = ResponseEventWriter(
        response,
        prep.tool_names if prep.with_tools else None,
        one_call=body.parallel_tool_calls is False,
        reasoning=prep.reasoning_split(),
    )
    saved = (store, translation.conversation) if body.stores() else None
    if body.stream:
        return EventSourceResponse(_stream(streams, writer, saved), ping=15, sep="\n")
    return await _complete(streams, writer, saved)


async def _complete(
    streams: ChoiceStreams,
    writer: ResponseEventWriter,
    saved: tuple[ResponseStore, list[dict[str, Any]]] | None,
) -> dict[str, Any]:
    async for _, event in streams:
        if isinstance(event, TokenEvent):
            writer.feed(event.text)
        elif isinstance(event, FinishEvent):
            writer.finished(event)
        elif isinstance(event, ErrorEvent):
            streams.cancel()
            raise engine_error(event)
    if saved is not None:
        saved[0].put(writer.response, saved[1])
    return writer.response


def _sse(events: list[Event]) -> list[dict[str, str]]:
    return [{"event": e["type"], "data": json.dumps(e)} for e in events]


async def _stream(
    streams: ChoiceStreams,
    writer: ResponseEventWriter,
    saved: tuple[ResponseStore, list[dict[str, Any]]] | None,
) -> AsyncIterator[dict[str, str]]:
    for sse in _sse(writer.started()):
        yield sse
    async for _, event in streams:
        if isinstance(event, TokenEvent):
            events = writer.feed(event.text)
        elif isinstance(event, FinishEvent):
            events = writer.finished(event)
            if saved is not None:
                saved[0].put(writer.response, saved[1])
        else:
            err = engine_error(event)
            events = writer.failed(
                err.message, "invalid_prompt" if err.status == 400 else "server_error"
            )
        for sse in _sse(events):
            yield sse


@router.get("/responses/{response_id}", response_model=None, include_in_schema=False)
@router.get("/v1/responses/{response_id}", response_model=None)
async def retrieve_response(response_id: str, request: Request) -> dict[str, Any]:
    stored = store_of(request).get(response_id)
    if stored is None:
        raise _not_found(response_id)
    return stored.response


@router.delete("/responses/{response_id}", response_model=None, include_in_schema=False)
@router.delete("/v1/responses/{response_id}", response_model=None)
async def delete_response(response_id: str, request: Request) -> dict[str, Any]:
    if not store_of(request).delete(response_id):
        raise _not_found(response_id)
    return {"id": response_id, "object": "response.deleted", "deleted": True}
