"""Root exception types for the QuantDesk back end.

Every error that should reach a user as a readable message derives from
:class:`QuantDeskError`. The CLI turns these into one line and a non-zero exit;
the server turns them into OpenAI-style JSON bodies.
"""

from __future__ import annotations


class QuantDeskError(Exception):
    """Base class of all user-facing QuantDesk errors."""

    exit_code: int = 1


class ConfigError(QuantDeskError):
    """A setting, flag or path is invalid."""

    exit_code = 2


class ModelNotFoundError(QuantDeskError):
    """A model file or library entry does not exist."""

    exit_code = 3
