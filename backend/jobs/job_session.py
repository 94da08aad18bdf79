"""One long CLI job (quantize, compare, bench): its cancel signals and its event output.

::

    with JobSession(jsonl=args.progress_jsonl) as job:
        result = run_job(..., progress=job.progress, cancel=job.cancel)
        job.result(result.to_json())

SIGINT and SIGTERM set ``job.cancel`` (the job finishes its current step, cleans up and
raises its cancelled error, exit 130); a second SIGINT interrupts at once. With ``jsonl``
every event is one JSON line on stdout (see :mod:`backend.jobs.events`), and an exception
leaving the block is written as the ``error`` event before it propagates to the one place
that turns it into the exit code (``backend.entrypoints.main``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any, TextIO

from backend.jobs.events import ErrorEvent, JobEvent, ProgressEvent, ResultEvent, WarningEvent
from backend.jobs.progress import Progress

_CANCEL_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def add_progress_jsonl_option(parser: argparse.ArgumentParser) -> None:
    """The ``--progress-jsonl`` flag that makes a job write its events on stdout."""
    parser.add_argument(
        "--progress-jsonl",
        action="store_true",
        help="print progress, the result and errors as JSON lines on stdout (for the GUI)",
    )


class JobSession:
    """Cancel event, signal handlers and ``--progress-jsonl`` writer of one job."""

    def __init__(self, *, jsonl: bool, stream: TextIO | None = None) -> None:
        self.jsonl = jsonl
        self.cancel = threading.Event()
        self._stream = stream
        self._previous: dict[int, Any] = {}

    # -- signals -------------------------------------------------------------------------
    def __enter__(self) -> JobSession:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._on_signal) for s in _CANCEL_SIGNALS}
        return self

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGINT and self.cancel.is_set():
            raise KeyboardInterrupt  # a second Ctrl-C: stop now
        self.cancel.set()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
        if exc is not None and not isinstance(exc, SystemExit):
            self.emit(ErrorEvent.from_exception(exc))

    # -- events --------------------------------------------------------------------------
    def emit(self, event: JobEvent) -> None:
        """Write ``event`` as one JSON line (only with ``jsonl``)."""
        if self.jsonl:
            stream = self._stream or sys.stdout
            stream.write(event.to_line() + "\n")
            stream.flush()

    def progress(self, p: Progress) -> None:
        """A :data:`~backend.jobs.progress.ProgressCallback` that writes progress events."""
        self.emit(ProgressEvent.from_progress(p))

    def warning(self, message: str) -> None:
        """A warning event with ``jsonl``, else the message on stderr."""
        if self.jsonl:
            self.emit(WarningEvent(message=message))
        else:
            sys.stderr.write(message + "\n")

    def result(self, payload: dict[str, Any]) -> None:
        """The job's result event (its keys flat beside ``"type": "result"``)."""
        self.emit(ResultEvent(payload=payload))
