"""The pooling contexts the embeddings and rerank routes keep on ``app.state``: made on
first use for the engine's model (cheaply, without a llama.cpp context until the first
request), and freed at shutdown, before the engine frees the model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol, TypeVar

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from backend.engine.engine import Engine
from backend.engine.model_runtime import ModelRuntime


class PooledContext(Protocol):
    @property
    def runtime(self) -> ModelRuntime: ...

    def close(self) -> None: ...


C = TypeVar("C", bound=PooledContext)


def closed_at_shutdown(attr: str) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """A router lifespan that frees ``app.state.<attr>`` when the app stops."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        setattr(app.state, attr, None)
        try:
            yield
        finally:
            context: PooledContext | None = getattr(app.state, attr, None)
            if context is not None:
                await run_in_threadpool(context.close)
                setattr(app.state, attr, None)

    return lifespan


def context_for(
    request: Request, engine: Engine, attr: str, make: Callable[[ModelRuntime], C]
) -> C:
    """``app.state.<attr>`` for ``engine``'s model, made with ``make`` on first use (or when
    the engine's model changed)."""
    state = request.app.state
    context: C | None = getattr(state, attr, None)
    if context is None or context.runtime is not engine.runtime:
        context = make(engine.runtime)
        setattr(state, attr, context)
    return context
