"""Run the router: bind, announce the port, serve with uvicorn (``quantdesk serve`` with
no ``-m`` or several)."""

from __future__ import annotations

import logging
from pathlib import Path

from backend.core.errors import ConfigError
from backend.router.app_factory import create_router_app
from backend.router.model_catalog import ModelCatalog
from backend.router.model_pool import ModelPool
from backend.server.runner import UvicornHandle
from backend.settings import EngineSettings, RouterSettings, ServerSettings
from backend.settings.model_settings_store import ModelSettingsStore

log = logging.getLogger(__name__)


class RouterHandle(UvicornHandle):
    """The router: a uvicorn server over a model pool."""

    server_name = "router"
    join_timeout_s = 60.0

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
        if preload and len(preload) > router_settings.models_max:
            raise ConfigError(
                f"{len(preload)} models to preload but --models-max is {router_settings.models_max}"
            )
        super().__init__(server_settings)
        self.pool = ModelPool(
            catalog, defaults, server_settings, router_settings, store, workdir=workdir
        )
        self._serve(
            create_router_app(
                self.pool, server_settings, preload=preload, on_load_failed=self._load_failed
            )
        )
