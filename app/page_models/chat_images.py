"""Images a user attaches to a chat message, without Qt: read from a file or from pasted
bytes, checked, kept as :class:`~app.storage.chat_store.ChatImage`."""

from __future__ import annotations

import base64
from pathlib import Path

from app.storage.chat_store import ChatImage

# what the server decodes (backend.engine.media.image_decode), by file signature
_SIGNATURES = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
    b"BM": "image/bmp",
}
MAX_BYTES = 20 * 1024 * 1024  # the server's default --media-max-mib


class AttachError(ValueError):
    """A file that cannot go with a message, in words for the page."""


def image_mime(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((m for sig, m in _SIGNATURES.items() if data.startswith(sig)), None)


def chat_image(data: bytes, name: str) -> ChatImage:
    """``data`` as an attachment; AttachError when it is not an image the server reads."""
    if len(data) > MAX_BYTES:
        raise AttachError(f"{name} is {len(data) // (1024 * 1024)} MiB: images up to 20 MiB")
    mime = image_mime(data)
    if mime is None:
        raise AttachError(f"{name} is not a PNG, JPEG, WebP, GIF or BMP image")
    return ChatImage(mime=mime, data=base64.b64encode(data).decode("ascii"), name=name)


def image_from_file(path: Path) -> ChatImage:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AttachError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    return chat_image(data, path.name)


def cannot_see_text(model: str) -> str:
    """What the page says when the chosen model reads no images."""
    return (
        f"{model} cannot read images: it has no projector. Choose a vision model (one whose "
        "Hub repo ships an mmproj file), or remove the images."
    )
