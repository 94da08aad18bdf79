"""Build the router's FastAPI app: the server's middleware, key check and error bodies in
front of the model pool; the pool and the upstream client live on ``app.state``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from backend.router.errors import RouterError
from backend.router.model_pool import ModelPool
from backend.router.openapi_schema import router_schema
from backend.router.proxy import new_upstream_client
from backend.router.routes import model_reads, models, monitoring, ollama_library, proxied
from backend.router.upstream import UpstreamPool
from backend.server.app_factory import add_docs, install_edge
from backend.server.errors import ApiError
from backend.server.routes import ollama_models
from backend.settings import ServerSettings

log = logging.getLogger(__name__)


def router_api_error(exc: RouterError) -> ApiError:
    headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s else None
    return ApiError(
        exc.status, str(exc), type_=exc.type_, param=exc.param, code=exc.code, headers=headers
    )


def create_router_app(
    pool: ModelPool,
    server_settings: ServerSettings,
    *,
    preload: list[str] | None = None,
    on_load_failed: Callable[[str], None] | None = None,
) -> FastAPI:
    """The app over ``pool``; the ``preload`` models load (pinned) once it serves."""

    async def _preload() -> None:
        for model in preload or []:
            try:
                await pool.load(model, pin=True)
            except Exception as exc:
                log.error("preloading %s failed: %s", model, exc)
                if on_load_failed is not None:
                    on_load_failed(f"preloading {model} failed: {exc}")
                return

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.upstream = new_upstream_client()
        app.state.relay = UpstreamPool()
        pool.start()
        loader = asyncio.create_task(_preload(), name="preload")
        try:
            yield
        finally:
            loader.cancel()
            await asyncio.gather(loader, return_exceptions=True)
            await pool.close()
            await app.state.upstream.aclose()
            app.state.relay.close()

    app = FastAPI(
        title="QuantDesk router",
        version="0.1.0",
        lifespan=lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.pool = pool
    app.state.preloaded = list(preload or [])  # the -m models, first = the default
    app.state.fallback_names_told = set()  # /v1/messages names answered by another model
    app.state.server_settings = server_settings
    install_edge(app, server_settings)  # the server's middleware and error answers

    @app.exception_handler(RouterError)
    async def _router_error(request: Request, exc: RouterError) -> JSONResponse:
        handler = app.exception_handlers[ApiError]
        response: JSONResponse = await handler(request, router_api_error(exc))  # type: ignore[misc]
        return response

    for module in (
        models,
        monitoring,
        model_reads,
        ollama_library,
        proxied,
    ):  # proxied last: it takes every other POST
        app.include_router(module.router)
    app.include_router(ollama_models.public)
    schema: dict[str, Any] = {}

    def merged() -> dict[str, Any]:  # built once, at the first read
        if not schema:
            schema.update(router_schema(app, pool.defaults, pool.server))
        return schema

    add_docs(app, merged)
    return app
