"""Errors of the model hub: one root type, specific subclasses, messages that say what to do."""

from __future__ import annotations

from backend.core.errors import QuantDeskError
from backend.jobs.errors import JobCancelledError


class HubError(QuantDeskError):
    """Root of all model-hub errors (search, download, library)."""


class HubConnectionError(HubError):
    """The Hub could not be reached (network down, offline mode, wrong endpoint)."""


class HubAccessError(HubError):
    """The Hub refused access: gated or private repo, missing or invalid token (401/403)."""

    exit_code = 4


class HubNotFoundError(HubError):
    """The repo, revision or file does not exist on the Hub (404)."""

    exit_code = 3


class DownloadError(HubError):
    """A download failed; nothing incomplete entered the library."""


class ChecksumMismatchError(DownloadError):
    """The downloaded bytes do not match the SHA-256 the Hub published."""


class DiskSpaceError(DownloadError):
    """Not enough free disk space for a download."""


class DownloadCancelledError(JobCancelledError, DownloadError):
    """The user cancelled a download; the partial file is kept for resuming."""


class LibraryError(HubError):
    """A library operation was refused (e.g. deleting outside the models folder)."""
