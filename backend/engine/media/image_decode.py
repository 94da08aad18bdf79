"""A client's image bytes to RGB pixels, checked against the limits, with Pillow.

Pillow decodes (not stb_image inside libmtmd): it reads WebP too, says clearly what is
wrong with a corrupt or truncated file, and its decompression-bomb check runs before any
pixel is decoded. The content hash names the image in the prefix cache: the same
screenshot sent again is the same tokens.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

from backend.engine.media.media_errors import MediaError, MediaTooLargeError
from backend.settings.media_settings import MediaLimits

FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP")


@dataclass(frozen=True)
class DecodedImage:
    """An image as libmtmd takes it: ``width`` x ``height`` RGB bytes, named by ``digest``
    (SHA-256 of the file the client sent)."""

    rgb: bytes
    width: int
    height: int
    digest: str


def decode_image(data: bytes, limits: MediaLimits, where: str) -> DecodedImage:
    """Decode ``data`` (``where`` names it in errors); MediaError for anything that is not
    a whole image of a supported format, MediaTooLargeError past the limits."""
    if len(data) > limits.max_bytes:
        raise MediaTooLargeError(
            f"{where}: the image has {len(data)} bytes, over the limit of {limits.max_bytes}",
            param=where,
        )
    if not data:
        raise MediaError(f"{where}: the image is empty", param=where)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=FORMATS) as img:
                width, height = img.size
                if width * height > limits.max_pixels:
                    raise MediaTooLargeError(
                        f"{where}: the image is {width}x{height} pixels, over the limit of "
                        f"{limits.max_pixels}",
                        param=where,
                    )
                img.seek(0)  # an animation: its first frame
                rgb = img.convert("RGB")
                rgb.load()
    except MediaError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise MediaTooLargeError(f"{where}: {exc}", param=where) from None
    except UnidentifiedImageError:
        raise MediaError(
            f"{where}: not an image of a supported format ({', '.join(FORMATS)})", param=where
        ) from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise MediaError(
            f"{where}: the image is corrupt or truncated ({exc})", param=where
        ) from None
    if width < 1 or height < 1:
        raise MediaError(f"{where}: the image has no pixels", param=where)
    return DecodedImage(rgb.tobytes(), width, height, hashlib.sha256(data).hexdigest())
