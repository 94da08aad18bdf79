"""Per-model serving settings, remembered under ``QUANTDESK_HOME`` and keyed by model id.

Each entry holds only the :class:`ServingKnobs` a user changed for that model (context,
``-np``, ``-ngl``, KV types, flash attention...); they override the defaults every time
the model is loaded, whether it is preloaded, loaded on demand or by ``POST /models/load``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock
from pydantic import ValidationError

from backend.core.errors import ConfigError
from backend.settings.engine_settings import ServingKnobs
from backend.settings.paths import quantdesk_home

log = logging.getLogger(__name__)

STORE_FILE = "model_settings.json"
# the model file is the entry's key, never one of its settings
PER_MODEL_FIELDS = tuple(name for name in ServingKnobs.model_fields if name != "model")

K = TypeVar("K", bound=ServingKnobs)


class ModelSettingsStore:
    """A JSON file ``{model id: {knob: value}}``; written whole, atomically, under a lock."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else quantdesk_home() / STORE_FILE
        self._lock = FileLock(str(self.path) + ".lock")

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable per-model settings %s: %s", self.path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): dict(v) for k, v in data.items() if isinstance(v, dict)}

    def _write(self, data: Mapping[str, Mapping[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(self.path)

    def all(self) -> dict[str, dict[str, Any]]:
        """Every model's overrides."""
        return self._read()

    def get(self, model_id: str) -> dict[str, Any]:
        """The knobs remembered for ``model_id`` (empty when none)."""
        stored = self._read().get(model_id, {})
        return {k: v for k, v in stored.items() if k in PER_MODEL_FIELDS}

    def set(self, model_id: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """Remember ``overrides`` for ``model_id`` on top of what is stored; returns the
        model's overrides now. Unknown knobs and values out of bounds are a ConfigError."""
        unknown = sorted(set(overrides) - set(PER_MODEL_FIELDS))
        if unknown:
            raise ConfigError(
                f"not a per-model setting: {', '.join(unknown)} "
                f"(choose from {', '.join(PER_MODEL_FIELDS)})"
            )
        with self._lock:
            data = self._read()
            merged = {**data.get(model_id, {}), **overrides}
            _validated(ServingKnobs(), merged)
            data[model_id] = merged
            self._write(data)
        return merged

    def clear(self, model_id: str) -> None:
        """Forget ``model_id``'s settings: it loads with the defaults again."""
        with self._lock:
            data = self._read()
            if data.pop(model_id, None) is not None:
                self._write(data)

    def apply(self, model_id: str, defaults: K) -> K:
        """``defaults`` with ``model_id``'s remembered knobs on top (validated)."""
        return _validated(defaults, self.get(model_id))


def _validated(defaults: K, overrides: Mapping[str, Any]) -> K:
    values = {**defaults.model_dump(), **overrides}
    try:
        return type(defaults).model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "?"
        raise ConfigError(f"invalid per-model setting {field}: {first['msg']}") from None
