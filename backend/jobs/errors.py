"""Errors every long job shares."""

from __future__ import annotations

from backend.core.errors import QuantDeskError

# The exit code of a cancelled job (128 + SIGINT, as a shell reports Ctrl+C).
CANCELLED_EXIT_CODE = 130


class JobError(QuantDeskError):
    """Root of the errors of the long-job machinery."""


class JobCancelledError(JobError):
    """The user cancelled a long job (quantise, compare, bench)."""

    exit_code = CANCELLED_EXIT_CODE


class JobProtocolError(JobError):
    """A ``--progress-jsonl`` line is not a job event."""
