"""Chat content parts with media: each image or audio clip read, and a media marker where
it goes.

Every dialect turns its image shape into chat's ``image_url`` part first (Anthropic's
``image`` block, Responses' ``input_image``), so that one function reads them all; audio
comes as chat's ``input_audio`` part. A message's parts become one text as llama-server
joins them: text parts by newlines, with no newline before or after a media marker.
Where the bytes may come from is :mod:`backend.server.media_sources`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backend.engine.media.audio_clip import check_audio, sniff_audio
from backend.engine.media.image_decode import decode_image
from backend.engine.media.media_errors import MediaError, MediaTooLargeError
from backend.engine.media.media_item import MediaItem
from backend.engine.media.projector import MARKER
from backend.server.errors import ApiError
from backend.server.media_sources import decode_base64, media_bytes
from backend.settings.media_settings import MediaLimits

MEDIA_PARTS = ("image_url", "input_audio")


def image_part(media_type: str, data: str) -> dict[str, Any]:
    """Chat's part for a base64 image (``media_type`` such as ``image/png``)."""
    return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{data}"}}


def _url_of(part: dict[str, Any]) -> str:
    value = part.get("image_url")
    if isinstance(value, dict):
        value = value.get("url")
    return value if isinstance(value, str) else ""


@dataclass
class MediaCollector:
    """The media of one request, in prompt order, checked against ``limits`` and against
    what the model takes (``vision``, ``audio``; ``model_id`` names it in errors)."""

    limits: MediaLimits
    vision: bool = True
    audio: bool = False
    model_id: str = "this model"
    items: list[MediaItem] = field(default_factory=list)

    def _room(self, where: str) -> None:
        if len(self.items) >= self.limits.max_images:
            raise MediaTooLargeError(
                f"{where}: more than {self.limits.max_images} images and audio clips in one "
                "request",
                param=where,
            )

    def add_image(self, part: dict[str, Any], where: str) -> str:
        """Decode ``part``'s image; the marker that stands for it in the prompt text."""
        if not self.vision:
            raise MediaError(f"{where} is an image; {self.model_id} takes no images", param=where)
        self._room(where)
        data = media_bytes(_url_of(part), self.limits, where)
        self.items.append(decode_image(data, self.limits, where))
        return MARKER

    def add_audio(self, part: dict[str, Any], where: str) -> str:
        """Check ``part``'s clip (``input_audio``: base64 ``data`` and ``format``)."""
        if not self.audio:
            raise MediaError(f"{where} is audio; {self.model_id} takes no audio", param=where)
        self._room(where)
        value = part.get("input_audio")
        value = value if isinstance(value, dict) else {}
        data = decode_base64(str(value.get("data", "")), where, "audio")
        self.items.append(check_audio(data, str(value.get("format", "")), self.limits, where))
        return MARKER

    def add_base64(self, payload: str, where: str) -> str:
        """llama-server's ``multimodal_data`` entry: base64 of an image or an audio file,
        told apart by the file's signature."""
        data = decode_base64(payload, where, "media")
        fmt = sniff_audio(data)
        if fmt is None:
            return self.add_image({"image_url": {"url": payload}}, where)
        return self.add_audio({"input_audio": {"data": payload, "format": fmt}}, where)


def has_media(content: object) -> bool:
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") in MEDIA_PARTS for p in content
    )


def content_text(parts: list[dict[str, Any]], media: MediaCollector, where: str) -> str:
    """A message's parts as one text with a marker per image or clip (see the module
    docstring); ApiError 400 for parts of other types."""
    text = ""
    after_media = False
    for j, part in enumerate(parts):
        kind = part.get("type")
        at = f"{where}.content[{j}]"
        if kind == "text":
            if text and not after_media:
                text += "\n"
            text += str(part.get("text", ""))
            after_media = False
        elif kind == "image_url":
            text += media.add_image(part, at)
            after_media = True
        elif kind == "input_audio":
            text += media.add_audio(part, at)
            after_media = True
        else:
            raise ApiError(
                400,
                f"{at} is a part of type {kind}; this server reads text, images and audio",
                param=where,
            )
    return text
