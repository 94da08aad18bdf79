"""One generic background worker: a function or a generator function, run once in a QThread.

Every background job of the window goes through :class:`ThreadWorker` (after napari's and
superqt's thread workers), so the catch-and-report code lives here once. The job itself is
plain Python: it returns a result, yields progress, or raises.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Generator
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal

from backend.core.errors import QuantDeskError

log = logging.getLogger(__name__)


def error_message(exc: Exception) -> str:
    """The words a page shows for a job's exception (a bug's type name and the log, too)."""
    if isinstance(exc, QuantDeskError):
        return str(exc)
    log.error("background job crashed", exc_info=exc)
    return f"{type(exc).__name__}: {exc}"


class ThreadWorker(QThread):
    """Run ``work()`` once off the GUI thread and report by signal.

    Signals: ``started()``; ``yielded(value)`` for each value a generator yields (or the
    job hands to :meth:`report`); then exactly one of ``returned(result)``,
    ``errored(message)`` or ``cancelled()``; then ``finished()``. An exception never
    reaches the event loop.

    Cancelling: a generator is checked before each step and closed at its next ``yield``
    (its ``with`` and ``finally`` blocks run). A plain function reads :attr:`cancel_event`
    (pass it to the blocking call); if it then raises, that counts as cancelled, and if it
    returns, the value is returned (a partial result).
    """

    yielded = Signal(object)
    returned = Signal(object)
    errored = Signal(str)
    cancelled = Signal()

    def __init__(self, work: Callable[[], Any], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._work = work
        self.cancel_event = threading.Event()

    def cancel(self) -> None:
        """Ask the job to stop; it ends with ``cancelled()`` (or a partial ``returned``)."""
        self.cancel_event.set()

    def report(self, value: object) -> None:
        """Emit ``yielded(value)``: the progress callback for a job that takes one."""
        self.yielded.emit(value)

    def run(self) -> None:
        try:
            result = self._work()
            if isinstance(result, Generator):
                stopped, result = self._drain(result)
                if stopped:
                    self.cancelled.emit()
                    return
        except Exception as exc:  # report, never kill the window's event loop
            if self.cancel_event.is_set():
                log.debug("job ended after cancel: %s", exc)
                self.cancelled.emit()
            else:
                self.errored.emit(error_message(exc))
            return
        self.returned.emit(result)

    def _drain(self, steps: Generator[Any, None, Any]) -> tuple[bool, Any]:
        """Run a generator to its end: ``(False, its return value)``, or ``(True, None)``
        when it was cancelled."""
        while True:
            if self.cancel_event.is_set():
                steps.close()
                return True, None
            try:
                value = next(steps)
            except StopIteration as stop:
                return False, stop.value
            self.yielded.emit(value)


def start_worker(
    owner: QObject,
    work: Callable[[], Any],
    on_returned: Callable[[Any], None],
    on_errored: Callable[[str], None],
) -> ThreadWorker:
    """Start ``work`` in a :class:`ThreadWorker` child of ``owner``; it deletes itself when
    done, and :func:`wait_for_workers` waits for it at shutdown."""
    worker = ThreadWorker(work, owner)
    worker.returned.connect(on_returned)
    worker.errored.connect(on_errored)
    worker.finished.connect(worker.deleteLater)
    worker.start()
    return worker


def wait_for_workers(owner: QObject, msecs: int = 5000) -> None:
    """Cancel and wait for ``owner``'s running workers, so that no thread outlives its page."""
    workers = owner.findChildren(ThreadWorker)
    for worker in workers:
        worker.cancel()
    for worker in workers:
        worker.wait(msecs)
