"""What a request's media can be refused for: a 400, or a 413 when it is too big."""

from __future__ import annotations

from backend.engine.errors import InvalidRequestError


class MediaError(InvalidRequestError):
    """An image the server cannot take: corrupt, unsupported, or for a model that cannot
    see. ``status`` is the HTTP status the server answers with."""

    status = 400


class MediaTooLargeError(MediaError):
    """Too many images, bytes or pixels for the configured limits."""

    status = 413
