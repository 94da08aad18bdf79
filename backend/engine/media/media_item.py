"""One piece of a request's media, in prompt order: a decoded image or an audio clip."""

from __future__ import annotations

from backend.engine.media.audio_clip import AudioClip
from backend.engine.media.image_decode import DecodedImage

MediaItem = DecodedImage | AudioClip
