"""Build the FastAPI app. The engine lives on ``app.state`` and its lifetime in the lifespan.

The model loads in a background thread so that ``/health`` answers 503 while it loads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from prometheus_client import CollectorRegistry

from backend.engine.engine import Engine
from backend.engine.stats_model import StatsSnapshot
from backend.server.arrival_tracking import ArrivalTracking
from backend.server.auth import require_api_key
from backend.server.body_limit import BodySizeLimit
from backend.server.cors import ShapedCORSMiddleware
from backend.server.errors import install_error_handlers
from backend.server.host_check import HostCheck, is_loopback
from backend.server.metrics_collector import EngineCollector
from backend.server.native.llamacpp_metrics import LlamacppCollector
from backend.server.routes import (
    chat,
    completions,
    embeddings,
    infill,
    messages,
    models,
    monitoring,
    native_completion,
    native_props,
    native_slots,
    ollama_inference,
    ollama_models,
    rerank,
    responses,
    tokenize,
)
from backend.settings import EngineSettings, ServerSettings

log = logging.getLogger(__name__)

# Browser pages served from this machine may call the API without --cors-origin, as with
# Ollama: http(s)://localhost, 127.0.0.1 or [::1], any port. Matched against the whole origin.
LOOPBACK_ORIGINS = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?"


def create_app(
    engine_settings: EngineSettings,
    server_settings: ServerSettings,
    *,
    on_load_failed: Callable[[str], None] | None = None,
) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loader = threading.Thread(target=_load, args=(app,), name="model-loader", daemon=True)
        loader.start()
        try:
            yield
        finally:
            loader.join(timeout=60)
            engine: Engine | None = app.state.engine
            if engine is not None:
                engine.close()
                app.state.engine = None

    def _load(app: FastAPI) -> None:
        try:
            engine = Engine(engine_settings)
            app.state.engine = engine
            engine.start(warmup=True)
            log.info("ready: serving %s", engine.model_id)
        except Exception as exc:
            log.error("model load failed: %s", exc)
            app.state.load_error = str(exc)
            if on_load_failed is not None:
                on_load_failed(str(exc))

    app = FastAPI(
        title="QuantDesk",
        version="0.1.0",
        lifespan=lifespan,
        openapi_url=None,  # served by _add_docs, behind the key
        docs_url=None,
        redoc_url=None,
    )
    app.state.engine = None
    app.state.load_error = None
    app.state.engine_settings = engine_settings
    app.state.server_settings = server_settings

    def snapshot() -> StatsSnapshot | None:
        engine: Engine | None = app.state.engine
        return engine.stats() if engine is not None and engine.ready else None

    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(snapshot))
    registry.register(LlamacppCollector(snapshot))  # llama-server's names, same numbers
    app.state.metrics_registry = registry

    app.add_middleware(ArrivalTracking)  # innermost: sees only requests the edge let in
    install_edge(app, server_settings)
    for module in (
        chat,
        completions,
        messages,
        models,
        monitoring,
        embeddings,
        rerank,
        infill,
        tokenize,
        responses,
        native_completion,
        native_props,
        native_slots,
        ollama_inference,
        ollama_models,
    ):
        app.include_router(module.router)
    app.include_router(ollama_models.public)
    add_docs(app, app.openapi)
    return app


def install_edge(app: FastAPI, server_settings: ServerSettings) -> None:
    """What every QuantDesk HTTP app (the server, the router) puts in front of its routes:
    the body size limit, CORS and the Host check, and the error handlers that answer every
    exception in OpenAI's shape. Added inner to outer: the Host check runs first, then CORS,
    so that the body limit's 413 and every error answer carry the CORS headers a page needs
    to read them."""
    app.add_middleware(BodySizeLimit, max_bytes=server_settings.max_body_bytes)
    app.add_middleware(
        ShapedCORSMiddleware,
        allow_origins=server_settings.cors_origins,
        allow_origin_regex=LOOPBACK_ORIGINS,
        allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
        allow_headers=["*"],  # the OpenAI SDKs add their own x-stainless-* headers
    )
    if is_loopback(server_settings.host):  # against DNS rebinding (host_check.py)
        app.add_middleware(HostCheck, allowed_hosts=server_settings.allowed_hosts)
    install_error_handlers(app)


def add_docs(app: FastAPI, schema: Callable[[], dict[str, Any]]) -> None:
    """/openapi.json (``schema``), /docs and /redoc, behind the API key when one is set,
    like the API.

    A browser cannot add the bearer header to /docs; fetch the schema with
    ``curl -H 'Authorization: Bearer KEY' .../openapi.json`` instead.
    """
    keyed = [Depends(require_api_key)]

    @app.get("/openapi.json", include_in_schema=False, dependencies=keyed)
    async def openapi() -> JSONResponse:
        return JSONResponse(schema())

    @app.get("/docs", include_in_schema=False, dependencies=keyed)
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} - docs")

    @app.get("/redoc", include_in_schema=False, dependencies=keyed)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url="/openapi.json", title=f"{app.title} - ReDoc")
