"""What the serving pages share: the settings, the server supervisor and the stats feed."""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.page_models.server_command import find_free_port, port_is_free
from app.storage.app_settings import AppSettings
from app.workers.server_process import ServerState, ServerSupervisor
from app.workers.stats_poller import StatsReading, stats_poller
from app.workers.thread_worker import ThreadWorker, stop_worker
from backend.engine.stats_model import StatsSnapshot

log = logging.getLogger(__name__)


class AppContext(QObject):
    """Owns the supervisor and one stats poller that runs while the server is up.

    Pages connect to :attr:`stats_received` instead of polling themselves, so
    the server sees one poller however many pages watch it.
    """

    stats_received = Signal(object, float)  # the snapshot, the monotonic time it arrived
    navigate_requested = Signal(str)  # page key
    port_moved = Signal(int, int)  # the busy port, the free one used instead

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
        self.poll_interval_s = poll_interval_s
        self.latest_stats: StatsSnapshot | None = None
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

    def _start_polling(self, url: str) -> None:
        self._stop_polling()
        self._poller = stats_poller(url, self.server.api_key, self.poll_interval_s)
        self._poller.yielded.connect(self._on_stats)
        self._poller.start()

    def _on_stats(self, reading: StatsReading) -> None:
        if self.server.state is ServerState.RUNNING:
            self.latest_stats = reading.snapshot
            self.stats_received.emit(reading.snapshot, reading.received_at)

    def _on_state(self, state: str) -> None:
        if state != ServerState.RUNNING.value:
            self._stop_polling()

    def _stop_polling(self) -> None:
        if self._poller is not None:
            if stop_worker(self._poller, 3000):
                self._poller.deleteLater()
            self._poller = None

    def shutdown(self) -> None:
        self._stop_polling()
        self.server.stop_and_wait()
