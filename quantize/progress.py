"""Progress reports and cancellation shared by convert, quantise and imatrix."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from quantize.errors import QuantizeCancelledError


@dataclass(frozen=True)
class Progress:
    """One step of long work: ``done`` of ``total`` units in ``stage``."""

    stage: str
    done: int
    total: int
    message: str = ""
    tokens: int = 0  # tokens processed so far in this stage, where that means something

    def as_event(self) -> dict[str, Any]:
        """The ``--progress-jsonl`` form: ``{"type": "progress", ...}``."""
        return {"type": "progress", **asdict(self)}


ProgressCallback = Callable[[Progress], None]


def no_progress(_: Progress) -> None:
    """A progress callback that ignores reports."""


def check_cancel(cancel: threading.Event | None, what: str) -> None:
    """Raise :class:`QuantizeCancelledError` when ``cancel`` is set."""
    if cancel is not None and cancel.is_set():
        raise QuantizeCancelledError(f"{what} cancelled")
