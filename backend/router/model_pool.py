"""The resident models: one child server per loaded model, loaded on demand, evicted by
memory (least recently used idle first), unloaded after an idle TTL.

Rules the pool keeps (each from a failure seen in a peer, see issue 18):

- any number of requests that find a model unloaded cause exactly one load: the first
  starts it as a task of its own and every request awaits the same future, so a failed
  load answers all of them with the same error, and a client that leaves does not cancel
  a load that others wait for;
- loads, unloads and evictions run one at a time under ``_admission``: a load checks the
  memory it needs against the budget and the free memory only after the previous model's
  process has taken its memory or given it back, so two copies never overlap;
- a model with a request in flight (``in_flight > 0``) or a pinned one is never evicted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psutil

from backend.fit.memory_probe import AvailableMemory, probe_memory
from backend.router.child_server import ChildServer, new_forker
from backend.router.errors import (
    InsufficientMemoryError,
    ModelLoadFailedError,
    ModelNotLoadedError,
    RouterError,
)
from backend.router.memory_check import MemoryNeed, default_budget, estimate_need, shortfall
from backend.router.model_catalog import CatalogEntry, ModelCatalog
from backend.router.model_events import ModelEvents
from backend.settings import EngineSettings, ServerSettings
from backend.settings.model_settings_store import ModelSettingsStore
from backend.settings.router_settings import RouterSettings

log = logging.getLogger(__name__)

ModelState = Literal["unloaded", "loading", "loaded", "failed"]
_REAPER_PERIOD_S = 1.0
# the router's own work folder under the system's temp folder: <prefix><pid>-<random>
WORKDIR_PREFIX = "qd-router-"


@dataclass
class PoolEntry:
    """One library model as the pool sees it."""

    model_id: str
    path: Path
    state: ModelState = "unloaded"
    pinned: bool = False
    last_used: float = 0.0  # time.monotonic() of the last request's end (or the load)
    in_flight: int = 0
    need: MemoryNeed | None = None  # the estimate it was admitted with, while resident
    error: str | None = None
    ttl_s: float | None = None  # a request's ttl; None: --idle-ttl
    loads: int = 0  # child processes started for it, ever
    child: ChildServer | None = None
    _loading: asyncio.Future[ChildServer] | None = field(default=None, repr=False)
    _watch: asyncio.Task[None] | None = field(default=None, repr=False)
    _load_task: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def memory_bytes(self) -> int | None:
        return self.need.total if self.need is not None and self.state == "loaded" else None


def llama_status(entry: PoolEntry) -> dict[str, Any]:
    """The entry's state as llama-server's router says it: a failed load or a crash is
    ``unloaded`` with ``failed`` (and why, here, in ``error``)."""
    if entry.state == "failed":
        return {"status": "unloaded", "failed": True, "error": entry.error}
    return {"status": entry.state}


class ModelPool:
    """Loads, tracks and unloads the child servers; all methods run on one event loop."""

    def __init__(
        self,
        catalog: ModelCatalog,
        defaults: EngineSettings,
        server: ServerSettings,
        router: RouterSettings,
        store: ModelSettingsStore | None = None,
        *,
        memory_probe: Callable[[], AvailableMemory] = probe_memory,
        workdir: Path | None = None,
        fork_servers: bool = True,
    ) -> None:
        self.catalog = catalog
        self.defaults = defaults
        self.server = server
        self.router = router
        self.store = store if store is not None else ModelSettingsStore()
        self._probe = memory_probe
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            remove_stale_workdirs()
            self._tmp = tempfile.TemporaryDirectory(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")
            workdir = Path(self._tmp.name)
        self.workdir = workdir
        self._entries: dict[str, PoolEntry] = {}
        self._admission = asyncio.Lock()
        self._reaper: asyncio.Task[None] | None = None
        # children fork from a pre-imported zygote (backend/router/server_forker.py), which
        # starts with the pool's event loop, or with the first load
        self.forker = new_forker() if fork_servers else None
        self._forker_start: asyncio.Task[None] | None = None
        self.events = ModelEvents()  # GET /models/sse
        self.budget = (
            router.memory_budget
            if router.memory_budget is not None
            else default_budget(memory_probe(), router.memory_reserve)
        )

    # ----- lookup -----

    def entry(self, model: str | None) -> PoolEntry:
        """The pool entry of the library model that ``model`` names (404 if none)."""
        found: CatalogEntry = self.catalog.find(model)
        entry = self._entries.get(found.model_id)
        if entry is None:
            entry = self._entries[found.model_id] = PoolEntry(found.model_id, found.path)
        return entry

    async def find(self, model: str | None) -> PoolEntry:
        """:meth:`entry` for a request handler: a name the catalog lacks makes it rescan
        the library (every GGUF header), which runs off the event loop."""
        found = await asyncio.to_thread(self.catalog.find, model)
        return self.entry(found.model_id)

    def entries(self) -> list[PoolEntry]:
        """Every library model, resident or not, in the catalog's order."""
        return [self.entry(item.model_id) for item in self.catalog.entries()]

    def resident(self) -> list[PoolEntry]:
        return [e for e in self._entries.values() if e.state in ("loaded", "loading")]

    def settings_for(self, model_id: str, path: Path) -> EngineSettings:
        """The defaults with the model's remembered settings on top, for its file and id.
        A ``--mmproj`` given to the router is no one model's: each finds its own beside it."""
        settings = self.store.apply(model_id, self.defaults)
        mmproj = settings.mmproj if settings.mmproj != self.defaults.mmproj else None
        return settings.model_copy(
            update={"model": str(path), "model_alias": model_id, "mmproj": mmproj}
        )

    # ----- using a model -----

    @contextlib.asynccontextmanager
    async def acquire(
        self, model: str | None, *, ttl_s: float | None = None, autoload: bool | None = None
    ) -> AsyncIterator[ChildServer]:
        """The ready child of ``model`` for the duration of the block, loaded if needed
        (once, however many wait); the model is never evicted while a block holds it."""
        entry = self.entry(model)
        if ttl_s is not None:
            entry.ttl_s = ttl_s
        entry.in_flight += 1
        try:
            child = entry.child
            if entry.state != "loaded" or child is None or not child.alive:
                allowed = self.router.models_autoload if autoload is None else autoload
                if not allowed and entry.state != "loading":
                    raise ModelNotLoadedError(
                        f"the model '{entry.model_id}' is not loaded and this server does not "
                        "load models on demand (--no-models-autoload): load it with "
                        "POST /models/load first"
                    )
                child = await self._ensure_loaded(entry)
            yield child
        finally:
            entry.in_flight -= 1
            entry.last_used = time.monotonic()

    async def load(self, model: str | None, *, pin: bool | None = None) -> PoolEntry:
        """Load ``model`` now (POST /models/load, preload). ``pin=True`` keeps it from
        eviction and from the idle TTL, ``pin=False`` lets it go again, ``None`` leaves
        the pin as it is."""
        entry = self.entry(model)
        if pin is not None:
            entry.pinned = pin
        if entry.state != "loaded" or entry.child is None or not entry.child.alive:
            await self._ensure_loaded(entry)
        entry.last_used = time.monotonic()
        return entry

    async def _ensure_loaded(self, entry: PoolEntry) -> ChildServer:
        if entry._loading is None:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[ChildServer] = loop.create_future()
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
            entry._loading = future
            entry.state, entry.error = "loading", None
            self._changed(entry)
            task = asyncio.create_task(self._load(entry, future), name=f"load-{entry.model_id}")
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            entry._load_task = task
        # shielded: a waiter that goes away does not cancel the load the others wait for
        return await asyncio.shield(entry._loading)

    async def _load(self, entry: PoolEntry, future: asyncio.Future[ChildServer]) -> None:
        try:
            async with self._admission:
                settings = self.settings_for(entry.model_id, entry.path)
                memory = self._probe()
                need = await asyncio.to_thread(estimate_need, settings, memory)
                await self._make_room(entry, need)
                entry.loads += 1
                child = await ChildServer.start(
                    entry.model_id,
                    settings,
                    self.server,
                    self.workdir / f"{entry.model_id.replace('/', '_')}-{entry.loads}",
                    forker=self.forker,
                )
                entry.child, entry.need, entry.state = child, need, "loaded"
                entry.last_used = time.monotonic()
                entry._watch = child.watch(self._child_exited)
                self._changed(entry)
        except BaseException as exc:
            entry.state = "failed"
            entry.error = str(exc) or type(exc).__name__
            entry.need = None
            self._changed(entry)
            if not isinstance(exc, asyncio.CancelledError):
                log.error("model %s: load failed: %s", entry.model_id, entry.error)
            if not future.done():
                future.set_exception(_load_error(entry.model_id, exc))
            if not isinstance(exc, Exception):
                raise
        else:
            future.set_result(child)
        finally:
            entry._loading = None
            entry._load_task = None

    async def _make_room(self, entry: PoolEntry, need: MemoryNeed) -> None:
        """Evict idle, unpinned models, least recently used first, until ``need`` fits both
        --models-max and the memory; a 503 that says needed vs free when it cannot."""
        while True:
            others = [e for e in self._entries.values() if e.state == "loaded" and e is not entry]
            resident = sum(e.need.total for e in others if e.need is not None)
            memory = self._probe()
            if len(others) >= self.router.models_max:
                why: str | None = (
                    f"{len(others)} models are resident (--models-max {self.router.models_max})"
                )
            else:
                why = shortfall(need, resident, self.budget, memory, self.router.memory_reserve)
            if why is None:
                return
            idle = [e for e in others if e.in_flight == 0 and not e.pinned]
            if not idle:
                held = ", ".join(e.model_id for e in others) or "none"
                raise InsufficientMemoryError(
                    f"cannot load the model '{entry.model_id}': {why}, and no resident model "
                    f"can be unloaded for it (in use or pinned: {held})"
                )
            victim = min(idle, key=lambda e: e.last_used)
            log.info("model %s: unloading it to make room for %s", victim.model_id, entry.model_id)
            await self._stop(victim)

    # ----- unloading -----

    async def unload(self, model: str | None) -> PoolEntry:
        """Unload ``model`` (POST /models/unload): a load in progress is awaited first."""
        entry = self.entry(model)
        if entry._loading is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(entry._loading)
        async with self._admission:
            await self._stop(entry)
        entry.pinned = False
        return entry

    async def _stop(self, entry: PoolEntry) -> None:
        """Stop the entry's child and wait for it to exit. Requests that arrive meanwhile
        find no child and wait for a fresh load, which starts only after this exit."""
        child, entry.child = entry.child, None
        if entry._watch is not None:
            entry._watch.cancel()
            entry._watch = None
        if child is not None:
            await child.stop()
        if entry._loading is None:  # else a request already wants it back: "loading"
            entry.state = "unloaded"
            self._changed(entry)
        entry.need = None

    async def settle(self, child: ChildServer, timeout_s: float = 3.0) -> None:
        """After a connection to ``child`` failed: wait (briefly) until its exit has been
        seen, so the model is already marked failed, with the reason, when the client
        hears of it, and the next request loads it again instead of meeting a dead port."""
        entry = self._entries.get(child.model_id)
        watch = entry._watch if entry is not None and entry.child is child else None
        if watch is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(watch), timeout_s)

    def _changed(self, entry: PoolEntry) -> None:
        self.events.publish(entry.model_id, "model_status", llama_status(entry))

    def _child_exited(self, child: ChildServer) -> None:
        """A child ended on its own (crash, abort, OOM kill): its model is failed, and the
        next request loads it again."""
        entry = self._entries.get(child.model_id)
        if entry is None or entry.child is not child:
            return
        code = child.process.returncode
        tail = child.log_tail(4).replace("\n", " | ")
        entry.child, entry.need, entry.state = None, None, "failed"
        entry.error = f"the model's server exited unexpectedly (code {code})" + (
            f": {tail}" if tail else ""
        )
        entry._watch = None
        log.error("model %s: %s", entry.model_id, entry.error)
        self._changed(entry)

    # ----- lifetime -----

    def start(self) -> None:
        """Start the idle-TTL reaper and the zygote (call on the event loop that serves
        requests)."""
        if self._reaper is None:
            self._reaper = asyncio.create_task(self._reap(), name="idle-ttl-reaper")
        if self.forker is not None and self._forker_start is None:
            self._forker_start = asyncio.create_task(self._start_forker(), name="zygote-start")

    async def _start_forker(self) -> None:
        assert self.forker is not None
        try:
            await self.forker.start()
        except Exception as exc:  # loads then start fresh processes
            log.warning("the model servers' zygote did not start (%s): fresh processes", exc)

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(_REAPER_PERIOD_S)
            await self.reap_idle()

    async def reap_idle(self) -> list[str]:
        """Unload every loaded model idle longer than its TTL; returns their ids."""
        now = time.monotonic()
        expired = []
        for entry in list(self._entries.values()):
            ttl = entry.ttl_s if entry.ttl_s is not None else self.router.idle_ttl
            if (
                ttl > 0
                and entry.state == "loaded"
                and entry.in_flight == 0
                and not entry.pinned
                and now - entry.last_used >= ttl
            ):
                expired.append(entry)
        unloaded = []
        for entry in expired:
            async with self._admission:
                if entry.state == "loaded" and entry.in_flight == 0:  # still idle
                    log.info("model %s: idle past its TTL; unloading it", entry.model_id)
                    await self._stop(entry)
                    unloaded.append(entry.model_id)
        return unloaded

    async def close(self) -> None:
        """Stop the reaper and every child; waits until they have exited."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        loads = [e._load_task for e in self._entries.values() if e._load_task is not None]
        for task in loads:  # a load in progress stops its child on the way out
            task.cancel()
        await asyncio.gather(*loads, return_exceptions=True)
        await asyncio.gather(*(self._stop(e) for e in self._entries.values()))
        if self._forker_start is not None:
            self._forker_start.cancel()
            await asyncio.gather(self._forker_start, return_exceptions=True)
        if self.forker is not None:
            await self.forker.close()
        if self._tmp is not None:
            self._tmp.cleanup()
        self.events.close()


def remove_stale_workdirs() -> None:
    """Remove the work folders (children's logs and port files) of routers that ended
    without cleaning up, killed outright: a folder is named after its router's pid."""
    for folder in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*-*"):
        pid = folder.name[len(WORKDIR_PREFIX) :].partition("-")[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _load_error(model_id: str, exc: BaseException) -> RouterError:
    """What every waiter of a failed load gets: the router's own errors as they are, any
    other reason (a refused setting, a broken file) as a load failure that says it."""
    if isinstance(exc, RouterError):
        return exc
    return ModelLoadFailedError(f"the model '{model_id}' could not be loaded: {exc}")
