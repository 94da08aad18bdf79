"""A temp library with two ids of the embedded model, and a pool factory for it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from backend.hub.hub_settings import HubSettings
from backend.hub.library import ModelLibrary
from backend.router.model_catalog import ModelCatalog
from backend.router.model_pool import ModelPool
from backend.settings import EngineSettings, RouterSettings, ServerSettings
from backend.settings.default_model import DEFAULT_MODEL_ID
from backend.settings.model_settings_store import ModelSettingsStore

EMBEDDED = DEFAULT_MODEL_ID
# small contexts: three children fit beside each other and the tests' own work
CHILD_DEFAULTS = {"ctx_size": 512, "parallel": 2, "threads": 1, "seed": 1}


@pytest.fixture
def library(isolated_home: Path, smollm2_path: Path) -> ModelLibrary:
    """The embedded model plus 'alpha' and 'beta': the same file under other names."""
    models = isolated_home / "models"
    models.mkdir(exist_ok=True)
    for name in ("alpha", "beta"):
        try:
            os.symlink(smollm2_path, models / f"{name}.gguf")
        except OSError:
            shutil.copyfile(smollm2_path, models / f"{name}.gguf")
    return ModelLibrary(HubSettings(models_dir=models))


@pytest.fixture
def make_pool(
    library: ModelLibrary, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., ModelPool]:
    for name in [n for n in os.environ if n.startswith("QUANTDESK_") and n != "QUANTDESK_HOME"]:
        monkeypatch.delenv(name)

    def make(**router: object) -> ModelPool:
        return ModelPool(
            ModelCatalog(library),
            EngineSettings(**CHILD_DEFAULTS),  # type: ignore[arg-type]
            ServerSettings(),
            RouterSettings(**router),  # type: ignore[arg-type]
            ModelSettingsStore(isolated_home / "model_settings.json"),
            workdir=isolated_home / "router",
        )

    return make
