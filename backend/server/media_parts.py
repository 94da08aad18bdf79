"""Chat content parts with images: each image decoded, and a media marker where it goes.

Every dialect turns its image shape into chat's ``image_url`` part first (Anthropic's
``image`` block, Responses' ``input_image``), so that one function reads them all. A
message's parts become one text as llama-server joins them: text parts by newlines, with
no newline before or after an image.

Only ``data:`` URLs (and bare base64, as llama-server takes) are read. A local server does
not fetch ``http(s)`` URLs for whoever can reach it.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from backend.engine.media.image_decode import DecodedImage, decode_image
from backend.engine.media.media_errors import MediaError, MediaTooLargeError
from backend.engine.media.projector import MARKER
from backend.server.errors import ApiError
from backend.settings.media_settings import MediaLimits


def image_part(media_type: str, data: str) -> dict[str, Any]:
    """Chat's part for a base64 image (``media_type`` such as ``image/png``)."""
    return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{data}"}}


def _url_of(part: dict[str, Any]) -> str:
    value = part.get("image_url")
    if isinstance(value, dict):
        value = value.get("url")
    return value if isinstance(value, str) else ""


def image_bytes(url: str, where: str) -> bytes:
    """The bytes of an image URL: a base64 ``data:`` URL, or bare base64."""
    if url.startswith(("http://", "https://")):
        raise MediaError(
            f"{where}: this local server does not fetch remote image URLs; send the image "
            "inline, as a data: URL (data:image/png;base64,...)",
            param=where,
        )
    payload = url
    if url.startswith("data:"):
        head, sep, payload = url.partition(",")
        if not sep or not head.endswith(";base64"):
            raise MediaError(f"{where}: a data: URL must be base64-encoded", param=where)
        mime = head[len("data:") : -len(";base64")]
        if mime and not mime.startswith("image/"):
            raise MediaError(f"{where}: a data: URL of type {mime} is not an image", param=where)
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise MediaError(f"{where}: the image is not valid base64", param=where) from None


@dataclass
class MediaCollector:
    """The images of one request, in prompt order, checked against ``limits``."""

    limits: MediaLimits
    images: list[DecodedImage] = field(default_factory=list)

    def add(self, part: dict[str, Any], where: str) -> str:
        """Decode ``part``'s image; the marker that stands for it in the prompt text."""
        if len(self.images) >= self.limits.max_images:
            raise MediaTooLargeError(
                f"{where}: more than {self.limits.max_images} images in one request",
                param=where,
            )
        self.images.append(decode_image(image_bytes(_url_of(part), where), self.limits, where))
        return MARKER


def has_images(content: object) -> bool:
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "image_url" for p in content
    )


def content_text(parts: list[dict[str, Any]], media: MediaCollector, where: str) -> str:
    """A message's parts as one text with a marker per image (see the module docstring);
    ApiError 400 for parts that are neither text nor an image."""
    text = ""
    after_image = False
    for j, part in enumerate(parts):
        kind = part.get("type")
        if kind == "text":
            if text and not after_image:
                text += "\n"
            text += str(part.get("text", ""))
            after_image = False
        elif kind == "image_url":
            text += media.add(part, f"{where}.content[{j}]")
            after_image = True
        else:
            raise ApiError(
                400,
                f"{where}.content[{j}] is a part of type {kind}; this server reads text and images",
                param=where,
            )
    return text
