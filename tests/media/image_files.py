"""Small test pictures, made with Pillow: encoded files as a client sends them."""

from __future__ import annotations

import base64
import io

from PIL import Image, ImageDraw


def picture(kind: str, size: int = 96, fmt: str = "PNG", height: int | None = None) -> bytes:
    """A distinct picture per ``kind``: a red square, a blue circle, stripes; ``size``
    pixels wide, and as high unless ``height`` says otherwise."""
    high = size if height is None else height
    img = Image.new("RGB", (size, high), "white")
    draw = ImageDraw.Draw(img)
    if kind == "red-square":
        draw.rectangle((10, 10, size - 10, high - 10), fill=(220, 20, 20))
    elif kind == "blue-circle":
        draw.ellipse((8, 8, size - 8, high - 8), fill=(20, 40, 230))
    elif kind == "stripes":
        for x in range(0, size, 8):
            draw.rectangle((x, 0, x + 3, high), fill=(0, 0, 0))
    else:
        raise ValueError(kind)
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"
