"""Child process that runs ``llama_model_quantize`` and reports progress as JSON lines.

``llama_model_quantize`` has no abort hook, so the parent runs it here and terminates this
process to cancel. Usage: ``python -m quantize.quantize_worker '<json job>'``; each stdout
line is a JSON event: ``tensor``, ``fallback``, ``log`` and finally ``done`` or ``error``.
A failed run's ``done`` carries the C ``errno`` llama.cpp's failing call left (a full disk
is ENOSPC under the C++ stream's ``basic_ios::clear: iostream error``).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from quantize.quant_log import FallbackEvent, TensorEvent, parse_line

PR_SET_PDEATHSIG = 1
PARENT_PID_ENV = "QUANTDESK_QUANTIZE_PARENT_PID"
FAILED_MARK = "failed to quantize"


def _errno_location() -> Any:
    """The C library's function that gives this thread's ``errno`` (None if unknown)."""
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):
        return None
    for name in ("__errno_location", "__error"):  # glibc and musl, macOS
        func = getattr(libc, name, None)
        if func is not None:
            func.restype = ctypes.POINTER(ctypes.c_int)
            return func
    return None


class _CErrno:
    """Reads and clears this thread's C ``errno`` (0 where it cannot be read). Resolved
    once, up front: reading it must not run code that may set it."""

    def __init__(self) -> None:
        self._location = _errno_location()

    def get(self) -> int:
        return int(self._location().contents.value) if self._location is not None else 0

    def clear(self) -> None:
        if self._location is not None:
            self._location().contents.value = 0


def build_imatrix_array(entries: dict[str, Any]) -> tuple[Any, list[Any]]:
    """A null-terminated ``llama_model_imatrix_data`` array, plus the buffers it points to."""
    import llama_cpp
    import numpy as np

    keep: list[Any] = []
    array = (llama_cpp.llama_model_imatrix_data * (len(entries) + 1))()
    for i, (name, values) in enumerate(sorted(entries.items())):
        data = np.ascontiguousarray(values, dtype=np.float32)
        name_b = name.encode("utf-8")
        keep.extend([data, name_b])
        array[i].name = name_b
        array[i].data = data.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        array[i].size = data.size
    array[len(entries)].name = None
    array[len(entries)].size = 0
    keep.append(array)
    return array, keep


def run_quantize(job: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> tuple[int, int]:
    """Quantise ``job["source"]`` to ``job["output"]``; returns llama.cpp's return code and,
    when it failed, the C ``errno`` it left (else 0)."""
    import llama_cpp

    from backend.llama.log_hook import captured_llama_log

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = int(job["ftype"])
    params.nthread = int(job.get("threads") or 0)
    params.allow_requantize = bool(job.get("allow_requantize", False))
    keep: list[Any] = []
    if job.get("imatrix"):
        from quantize.imatrix_file import load_imatrix

        imatrix = load_imatrix(Path(job["imatrix"]))
        array, keep = build_imatrix_array(imatrix.mean_squares())
        params.imatrix = ctypes.cast(array, ctypes.POINTER(llama_cpp.llama_model_imatrix_data))

    c_errno = _CErrno()
    failure_errno: list[int] = []

    def on_line(line: str) -> None:
        failed = line.find(FAILED_MARK)
        if failed >= 0:  # read errno first: writing the events below may reset it
            failure_errno.append(c_errno.get())
        event = parse_line(line)
        if isinstance(event, TensorEvent):
            emit({"event": "tensor", **asdict(event)})
        elif isinstance(event, FallbackEvent):
            emit({"event": "fallback", **asdict(event)})
        else:
            emit({"event": "log", "line": line})
            return
        if failed >= 0:  # the message ended the unfinished line of the tensor it failed on
            emit({"event": "log", "line": line[failed:]})

    with captured_llama_log(on_line):
        c_errno.clear()
        rc = llama_cpp.llama_model_quantize(
            str(job["source"]).encode("utf-8"),
            str(job["output"]).encode("utf-8"),
            ctypes.byref(params),
        )
        err = c_errno.get() if rc != 0 else 0
    del keep
    if failure_errno and failure_errno[0]:
        err = failure_errno[0]  # as the failure left it, before any Python ran
    return int(rc), err


def die_with_parent() -> None:
    """On Linux, ask the kernel to SIGTERM this worker when its parent dies (e.g. is killed)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and os.getppid() != int(parent):
        sys.exit(1)  # the parent is already gone


def main(argv: list[str]) -> int:
    die_with_parent()

    def emit(event: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    job = json.loads(argv[1])
    try:
        rc, err = run_quantize(job, emit)
    except Exception as exc:  # reported to the parent as an event
        code = exc.errno if isinstance(exc, OSError) else None
        emit({"event": "error", "message": f"{type(exc).__name__}: {exc}", "errno": code})
        return 1
    emit({"event": "done", "rc": rc, "errno": err})
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
