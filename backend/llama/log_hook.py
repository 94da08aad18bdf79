"""llama.cpp's log (``llama_log_set``) into Python: one C callback over a swappable sink.

The C callback is made once and kept for the life of the process; only the Python sink
behind it changes. Another thread may be inside the callback while the sink is swapped, so
the callback itself must never be freed. A sink gets ``(ggml_log_level, text)`` for each
piece llama.cpp writes (a piece may be a part of a line). :class:`LoggingSink` sends pieces
to a :mod:`logging` logger; :class:`LineAssembler` joins them into whole lines for a parser.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import llama_cpp

LogSink = Callable[[int, str], None]

# enum ggml_log_level: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5 (continues the last)
GGML_LOG_LEVEL_CONT = 5
# llama.cpp's INFO is very chatty: it goes to DEBUG, warnings and errors stay visible.
_PY_LEVELS = {3: logging.WARNING, 4: logging.ERROR}


class _SinkSwitch:
    """The sink the process-wide C callback writes to, and whose sink it is."""

    def __init__(self) -> None:
        self.sink: LogSink | None = None
        self.logger: logging.Logger | None = None

    def __call__(self, level: int, text: bytes | None, _user_data: ctypes.c_void_p) -> None:
        sink = self.sink  # one read: a swap on another thread cannot split this call
        if text and sink is not None:
            sink(level, text.decode("utf-8", "replace"))


_switch = _SinkSwitch()
# Made once, never replaced nor freed: llama.cpp keeps its address for the whole process.
_C_CALLBACK = llama_cpp.llama_log_callback(_switch)
_C_CALLBACK_ADDRESS = ctypes.cast(_C_CALLBACK, ctypes.c_void_p).value


def _install_callback() -> None:
    llama_cpp.llama_log_set(_C_CALLBACK, ctypes.c_void_p(0))


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
    if _switch.logger is not logger:
        _switch.sink, _switch.logger = LoggingSink(logger), logger
    _install_callback()


@contextmanager
def captured_llama_log(on_line: Callable[[str], None]) -> Iterator[None]:
    """llama.cpp's log as whole lines through ``on_line`` during the block; the previous
    sink (or callback, when llama.cpp's log went elsewhere) after it."""
    previous_cb = llama_cpp.llama_log_callback()
    previous_ud = ctypes.c_void_p()
    llama_cpp.llama_log_get(ctypes.byref(previous_cb), ctypes.byref(previous_ud))
    previous_sink, previous_logger = _switch.sink, _switch.logger
    lines = LineAssembler(on_line)
    _switch.sink, _switch.logger = lines, None
    _install_callback()
    try:
        yield
    finally:
        _switch.sink, _switch.logger = previous_sink, previous_logger
        lines.flush()
        if ctypes.cast(previous_cb, ctypes.c_void_p).value != _C_CALLBACK_ADDRESS:
            llama_cpp.llama_log_set(previous_cb, previous_ud)


def route_mtmd_log() -> None:
    """libmtmd (a model's projector) logs through the same callback as llama.cpp."""
    from llama_cpp import mtmd_cpp

    mtmd_cpp.mtmd_log_set(_C_CALLBACK, ctypes.c_void_p(0))
    mtmd_cpp.mtmd_helper_log_set(_C_CALLBACK, ctypes.c_void_p(0))
