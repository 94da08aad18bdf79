"""One generic background worker: a function or a generator function, run once in a QThread.

Every background job of the window goes through :class:`ThreadWorker` (after napari's and
superqt's thread workers), so the catch-and-report code lives here once. The job itself is
plain Python: it returns a result, yields progress, or raises.
"""

from __future__ import annotations

import atexit
import logging
import threading
import warnings
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
    on_cancelled: Callable[[], None] | None = None,
) -> ThreadWorker:
    """Start ``work`` in a :class:`ThreadWorker` child of ``owner``; it deletes itself when
    done, and :func:`wait_for_workers` waits for it at shutdown. A cancelled job calls
    ``on_cancelled`` (give one when the owner keeps a busy flag)."""
    worker = ThreadWorker(work, owner)
    worker.returned.connect(on_returned)
    worker.errored.connect(on_errored)
    if on_cancelled is not None:
        worker.cancelled.connect(on_cancelled)
    worker.finished.connect(worker.deleteLater)
    worker.start()
    return worker


_detached: set[ThreadWorker] = set()
"""Workers that outlived their owner's wait: kept alive here until they finish."""


def _release(worker: ThreadWorker) -> None:
    if worker in _detached:
        worker.wait()  # ``finished`` was emitted: run() has returned, this is immediate
        _detached.discard(worker)
        worker.deleteLater()


def detach(worker: ThreadWorker) -> None:
    """Let a still-running worker outlive its owner: unparent it, stop reporting to the
    owner, and keep it referenced until ``finished``, when it is deleted. Deleting a
    running QThread aborts the process."""
    log.warning("a background job did not stop in time; it is left to finish on its own")
    with warnings.catch_warnings():  # a signal with nothing connected warns on disconnect
        warnings.simplefilter("ignore", RuntimeWarning)
        for signal in (
            worker.yielded,
            worker.returned,
            worker.errored,
            worker.cancelled,
            worker.finished,
        ):
            signal.disconnect()
    worker.setParent(None)
    _detached.add(worker)
    worker.finished.connect(lambda: _release(worker))
    if worker.isFinished():  # it ended between the wait and the connect
        _release(worker)


def stop_worker(worker: ThreadWorker, msecs: int = 5000) -> bool:
    """Cancel ``worker`` and wait up to ``msecs`` for it; True when it stopped. One still
    running is :func:`detach`-ed, so its owner may be deleted safely."""
    worker.cancel()
    if worker.wait(msecs):
        return True
    detach(worker)
    return False


def wait_for_workers(owner: QObject, msecs: int = 5000) -> None:
    """Cancel and wait for ``owner``'s running workers, so that no thread outlives its page;
    one that does not stop in time is detached from the owner."""
    workers = owner.findChildren(ThreadWorker)
    for worker in workers:
        worker.cancel()
    for worker in workers:
        stop_worker(worker, msecs)


@atexit.register
def _wait_for_detached(msecs: int = 30_000) -> None:
    """At exit, give detached workers time to end before their QThreads are destroyed."""
    for worker in list(_detached):
        if not worker.wait(msecs):
            log.error("a background job was still running at exit")
