"""A client's audio clip, checked before libmtmd decodes it.

libmtmd's helper (miniaudio) decodes WAV and MP3 and resamples to the model's rate, as
llama-server does; here the clip's size and its format's signature are checked first, so
that a clip that is plainly not audio is refused with a clear message. The content hash
names the clip in the prefix cache, as for images.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from backend.engine.media.media_errors import MediaError, MediaTooLargeError
from backend.settings.media_settings import MediaLimits

AUDIO_FORMATS = ("wav", "mp3")


@dataclass(frozen=True)
class AudioClip:
    """An audio file as the client sent it (``format``: one of :data:`AUDIO_FORMATS`),
    named by ``digest`` (SHA-256 of its bytes)."""

    data: bytes
    format: str
    digest: str


def sniff_audio(data: bytes) -> str | None:
    """The audio format whose signature ``data`` starts with, if any."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return "mp3"
    return None


def check_audio(data: bytes, fmt: str, limits: MediaLimits, where: str) -> AudioClip:
    """``data`` as a clip of format ``fmt``; MediaError when it is not one,
    MediaTooLargeError past the byte limit."""
    if fmt not in AUDIO_FORMATS:
        raise MediaError(
            f"{where}: audio format {fmt!r} is not supported ({', '.join(AUDIO_FORMATS)})",
            param=where,
        )
    if len(data) > limits.max_bytes:
        raise MediaTooLargeError(
            f"{where}: the audio has {len(data)} bytes, over the limit of {limits.max_bytes}",
            param=where,
        )
    if sniff_audio(data) != fmt:
        raise MediaError(f"{where}: the data is not a {fmt.upper()} file", param=where)
    return AudioClip(data, fmt, hashlib.sha256(data).hexdigest())
