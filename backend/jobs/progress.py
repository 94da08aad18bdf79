"""Progress reports shared by the long jobs (convert, quantise, imatrix, compare)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


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
