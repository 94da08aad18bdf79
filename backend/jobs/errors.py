"""Errors every long job shares."""

from __future__ import annotations

from backend.core.errors import QuantDeskError


class JobError(QuantDeskError):
    """Root of the errors of the long-job machinery."""


class JobCancelledError(JobError):
    """The user cancelled a long job (quantise, compare, bench)."""

    exit_code = 130


class JobProtocolError(JobError):
    """A ``--progress-jsonl`` line is not a job event."""
