"""``POST /api/pull`` in the router: an ``hf.co/{owner}/{repo}[:{quant}]`` name pulled
through the verified Hub downloader into the library, as Ollama's progress objects
(``status``, ``digest``, ``total``, ``completed``). The download runs in a worker thread;
a client that goes away cancels it (the partial file stays, resumable)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from backend.hub.download_manager import DownloadManager
from backend.hub.download_progress import DownloadProgress
from backend.hub.errors import HubAccessError, HubError, HubNotFoundError
from backend.hub.hub_search import RepoListing, list_repo_files
from backend.hub.hub_settings import HubSettings
from backend.router.ollama_names import DEFAULT_QUANT, HubName, hub_name, quant_matches
from backend.server.errors import ApiError


def pull_target(name: str) -> HubName:
    hub = hub_name(name)
    if hub is None:
        raise ApiError(
            400,
            f"pull: '{name}' is not a Hugging Face name; this server pulls GGUF models named "
            "hf.co/{owner}/{repo}:{quant} (Ollama's own registry is not one it can reach)",
            param="model",
        )
    return hub


def chosen_files(listing: RepoListing, quant: str | None) -> list[str]:
    """The GGUF of ``quant`` (default Q4_K_M, or the repo's only GGUF)."""
    ggufs = listing.gguf_files
    wanted = [f.path for f in ggufs if quant_matches(f.path, quant or DEFAULT_QUANT)]
    if not wanted and quant is None and len(ggufs) == 1:
        wanted = [ggufs[0].path]
    if not wanted:
        have = ", ".join(f.path for f in ggufs) or "none"
        raise ApiError(
            404,
            f"{listing.repo_id} has no GGUF file of quantisation {quant or DEFAULT_QUANT} "
            f"(its GGUF files: {have})",
            param="model",
        )
    return wanted[:1]


def _status(error: HubError) -> int:
    if isinstance(error, HubNotFoundError):
        return 404
    if isinstance(error, HubAccessError):
        return 403
    return 500


def _progress(p: DownloadProgress, digests: dict[str, str]) -> dict[str, Any]:
    digest = digests.get(p.filename) or ""
    out: dict[str, Any] = {"status": f"pulling {digest[:12] or p.filename}"}
    if digest:
        out["digest"] = f"sha256:{digest}"
    if p.total_bytes:
        out["total"] = p.total_bytes
    if p.done_bytes:
        out["completed"] = p.done_bytes
    return out


async def pull_events(
    settings: HubSettings, hub: HubName, cancel: threading.Event
) -> AsyncIterator[dict[str, Any]]:
    """Ollama's progress objects for pulling ``hub``, ending with ``success``; ApiError
    for what the Hub refuses."""
    yield {"status": "pulling manifest"}
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[DownloadProgress] = asyncio.Queue()
    digests: dict[str, str] = {}

    def progress(p: DownloadProgress) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, p)

    def work() -> list[Path]:
        listing = list_repo_files(hub.repo_id, settings=settings)
        files = chosen_files(listing, hub.quant)
        digests.update({f.path: f.sha256 or "" for f in listing.files})
        manager = DownloadManager(settings, progress=progress, cancel=cancel)
        return manager.pull(hub.repo_id, files)

    task = asyncio.ensure_future(asyncio.to_thread(work))
    try:
        while not task.done() or not queue.empty():
            get = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({get, task}, return_when=asyncio.FIRST_COMPLETED)
            if get in done:
                yield _progress(get.result(), digests)
            else:
                get.cancel()
        task.result()
    except HubError as exc:
        raise ApiError(_status(exc), f"pull model manifest: {exc}", param="model") from None
    finally:
        cancel.set()  # the client went away (or it is over): the download stops
    yield {"status": "verifying sha256 digest"}
    yield {"status": "writing manifest"}
    yield {"status": "success"}
