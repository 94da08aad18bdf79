"""Output naming, temp names, the sidecar JSON and the default output folder."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from backend.core.units import human_bytes
from backend.hub.writer_lock import sole_writer
from quantize.errors import OutputWriteError, QuantizeError

log = logging.getLogger(__name__)

PART_SUFFIX = ".part"
SIDECAR_SUFFIX = ".json"
_QUANT_SUFFIX = re.compile(
    r"[-_.](F32|F16|BF16|Q\d(_[0-9KSML]+)*|IQ\d(_[A-Z0-9]+)*)$", re.IGNORECASE
)


def final_path(out_dir: Path, model_name: str, type_name: str) -> Path:
    """``<out_dir>/<model-name>-<TYPE>.gguf``."""
    return out_dir / f"{model_name}-{type_name.upper()}.gguf"


def part_path(target: Path) -> Path:
    """The temp name a file is written under before the final rename."""
    return target.with_name(target.name + PART_SUFFIX)


@contextlib.contextmanager
def writing(part: Path) -> Iterator[None]:
    """Hold ``part``'s writer lock (the one downloads use) while this run writes it.

    ``quantdesk models partials`` then tells a live run's file from the leftover of a
    run that was killed (the kernel drops the lock with the process), and a second run
    is refused the file a first one is writing.
    """
    with sole_writer(part) as sole:
        if not sole:
            raise QuantizeError(
                f"{part.name} is being written by another quantisation or conversion; "
                "wait for it to finish, or cancel it"
            )
        yield


# errno values of a write that failed for want of room or of a working disk, said plainly.
WRITE_FAILURES: dict[int, str] = {
    code: reason
    for name, reason in (
        ("ENOSPC", "no space left"),
        ("EDQUOT", "disk quota exceeded"),
        ("EFBIG", "file too large"),
        ("EIO", "I/O error"),
    )
    if (code := getattr(errno, name, None)) is not None
}


def free_space(folder: Path) -> str:
    """Free space in ``folder``'s file system, e.g. ``12.0 MiB`` (``?`` when unknown)."""
    try:
        return human_bytes(shutil.disk_usage(folder).free)
    except OSError:
        return "?"


def write_error(path: Path, err: int | None) -> OutputWriteError | None:
    """One line for a write of ``path`` that failed with ``errno`` ``err``, e.g. ``no space
    left writing /models/x.gguf.part (free: 12.0 MiB)``; None for other errors."""
    reason = WRITE_FAILURES.get(err) if err is not None else None
    if reason is None:
        return None
    return OutputWriteError(f"{reason} writing {path} (free: {free_space(path.parent)})")


def sidecar_path(target: Path) -> Path:
    return target.with_name(target.name + SIDECAR_SUFFIX)


def base_model_name(name: str) -> str:
    """Drop a trailing quant label: ``SmolLM2-135M-Instruct.Q4_1`` -> ``SmolLM2-135M-Instruct``."""
    stem = name[:-5] if name.lower().endswith(".gguf") else name
    stripped = _QUANT_SUFFIX.sub("", stem)
    return stripped or stem


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = part_path(path)
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        mapped = write_error(tmp, exc.errno)
        raise mapped or OutputWriteError(f"cannot write {path}: {exc.strerror or exc}") from exc


def default_output_dir() -> Path:
    """The library's models folder, so new outputs appear in the library."""
    try:
        from backend.hub.hub_settings import HubSettings
    except ImportError:
        from backend.settings.paths import subdir

        return subdir("models")
    return HubSettings.model_validate({}).library_dir()
