"""Shared request handling for chat and completions: validation, sampling, streaming."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any, ParamSpec, TypeVar

from fastapi import Request

from backend.engine.engine import Engine
from backend.engine.media.media_span import MediaSpan
from backend.engine.media.projector import EncodeCancelled
from backend.engine.request_types import (
    EngineEvent,
    ErrorEvent,
    EventSink,
    FinishEvent,
    SamplingParams,
    TokenEvent,
)
from backend.server.arrival_tracking import submitted
from backend.server.errors import ApiError, error_body
from backend.server.schemas import SamplingFields

# llama-server's defaults for fields a client leaves out
DEFAULT_TEMPERATURE = 0.8
DEFAULT_TOP_K = 40
DEFAULT_TOP_P = 0.95
DEFAULT_MIN_P = 0.05

P = ParamSpec("P")
T = TypeVar("T")


async def off_loop(func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run blocking request preparation (templating, tokenising, grammar building) in a
    worker thread, so that /health and running streams stay live while one big request is
    prepared. The context travels along (arrival tracking lives in a context variable)."""
    return await asyncio.to_thread(func, *args, **kwargs)


async def wait_disconnected(request: Request) -> None:
    """Return once the client has closed its connection.

    For a request whose body has been read, ``receive`` answers only ``http.disconnect``
    (the client left, or the response is complete), so this waits without polling.
    """
    while (await request.receive())["type"] != "http.disconnect":
        pass


@asynccontextmanager
async def on_disconnect(request: Request, callback: Callable[[], None]) -> AsyncIterator[None]:
    """Call ``callback`` if the client disconnects while the block runs.

    Streamed (SSE) responses watch their connection on their own; a non-streamed request
    only learns that nobody waits for it from this.
    """

    async def watch() -> None:
        await wait_disconnected(request)
        callback()

    task = asyncio.create_task(watch())
    try:
        yield
    finally:
        task.cancel()


class ClientDisconnectedError(ApiError):
    """The client went away before its answer was ready; nobody reads this error."""

    def __init__(self) -> None:
        super().__init__(499, "the client closed the connection", code="client_disconnected")


async def prepared_while_connected(
    request: Request, prepare: Callable[[Callable[[], bool]], T]
) -> T:
    """``prepare(cancelled)`` off the loop, ``cancelled`` turning true once the client has
    gone: encoding a request's images stops between two images, and nothing is submitted
    for nobody (ClientDisconnectedError)."""
    gone = threading.Event()
    try:
        async with on_disconnect(request, gone.set):
            return await off_loop(prepare, gone.is_set)
    except EncodeCancelled:
        raise ClientDisconnectedError from None


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


def model_names(engine: Engine) -> set[str]:
    """The names that pick ``engine``'s model: its id or file name, with or without
    ``.gguf``, in any case (people type model names into IDE plugin settings by hand)."""
    return {n.casefold() for n in (engine.model_id, engine.model_path.name, engine.model_path.stem)}


def route_model(served: dict[str, set[str]], model: str | None) -> str:
    """The id of the served model that a generation request's ``model`` picks.

    With one model served, any name reaches it, as llama-server does: plugins ship preset
    names such as ``gpt-4o`` that a user can't always change. With several, a name that
    matches none of them is a 404 that lists the ids."""
    wanted = (model or "").casefold()
    for model_id, names in served.items():
        if wanted in names:
            return model_id
    if len(served) == 1 or not model:
        return next(iter(served))
    raise ApiError(
        404,
        f"the model '{model}' does not exist; this server serves: {', '.join(sorted(served))}",
        param="model",
        code="model_not_found",
        type_="not_found_error",
    )


def engine_for(request: Request, model: str | None) -> Engine:
    """The ready engine that a generation request's ``model`` picks (see route_model);
    the one place where model names become engines."""
    engine = ready_engine(request)
    route_model({engine.model_id: model_names(engine)}, model)
    return engine


def check_model(engine: Engine, model: str | None) -> None:
    """404 unless ``model`` names the served model (a lookup such as GET /v1/models/ID)."""
    if model and model.casefold() not in model_names(engine):
        raise ApiError(
            404,
            f"the model '{model}' does not exist; this server serves '{engine.model_id}'",
            param="model",
            code="model_not_found",
            type_="not_found_error",
        )


def max_tokens_for(engine: Engine, n_prompt: int, asked: int | None, request: Request) -> int:
    """The tokens a request may generate: what it asked (None: as many as fit, up to
    ``--max-tokens-limit``), cut to the room left in the context unless
    ``--strict-max-tokens`` makes that a 400."""
    settings = request.app.state.server_settings
    limit: int = settings.max_tokens_limit
    capped = min(asked, limit) if asked is not None else None
    return engine.resolve_max_tokens(n_prompt, capped, limit, strict=settings.strict_max_tokens)


def check_choices(n: int, request: Request, param: str = "n") -> None:
    """400 when a request asks for more sequences than ``--max-choices`` allows."""
    limit: int = request.app.state.server_settings.max_choices
    if n > limit:
        raise ApiError(
            400,
            f"{param}={n}: at most {limit} choices per request on this server "
            "(each one is a sequence of its own; see --max-choices)",
            param=param,
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
        draft_n_max=body.speculative_n_max,
        draft_n_min=body.speculative_n_min,
        draft_p_min=body.speculative_p_min,
        n_keep=body.n_keep,
        n_discard=body.n_discard,
    )


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def finish_reason(finish: FinishEvent) -> str:
    return "length" if finish.finish_reason == "length" else "stop"


class ChoiceStreams:
    """Run ``n`` sequences on the same prompt and receive their events tagged by index.

    Identical prompts share their KV: the scheduler prefills the prompt once and the
    other sequences copy it. Sequences still running when iteration stops are
    cancelled (a client that goes away frees its sequences within one step). With a
    ``request`` to watch, iteration also stops, with :class:`ClientDisconnectedError`,
    when that client disconnects: non-streamed requests stop generating for nobody.
    """

    def __init__(self, engine: Engine, request: Request | None = None) -> None:
        self._engine = engine
        self._request = request
        self._loop = asyncio.get_running_loop()
        # (index, event); index -1 with no event: the watched client disconnected
        self._queue: asyncio.Queue[tuple[int, EngineEvent | None]] = asyncio.Queue()
        self._requests: list[int] = []
        self._open: set[int] = set()

    async def start(
        self,
        tokens: list[int],
        max_tokens: int,
        samplings: list[SamplingParams],
        stop: list[str],
        media: list[MediaSpan] | None = None,
    ) -> None:
        """One prompt (with its images), ``len(samplings)`` sequences: see
        :meth:`start_batch`."""
        await self.start_batch([(tokens, max_tokens)], samplings, stop, media=media)

    async def start_batch(
        self,
        prompts: list[tuple[list[int], int]],
        samplings: list[SamplingParams],
        stop: list[str],
        prompt_logprobs: int | None = None,
        media: list[MediaSpan] | None = None,
    ) -> None:
        """:meth:`submit` from a worker thread (a grammar sampler can take a while to build).
        Sequences submitted after the caller was cancelled are cancelled at once."""
        job = asyncio.ensure_future(
            off_loop(self.submit, prompts, samplings, stop, prompt_logprobs, media)
        )
        try:
            await asyncio.shield(job)
        except asyncio.CancelledError:

            def abandoned(job: asyncio.Future[None]) -> None:
                if not job.cancelled() and job.exception() is None:
                    self.cancel()

            job.add_done_callback(abandoned)
            raise

    def submit(
        self,
        prompts: list[tuple[list[int], int]],
        samplings: list[SamplingParams],
        stop: list[str],
        prompt_logprobs: int | None = None,
        media: list[MediaSpan] | None = None,
    ) -> None:
        """Each (prompt tokens, max_tokens) with every sampling: sequence ``p * len(samplings)
        + k`` is prompt p with sampling k (OpenAI's choice order for a batch of prompts).
        ``media``: the images of a single prompt."""
        try:
            for p, (tokens, max_tokens) in enumerate(prompts):
                for k, sampling in enumerate(samplings):
                    index = p * len(samplings) + k
                    req = self._engine.submit(
                        tokens,
                        max_tokens=max_tokens,
                        sampling=sampling,
                        sink=self._sink(index),
                        stop=stop,
                        prompt_logprobs=prompt_logprobs,
                        media=media,
                    )
                    self._requests.append(req.request_id)
                    self._open.add(index)
        except Exception:
            self.cancel()
            raise
        finally:
            submitted()

    def _sink(self, index: int) -> EventSink:
        def sink(event: EngineEvent) -> None:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (index, event))

        return sink

    async def __aiter__(self) -> AsyncIterator[tuple[int, EngineEvent]]:
        def gone() -> None:
            self._queue.put_nowait((-1, None))

        watch: AbstractAsyncContextManager[None] = (
            on_disconnect(self._request, gone) if self._request else nullcontext()
        )
        try:
            async with watch:
                while self._open:
                    index, event = await self._queue.get()
                    if event is None:
                        raise ClientDisconnectedError
                    if isinstance(event, FinishEvent | ErrorEvent):
                        self._open.discard(index)
                    yield index, event
        finally:
            if self._open:
                self.cancel()

    def cancel(self) -> None:
        for request_id in self._requests:
            self._engine.cancel(request_id)
        self._open.clear()


def seeded_samplings(base: SamplingParams, n: int) -> list[SamplingParams]:
    """n copies of the sampling settings; distinct seeds so that choices differ."""
    out = []
    for i in range(n):
        seed = None if base.seed is None else base.seed + i
        out.append(dataclasses.replace(base, seed=seed))
    return out


def engine_error(event: ErrorEvent) -> ApiError:
    if event.invalid_request:
        return ApiError(400, event.message, code="invalid_request")
    return ApiError(500, event.message, type_="server_error", code="engine_error")


def sse(data: dict[str, Any] | str) -> dict[str, str]:
    return {"data": data if isinstance(data, str) else json.dumps(data)}


def sse_error(event: ErrorEvent) -> dict[str, str]:
    err = engine_error(event)
    return sse(error_body(err.message, err.type, err.param, err.code))


def combined_usage(finishes: list[FinishEvent], per_prompt: int | None = None) -> dict[str, Any]:
    """Usage of the sequences of one request, in submission order: each prompt (every
    ``per_prompt`` sequences; default: one prompt for all) counted once, every completion."""
    firsts = finishes[:: per_prompt or len(finishes)]
    prompt = sum(f.prompt_tokens for f in firsts)
    completion = sum(f.completion_tokens for f in finishes)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": sum(f.cached_tokens for f in firsts)},
    }


def draft_timings(finishes: list[FinishEvent]) -> dict[str, int]:
    """llama-server's ``timings.draft_n`` and ``draft_n_accepted`` (draft tokens verified,
    and kept) over the sequences of one request; empty when none drafted, as it does."""
    drafted = sum(f.draft_n for f in finishes)
    if not drafted:
        return {}
    return {"draft_n": drafted, "draft_n_accepted": sum(f.draft_n_accepted for f in finishes)}


def now() -> int:
    return int(time.time())


async def collect(
    engine: Engine,
    tokens: list[int],
    max_tokens: int,
    sampling: SamplingParams,
    stop: list[str],
    request: Request | None = None,
) -> tuple[str, FinishEvent]:
    """Run one sequence to the end and return its text and finish event; cancelled if
    ``request``'s client disconnects first."""
    streams = ChoiceStreams(engine, request)
    await streams.start(tokens, max_tokens, [sampling], stop)
    parts: list[str] = []
    async for _, event in streams:
        if isinstance(event, TokenEvent):
            parts.append(event.text)
        elif isinstance(event, ErrorEvent):
            raise engine_error(event)
        elif isinstance(event, FinishEvent):
            return "".join(parts), event
    raise ApiError(500, "the sequence ended without a result", type_="server_error")
