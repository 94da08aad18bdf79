"""A temp library with two ids of the embedded model, a pool factory and a router
factory for it, and the tiny BERT embedding model for the library."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from backend.hub.hub_settings import HubSettings
from backend.hub.library import ModelLibrary
from backend.router.model_catalog import ModelCatalog
from backend.router.model_pool import ModelPool
from backend.router.runner import RouterHandle
from backend.settings import EngineSettings, RouterSettings, ServerSettings
from backend.settings.default_model import DEFAULT_MODEL_ID
from backend.settings.model_settings_store import ModelSettingsStore
from tests.server.conftest import wait_healthy
from tests.tiny_bert import tiny_bert_folder, tiny_bert_gguf  # noqa: F401  (session fixtures)

EMBEDDED = DEFAULT_MODEL_ID
# small contexts: three children fit beside each other and the tests' own work
CHILD_DEFAULTS = {"ctx_size": 512, "parallel": 2, "threads": 1, "seed": 1}


def link_into(models: Path, source: Path, name: str) -> Path:
    """``models/<name>.gguf``: a symlink to ``source`` (a copy where links are refused)."""
    target = models / f"{name}.gguf"
    try:
        os.symlink(source, target)
    except OSError:
        shutil.copyfile(source, target)
    return target


@pytest.fixture
def library(isolated_home: Path, smollm2_path: Path) -> ModelLibrary:
    """The embedded model plus 'alpha' and 'beta': the same file under other names."""
    models = isolated_home / "models"
    models.mkdir(exist_ok=True)
    for name in ("alpha", "beta"):
        link_into(models, smollm2_path, name)
    return ModelLibrary(HubSettings(models_dir=models))


@pytest.fixture
def bert_library(library: ModelLibrary, tiny_bert_gguf: Path) -> ModelLibrary:  # noqa: F811
    """The library with the tiny BERT embedding model as 'tiny-bert'."""
    link_into(library.root, tiny_bert_gguf, "tiny-bert")
    return library


def _clear_settings_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("QUANTDESK_") and n != "QUANTDESK_HOME"]:
        monkeypatch.delenv(name)


@pytest.fixture
def make_pool(
    library: ModelLibrary, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., ModelPool]:
    _clear_settings_environment(monkeypatch)

    def make(fork_servers: bool = True, **router: object) -> ModelPool:
        return ModelPool(
            ModelCatalog(library),
            EngineSettings(**CHILD_DEFAULTS),  # type: ignore[arg-type]
            ServerSettings(),
            RouterSettings(**router),  # type: ignore[arg-type]
            ModelSettingsStore(isolated_home / "model_settings.json"),
            workdir=isolated_home / "router",
            fork_servers=fork_servers,
        )

    return make


@pytest.fixture
def start_router(
    library: ModelLibrary, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., RouterHandle]]:
    """Start a router over ``library`` in this process (``preload``: the ``-m`` models)."""
    _clear_settings_environment(monkeypatch)
    started: list[RouterHandle] = []

    def start(
        api_key: str | None = None, preload: list[str] | None = None, **router: Any
    ) -> RouterHandle:
        handle = RouterHandle(
            ModelCatalog(library),
            EngineSettings(**CHILD_DEFAULTS),
            ServerSettings(port=0, api_key=api_key),
            RouterSettings(**router),
            preload=preload,
            store=ModelSettingsStore(isolated_home / "model_settings.json"),
            workdir=isolated_home / f"router-{len(started)}",
        )
        handle.start_thread()
        started.append(handle)
        wait_healthy(handle.base_url)
        return handle

    yield start
    for handle in started:
        handle.stop()


def model_servers(router: psutil.Process) -> list[psutil.Process]:
    """The model servers of a router process: its zygote's forks, and any child of its own
    that is not the zygote (a server started fresh)."""
    servers = []
    for proc in router.children():
        try:
            zygote = "backend.entrypoints.serve_zygote" in proc.cmdline()
            servers += proc.children() if zygote else [proc]
        except psutil.Error:
            continue
    return servers
