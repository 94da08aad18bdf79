"""Small test clips, made with the standard library: WAV files as a client sends them."""

from __future__ import annotations

import base64
import io
import math
import random
import wave


def clip(kind: str, seconds: float = 1.0, rate: int = 16000, channels: int = 1) -> bytes:
    """A distinct 16-bit WAV clip per ``kind``: a low tone, a high tone, noise."""
    rng = random.Random(kind)
    frames = bytearray()
    for i in range(int(seconds * rate)):
        t = i / rate
        if kind == "low":
            x = 0.6 * math.sin(2 * math.pi * 220 * t)
        elif kind == "high":
            x = 0.6 * math.sin(2 * math.pi * 3000 * t)
        elif kind == "noise":
            x = rng.uniform(-0.8, 0.8)
        else:
            raise ValueError(kind)
        sample = int(x * 32767).to_bytes(2, "little", signed=True)
        frames += sample * channels
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(frames))
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def audio_part(data: bytes, fmt: str = "wav") -> dict[str, object]:
    return {"type": "input_audio", "input_audio": {"data": b64(data), "format": fmt}}
