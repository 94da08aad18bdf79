"""Progress reports shared by the long jobs (convert, quantise, imatrix, compare)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """One step of long work: ``done`` of ``total`` units in ``stage``, which runs in
    phase ``phase`` (0-based) of the job's ``phases``."""

    stage: str
    done: int
    total: int
    message: str = ""
    tokens: int = 0  # tokens processed so far in this stage, where that means something
    phase: int = 0
    phases: int = 1


ProgressCallback = Callable[[Progress], None]


def no_progress(_: Progress) -> None:
    """A progress callback that ignores reports."""
