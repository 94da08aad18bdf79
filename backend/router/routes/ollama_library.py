"""Ollama's API over the library (``quantdesk serve`` without ``-m``).

The router answers discovery itself, from the catalog and the pool, without loading a
model: ``/api/tags`` (every library model), ``/api/show`` (from the GGUF header),
``/api/ps`` (the resident models, ``expires_at`` from their idle TTL). It manages the
library: ``/api/pull`` (``hf.co/...`` names, ``backend/router/ollama_pull.py``),
``/api/delete`` (never the embedded model) and ``/api/copy`` (a hard link under the new
name). Inference (``/api/chat``, ``/api/generate``, ``/api/embed``, ``/api/embeddings``)
goes to the model's own server, loaded on demand; ``keep_alive`` is the model's idle TTL
(0: unloaded once answered; negative: kept), and a request with nothing to generate only
loads, or with ``keep_alive: 0`` unloads, the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from backend.gguf_file.errors import GGUFFormatError
from backend.gguf_file.gguf_header import read_gguf_header
from backend.gguf_file.split_gguf import SPLIT_NAME
from backend.hub.errors import HubError
from backend.hub.library import ModelLibrary
from backend.router.errors import UnknownModelError
from backend.router.model_pool import ModelPool, PoolEntry
from backend.router.ollama_names import library_id
from backend.router.ollama_pull import pull_events, pull_target
from backend.router.proxy import proxy
from backend.router.routes.models import pool_of
from backend.server.auth import require_api_key
from backend.server.errors import ApiError
from backend.server.ollama.answer import Kind, loaded, ndjson_lines
from backend.server.ollama.model_facts import details, digest, show_body, tag_entry
from backend.server.ollama.names import ollama_name
from backend.server.ollama.options import keep_alive_seconds
from backend.server.ollama.schemas import OllamaCopyRequest, OllamaModelRequest
from backend.server.routes.ollama_models import FOREVER

router = APIRouter(dependencies=[Depends(require_api_key)])
UNLOAD_AFTER_S = 1e-3  # keep_alive 0: the reaper unloads it once the request is over


def _library(request: Request) -> ModelLibrary:
    library: ModelLibrary | None = pool_of(request).catalog.library
    if library is None:
        raise ApiError(400, "this router serves no library", param="model")
    return library


async def _entry(request: Request, name: str) -> PoolEntry:
    """The pool entry an Ollama name means; Ollama's 404 when none."""
    pool = pool_of(request)
    model_id = await asyncio.to_thread(library_id, pool.catalog.library, name)
    try:
        return await pool.find(model_id)
    except UnknownModelError:
        raise ApiError(404, f"model '{name}' not found", param="model") from None


@router.get("/api/tags")
async def tags(request: Request) -> dict[str, Any]:
    pool = pool_of(request)

    def listing() -> list[dict[str, Any]]:
        pool.catalog.refresh()
        out = []
        for item in pool.catalog.entries():
            try:
                out.append(tag_entry(item.model_id, item.path, read_gguf_header(item.path)))
            except (OSError, GGUFFormatError):
                continue
        return out

    return {"models": await asyncio.to_thread(listing)}


@router.post("/api/show")
async def show(body: OllamaModelRequest, request: Request) -> dict[str, Any]:
    entry = await _entry(request, body.which())
    pool = pool_of(request)
    facts = pool.catalog.get(entry.model_id)
    header = await asyncio.to_thread(read_gguf_header, entry.path)
    caps = facts.facts()[0] if facts is not None else []
    ctx = pool.settings_for(entry.model_id, entry.path).ctx_size
    return show_body(
        entry.model_id, entry.path, header, caps, header.chat_template, {"num_ctx": ctx}
    )


def _expires_at(pool: ModelPool, entry: PoolEntry) -> str:
    ttl = entry.ttl_s if entry.ttl_s is not None else pool.router.idle_ttl
    if entry.pinned or ttl <= 0 or math.isinf(ttl):
        return FOREVER
    left = max(0.0, ttl - (time.monotonic() - entry.last_used))
    return (datetime.now(UTC) + timedelta(seconds=left)).isoformat().replace("+00:00", "Z")


@router.get("/api/ps")
async def ps(request: Request) -> dict[str, Any]:
    pool = pool_of(request)
    models = []
    for entry in pool.resident():
        if entry.state != "loaded":
            continue
        header = await asyncio.to_thread(read_gguf_header, entry.path)
        need = entry.need
        name = ollama_name(entry.model_id)
        models.append(
            {
                "name": name,
                "model": name,
                "size": need.total if need else entry.path.stat().st_size,
                "digest": digest(entry.path),
                "details": details(header),
                "expires_at": _expires_at(pool, entry),
                "size_vram": need.gpu_bytes if need else 0,
                "context_length": pool.settings_for(entry.model_id, entry.path).ctx_size,
            }
        )
    return {"models": models}


def _only_loads(path: str, data: dict[str, Any]) -> bool:
    """A request with nothing to generate: Ollama's way to load (or unload) a model."""
    if path == "/api/chat":
        return not data.get("messages")
    if path == "/api/generate":
        return not data.get("prompt") and not data.get("images") and data.get("suffix") is None
    return False


@router.post("/api/chat", response_model=None)
@router.post("/api/generate", response_model=None)
@router.post("/api/embed", response_model=None)
@router.post("/api/embeddings", response_model=None)
async def inference(request: Request) -> Response:
    if "json" not in request.headers.get("content-type", ""):
        # not a form a web page can send without asking (CORS preflight): no page elsewhere
        # loads or unloads models by posting text/plain
        raise ApiError(415, "send the body as application/json")
    body = await request.body()
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        raise ApiError(400, "the request body is not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), str) or not data["model"]:
        raise ApiError(400, "model is required", param="model")
    name: str = data["model"]
    entry = await _entry(request, name)
    keep = keep_alive_seconds(data.get("keep_alive"))
    ttl = None if keep is None else (UNLOAD_AFTER_S if keep == 0 else keep)
    if keep is None:
        entry.ttl_s = None  # Ollama's keep_alive is per request: absent, the default TTL
    pool = pool_of(request)
    path = request.url.path
    if _only_loads(path, data):
        if keep == 0:
            await pool.unload(entry.model_id)
        else:
            await pool.load(entry.model_id)
            if ttl is not None:
                entry.ttl_s = ttl
        kind: Kind = "chat" if path == "/api/chat" else "generate"
        return JSONResponse(loaded(kind, name, keep == 0))
    data["model"] = entry.model_id  # the child knows it by its id (not hf.co/... names)
    body = json.dumps(data).encode()
    return await proxy(request, pool, request.app.state.relay, entry.model_id, body, ttl)


@router.post("/api/pull", response_model=None)
async def pull(body: OllamaModelRequest, request: Request) -> Response:
    hub = pull_target(body.which())
    library = _library(request)
    cancel = threading.Event()
    events = pull_events(library.settings, hub, cancel)
    pool = pool_of(request)

    async def refreshed() -> Any:
        async for event in events:
            if event.get("status") == "success":
                await asyncio.to_thread(pool.catalog.refresh)
            yield event

    if body.stream:
        return StreamingResponse(ndjson_lines(refreshed()), media_type="application/x-ndjson")
    last: dict[str, Any] = {}
    async for event in refreshed():
        last = event
    return JSONResponse(last)


@router.delete("/api/delete")
async def delete(body: OllamaModelRequest, request: Request) -> Response:
    name = body.which()
    entry = await _entry(request, name)
    pool = pool_of(request)
    facts = pool.catalog.get(entry.model_id)
    library = _library(request)
    try:
        item = await asyncio.to_thread(library.find, entry.model_id)
    except HubError:
        item = None
    if item is None or not item.removable or facts is None:
        raise ApiError(400, f"model '{name}' cannot be deleted (the embedded model stays)")
    if entry.state in ("loaded", "loading"):
        await pool.unload(entry.model_id)
    try:
        await asyncio.to_thread(library.delete, item.name)
    except HubError as exc:
        raise ApiError(400, str(exc), param="model") from None
    await asyncio.to_thread(pool.catalog.refresh)
    return Response(status_code=200)


@router.post("/api/copy")
async def copy(body: OllamaCopyRequest, request: Request) -> Response:
    """The source under a second name in the library folder: a hard link, as Ollama's copy
    shares the source's blobs (a copy where that cannot be)."""
    entry = await _entry(request, body.source)
    library = _library(request)
    if SPLIT_NAME.match(entry.path.name):
        raise ApiError(400, f"{body.source} is a split GGUF; copy the library folder instead")
    dest_name = library_id(None, body.destination)
    root = library.root.resolve()
    try:
        target = (root / f"{dest_name}.gguf").resolve()
    except (ValueError, OSError):  # a NUL byte, a name the system refuses
        target = root
    unsafe = ":" in dest_name or "\\" in dest_name or dest_name.startswith(".")
    if unsafe or target == root or not target.is_relative_to(root):
        raise ApiError(400, f'destination "{body.destination}" is invalid', param="destination")

    def link(source: Path) -> None:
        """A hard link to a library file; a copy of one outside it (the embedded model, a
        linked file), which the copy's delete must never reach. Neither ever replaces a
        file that is there (two copies to one name: the second is a 400)."""
        target.parent.mkdir(parents=True, exist_ok=True)
        real = source.resolve()
        if real.is_relative_to(root):
            with contextlib.suppress(OSError):
                os.link(real, target)
                return
        if target.exists():
            raise FileExistsError(target)
        part = target.with_name(f".{target.name}.{os.getpid()}.part")
        shutil.copyfile(real, part)
        try:
            os.link(part, target)  # fails if the name was taken meanwhile
        finally:
            part.unlink(missing_ok=True)

    try:
        await asyncio.to_thread(link, entry.path)
    except (FileExistsError, ValueError):
        raise ApiError(
            400, f'destination "{body.destination}" already exists', param="destination"
        ) from None
    await asyncio.to_thread(pool_of(request).catalog.refresh)
    return Response(status_code=200)
