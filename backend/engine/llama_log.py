"""Route llama.cpp's log into Python logging (and keep the callback alive)."""

from __future__ import annotations

import ctypes
import logging

import llama_cpp

log = logging.getLogger("llama_cpp.native")

# ggml_log_level: 1 debug, 2 info, 3 warn, 4 error, 5 continuation of the previous line
_LEVELS = {
    1: logging.DEBUG,
    2: logging.INFO,
    3: logging.WARNING,
    4: logging.ERROR,
    5: logging.DEBUG,
}
_state: dict[str, object] = {}


def route_llama_log_to_logging() -> None:
    """Install once per process; llama.cpp's INFO chatter goes to DEBUG."""
    if "callback" in _state:
        return

    @llama_cpp.llama_log_callback  # type: ignore[misc]
    def _callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        try:
            message = text.decode(errors="replace").rstrip("\n")
        except Exception:
            return
        if message:
            py_level = _LEVELS.get(level, logging.DEBUG)
            log.log(logging.DEBUG if py_level == logging.INFO else py_level, "%s", message)

    _state["callback"] = _callback
    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))
