"""Where QuantDesk writes things: everything lives under ``QUANTDESK_HOME``."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "QuantDesk"


def quantdesk_home() -> Path:
    """Root folder for everything QuantDesk writes (models, settings, logs, chats).

    ``QUANTDESK_HOME`` overrides the platform's user data dir.
    """
    env = os.environ.get("QUANTDESK_HOME")
    root = Path(env).expanduser() if env else Path(platformdirs.user_data_dir(APP_NAME, False))
    root.mkdir(parents=True, exist_ok=True)
    return root


def subdir(name: str) -> Path:
    """A named folder under :func:`quantdesk_home`, created on demand."""
    path = quantdesk_home() / name
    path.mkdir(parents=True, exist_ok=True)
    return path
