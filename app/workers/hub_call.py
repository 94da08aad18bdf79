"""Run one blocking hub call (search, repo listing, library scan, fit) off the GUI thread."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal

from backend.core.errors import QuantDeskError

log = logging.getLogger(__name__)


class HubCall(QThread):
    """``succeeded(result)`` or ``failed(message)``; the call's errors never reach the event loop.

    ``tag`` lets a page ignore answers to requests it has since replaced.
    """

    succeeded = Signal(object)
    failed = Signal(str)

    def __init__(
        self, func: Callable[[], Any], tag: object = None, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.func = func
        self.tag = tag

    def run(self) -> None:
        try:
            result = self.func()
        except QuantDeskError as exc:
            self.failed.emit(str(exc))
            return
        except Exception as exc:  # report, never crash the window
            log.exception("hub call failed")
            self.failed.emit(f"{type(exc).__name__}: {exc}")
            return
        self.succeeded.emit(result)


def run_call(
    owner: QObject,
    func: Callable[[], Any],
    on_ok: Callable[[Any], None],
    on_error: Callable[[str], None],
    tag: object = None,
) -> HubCall:
    """Start ``func`` in a :class:`HubCall` owned by ``owner``; it deletes itself when done."""
    call = HubCall(func, tag, owner)
    call.succeeded.connect(on_ok)
    call.failed.connect(on_error)
    calls: list[HubCall] = owner.__dict__.setdefault("_hub_calls", [])
    calls.append(call)

    def done() -> None:
        if call in calls:
            calls.remove(call)
        call.deleteLater()

    call.finished.connect(done)
    call.start()
    return call


def wait_for_calls(owner: QObject, msecs: int = 5000) -> None:
    """Wait for ``owner``'s running calls (at shutdown, so no thread outlives its page)."""
    for call in list(owner.__dict__.get("_hub_calls", [])):
        try:
            call.wait(msecs)
        except RuntimeError:  # already deleted by Qt
            continue
