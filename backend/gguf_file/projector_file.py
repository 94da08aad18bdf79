"""Which projector a model loads: ``--mmproj``, or the one beside it."""

from __future__ import annotations

import functools
from pathlib import Path

from backend.core.errors import ConfigError
from backend.gguf_file.errors import GGUFFormatError
from backend.gguf_file.gguf_header import read_gguf_header


def is_projector(path: Path) -> bool:
    """A file named as Hub repos name projectors (``mmproj-*.gguf``, ``mmproj.gguf``)."""
    return path.name.lower().startswith("mmproj") and path.suffix.lower() == ".gguf"


def mmproj_beside(model_path: Path) -> Path | None:
    """The ``mmproj*.gguf`` in the model's folder, when there is exactly one (Hub repos
    ship one beside their model files; several mean a choice only the user can make)."""
    try:
        found = [p for p in model_path.parent.iterdir() if is_projector(p) and p.is_file()]
    except OSError:
        return None
    return found[0] if len(found) == 1 and found[0] != model_path else None


def projector_path(model_path: Path, mmproj: str | None, no_mmproj: bool) -> Path | None:
    """``--mmproj`` (ConfigError when it is not a file), none with ``--no-mmproj``, else
    the one beside the model."""
    if no_mmproj:
        return None
    if mmproj:
        path = Path(mmproj).expanduser()
        if not path.is_file():
            raise ConfigError(f"--mmproj {mmproj}: no such file")
        return path
    if is_projector(model_path):
        return None
    return mmproj_beside(model_path)


@functools.lru_cache(maxsize=256)
def _modalities_of(path: str, size: int, mtime_ns: int) -> tuple[bool, bool]:
    header = read_gguf_header(Path(path))
    vision = header.get("clip.has_vision_encoder", False)
    audio = header.get("clip.has_audio_encoder", False)
    return vision is True, audio is True


def projector_modalities(path: Path) -> dict[str, bool]:
    """What a projector lets its model read, from its header (``/props``' shape); read
    once per file version. An unreadable projector reads as vision, as llama.cpp's older
    projectors (vision only) have neither key."""
    try:
        stat = path.stat()
        vision, audio = _modalities_of(str(path), stat.st_size, stat.st_mtime_ns)
    except (OSError, GGUFFormatError):
        return {"vision": True, "audio": False}
    if not vision and not audio:
        vision = True  # a projector from before the audio keys: vision only
    return {"vision": vision, "audio": audio}
