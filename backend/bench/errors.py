"""Errors of the load generator."""

from __future__ import annotations

from backend.core.errors import QuantDeskError


class BenchError(QuantDeskError):
    """The benchmark could not run: bad settings, unreachable server, every request failed."""


class BenchCancelled(BenchError):
    """The benchmark was cancelled through its cancel event."""

    exit_code = 130
