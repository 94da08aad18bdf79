"""Ollama's ``options`` and ``keep_alive`` in our terms.

``options`` keys map to chat's sampling fields; ``num_ctx``, ``num_batch``, ``num_gpu``,
``num_thread``, ``main_gpu``, ``use_mmap`` and ``typical_p`` are load-time or
unsupported knobs and are ignored (the served model keeps its own), as are Ollama's
legacy keys (``mirostat*``, ``tfs_z``, ``penalize_newline``...). ``keep_alive`` is a
number of seconds or a Go duration (``"5m"``, ``"1h30m"``); negative: forever; 0: unload
once answered.
"""

from __future__ import annotations

import math
import re
from typing import Any

from backend.server.errors import ApiError

# Ollama option -> chat's field
SAMPLING = {
    "temperature": "temperature",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
    "seed": "seed",
    "stop": "stop",
    "repeat_penalty": "repeat_penalty",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "num_keep": "n_keep",  # tokens a context shift keeps (serve --context-shift)
}
IGNORED = frozenset(
    {
        "num_ctx", "num_batch", "num_gpu", "num_thread", "main_gpu", "use_mmap",
        "typical_p", "low_vram", "f16_kv", "logits_all", "vocab_only", "use_mlock",
        "embedding_only", "numa", "tfs_z", "mirostat", "mirostat_tau", "mirostat_eta",
        "penalize_newline",
    }
)  # fmt: skip
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def sampling_fields(options: dict[str, Any] | None) -> dict[str, Any]:
    """Chat's sampling fields for ``options`` (``num_predict`` < 0: no limit)."""
    out: dict[str, Any] = {}
    for key, value in (options or {}).items():
        if key in SAMPLING and value is not None:
            out[SAMPLING[key]] = value
        elif key == "num_predict" and isinstance(value, int) and value >= 0:
            out["max_tokens"] = max(value, 1)
    if isinstance(out.get("seed"), int) and out["seed"] < 0:
        del out["seed"]  # Ollama's -1: random
    return out


def repeat_last_n(options: dict[str, Any] | None, n_ctx: int) -> int | None:
    """``repeat_last_n`` (-1: the whole context; 0: off), when given."""
    value = (options or {}).get("repeat_last_n")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise ApiError(400, "options.repeat_last_n: an integer >= -1", param="options")
    return n_ctx if value == -1 else value


def keep_alive_seconds(value: float | int | str | None) -> float | None:
    """Seconds to keep the model loaded after this request: None for the server's default,
    ``inf`` for forever, 0 to unload once answered. 400 for what Ollama refuses."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ApiError(400, "keep_alive: a number of seconds or a duration such as 5m")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip()
        sign = -1.0 if text.startswith("-") else 1.0
        body = text.lstrip("+-")
        parts = _DURATION.findall(body)
        if body in ("0", "") or not parts or "".join(n + u for n, u in parts) != body:
            if body == "0":
                return 0.0
            raise ApiError(
                400, f'keep_alive: "{value}" is not a duration such as 5m, 1h30m or 300s'
            )
        seconds = sign * sum(float(n) * _UNITS[u] for n, u in parts)
    return math.inf if seconds < 0 else seconds
