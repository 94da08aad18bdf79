"""Run the router: bind, announce the port, serve with uvicorn (``quantdesk serve`` with
no ``-m`` or several)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import uvicorn

from backend.core.errors import ConfigError
from backend.engine.errors import ModelLoadError
from backend.router.app_factory import create_router_app
from backend.router.model_catalog import ModelCatalog
from backend.router.model_pool import ModelPool
from backend.server.runner import bind_socket, check_bind_policy
from backend.settings import EngineSettings, RouterSettings, ServerSettings
from backend.settings.model_settings_store import ModelSettingsStore

log = logging.getLogger(__name__)


class RouterHandle:
    """A uvicorn server over a model pool; ``run()`` blocks, ``start_thread()`` does not."""

    def __init__(
        self,
        catalog: ModelCatalog,
        defaults: EngineSettings,
        server_settings: ServerSettings,
        router_settings: RouterSettings,
        *,
        preload: list[str] | None = None,
        store: ModelSettingsStore | None = None,
        workdir: Path | None = None,
    ) -> None:
        check_bind_policy(server_settings)
        if preload and len(preload) > router_settings.models_max:
            raise ConfigError(
                f"{len(preload)} models to preload but --models-max is {router_settings.models_max}"
            )
        self.load_error: str | None = None
        self.pool = ModelPool(
            catalog, defaults, server_settings, router_settings, store, workdir=workdir
        )
        self.sock = bind_socket(server_settings.host, server_settings.port)
        self.port: int = self.sock.getsockname()[1]
        self.app = create_router_app(
            self.pool, server_settings, preload=preload, on_load_failed=self._load_failed
        )
        config = uvicorn.Config(
            self.app, log_level="warning", access_log=False, timeout_graceful_shutdown=5
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        if server_settings.port_file:
            path = Path(server_settings.port_file)
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(str(self.port))
            tmp.replace(path)
        host = server_settings.host
        shown = f"[{host}]" if ":" in host else host
        self.base_url = f"http://{shown}:{self.port}"

    def _load_failed(self, message: str) -> None:
        self.load_error = message
        self.server.should_exit = True

    def run(self) -> None:
        log.info("router listening on %s", self.base_url)
        self.server.run(sockets=[self.sock])
        if self.load_error:
            raise ModelLoadError(self.load_error)

    def start_thread(self) -> None:
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, name="uvicorn", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=60)
        self.sock.close()
