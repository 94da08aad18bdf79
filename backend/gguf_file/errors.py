"""The one error of the GGUF reader."""

from __future__ import annotations

from backend.core.errors import QuantDeskError


class GGUFFormatError(QuantDeskError):
    """A file is not a readable GGUF file."""
