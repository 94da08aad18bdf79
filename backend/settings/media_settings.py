"""The knobs of image input: the projector and the limits on what a request may send."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field


@dataclass(frozen=True)
class MediaLimits:
    """Per-request limits on media, and where media may be read from."""

    max_images: int = 16
    max_bytes: int = 20 * 1024 * 1024
    max_pixels: int = 40_000_000
    allow_remote: bool = False  # fetch http(s) URLs
    media_dir: Path | None = None  # file:// URLs are read under it; none: never


class MediaKnobs(BaseModel):
    """``--mmproj`` and the per-request media limits (llama-server's flag names where it
    has one)."""

    mmproj: str | None = Field(
        default=None,
        description="Multimodal projector GGUF (mmproj-*.gguf) that lets the model read "
        "images (default: an mmproj*.gguf beside the model, if there is exactly one)",
        json_schema_extra={"flags": ["-mm", "--mmproj"]},
    )
    no_mmproj: bool = Field(
        default=False,
        description="Do not load a projector, even one found beside the model (text only)",
        json_schema_extra={"flags": ["--no-mmproj"]},
    )
    media_max_images: int = Field(
        default=16,
        ge=0,
        le=1000,
        description="Most images one request may carry (more: 413)",
        json_schema_extra={"flags": ["--media-max-images"]},
    )
    media_max_mib: float = Field(
        default=20.0,
        gt=0,
        le=1024,
        description="Largest image file one request may carry, in MiB (larger: 413)",
        json_schema_extra={"flags": ["--media-max-mib"]},
    )
    media_max_pixels: int = Field(
        default=40_000_000,
        ge=1,
        description="Most pixels one image may have (more: 413)",
        json_schema_extra={"flags": ["--media-max-pixels"]},
    )

    allow_remote_media: bool = Field(
        default=False,
        description="Fetch http(s) image and audio URLs that requests name (off: a local "
        "server fetches nothing for whoever can reach it; send media inline)",
        json_schema_extra={"flags": ["--allow-remote-media"]},
    )
    media_path: str | None = Field(
        default=None,
        description="Folder whose files requests may name as file://NAME (llama-server's "
        "flag; default: no local files are read)",
        json_schema_extra={"flags": ["--media-path"]},
    )

    def media_limits(self) -> MediaLimits:
        return MediaLimits(
            self.media_max_images,
            int(self.media_max_mib * 1024 * 1024),
            self.media_max_pixels,
            self.allow_remote_media,
            Path(self.media_path).expanduser() if self.media_path else None,
        )
