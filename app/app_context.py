"""What the serving pages share: the settings, the server supervisor and the stats feed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.page_models.router_models import ModelCard, library_model_id
from app.page_models.server_command import find_free_port, port_is_free
from app.page_models.server_memory_view import ServerMemory
from app.storage.app_settings import AppSettings
from app.workers.router_client import load_model, unload_model
from app.workers.server_process import ServerState, ServerSupervisor, remember_model_knobs
from app.workers.share_process import ShareSupervisor
from app.workers.stats_poller import ModelsReading, StatsReading, stats_poller
from app.workers.thread_worker import ThreadWorker, start_worker, stop_worker
from backend.engine.stats_model import StatsSnapshot

log = logging.getLogger(__name__)


class AppContext(QObject):
    """Owns the supervisor and one stats poller that runs while the server is up.

    Pages connect to :attr:`stats_received` instead of polling themselves, so
    the server sees one poller however many pages watch it.
    """

    stats_received = Signal(object, float)  # the snapshot, the monotonic time it arrived
    models_received = Signal(object)  # list[ModelCard]: a library server's models, polled
    model_action_finished = Signal(str, str)  # model id, what happened (for the pages)
    model_action_failed = Signal(str, str)  # model id, the error in plain words
    navigate_requested = Signal(str)  # page key
    port_moved = Signal(int, int)  # the busy port, the free one used instead

    MODELS_EVERY = 4  # polls between two reads of /v1/models (it reads every GGUF header)

    def __init__(
        self,
        settings: AppSettings,
        supervisor: ServerSupervisor | None = None,
        poll_interval_s: float = 0.25,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.server = supervisor or ServerSupervisor(self)
        # "Share this machine": this machine's devices as an RPC worker for other servers
        self.share = ShareSupervisor(self)
        self.poll_interval_s = poll_interval_s
        self.latest_stats: StatsSnapshot | None = None
        self.latest_models: list[ModelCard] = []
        # a library server's router and model servers together (None: a single server)
        self.latest_memory: ServerMemory | None = None
        # the dashboard's filter: one model's stats, or None for every model added up
        self.stats_model: str | None = None
        self._poller: ThreadWorker | None = None
        self.server.server_started.connect(self._start_polling)
        self.server.state_changed.connect(self._on_state)
        self.save_settings: Callable[[], None] = lambda: None
        # no settings file yet: QuantDesk has not run here before (read now, before the
        # window's first save writes one)
        self.first_run = not AppSettings.default_path().is_file()

    def start_server(self) -> None:
        """Start with the knobs in the settings (the Server page keeps them current)."""
        if not self.server.is_active():
            self.server.start(self.settings.server)

    def autostart_server(self) -> None:
        """Start as the window opens.

        On the very first run a busy default port is no reason to greet a new user
        with an error: the server takes a free port instead, the settings keep it, and
        :attr:`port_moved` tells the Server page to say so. Later runs keep the port
        the user has (their clients may be set up for it) and report a clash plainly.
        """
        knobs = self.settings.server
        if (
            self.first_run
            and knobs.port
            and not self.server.is_active()
            and not port_is_free(knobs.host, knobs.port)
        ):
            busy, knobs.port = knobs.port, find_free_port(knobs.host)
            log.info("port %d is in use; serving on free port %d instead", busy, knobs.port)
            self.save_settings()
            self.port_moved.emit(busy, knobs.port)
        self.start_server()

    def navigate(self, key: str) -> None:
        self.navigate_requested.emit(key)

    # -- models of a library server ------------------------------------------------------
    def model_state(self, model_id: str) -> str | None:
        """The last polled state of ``model_id`` (``None``: not known)."""
        return next((c.state for c in self.latest_models if c.id == model_id), None)

    def load_model(self, model_id: str, pin: bool | None = None) -> None:
        """Load ``model_id`` in the running library server (pin or unpin it with ``pin``),
        off the GUI thread; ``model_action_finished`` or ``model_action_failed`` follows."""
        what = {None: "loaded", True: "pinned", False: "unpinned"}[pin]
        self._model_request(model_id, what, lambda url, key: load_model(url, key, model_id, pin))

    def unload_model(self, model_id: str) -> None:
        self._model_request(model_id, "unloaded", lambda url, key: unload_model(url, key, model_id))

    def load_path(self, path: str) -> str | None:
        """Load a library file (or 'default') beside the served models, with the knobs
        remembered for it, else the Server page's; starts the server with it when none runs.
        Returns the words to show when it cannot (``None``: it is on its way)."""
        model_id = library_model_id(path)
        if model_id is None:
            return "Only a model of the library can be loaded beside others."
        state = self.server.state
        if not self.server.is_active():
            self.settings.server = self.settings.server.model_copy(update={"model": path})
            self.settings.remember_model(path)
            self.save_settings()
            self.server.start(self.settings.server)
            return None
        if state is not ServerState.RUNNING:
            return "The server is starting or stopping; load the model once it runs."
        if not self.server.serves_library:
            return (
                "The server serves one file from outside the library alone. Start it with a "
                "library model on the Server page to load others beside it."
            )
        from backend.settings.model_settings_store import ModelSettingsStore

        if not ModelSettingsStore().get(model_id):  # a first load: the Server page's knobs
            remember_model_knobs(model_id, self.settings.server)
        self.load_model(model_id)
        return None

    def _model_request(
        self, model_id: str, what: str, call: Callable[[str, str], dict[str, Any]]
    ) -> None:
        url = self.server.base_url
        if url is None:
            self.model_action_failed.emit(model_id, "The server is not running.")
            return
        key = self.server.api_key
        start_worker(
            self,
            lambda: call(url, key),
            lambda _answer: self.model_action_finished.emit(model_id, what),
            lambda message: self.model_action_failed.emit(model_id, message),
        )

    # -- polling ---------------------------------------------------------------------------
    def _start_polling(self, url: str) -> None:
        self._stop_polling()
        self._poller = stats_poller(
            url,
            self.server.api_key,
            self.poll_interval_s,
            model=lambda: self.stats_model,
            models_every=self.MODELS_EVERY if self.server.serves_library else 0,
            server_pid=self.server.pid() if self.server.serves_library else None,
        )
        self._poller.yielded.connect(self._on_stats)
        self._poller.start()

    def _on_stats(self, reading: StatsReading | ModelsReading) -> None:
        if self.server.state is not ServerState.RUNNING:
            return
        if isinstance(reading, ModelsReading):
            self.latest_models = reading.models
            self.models_received.emit(reading.models)
            return
        self.latest_stats = reading.snapshot
        self.latest_memory = reading.memory
        self.stats_received.emit(reading.snapshot, reading.received_at)

    def _on_state(self, state: str) -> None:
        if state != ServerState.RUNNING.value:
            self._stop_polling()
            self.latest_models = []
            self.latest_memory = None
            self.models_received.emit([])

    def _stop_polling(self) -> None:
        if self._poller is not None:
            if stop_worker(self._poller, 3000):
                self._poller.deleteLater()
            self._poller = None

    def shutdown(self) -> None:
        self._stop_polling()
        self.share.stop_and_wait()
        self.server.stop_and_wait()
