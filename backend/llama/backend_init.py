"""``llama_backend_init``, once per process."""

from __future__ import annotations

import logging

import llama_cpp

from backend.llama.log_hook import route_llama_log

_ready: list[bool] = []


def init_llama_backend(log_to: logging.Logger | None = None) -> None:
    """Initialise llama.cpp's backends (first call only); with ``log_to``, route llama.cpp's
    log to that logger first, so that loading messages land there too."""
    if log_to is not None:
        route_llama_log(log_to)
    if not _ready:
        llama_cpp.llama_backend_init()
        _ready.append(True)
