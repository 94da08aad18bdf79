"""Client image bytes to pixels: every format users send, and every way a file is broken
(fuzzed by truncation and bit flips) is a MediaError, never a crash or a hang."""

from __future__ import annotations

import random

import pytest

from backend.engine.media.image_decode import decode_image
from backend.engine.media.media_errors import MediaError, MediaTooLargeError
from backend.settings.media_settings import MediaLimits
from tests.media.image_files import picture

LIMITS = MediaLimits()


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "GIF", "BMP"])
def test_each_format_decodes_to_rgb_named_by_its_bytes(fmt: str) -> None:
    data = picture("red-square", fmt=fmt)
    image = decode_image(data, LIMITS, "messages[0].content[1]")
    assert (image.width, image.height) == (96, 96)
    assert len(image.rgb) == 96 * 96 * 3
    assert image.digest == decode_image(data, LIMITS, "x").digest
    assert image.digest != decode_image(picture("blue-circle", fmt=fmt), LIMITS, "x").digest


def test_the_limits_are_a_413_class_error() -> None:
    data = picture("stripes", size=200)
    with pytest.raises(MediaTooLargeError, match="pixels"):
        decode_image(data, MediaLimits(max_pixels=100 * 100), "img")
    with pytest.raises(MediaTooLargeError, match="bytes"):
        decode_image(data, MediaLimits(max_bytes=100), "img")


@pytest.mark.parametrize(
    "data",
    [b"", b"not an image at all", b"%PDF-1.7\n", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40],
)
def test_what_is_not_an_image_says_so(data: bytes) -> None:
    with pytest.raises(MediaError) as info:
        decode_image(data, LIMITS, "messages[0].content[0]")
    assert "messages[0].content[0]" in str(info.value)
    assert info.value.status == 400


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP"])
def test_truncated_and_bit_flipped_files_never_get_past_the_decoder_unnoticed(fmt: str) -> None:
    """Fuzz: every truncation point class and random bit flips. A flipped file may still
    decode (JPEG has no checksum): then it is a whole image; otherwise a MediaError."""
    data = picture("stripes", fmt=fmt)
    rng = random.Random(fmt)
    cases = [data[:n] for n in sorted({1, 8, 16, 33, len(data) // 2, len(data) - 1})]
    for _ in range(60):
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(flipped))
            flipped[i] ^= 1 << rng.randrange(8)
        cases.append(bytes(flipped))
    refused = 0
    for case in cases:
        try:
            image = decode_image(case, LIMITS, "img")
        except MediaError:
            refused += 1
            continue
        assert len(image.rgb) == image.width * image.height * 3
    assert refused >= 6  # at least every truncation
