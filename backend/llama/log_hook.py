"""llama.cpp's log (``llama_log_set``) into Python: one C callback over a pluggable sink.

A sink gets ``(ggml_log_level, text)`` for each piece llama.cpp writes (a piece may be a
part of a line). :class:`LoggingSink` sends pieces to a :mod:`logging` logger;
:class:`LineAssembler` joins them into whole lines for a parser.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import llama_cpp

LogSink = Callable[[int, str], None]

# enum ggml_log_level: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5 (continues the last)
GGML_LOG_LEVEL_CONT = 5
# llama.cpp's INFO is very chatty: it goes to DEBUG, warnings and errors stay visible.
_PY_LEVELS = {3: logging.WARNING, 4: logging.ERROR}

# The C callback installed for the rest of the process (ctypes must not free it), with the
# logger its sink writes to.
_routed: dict[str, Any] = {}


def _c_callback(sink: LogSink) -> Any:
    @llama_cpp.llama_log_callback  # type: ignore[misc]
    def callback(level: int, text: bytes | None, _user_data: ctypes.c_void_p) -> None:
        if text:
            sink(level, text.decode("utf-8", "replace"))

    return callback


class LoggingSink:
    """Log each piece to ``logger``: INFO and below as DEBUG, warnings and errors as such,
    a continuation at the level of the piece it continues."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._last_level = logging.DEBUG

    def __call__(self, level: int, text: str) -> None:
        if level != GGML_LOG_LEVEL_CONT:
            self._last_level = _PY_LEVELS.get(level, logging.DEBUG)
        message = text.rstrip()
        if message and self.logger.isEnabledFor(self._last_level):
            self.logger.log(self._last_level, "%s", message)


class LineAssembler:
    """Join llama.cpp's log pieces into whole lines and hand each non-blank one on."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self._buf = ""
        self._on_line = on_line

    def __call__(self, _level: int, text: str) -> None:
        self._buf += text
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            if line.strip():
                self._on_line(line)

    def flush(self) -> None:
        if self._buf.strip():
            self._on_line(self._buf)
        self._buf = ""


def route_llama_log(logger: logging.Logger) -> None:
    """Send llama.cpp's log to ``logger`` (a :class:`LoggingSink`) from now on."""
    if _routed.get("logger") is logger:
        return
    callback = _c_callback(LoggingSink(logger))
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    _routed.update(logger=logger, callback=callback)


@contextmanager
def captured_llama_log(on_line: Callable[[str], None]) -> Iterator[None]:
    """llama.cpp's log as whole lines through ``on_line`` during the block; the previous
    logger after it."""
    previous_cb = llama_cpp.llama_log_callback()
    previous_ud = ctypes.c_void_p()
    llama_cpp.llama_log_get(ctypes.byref(previous_cb), ctypes.byref(previous_ud))
    lines = LineAssembler(on_line)
    callback = _c_callback(lines)  # held by this frame while llama.cpp may call it
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    try:
        yield
    finally:
        lines.flush()
        llama_cpp.llama_log_set(previous_cb, previous_ud)
