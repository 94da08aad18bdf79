"""Errors every long job shares."""

from __future__ import annotations

from backend.core.errors import QuantDeskError


class JobCancelledError(QuantDeskError):
    """The user cancelled a long job (quantise, compare, bench)."""

    exit_code = 130
