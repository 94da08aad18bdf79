"""The one error of the fit estimate."""

from __future__ import annotations

from backend.core.errors import QuantDeskError


class FitError(QuantDeskError):
    """A fit estimate was refused: settings out of range, or a model it cannot size."""
