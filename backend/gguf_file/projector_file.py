"""Which projector a model loads: ``--mmproj``, or the one beside it."""

from __future__ import annotations

from pathlib import Path

from backend.core.errors import ConfigError


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
