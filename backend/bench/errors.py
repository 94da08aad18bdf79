"""Errors of the load generator."""

from __future__ import annotations

from backend.core.errors import QuantDeskError
from backend.jobs.errors import JobCancelledError


class BenchError(QuantDeskError):
    """The benchmark could not run: bad settings, unreachable server, every request failed."""


class BenchCancelled(JobCancelledError, BenchError):
    """The benchmark was cancelled through its cancel event."""
