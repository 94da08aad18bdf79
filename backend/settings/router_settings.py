"""Router settings: how ``quantdesk serve`` keeps several models resident at once.

A byte size is a number with an optional unit: ``K``/``M``/``G``/``T`` (or ``KiB``,
``MiB``...) count in powers of 1024, ``KB``/``MB``/``GB``/``TB`` in powers of 1000.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

GIB = 1 << 30
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_byte_size(value: object) -> int:
    """``value`` (an int, or text such as ``8G``, ``512MiB``, ``2GB``) as a count of bytes."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 8G or 512MiB")
    if isinstance(value, int):
        return value
    match = _SIZE.match(str(value))
    if match is None:
        raise ValueError(f"expected a size such as 8G or 512MiB, got {value!r}")
    number, prefix, suffix = match.group(1), match.group(2).lower(), match.group(3).lower()
    base = 1000 if suffix == "b" and prefix else 1024
    return int(float(number) * base ** _POWERS[prefix])


class RouterSettings(BaseSettings):
    """Serving a library of models: how many stay resident, for how long, in how much memory."""

    model_config = SettingsConfigDict(env_prefix="QUANTDESK_", extra="ignore")

    models_max: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Most models resident at once (router mode); the least recently used "
        "idle one is unloaded to make room",
        json_schema_extra={"flags": ["--models-max"]},
    )
    models_autoload: bool = Field(
        default=True,
        description="Load a model that a request names when it is not resident (router mode)",
        json_schema_extra={"flags": ["--models-autoload"], "off_flags": ["--no-models-autoload"]},
    )
    idle_ttl: float = Field(
        default=0.0,
        ge=0.0,
        le=30 * 24 * 3600,
        description="Unload a model idle this many seconds (router mode; 0 = never); a "
        "request's 'ttl' field sets it for its model",
        json_schema_extra={"flags": ["--idle-ttl"]},
    )
    memory_budget: int | None = Field(
        default=None,
        ge=0,
        description="Most memory (RAM + VRAM) the resident models' estimates may total, as "
        "8G or 512MiB (router mode; default: what is free at start less --memory-reserve)",
        json_schema_extra={"flags": ["--memory-budget"]},
    )
    memory_reserve: int = Field(
        default=GIB,
        ge=0,
        description="Memory always left free on each device when loading a model, as 1G or "
        "512MiB (router mode)",
        json_schema_extra={"flags": ["--memory-reserve"]},
    )

    @field_validator("memory_budget", "memory_reserve", mode="before")
    @classmethod
    def _sizes(cls, value: object) -> object:
        return None if value is None else parse_byte_size(value)
