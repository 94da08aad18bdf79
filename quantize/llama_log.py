"""Capture llama.cpp's log (``llama_log_set``) for a block of code; restore the previous logger."""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from quantize.quant_log import LineAssembler

log = logging.getLogger(__name__)


@contextmanager
def captured_llama_log(on_line: Callable[[str], None]) -> Iterator[None]:
    """Route llama.cpp's log through ``on_line`` (whole lines); restore the previous logger."""
    import llama_cpp

    previous_cb = llama_cpp.llama_log_callback()
    previous_ud = ctypes.c_void_p()
    llama_cpp.llama_log_get(ctypes.byref(previous_cb), ctypes.byref(previous_ud))
    assembler = LineAssembler(on_line)

    @llama_cpp.llama_log_callback  # type: ignore[misc]
    def callback(level: int, text: bytes | None, user_data: ctypes.c_void_p) -> None:
        if text:
            assembler.feed(text.decode("utf-8", "replace"))

    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    try:
        yield
    finally:
        assembler.flush()
        llama_cpp.llama_log_set(previous_cb, previous_ud)


def log_debug(line: str) -> None:
    """An ``on_line`` that sends llama.cpp's lines to this package's debug log."""
    log.debug("llama.cpp: %s", line)
