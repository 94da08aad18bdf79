"""Output naming, temp names, the sidecar JSON and the default output folder."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PART_SUFFIX = ".part"
SIDECAR_SUFFIX = ".json"
_QUANT_SUFFIX = re.compile(
    r"[-_.](F32|F16|BF16|Q\d(_[0-9KSML]+)*|IQ\d(_[A-Z0-9]+)*)$", re.IGNORECASE
)


def final_path(out_dir: Path, model_name: str, type_name: str) -> Path:
    """``<out_dir>/<model-name>-<TYPE>.gguf``."""
    return out_dir / f"{model_name}-{type_name.upper()}.gguf"


def part_path(target: Path) -> Path:
    """The temp name a file is written under before the final rename."""
    return target.with_name(target.name + PART_SUFFIX)


def sidecar_path(target: Path) -> Path:
    return target.with_name(target.name + SIDECAR_SUFFIX)


def base_model_name(name: str) -> str:
    """Drop a trailing quant label: ``SmolLM2-135M-Instruct.Q4_1`` -> ``SmolLM2-135M-Instruct``."""
    stem = name[:-5] if name.lower().endswith(".gguf") else name
    stripped = _QUANT_SUFFIX.sub("", stem)
    return stripped or stem


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = part_path(path)
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def default_output_dir() -> Path:
    """The library's models folder, so new outputs appear in the library."""
    try:
        from backend.hub.hub_settings import HubSettings
    except ImportError:
        from backend.settings.paths import subdir

        return subdir("models")
    return HubSettings.model_validate({}).library_dir()
