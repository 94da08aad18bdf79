"""The errors of the GGUF reader: one kind, and two ways a file can end too soon."""

from __future__ import annotations

from backend.core.errors import QuantDeskError


class GGUFFormatError(QuantDeskError):
    """A file is not a readable GGUF file."""


class GGUFTruncatedError(GGUFFormatError):
    """The bytes at hand end inside the header, before the end of the file: a prefix
    fetched remotely, which a longer prefix may complete."""


class GGUFIncompleteError(GGUFFormatError):
    """The file ends before what its header describes: an interrupted download or copy
    (or a count a damaged or crafted file claims); more bytes of it would not help."""
