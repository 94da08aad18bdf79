"""GUI settings persisted as JSON under ``quantdesk_home()/gui-settings.json``.

One pydantic model holds everything the window remembers: the server knobs, the
last model, window geometry and chat defaults. Pages written later can keep
free-form state in :attr:`AppSettings.pages` without changing this file.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from app.storage.atomic_file import write_text_atomic
from backend.settings import quantdesk_home
from backend.settings.engine_settings import ServingKnobs, SpeculativeKnobs
from backend.settings.server_settings import ListenSettings

log = logging.getLogger(__name__)

SETTINGS_FILE = "gui-settings.json"


class ServerKnobs(ServingKnobs, SpeculativeKnobs, ListenSettings):
    """What the Server page starts ``quantdesk serve`` with: the serving knobs, speculative
    decoding and where to listen, as ``serve`` defines them, and the API key from the key
    box. Settings saved before a group of knobs existed load with ``serve``'s defaults for
    it (speculative decoding off)."""

    api_key: str = Field(
        default="",
        description="Key clients must send; blank for none. It reaches serve in the child's "
        "environment (QUANTDESK_API_KEY), never on its command line, which any local user "
        "can read",
    )

    @field_validator("api_key")
    @classmethod
    def _strip_key(cls, value: str) -> str:
        return value.strip()


class ChatDefaults(BaseModel):
    """Sampling defaults and the system prompt of a new conversation."""

    system_prompt: str = "You are a helpful assistant."
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    top_p: float = Field(default=0.95, ge=0.01, le=1.0)
    top_k: int = Field(default=40, ge=0, le=1000)
    min_p: float = Field(default=0.05, ge=0.0, le=1.0)
    repeat_penalty: float = Field(default=1.0, ge=0.0, le=10.0)
    max_tokens: int = Field(default=512, ge=1, le=1_048_576)
    seed: int = Field(default=-1, ge=-1)


class ShareSettings(BaseModel):
    """ "Share this machine": how the window starts ``quantdesk worker`` (llama.cpp RPC).
    Never started on its own at launch: sharing is switched on each time."""

    port: int = Field(default=50052, ge=1, le=65_535, description="TCP port of the worker")
    allow_remote: bool = Field(
        default=False,
        description="Bind every address (--allow-remote) so other machines can connect; "
        "the RPC protocol has no authentication",
    )


class WindowState(BaseModel):
    geometry_hex: str = ""
    last_page: str = "server"


class AppSettings(BaseModel):
    """Everything the desktop app remembers between runs."""

    server: ServerKnobs = Field(default_factory=ServerKnobs)
    chat: ChatDefaults = Field(default_factory=ChatDefaults)
    window: WindowState = Field(default_factory=WindowState)
    share: ShareSettings = Field(default_factory=ShareSettings)
    recent_models: list[str] = Field(default_factory=list)
    autostart_server: bool = Field(
        default=True, description="Start the server with the last model when the window opens"
    )
    pages: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Free-form per-page state, keyed by page key"
    )

    @staticmethod
    def default_path() -> Path:
        return quantdesk_home() / SETTINGS_FILE

    @classmethod
    def load(cls, path: Path | None = None) -> AppSettings:
        """Read the settings; a missing or broken file gives the defaults (and a log line)."""
        path = path or cls.default_path()
        if not path.is_file():
            return cls()
        try:
            return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, ValidationError) as exc:
            log.warning("ignoring unreadable settings %s: %s", path, exc)
            return cls()

    def save(self, path: Path | None = None) -> Path:
        """Write atomically: a temp file in the same folder, then a rename."""
        path = path or self.default_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_text_atomic(path, self.model_dump_json(indent=2))

    def remember_model(self, model: str, keep: int = 10) -> None:
        """Put ``model`` first in the recent list."""
        if model in ("", "default"):
            return
        self.recent_models = [model, *[m for m in self.recent_models if m != model]][:keep]
