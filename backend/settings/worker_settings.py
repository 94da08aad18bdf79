"""``quantdesk worker`` settings: where an RPC worker listens and what it offers."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from backend.settings.engine_settings import _default_threads


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (127.0.0.0/8, ::1 or localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WorkerSettings(BaseSettings):
    """An RPC worker (llama.cpp's ``rpc-server``): this machine's devices for other
    machines' ``quantdesk serve --rpc`` or ``llama-server --rpc``."""

    model_config = SettingsConfigDict(env_prefix="QUANTDESK_WORKER_", extra="ignore")

    host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="Address to bind; anything but loopback needs --allow-remote",
        json_schema_extra={"flags": ["-H", "--host"]},
    )
    port: int = Field(
        default=50052,
        ge=1,
        le=65_535,
        description="TCP port (rpc-server's default)",
        json_schema_extra={"flags": ["-p", "--port"]},
    )
    threads: int = Field(
        default_factory=_default_threads,
        ge=1,
        le=512,
        description="CPU threads for the CPU device",
        json_schema_extra={"flags": ["-t", "--threads"]},
    )
    device: str | None = Field(
        default=None,
        description="Comma-separated devices to offer, e.g. CUDA0,CUDA1 or CPU (default: every "
        "GPU, else the CPU)",
        json_schema_extra={"flags": ["-d", "--device"]},
    )
    cache: bool = Field(
        default=False,
        description="Keep received tensors in a local file cache, so that a model sent again "
        "loads from disk (rpc-server's -c)",
        json_schema_extra={"flags": ["-c", "--cache"]},
    )
    cache_dir: Path | None = Field(
        default=None,
        description="Folder of that cache (implies --cache; default: <QuantDesk home>/rpc-cache)",
        json_schema_extra={"flags": ["--cache-dir"]},
    )
    allow_remote: bool = Field(
        default=False,
        description="Allow binding a non-loopback address: anyone who can reach the port can "
        "use this machine's devices and memory (no authentication): LAN or VPN only",
        json_schema_extra={"flags": ["--allow-remote"]},
    )

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def devices(self) -> list[str]:
        return [
            name.strip()
            for name in (self.device or "").replace("/", ",").split(",")
            if name.strip()
        ]
